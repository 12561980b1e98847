//! Text form of the IR, used by `weft ir` and by golden tests.

use super::*;
use std::fmt::Write;

pub fn print_program(program: &Program, only_kernel: Option<&str>) -> String {
    let mut out = String::new();
    if only_kernel.is_none() {
        for (h, l) in program.layouts.iter() {
            let parent = l
                .parent
                .map(|p| format!(" parent=L{}", p.index()))
                .unwrap_or_default();
            let packing = match l.packing {
                Packing::Cells => String::new(),
                p => format!(" packing={} cell_bits={}", p.node_kind(), l.cell_bits),
            };
            let _ = writeln!(
                out,
                "layout L{} '{}' {:?} shape={:?}{} cell_words={} offset={}{}",
                h.index(),
                l.node_id,
                l.kind,
                l.shape,
                parent,
                l.cell_words,
                l.offset_in_parent,
                packing
            );
        }
        for (h, f) in program.fields.iter() {
            let _ = writeln!(
                out,
                "field F{} '{}' : {} shape={:?} layout=L{} offset={}{}",
                h.index(),
                f.name,
                f.ty,
                f.shape,
                f.layout.index(),
                // Words for word storage (as before quantized storage existed), bits otherwise.
                match f.storage {
                    Storage::Word => (f.offset_in_cell / 32).to_string(),
                    Storage::Quant(_) | Storage::Shared(_) => format!("{}b", f.offset_in_cell),
                },
                match f.storage {
                    Storage::Word => String::new(),
                    Storage::Quant(q) => format!(" storage={}", q.name()),
                    Storage::Shared(s) => format!(
                        " storage={}float{}m{} shared_exponent",
                        if s.signed { "" } else { "u" },
                        s.exp,
                        s.frac
                    ),
                }
            );
        }
    }
    for (_, k) in program.kernels.iter() {
        // A fused kernel is printed for each of its nodes.
        if only_kernel.is_some_and(|n| !k.has_node(n)) {
            continue;
        }
        print_kernel(&mut out, program, k);
    }
    out
}

fn print_kernel(out: &mut String, program: &Program, k: &Kernel) {
    let iter = match &k.iteration {
        Iteration::Range(s) => format!("range {:?}", s),
        Iteration::Field(f) => format!("cells of {}", program.fields[*f].name),
    };
    let iter = match k.count_from {
        Some(c) => format!(
            "{} (rows < word {} of {})",
            iter, c.word, program.layouts[c.root].node_id
        ),
        None => iter,
    };
    let params: Vec<String> = k
        .params
        .iter()
        .map(|p| match p.part {
            0 => format!("{}: {}", p.name, p.ty),
            n => format!("{}@{}: {}", p.name, n, p.ty),
        })
        .collect();
    let _ = writeln!(
        out,
        "kernel '{}' over {} params({})",
        k.name,
        iter,
        params.join(", ")
    );
    // A kernel fused from several launches (`schedule::fusion`): its later
    // nodes, which `name@N` scalars above belong to.
    if !k.fused.is_empty() {
        let nodes: Vec<String> = k.fused.iter().map(|n| format!("'{}'", n)).collect();
        let _ = writeln!(out, "  fused {}", nodes.join(" "));
    }
    if let Some(z) = k.zero_fill {
        let _ = writeln!(
            out,
            "  zero fill: words {}..{} of {}",
            z.first,
            z.first + z.words,
            program.layouts[z.root].node_id
        );
    }
    if let Some(w) = &k.workgroup {
        let _ = writeln!(out, "  workgroup {}", w.size);
        for (i, a) in w.arrays.iter().enumerate() {
            let _ = writeln!(out, "  shared #{} '{}': {}[{}]", i, a.name, a.ty, a.len);
        }
    }
    for (i, site) in k.fault_sites.iter().enumerate() {
        let resume = if site.resume { ", resumes" } else { "" };
        let _ = writeln!(
            out,
            "  fault site {} at {}: {:?}{}",
            i, site.span, site.kind, resume
        );
    }
    for (_, f) in k.functions.iter() {
        print_function(out, program, f, "fn");
    }
    print_function(out, program, &k.entry, "entry");
    out.push('\n');
}

fn print_function(out: &mut String, program: &Program, f: &Function, what: &str) {
    let args: Vec<String> = f.args.iter().map(|t| t.to_string()).collect();
    let _ = writeln!(
        out,
        "  {} {}({}) -> {} {{",
        what,
        f.name,
        args.join(", "),
        f.ret
    );
    for (h, l) in f.locals.iter() {
        let _ = writeln!(out, "    local ${} '{}': {}", h.index(), l.name, l.ty);
    }
    print_block(out, program, f, &f.body, 2);
    let _ = writeln!(out, "  }}");
}

fn list(v: &[InstId]) -> String {
    v.iter()
        .map(|h| format!("{:?}", h))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_block(out: &mut String, program: &Program, f: &Function, block: &Block, depth: usize) {
    for &h in block {
        let inst = &f.insts[h];
        let pad = "  ".repeat(depth);
        let fname = |id: FieldId| {
            program
                .fields
                .get(id)
                .map(|x| x.name.clone())
                .unwrap_or_else(|| "?".into())
        };
        let text = match &inst.kind {
            InstKind::Const(c) => format!("const {}", c),
            InstKind::Arg(i) => format!("arg {}", i),
            InstKind::Param(i) => format!("param {}", i),
            InstKind::Frame => "frame".into(),
            InstKind::Unary(op, a) => format!("{:?} {:?}", op, a).to_lowercase(),
            InstKind::Binary(op, a, b) => format!("{:?} {} {:?}", a, op.symbol(), b),
            InstKind::Select {
                cond,
                accept,
                reject,
            } => format!("select {:?} ? {:?} : {:?}", cond, accept, reject),
            InstKind::Cast(a) => format!("cast {:?}", a),
            InstKind::Bitcast(a) => format!("bitcast {:?}", a),
            InstKind::Construct(v) => format!("construct({})", list(v)),
            InstKind::Extract(a, i) => format!("extract {:?}[{}]", a, i),
            InstKind::ExtractDyn(a, i) => format!("extract {:?}[{:?}]", a, i),
            InstKind::Insert { base, index, value } => {
                format!("insert {:?}[{}] = {:?}", base, index, value)
            }
            InstKind::InsertDyn { base, index, value } => {
                format!("insert {:?}[{:?}] = {:?}", base, index, value)
            }
            InstKind::Swizzle(a, c) => {
                let s: String = c
                    .iter()
                    .map(|&i| ['x', 'y', 'z', 'w'][i as usize])
                    .collect();
                format!("{:?}.{}", a, s)
            }
            InstKind::Builtin(b, v) => format!("{}({})", b.name(), list(v)),
            InstKind::Call(fid, v) => format!("call fn{}({})", fid.index(), list(v)),
            InstKind::Random => "random".into(),
            InstKind::Launch(v) => format!("launch.{:?}", v).to_lowercase(),
            InstKind::RngLoad => "rng_load".into(),
            InstKind::RngStore(v) => format!("rng_store {:?}", v),
            InstKind::TripsLoad => "trips_load".into(),
            InstKind::TripsStore(v) => format!("trips_store {:?}", v),
            InstKind::LaneMax(v) => format!("lane_max {:?}", v),
            InstKind::LocalLoad(l) => format!("load ${}", l.index()),
            InstKind::LocalStore(l, v) => format!("store ${} = {:?}", l.index(), v),
            InstKind::FieldLoad { field, index } => {
                format!("field_load {}[{}]", fname(*field), list(index))
            }
            InstKind::FieldIsActive {
                field,
                index,
                level,
            } => match level {
                None => format!("is_active {}[{}]", fname(*field), list(index)),
                Some(l) => format!("is_active {}[{}] level {}", fname(*field), list(index), l),
            },
            InstKind::FieldActivate { field, index } => {
                format!("activate {}[{}]", fname(*field), list(index))
            }
            InstKind::FieldAppend { field, list, value } => {
                format!("append {}[list {:?}] <- {:?}", fname(*field), list, value)
            }
            InstKind::FieldLength { field, list } => {
                format!("length {}[list {:?}]", fname(*field), list)
            }
            InstKind::FieldDeactivate { field, index } => {
                format!("deactivate {}[{}]", fname(*field), list(index))
            }
            InstKind::FieldStore {
                field,
                index,
                value,
            } => {
                format!(
                    "field_store {}[{}] = {:?}",
                    fname(*field),
                    list(index),
                    value
                )
            }
            InstKind::FieldAtomic {
                op,
                field,
                index,
                value,
                cmp,
            } => format!(
                "field_atomic_{} {}[{}], {:?}{}",
                op.name(),
                fname(*field),
                list(index),
                value,
                cmp.map(|c| format!(", cmp {:?}", c)).unwrap_or_default()
            ),
            InstKind::IndexCheck { index, len } => {
                format!("index_check 0 <= {:?} < {}", index, len)
            }
            InstKind::SharedLoad { array, index } => format!("shared_load #{}[{:?}]", array, index),
            InstKind::SharedStore {
                array,
                index,
                value,
            } => format!("shared_store #{}[{:?}] = {:?}", array, index, value),
            InstKind::Barrier => "barrier".to_string(),
            InstKind::BoundsCheck {
                field,
                axis,
                index,
                extent,
            } => {
                format!(
                    "bounds_check {} axis {}: 0 <= {:?} < {}",
                    fname(*field),
                    axis,
                    index,
                    extent
                )
            }
            InstKind::Trap { site, value } => format!("trap site {} {:?}", site, value),
            InstKind::BufLoad { root, addr } => format!("buf_load L{}[{:?}]", root.index(), addr),
            InstKind::BufStore { root, addr, value } => {
                format!("buf_store L{}[{:?}] = {:?}", root.index(), addr, value)
            }
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            } => format!(
                "buf_atomic_{} L{}[{:?}], {:?}{}",
                op.name(),
                root.index(),
                addr,
                value,
                cmp.map(|c| format!(", cmp {:?}", c)).unwrap_or_default()
            ),
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let _ = writeln!(out, "{}if {:?} {{", pad, cond);
                print_block(out, program, f, accept, depth + 1);
                if !reject.is_empty() {
                    let _ = writeln!(out, "{}}} else {{", pad);
                    print_block(out, program, f, reject, depth + 1);
                }
                let _ = writeln!(out, "{}}}", pad);
                continue;
            }
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive,
                body,
            } => {
                let dots = if *inclusive { "..=" } else { ".." };
                let _ = writeln!(
                    out,
                    "{}{:?} = for {:?}{}{:?} step {:?} {{",
                    pad, h, begin, dots, end, step
                );
                print_block(out, program, f, body, depth + 1);
                let _ = writeln!(out, "{}}}", pad);
                continue;
            }
            InstKind::LoopCounter(l) => format!("counter of {:?}", l),
            InstKind::Loop { body } => {
                let _ = writeln!(out, "{}loop {{", pad);
                print_block(out, program, f, body, depth + 1);
                let _ = writeln!(out, "{}}}", pad);
                continue;
            }
            InstKind::Break => "break".into(),
            InstKind::Continue => "continue".into(),
            InstKind::Return(v) => match v {
                Some(v) => format!("return {:?}", v),
                None => "return".into(),
            },
        };
        if inst.ty == Type::Void {
            let _ = writeln!(out, "{}{}", pad, text);
        } else {
            let _ = writeln!(out, "{}{:?} = {} : {}", pad, h, text, inst.ty);
        }
    }
}

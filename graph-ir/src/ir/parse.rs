//! Reads the text that [`print_program`](super::print_program) writes back
//! into a [`Program`], so that a pass can be tested from text in to text out
//! (`tests/filetests/`) without building a graph.
//!
//! Contract:
//! - For every program `p`, `print_program(&parse_program(&t)?, None) == t`
//!   where `t = print_program(&p, None)` (tested on the golden files and on
//!   every shipped example at every pipeline stage).
//! - What the text holds comes back: layouts (kind, shape, parent, packing,
//!   cell words and bits, offset in the parent), fields (type, shape,
//!   layout, offset, storage), kernels (iteration, `count_from`, params,
//!   zero fill, fault sites, helper functions, the entry), functions (args,
//!   return type, locals) and every instruction with its handle, type and
//!   nested blocks. Layout children are rebuilt from the parents and the
//!   fields' layouts (fields first, then child nodes, in handle order).
//! - What the text does not hold gets a neutral value: the schedule, views,
//!   gradients, word views and custom backward kernels are empty, field
//!   initial values zero, kernel bindings empty and params 0, spans 0:0,
//!   `loops_end` false. The layout sizes the text does not show (headers,
//!   blocks, images, pools, lists, tree words) come from `layout::compute`
//!   when it reproduces every printed size (cell words and bits, offsets);
//!   otherwise (a `bit_array` word view, which the text does not mark, or
//!   hand-written sizes that `compute` would not give) they stay 0 and
//!   the printed sizes are kept, fit for every pass that computes no
//!   addresses. The result is for passes, not for a backend (no schedule,
//!   no initial values). Quantized storage comes back without
//!   `overflow: wrap` and stochastic rounding, which the text does not show.
//! - Instructions the printer leaves out (void instructions carry no handle
//!   in the text; dead instructions are not printed at all) get fresh
//!   handles after the largest printed one; unused handles below it hold a
//!   dead `const 0i`, so that handles read back as they were printed.
//! - Malformed text is an [`ParseError`] with the 1-based line and column,
//!   never a panic.

use super::quant::{Quant, QuantParams, SharedFloat};
use super::*;

/// Why text is not a program, at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.col, self.message
        )
    }
}

impl std::error::Error for ParseError {}

type R<T> = Result<T, ParseError>;

/// A cursor over one line.
struct Cur<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Cur<'a> {
    fn new(text: &'a str, line: usize) -> Self {
        Cur { text, pos: 0, line }
    }
    fn err<T>(&self, message: impl Into<String>) -> R<T> {
        Err(ParseError {
            line: self.line,
            col: self.text[..self.pos].chars().count() + 1,
            message: message.into(),
        })
    }
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }
    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }
    fn eat(&mut self, lit: &str) -> bool {
        if self.rest().starts_with(lit) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, lit: &str) -> R<()> {
        if self.eat(lit) {
            Ok(())
        } else {
            let got: String = self.rest().chars().take(20).collect();
            self.err(format!("expected '{}', found '{}'", lit, got))
        }
    }
    fn end(&self) -> R<()> {
        if self.at_end() {
            Ok(())
        } else {
            self.err(format!(
                "unexpected '{}' at the end of the line",
                self.rest()
            ))
        }
    }
    /// Text up to (not including) the first of `stops`, or to the end.
    fn until(&mut self, stops: &[&str]) -> &'a str {
        let rest = self.rest();
        let n = stops
            .iter()
            .filter_map(|s| rest.find(s))
            .min()
            .unwrap_or(rest.len());
        self.pos += n;
        &rest[..n]
    }
    fn number<T: std::str::FromStr>(&mut self, what: &str) -> R<T> {
        let rest = self.rest();
        let n = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        match rest[..n].parse() {
            Ok(v) => {
                self.pos += n;
                Ok(v)
            }
            Err(_) => self.err(format!("expected {}", what)),
        }
    }
    fn inst(&mut self) -> R<InstId> {
        self.expect("%")?;
        Ok(Handle::new(
            self.number::<u32>("an instruction number after '%'")? as usize,
        ))
    }
    fn inst_list(&mut self, close: &str) -> R<Vec<InstId>> {
        let mut v = vec![];
        if self.eat(close) {
            return Ok(v);
        }
        loop {
            v.push(self.inst()?);
            if self.eat(close) {
                return Ok(v);
            }
            self.expect(", ")?;
        }
    }
    /// `'name'`
    fn quoted(&mut self) -> R<&'a str> {
        self.expect("'")?;
        let rest = self.rest();
        match rest.find('\'') {
            Some(n) => {
                self.pos += n + 1;
                Ok(&rest[..n])
            }
            None => self.err("unterminated quoted name"),
        }
    }
    fn ty(&mut self, stops: &[&str]) -> R<Type> {
        let start = self.pos;
        let t = self.until(stops);
        parse_type(t)
            .or_else(|| {
                self.pos = start;
                None
            })
            .map_or_else(|| self.err(format!("unknown type '{}'", t)), Ok)
    }
    fn u32_list(&mut self) -> R<Vec<u32>> {
        self.expect("[")?;
        let mut v = vec![];
        if self.eat("]") {
            return Ok(v);
        }
        loop {
            v.push(self.number("a number")?);
            if self.eat("]") {
                return Ok(v);
            }
            self.expect(", ")?;
        }
    }
}

fn parse_type(t: &str) -> Option<Type> {
    if t == "()" {
        Some(Type::Void)
    } else {
        Type::parse(t)
    }
}

/// Reads printer text back into a program (see the module doc).
pub fn parse_program(text: &str) -> Result<Program, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut p = Program::default();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let mut c = Cur::new(line, i + 1);
        if line.is_empty() {
            i += 1;
        } else if c.eat("layout ") {
            parse_layout(&mut c, &mut p)?;
            i += 1;
        } else if c.eat("field ") {
            parse_field(&mut c, &mut p)?;
            i += 1;
        } else if c.eat("kernel ") {
            i = parse_kernel(&lines, i, &mut p)?;
        } else {
            return c.err("expected 'layout', 'field' or 'kernel'");
        }
    }
    // Parents must exist; children are rebuilt from parents and fields.
    for h in p.layouts.handles().collect::<Vec<_>>() {
        if let Some(par) = p.layouts[h].parent {
            if p.layouts.get(par).is_none() || par == h {
                return Err(ParseError {
                    line: 1,
                    col: 1,
                    message: format!(
                        "layout L{}: parent L{} is not a layout",
                        h.index(),
                        par.index()
                    ),
                });
            }
        }
    }
    for (f, fd) in p
        .fields
        .iter()
        .map(|(h, f)| (h, f.layout))
        .collect::<Vec<_>>()
    {
        p.layouts[fd].children.push(LayoutChild::Field(f));
    }
    for h in p.layouts.handles().collect::<Vec<_>>() {
        if let Some(par) = p.layouts[h].parent {
            p.layouts[par].children.push(LayoutChild::Layout(h));
        }
    }
    // The sizes the text does not show, from the one layout module, kept
    // only where it reproduces every size the text does show.
    let mut sized = p.clone();
    if layout::compute(&mut sized).is_ok()
        && sized.layouts.iter().zip(p.layouts.iter()).all(|(a, b)| {
            (a.1.cell_words, a.1.cell_bits, a.1.offset_in_parent)
                == (b.1.cell_words, b.1.cell_bits, b.1.offset_in_parent)
        })
        && sized
            .fields
            .iter()
            .zip(p.fields.iter())
            .all(|(a, b)| a.1.offset_in_cell == b.1.offset_in_cell)
    {
        p = sized;
    }
    Ok(p)
}

fn parse_layout(c: &mut Cur, p: &mut Program) -> R<()> {
    c.expect("L")?;
    let idx: usize = c.number("a layout number")?;
    if idx != p.layouts.len() {
        return c.err(format!(
            "expected layout L{} (layouts are numbered in order)",
            p.layouts.len()
        ));
    }
    c.expect(" ")?;
    let node_id = c.quoted()?.to_string();
    c.expect(" ")?;
    let kind = if c.eat("Dense") {
        LayoutKind::Dense
    } else if c.eat("Bitmasked") {
        LayoutKind::Bitmasked
    } else if c.eat("Dynamic") {
        LayoutKind::Dynamic
    } else if c.eat("Pointer { capacity: ") {
        let capacity = c.number("a capacity")?;
        c.expect(" }")?;
        LayoutKind::Pointer { capacity }
    } else if c.eat("Hash { capacity: ") {
        let capacity = c.number("a capacity")?;
        c.expect(" }")?;
        LayoutKind::Hash { capacity }
    } else {
        return c.err("expected a layout kind (Dense, Bitmasked, Pointer { capacity: N }, Dynamic, Hash { capacity: N })");
    };
    c.expect(" shape=")?;
    let shape = c.u32_list()?;
    let parent = if c.eat(" parent=L") {
        Some(Handle::new(c.number::<usize>("a layout number")?))
    } else {
        None
    };
    let mut l = LayoutNode::new(&node_id, kind, shape, parent);
    c.expect(" cell_words=")?;
    l.cell_words = c.number("a number of words")?;
    c.expect(" offset=")?;
    l.offset_in_parent = c.number("a word offset")?;
    l.cell_bits = l.cell_words * 32;
    if c.eat(" packing=") {
        l.packing = if c.eat("bit_struct") {
            Packing::BitStruct
        } else if c.eat("bit_array") {
            Packing::BitArray
        } else {
            return c.err("expected packing bit_struct or bit_array");
        };
        c.expect(" cell_bits=")?;
        l.cell_bits = c.number("a number of bits")?;
    }
    c.end()?;
    p.layouts.append(l);
    Ok(())
}

fn parse_field(c: &mut Cur, p: &mut Program) -> R<()> {
    c.expect("F")?;
    let idx: usize = c.number("a field number")?;
    if idx != p.fields.len() {
        return c.err(format!(
            "expected field F{} (fields are numbered in order)",
            p.fields.len()
        ));
    }
    c.expect(" ")?;
    let name = c.quoted()?.to_string();
    c.expect(" : ")?;
    let ty = c.ty(&[" shape="])?;
    c.expect(" shape=")?;
    let shape = c.u32_list()?;
    c.expect(" layout=L")?;
    let layout: usize = c.number("a layout number")?;
    if layout >= p.layouts.len() {
        return c.err(format!("layout L{} is not defined above", layout));
    }
    c.expect(" offset=")?;
    let off: u64 = c.number("an offset")?;
    let bits = c.eat("b");
    let storage = if c.eat(" storage=") {
        let start = c.pos;
        let name = c.until(&[" "]);
        let q = match Quant::parse(name, QuantParams::default()) {
            Ok(Some(q)) => q,
            Ok(None) => return c.err("storage=word is written without storage="),
            Err(e) => {
                c.pos = start;
                return c.err(e);
            }
        };
        if c.eat(" shared_exponent") {
            match SharedFloat::new(q, ty.components()) {
                Ok(s) => Storage::Shared(s),
                Err(e) => {
                    c.pos = start;
                    return c.err(e);
                }
            }
        } else {
            Storage::Quant(q)
        }
    } else {
        Storage::Word
    };
    c.end()?;
    if bits == matches!(storage, Storage::Word) {
        return c.err("word storage gives its offset in words (N), other storage in bits (Nb)");
    }
    let n = ty.components();
    p.fields.append(Field {
        name,
        ty,
        storage,
        layout: Handle::new(layout),
        shape,
        offset_in_cell: if bits { off } else { off * 32 },
        init: FieldInit::Constant(vec![0; n]),
    });
    Ok(())
}

fn layout_by_node(c: &Cur, p: &Program, id: &str) -> R<LayoutId> {
    p.layouts
        .iter()
        .filter(|(_, l)| l.node_id == id)
        .min_by_key(|(_, l)| l.parent.is_some())
        .map(|(h, _)| h)
        .map_or_else(|| c.err(format!("no layout node '{}'", id)), Ok)
}

/// Parses the kernel starting at `lines[start]`; returns the next line.
fn parse_kernel(lines: &[&str], start: usize, p: &mut Program) -> R<usize> {
    let mut c = Cur::new(lines[start], start + 1);
    c.expect("kernel ")?;
    let name = c.quoted()?.to_string();
    c.expect(" over ")?;
    let Some(pp) = c.rest().rfind(" params(") else {
        return c.err("expected ' params(...)' at the end of the kernel line");
    };
    let iter_end = c.pos + pp;
    let mut ic = Cur {
        text: &c.text[..iter_end],
        pos: c.pos,
        line: c.line,
    };
    let iteration = if ic.eat("range ") {
        Iteration::Range(ic.u32_list()?)
    } else if ic.eat("cells of ") {
        let f = ic.until(&[" (rows < word "]);
        match p.field_by_name(f) {
            Some(f) => Iteration::Field(f),
            None => return ic.err(format!("no field '{}'", f)),
        }
    } else {
        return ic.err("expected 'range [..]' or 'cells of FIELD'");
    };
    let count_from = if ic.eat(" (rows < word ") {
        let word = ic.number("a word address")?;
        ic.expect(" of ")?;
        let node = ic.until(&[")"]);
        let root = layout_by_node(&ic, p, node)?;
        ic.expect(")")?;
        Some(DeviceCount { root, word })
    } else {
        None
    };
    ic.end()?;
    c.pos = iter_end;
    c.expect(" params(")?;
    let mut params = vec![];
    if !c.eat(")") {
        loop {
            let pname = c.until(&[": "]).to_string();
            c.expect(": ")?;
            let ty = c.ty(&[", ", ")"])?;
            // `name@N`: a scalar of the kernel's N-th fused node.
            let (pname, part) = match pname.rsplit_once('@') {
                Some((n, part)) => match part.parse::<u16>() {
                    Ok(part) => (n.to_string(), part),
                    Err(_) => return c.err(format!("bad scalar part in '{}'", pname)),
                },
                None => (pname, 0),
            };
            params.push(KernelParam {
                part,
                name: pname,
                ty,
                value: 0,
            });
            if c.eat(")") {
                break;
            }
            c.expect(", ")?;
        }
    }
    c.end()?;
    let mut i = start + 1;
    let mut zero_fill = None;
    let mut workgroup: Option<Workgroup> = None;
    let mut fault_sites = vec![];
    let mut functions = Arena::new();
    let mut entry = None;
    let mut fused = Vec::new();
    while i < lines.len() && !lines[i].is_empty() {
        let mut c = Cur::new(lines[i], i + 1);
        if entry.is_some() {
            return c.err("the entry function ends a kernel: expected an empty line");
        }
        if c.eat("  fused ") {
            loop {
                fused.push(c.quoted()?.to_string());
                if !c.eat(" ") {
                    break;
                }
            }
            c.end()?;
            i += 1;
            continue;
        }
        if c.eat("  zero fill: words ") {
            let first: u64 = c.number("a word")?;
            c.expect("..")?;
            let end: u64 = c.number("a word")?;
            c.expect(" of ")?;
            let root = layout_by_node(&c, p, c.rest())?;
            if end < first {
                return c.err("the zero-fill range ends before it starts");
            }
            zero_fill = Some(ZeroFill {
                root,
                first,
                words: end - first,
            });
            i += 1;
        } else if c.eat("  workgroup ") {
            let size = c.number("a workgroup size")?;
            c.end()?;
            workgroup = Some(Workgroup {
                size,
                arrays: vec![],
            });
            i += 1;
        } else if c.eat("  shared #") {
            let Some(w) = workgroup.as_mut() else {
                return c.err("a shared array needs a 'workgroup N' line before it");
            };
            let n: usize = c.number("a shared array number")?;
            if n != w.arrays.len() {
                return c.err(format!("expected shared array #{}", w.arrays.len()));
            }
            c.expect(" ")?;
            let name = c.quoted()?.to_string();
            c.expect(": ")?;
            let ty = c.ty(&["["])?;
            c.expect("[")?;
            let len = c.number("a length")?;
            c.expect("]")?;
            c.end()?;
            w.arrays.push(SharedArray { name, ty, len });
            i += 1;
        } else if c.eat("  fault site ") {
            let n: usize = c.number("a site number")?;
            if n != fault_sites.len() {
                return c.err(format!("expected fault site {}", fault_sites.len()));
            }
            c.expect(" at ")?;
            let line = c.number("a line")?;
            c.expect(":")?;
            let col = c.number("a column")?;
            c.expect(": ")?;
            let kind = parse_fault_kind(&mut c, p)?;
            let resume = c.eat(", resumes");
            c.end()?;
            fault_sites.push(FaultSite {
                span: Span::new(line, col),
                kind,
                resume,
            });
            i += 1;
        } else if c.rest().starts_with("  fn ") || c.rest().starts_with("  entry ") {
            let is_entry = c.rest().starts_with("  entry ");
            let (f, next) = parse_function(lines, i, p, is_entry)?;
            if is_entry {
                entry = Some(f);
            } else {
                functions.append(f);
            }
            i = next;
        } else {
            return c.err(
                "expected 'zero fill', 'workgroup', 'shared', 'fault site', 'fn' or 'entry' in a kernel",
            );
        }
    }
    let Some(entry) = entry else {
        return Cur::new(lines[start], start + 1)
            .err(format!("kernel '{}' has no entry function", name));
    };
    // Calls name functions of this kernel.
    for f in functions.iter().map(|x| x.1).chain([&entry]) {
        for (_, inst) in f.insts.iter() {
            if let InstKind::Call(fid, _) = inst.kind {
                if fid.index() >= functions.len() {
                    return Cur::new(lines[start], start + 1).err(format!(
                        "kernel '{}': a call names fn{}, which the kernel does not have",
                        name,
                        fid.index()
                    ));
                }
            }
        }
    }
    p.kernels.append(Kernel {
        fused,
        name,
        iteration,
        dims: entry.args.len(),
        params,
        entry,
        functions,
        bindings: vec![],
        fault_sites,
        count_from,
        loops_end: false,
        zero_fill,
        workgroup,
    });
    Ok(i)
}

fn parse_fault_kind(c: &mut Cur, p: &Program) -> R<FaultKind> {
    let layout = |c: &mut Cur| -> R<LayoutId> {
        c.expect("{ layout: %")?;
        let l: usize = c.number("a layout number")?;
        c.expect(" }")?;
        if l >= p.layouts.len() {
            return c.err(format!("layout L{} is not defined", l));
        }
        Ok(Handle::new(l))
    };
    Ok(if c.eat("OutOfBounds { field: %") {
        let f: usize = c.number("a field number")?;
        if f >= p.fields.len() {
            return c.err(format!("field F{} is not defined", f));
        }
        c.expect(", axis: ")?;
        let axis = c.number("an axis")?;
        c.expect(", extent: ")?;
        let extent = c.number("an extent")?;
        c.expect(" }")?;
        FaultKind::OutOfBounds {
            field: Handle::new(f),
            axis,
            extent,
        }
    } else if c.eat("LocalIndex { len: ") {
        let len = c.number("a length")?;
        c.expect(" }")?;
        FaultKind::LocalIndex { len }
    } else if c.eat("LoopTrips { limit: ") {
        let limit = c.number("a trip limit")?;
        c.expect(" }")?;
        FaultKind::LoopTrips { limit }
    } else if c.eat("NonPositiveStep { signed: ") {
        let signed = if c.eat("true") {
            true
        } else {
            c.expect("false")?;
            false
        };
        c.expect(" }")?;
        FaultKind::NonPositiveStep { signed }
    } else if c.eat("PoolExhausted ") {
        FaultKind::PoolExhausted { layout: layout(c)? }
    } else if c.eat("ListFull ") {
        FaultKind::ListFull { layout: layout(c)? }
    } else if c.eat("TableFull ") {
        FaultKind::TableFull { layout: layout(c)? }
    } else if c.eat("Address") {
        FaultKind::Address
    } else if c.eat("CallDepth") {
        FaultKind::CallDepth
    } else {
        return c.err("unknown fault kind");
    })
}

/// One instruction as read, before handles are final.
struct Parsed {
    id: Option<InstId>,
    kind: InstKind,
    ty: Type,
    line: usize,
}

struct FnParser<'a, 'p> {
    lines: &'a [&'a str],
    program: &'p Program,
    insts: Vec<Option<(Inst, usize, bool)>>,
    next_void: usize,
    locals: usize,
}

fn parse_function(
    lines: &[&str],
    start: usize,
    p: &Program,
    is_entry: bool,
) -> R<(Function, usize)> {
    let mut c = Cur::new(lines[start], start + 1);
    c.expect(if is_entry { "  entry " } else { "  fn " })?;
    let name = c.until(&["("]).to_string();
    c.expect("(")?;
    let mut args = vec![];
    if !c.eat(")") {
        loop {
            args.push(c.ty(&[", ", ")"])?);
            if c.eat(")") {
                break;
            }
            c.expect(", ")?;
        }
    }
    c.expect(" -> ")?;
    let ret = c.ty(&[" {"])?;
    c.expect(" {")?;
    c.end()?;
    let mut f = Function::new(&name, args, ret, Span::default());
    let mut i = start + 1;
    while i < lines.len() && lines[i].starts_with("    local $") {
        let mut c = Cur::new(lines[i], i + 1);
        c.expect("    local $")?;
        let n: usize = c.number("a local number")?;
        if n != f.locals.len() {
            return c.err(format!("expected local ${}", f.locals.len()));
        }
        c.expect(" ")?;
        let lname = c.quoted()?.to_string();
        c.expect(": ")?;
        let ty = c.ty(&[])?;
        f.locals.append(Local { name: lname, ty });
        i += 1;
    }
    // Printed handles: void instructions get handles after the largest.
    let mut max = None::<usize>;
    let mut j = i;
    while j < lines.len() && lines[j] != "  }" && !lines[j].is_empty() {
        let t = lines[j].trim_start();
        if let Some(rest) = t.strip_prefix('%') {
            if let Some((n, _)) = rest.split_once(" = ") {
                if let Ok(n) = n.parse::<usize>() {
                    max = Some(max.map_or(n, |m: usize| m.max(n)));
                }
            }
        }
        j += 1;
    }
    let mut fp = FnParser {
        lines,
        program: p,
        insts: vec![],
        next_void: max.map_or(0, |m| m + 1),
        locals: f.locals.len(),
    };
    let (body, next) = fp.block(i, 2)?;
    let Some(&close) = lines.get(next) else {
        return Cur::new(lines[start], start + 1)
            .err(format!("function '{}' is not closed by '  }}'", name));
    };
    let c = Cur::new(close, next + 1);
    if close != "  }" {
        return c.err("expected '  }' closing the function");
    }
    // Every operand names an instruction of this function.
    let defined = |h: InstId| {
        fp.insts
            .get(h.index())
            .is_some_and(|x| x.as_ref().is_some_and(|x| x.2))
    };
    for (inst, line, _) in fp.insts.iter().flatten() {
        let mut bad = inst.kind.operands().into_iter().find(|&o| !defined(o));
        if let InstKind::LoopCounter(l) = inst.kind {
            if !defined(l) {
                bad = Some(l);
            }
        }
        if let Some(o) = bad {
            return Err(ParseError {
                line: *line,
                col: 1,
                message: format!("{:?} is not an instruction of function '{}'", o, name),
            });
        }
    }
    for x in fp.insts {
        f.insts.append(match x {
            Some((inst, _, _)) => inst,
            None => Inst {
                kind: InstKind::Const(Const::i32(0)),
                ty: Type::I32,
                span: Span::default(),
            },
        });
    }
    f.body = body;
    Ok((f, next + 1))
}

impl FnParser<'_, '_> {
    fn place(&mut self, p: Parsed) -> R<InstId> {
        let explicit = p.id.is_some();
        let h = match p.id {
            Some(h) => h,
            None => {
                self.next_void += 1;
                Handle::new(self.next_void - 1)
            }
        };
        if h.index() >= 1 << 24 {
            return Err(ParseError {
                line: p.line,
                col: 1,
                message: format!("instruction number {:?} is too large", h),
            });
        }
        if self.insts.len() <= h.index() {
            self.insts.resize_with(h.index() + 1, || None);
        }
        if self.insts[h.index()].is_some() {
            return Err(ParseError {
                line: p.line,
                col: 1,
                message: format!("{:?} is defined twice", h),
            });
        }
        self.insts[h.index()] = Some((
            Inst {
                kind: p.kind,
                ty: p.ty,
                span: Span::default(),
            },
            p.line,
            explicit,
        ));
        Ok(h)
    }

    /// Reads instructions indented by `depth` levels from line `i` to the
    /// first line that closes the block; returns the block and that line.
    fn block(&mut self, mut i: usize, depth: usize) -> R<(Block, usize)> {
        let pad = "  ".repeat(depth);
        let mut block = vec![];
        while i < self.lines.len() {
            let line = self.lines[i];
            let Some(text) = line.strip_prefix(pad.as_str()) else {
                return Ok((block, i));
            };
            if text.starts_with(' ') {
                return Cur::new(line, i + 1).err("unexpected indentation");
            }
            if text.starts_with('}') {
                return Ok((block, i));
            }
            let mut c = Cur::new(line, i + 1);
            c.pos = pad.len();
            // Control flow with nested blocks.
            if c.eat("if ") {
                let cond = c.inst()?;
                c.expect(" {")?;
                c.end()?;
                let (accept, j) = self.block(i + 1, depth + 1)?;
                let close = format!("{}}}", pad);
                let els = format!("{}}} else {{", pad);
                let (reject, j) = match self.lines.get(j) {
                    Some(&l) if l == els => self.block(j + 1, depth + 1)?,
                    _ => (vec![], j),
                };
                self.close(j, &close)?;
                let h = self.place(Parsed {
                    id: None,
                    kind: InstKind::If {
                        cond,
                        accept,
                        reject,
                    },
                    ty: Type::Void,
                    line: i + 1,
                })?;
                block.push(h);
                i = j + 1;
                continue;
            }
            if c.eat("loop {") {
                c.end()?;
                let (body, j) = self.block(i + 1, depth + 1)?;
                self.close(j, &format!("{}}}", pad))?;
                let h = self.place(Parsed {
                    id: None,
                    kind: InstKind::Loop { body },
                    ty: Type::Void,
                    line: i + 1,
                })?;
                block.push(h);
                i = j + 1;
                continue;
            }
            let mut id = None;
            if c.rest().starts_with('%') {
                let save = c.pos;
                let h = c.inst()?;
                if c.eat(" = ") {
                    id = Some(h);
                } else {
                    c.pos = save;
                }
            }
            if id.is_some() && c.eat("for ") {
                let begin = c.inst()?;
                let inclusive = if c.eat("..=") {
                    true
                } else {
                    c.expect("..")?;
                    false
                };
                let end = c.inst()?;
                c.expect(" step ")?;
                let step = c.inst()?;
                c.expect(" {")?;
                c.end()?;
                let (body, j) = self.block(i + 1, depth + 1)?;
                self.close(j, &format!("{}}}", pad))?;
                let h = self.place(Parsed {
                    id,
                    kind: InstKind::RangeFor {
                        begin,
                        end,
                        step,
                        inclusive,
                        body,
                    },
                    ty: Type::Void,
                    line: i + 1,
                })?;
                block.push(h);
                i = j + 1;
                continue;
            }
            // A plain instruction: `%N = TEXT : TYPE` or `TEXT` (void).
            let ty = if id.is_some() {
                let Some(k) = c.rest().rfind(" : ") else {
                    return c.err("expected ' : TYPE' after the instruction");
                };
                let tpos = c.pos + k + 3;
                let tc = Cur {
                    text: line,
                    pos: tpos,
                    line: i + 1,
                };
                let t = &line[tpos..];
                let Some(ty) = parse_type(t) else {
                    return tc.err(format!("unknown type '{}'", t));
                };
                if ty == Type::Void {
                    return tc.err("a value of type () has no handle in the text");
                }
                ty
            } else {
                Type::Void
            };
            let end = match id {
                Some(_) => c.pos + c.rest().rfind(" : ").unwrap_or(0),
                None => line.len(),
            };
            let mut ic = Cur {
                text: &line[..end],
                pos: c.pos,
                line: i + 1,
            };
            let kind = self.inst_kind(&mut ic)?;
            ic.end()?;
            let h = self.place(Parsed {
                id,
                kind,
                ty,
                line: i + 1,
            })?;
            block.push(h);
            i += 1;
        }
        Ok((block, i))
    }

    fn close(&self, j: usize, want: &str) -> R<()> {
        match self.lines.get(j) {
            Some(&l) if l == want => Ok(()),
            Some(&l) => {
                Cur::new(l, j + 1).err(format!("expected '{}' closing the block", want.trim()))
            }
            None => Err(ParseError {
                line: self.lines.len(),
                col: 1,
                message: format!("the text ends inside a block (expected '{}')", want.trim()),
            }),
        }
    }

    fn field(&self, c: &mut Cur) -> R<FieldId> {
        let start = c.pos;
        let name = c.until(&["["]);
        match self.program.field_by_name(name) {
            Some(f) => Ok(f),
            None => {
                c.pos = start;
                c.err(format!("no field '{}'", name))
            }
        }
    }

    fn root(&self, c: &mut Cur) -> R<LayoutId> {
        c.expect("L")?;
        let start = c.pos;
        let l: usize = c.number("a layout number")?;
        if l >= self.program.layouts.len() {
            c.pos = start;
            return c.err(format!("layout L{} is not defined", l));
        }
        Ok(Handle::new(l))
    }

    fn local(&self, c: &mut Cur) -> R<LocalId> {
        c.expect("$")?;
        let start = c.pos;
        let l: usize = c.number("a local number")?;
        if l >= self.locals {
            c.pos = start;
            return c.err(format!("local ${} is not declared", l));
        }
        Ok(Handle::new(l))
    }

    fn atomic_op(c: &mut Cur) -> R<AtomicOp> {
        const OPS: [AtomicOp; 9] = [
            AtomicOp::CompareExchange,
            AtomicOp::Exchange,
            AtomicOp::Add,
            AtomicOp::Sub,
            AtomicOp::Min,
            AtomicOp::Max,
            AtomicOp::And,
            AtomicOp::Or,
            AtomicOp::Xor,
        ];
        for op in OPS {
            if c.eat(op.name()) {
                return Ok(op);
            }
        }
        c.err("unknown atomic operation")
    }

    fn cmp(c: &mut Cur) -> R<Option<InstId>> {
        Ok(if c.eat(", cmp ") {
            Some(c.inst()?)
        } else {
            None
        })
    }

    fn inst_kind(&self, c: &mut Cur) -> R<InstKind> {
        use InstKind as K;
        let r = c.rest();
        // Operand-first forms: binary operations and swizzles.
        if r.starts_with('%') {
            let a = c.inst()?;
            if c.eat(".") {
                let mut comps = vec![];
                for ch in c.rest().chars() {
                    comps.push(match ch {
                        'x' => 0,
                        'y' => 1,
                        'z' => 2,
                        'w' => 3,
                        _ => return c.err("expected swizzle components x, y, z, w"),
                    });
                }
                if comps.is_empty() || comps.len() > 4 {
                    return c.err("a swizzle has 1 to 4 components");
                }
                c.pos = c.text.len();
                return Ok(K::Swizzle(a, comps));
            }
            c.expect(" ")?;
            let start = c.pos;
            let sym = c.until(&[" "]);
            const OPS: [BinaryOp; 19] = [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Rem,
                BinaryOp::BitAnd,
                BinaryOp::BitOr,
                BinaryOp::BitXor,
                BinaryOp::Shl,
                BinaryOp::Shr,
                BinaryOp::Eq,
                BinaryOp::Ne,
                BinaryOp::Lt,
                BinaryOp::Le,
                BinaryOp::Gt,
                BinaryOp::Ge,
                BinaryOp::LogicalAnd,
                BinaryOp::LogicalOr,
                BinaryOp::MatMul,
            ];
            let Some(op) = OPS.into_iter().find(|o| o.symbol() == sym) else {
                c.pos = start;
                return c.err(format!("unknown binary operator '{}'", sym));
            };
            c.expect(" ")?;
            let b = c.inst()?;
            return Ok(K::Binary(op, a, b));
        }
        if c.eat("const ") {
            let start = c.pos;
            let t = c.rest();
            c.pos = c.text.len();
            let bad = |c: &mut Cur| {
                c.pos = start;
                c.err(format!("bad constant '{}'", t))
            };
            let k = if t == "true" || t == "false" {
                Const::bool(t == "true")
            } else if let Some(v) = t.strip_suffix("ul") {
                match v.parse::<u64>() {
                    Ok(v) => Const::u64(v),
                    Err(_) => return bad(c),
                }
            } else if let Some(v) = t.strip_suffix('l') {
                match v.parse::<i64>() {
                    Ok(v) => Const::i64(v),
                    Err(_) => return bad(c),
                }
            } else if let Some(v) = t.strip_suffix('d') {
                match v.parse::<f64>() {
                    Ok(v) => Const::f64(v),
                    Err(_) => return bad(c),
                }
            } else if let Some(v) = t.strip_suffix('i') {
                match v.parse::<i32>() {
                    Ok(v) => Const::i32(v),
                    Err(_) => return bad(c),
                }
            } else if let Some(v) = t.strip_suffix('u') {
                match v.parse::<u32>() {
                    Ok(v) => Const::u32(v),
                    Err(_) => return bad(c),
                }
            } else if let Some(v) = t.strip_suffix('f') {
                match v.parse::<f32>() {
                    Ok(v) => Const::f32(v),
                    Err(_) => return bad(c),
                }
            } else {
                return bad(c);
            };
            return Ok(K::Const(k));
        }
        if c.eat("arg ") {
            return Ok(K::Arg(c.number("an argument number")?));
        }
        if c.eat("param ") {
            return Ok(K::Param(c.number("a param number")?));
        }
        for (word, kind) in [
            ("frame", K::Frame),
            ("random", K::Random),
            ("rng_load", K::RngLoad),
            ("trips_load", K::TripsLoad),
            ("launch.seed", K::Launch(LaunchValue::Seed)),
            ("launch.count", K::Launch(LaunchValue::Count)),
            ("launch.linear", K::Launch(LaunchValue::Linear)),
            ("break", K::Break),
            ("continue", K::Continue),
            ("barrier", K::Barrier),
        ] {
            if c.rest() == word {
                c.pos = c.text.len();
                return Ok(kind);
            }
        }
        if c.eat("neg ") {
            return Ok(K::Unary(UnaryOp::Neg, c.inst()?));
        }
        if c.eat("not ") {
            return Ok(K::Unary(UnaryOp::Not, c.inst()?));
        }
        if c.eat("select ") {
            let cond = c.inst()?;
            c.expect(" ? ")?;
            let accept = c.inst()?;
            c.expect(" : ")?;
            let reject = c.inst()?;
            return Ok(K::Select {
                cond,
                accept,
                reject,
            });
        }
        if c.eat("cast ") {
            return Ok(K::Cast(c.inst()?));
        }
        if c.eat("bitcast ") {
            return Ok(K::Bitcast(c.inst()?));
        }
        if c.eat("construct(") {
            return Ok(K::Construct(c.inst_list(")")?));
        }
        if c.eat("extract ") {
            let a = c.inst()?;
            c.expect("[")?;
            let k = if c.rest().starts_with('%') {
                K::ExtractDyn(a, c.inst()?)
            } else {
                K::Extract(a, c.number("a component index")?)
            };
            c.expect("]")?;
            return Ok(k);
        }
        if c.eat("insert ") {
            let base = c.inst()?;
            c.expect("[")?;
            let dynamic = if c.rest().starts_with('%') {
                Some(c.inst()?)
            } else {
                None
            };
            let index = match dynamic {
                Some(_) => 0,
                None => c.number("a component index")?,
            };
            c.expect("] = ")?;
            let value = c.inst()?;
            return Ok(match dynamic {
                Some(index) => K::InsertDyn { base, index, value },
                None => K::Insert { base, index, value },
            });
        }
        if c.eat("call fn") {
            let f: usize = c.number("a function number")?;
            c.expect("(")?;
            return Ok(K::Call(Handle::new(f), c.inst_list(")")?));
        }
        if c.eat("rng_store ") {
            return Ok(K::RngStore(c.inst()?));
        }
        if c.eat("trips_store ") {
            return Ok(K::TripsStore(c.inst()?));
        }
        if c.eat("lane_max ") {
            return Ok(K::LaneMax(c.inst()?));
        }
        if c.eat("load ") {
            return Ok(K::LocalLoad(self.local(c)?));
        }
        if c.eat("store ") {
            let l = self.local(c)?;
            c.expect(" = ")?;
            return Ok(K::LocalStore(l, c.inst()?));
        }
        if c.eat("field_load ") {
            let field = self.field(c)?;
            c.expect("[")?;
            return Ok(K::FieldLoad {
                field,
                index: c.inst_list("]")?,
            });
        }
        if c.eat("field_store ") {
            let field = self.field(c)?;
            c.expect("[")?;
            let index = c.inst_list("]")?;
            c.expect(" = ")?;
            return Ok(K::FieldStore {
                field,
                index,
                value: c.inst()?,
            });
        }
        if c.eat("field_atomic_") {
            let op = Self::atomic_op(c)?;
            c.expect(" ")?;
            let field = self.field(c)?;
            c.expect("[")?;
            let index = c.inst_list("]")?;
            c.expect(", ")?;
            let value = c.inst()?;
            let cmp = Self::cmp(c)?;
            return Ok(K::FieldAtomic {
                op,
                field,
                index,
                value,
                cmp,
            });
        }
        if c.eat("is_active ") {
            let field = self.field(c)?;
            c.expect("[")?;
            let index = c.inst_list("]")?;
            let level = if c.eat(" level ") {
                Some(c.number("a level")?)
            } else {
                None
            };
            return Ok(K::FieldIsActive {
                field,
                index,
                level,
            });
        }
        if c.eat("activate ") {
            let field = self.field(c)?;
            c.expect("[")?;
            return Ok(K::FieldActivate {
                field,
                index: c.inst_list("]")?,
            });
        }
        if c.eat("deactivate ") {
            let field = self.field(c)?;
            c.expect("[")?;
            return Ok(K::FieldDeactivate {
                field,
                index: c.inst_list("]")?,
            });
        }
        if c.eat("append ") {
            let field = self.field(c)?;
            c.expect("[list ")?;
            let list = c.inst()?;
            c.expect("] <- ")?;
            return Ok(K::FieldAppend {
                field,
                list,
                value: c.inst()?,
            });
        }
        if c.eat("length ") {
            let field = self.field(c)?;
            c.expect("[list ")?;
            let list = c.inst()?;
            c.expect("]")?;
            return Ok(K::FieldLength { field, list });
        }
        if c.eat("bounds_check ") {
            let start = c.pos;
            let name = c.until(&[" axis "]);
            let Some(field) = self.program.field_by_name(name) else {
                c.pos = start;
                return c.err(format!("no field '{}'", name));
            };
            c.expect(" axis ")?;
            let axis = c.number("an axis")?;
            c.expect(": 0 <= ")?;
            let index = c.inst()?;
            c.expect(" < ")?;
            let extent = c.number("an extent")?;
            return Ok(K::BoundsCheck {
                field,
                axis,
                index,
                extent,
            });
        }
        if c.eat("shared_load #") {
            let array = c.number("a shared array number")?;
            c.expect("[")?;
            let index = c.inst()?;
            c.expect("]")?;
            return Ok(K::SharedLoad { array, index });
        }
        if c.eat("shared_store #") {
            let array = c.number("a shared array number")?;
            c.expect("[")?;
            let index = c.inst()?;
            c.expect("] = ")?;
            return Ok(K::SharedStore {
                array,
                index,
                value: c.inst()?,
            });
        }
        if c.eat("index_check 0 <= ") {
            let index = c.inst()?;
            c.expect(" < ")?;
            let len = c.number("a length")?;
            return Ok(K::IndexCheck { index, len });
        }
        if c.eat("trap site ") {
            let site = c.number("a site number")?;
            c.expect(" ")?;
            return Ok(K::Trap {
                site,
                value: c.inst()?,
            });
        }
        if c.eat("buf_load ") {
            let root = self.root(c)?;
            c.expect("[")?;
            let addr = c.inst()?;
            c.expect("]")?;
            return Ok(K::BufLoad { root, addr });
        }
        if c.eat("buf_store ") {
            let root = self.root(c)?;
            c.expect("[")?;
            let addr = c.inst()?;
            c.expect("] = ")?;
            return Ok(K::BufStore {
                root,
                addr,
                value: c.inst()?,
            });
        }
        if c.eat("buf_atomic_") {
            let op = Self::atomic_op(c)?;
            c.expect(" ")?;
            let root = self.root(c)?;
            c.expect("[")?;
            let addr = c.inst()?;
            c.expect("], ")?;
            let value = c.inst()?;
            let cmp = Self::cmp(c)?;
            return Ok(K::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            });
        }
        if c.eat("counter of ") {
            return Ok(K::LoopCounter(c.inst()?));
        }
        if c.rest() == "return" {
            c.pos = c.text.len();
            return Ok(K::Return(None));
        }
        if c.eat("return ") {
            return Ok(K::Return(Some(c.inst()?)));
        }
        // Builtins: `name(args)`.
        let start = c.pos;
        let name = c.until(&["("]);
        if let Some(b) = Builtin::from_name(name) {
            c.expect("(")?;
            return Ok(K::Builtin(b, c.inst_list(")")?));
        }
        c.pos = start;
        c.err(format!("unknown instruction '{}'", c.rest()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "layout L0 'cells' Dense shape=[16] cell_words=1 offset=0
field F0 'a' : f32 shape=[16] layout=L0 offset=0
kernel 'k' over range [16] params(s: f32)
  entry kernel(i32) -> () {
    local $0 'acc': f32
    %0 = arg 0 : i32
    %1 = field_load a[%0] : f32
    %2 = %1 + %1 : f32
    store $0 = %2
    if %5 {
      field_store a[%0] = %2
    } else {
      break
    }
    %5 = const true : bool
  }

";

    #[test]
    fn small_program_round_trips() {
        let p = parse_program(SMALL).unwrap();
        assert_eq!(print_program(&p, None), SMALL);
    }

    fn err(text: &str) -> ParseError {
        parse_program(text).unwrap_err()
    }

    #[test]
    fn malformed_text_is_an_error_with_its_position() {
        let e = err("layout L0 'c' Sparse shape=[4] cell_words=1 offset=0\n");
        assert_eq!((e.line, e.col), (1, 15), "{}", e);
        assert!(e.message.contains("layout kind"), "{}", e);
        let bad_op = SMALL.replace("%1 + %1", "%1 +? %1");
        let e = err(&bad_op);
        assert_eq!(e.line, 8, "{}", e);
        assert!(e.message.contains("'+?'"), "{}", e);
        let e = err(&SMALL.replace("field_load a[", "field_load b["));
        assert_eq!((e.line, e.message.as_str()), (7, "no field 'b'"));
        let e = err(&SMALL.replace("    } else {\n", "    } els {\n"));
        assert_eq!(e.line, 12, "{}", e);
        let e = err(&SMALL.replace("%2 = %1 + %1", "%1 = %1 + %1"));
        assert!(e.message.contains("defined twice"), "{}", e);
        let e = err(&SMALL.replace("%2 = %1 + %1 : f32", "%2 = %1 + %9 : f32"));
        assert!(e.message.contains("%9 is not an instruction"), "{}", e);
        let e = err(&SMALL.replace(" : f32\n    store", " : f33\n    store"));
        assert!(e.message.contains("unknown type 'f33'"), "{}", e);
        let e = err("kernel 'k' over range [4] params()\n  entry kernel(i32) -> () {\n    %0 = arg 0 : i32\n");
        assert!(e.message.contains("not closed"), "{}", e);
        let e = err("junk\n");
        assert_eq!((e.line, e.col), (1, 1));
        for cut in 0..SMALL.len() {
            if SMALL.is_char_boundary(cut) {
                let _ = parse_program(&SMALL[..cut]);
            }
        }
    }
}

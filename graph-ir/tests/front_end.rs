//! Parser and type-checker: accepted programs build valid IR; rejected ones
//! report the right line:col and a plain-words message.

use weft_ir::ir::{validate_kernel, FieldId, Program};
use weft_ir::lang::{lower_kernel, CodeError, KernelEnv};
use weft_ir::types::{Scalar, Type};

fn env_fields() -> Vec<(String, FieldId, Type, usize)> {
    vec![
        ("x".into(), FieldId::new(0), Type::F32, 1),
        (
            "grid_v".into(),
            FieldId::new(1),
            Type::Vector(Scalar::F32, 2),
            2,
        ),
        ("n".into(), FieldId::new(2), Type::I32, 1),
    ]
}

fn lower(code: &str, dims: usize) -> Result<(), CodeError> {
    let fields = env_fields();
    let params = vec![("dt".to_string(), Type::F32), ("k".to_string(), Type::I32)];
    let env = KernelEnv {
        dims,
        params: &params,
        fields: &fields,
    };
    lower_kernel(code, &env).map(|_| ())
}

/// Returns a description of the problem, if any, so one run reports every case.
fn check_rejects(code: &str, line: u32, col: u32, needle: &str) -> Option<String> {
    match lower(code, 1) {
        Ok(()) => Some(format!("accepted bad code:\n{}", code)),
        Err(e) if !e.message.contains(needle) => {
            Some(format!("message {:?} lacks {:?}", e.message, needle))
        }
        Err(e) if (e.line, e.col) != (line, col) => Some(format!(
            "{:?}: at {}:{}, expected {}:{}",
            e.message, e.line, e.col, line, col
        )),
        Err(_) => None,
    }
}

#[test]
fn accepts_the_language() {
    let ok = [
        "fn kernel(i: i32) { x[i] = dt * 2.0; }",
        "fn kernel(i: i32) { let v: vec2<f32> = vec2(1.0, 2.0); grid_v[(i, 0)] = v.yx * 2.0; }",
        "fn kernel(i: i32) { grid_v[[i, k]] += vec2(dt); n[i] = atomic_add(n[0], 1); }",
        "fn h(a: f32) -> f32 { if a > 0.0 { return a; } -a }\nfn kernel(i: i32) { x[i] = h(x[i]); }",
        "fn kernel(i: i32) { let m = mat3(1.0); let r = m * vec3(1.0, 2.0, 3.0); x[i] = r.z + m[2][2]; }",
        "fn kernel(i: i32) { let (a, b) = (1, 2.0); x[i] = (a + k) as f32 * b; }",
        "fn kernel(i: i32) { let mut s = 0u32; for j in (0..10).step_by(3) { s += j as u32; } x[i] = s as f32; }",
        "fn kernel(i: i32) { x[i] = x[i].sqrt().max(0.5) + PI; }",
        "fn kernel(i: i32) { let p = ivec2(i, 1); grid_v[p] = vec2(random(), frame() as f32); }",
    ];
    for code in ok {
        if let Err(e) = lower(code, 1) {
            panic!("rejected {:?}: {}", code, e);
        }
    }
    assert!(lower("fn kernel(p: ivec2) { grid_v[p] = vec2(0.0); }", 2).is_ok());
}

#[test]
fn rejects_with_positions_and_plain_words() {
    let mut problems = Vec::new();
    let mut rejects = |code: &str, line: u32, col: u32, needle: &str| {
        problems.extend(check_rejects(code, line, col, needle))
    };
    rejects(
        "fn kernel(i: i32) {\n    grid_v[(i, 0)] = x[i];\n}",
        2,
        22,
        "`x[i]` is f32 but `grid_v[(i, 0)]` expects vec2<f32>",
    );
    rejects(
        "fn kernel(i: i32) {\n  let a = 1.0 + k;\n}",
        2,
        11,
        "`1.0` is f32 but `k` is i32",
    );
    rejects(
        "fn kernel(i: i32) { y[i] = 1.0; }",
        1,
        21,
        "`y` is not a field wired to this kernel",
    );
    rejects(
        "fn kernel(i: i32) { let a = b; }",
        1,
        29,
        "unknown name `b`",
    );
    rejects(
        "fn kernel(i: i32) { let a = 1; a = 2; }",
        1,
        32,
        "declare it with `let mut a`",
    );
    rejects(
        "fn kernel(i: i32) { break; }",
        1,
        21,
        "`break` outside a loop",
    );
    rejects("fn f(a: f32) -> f32 { g(a) }\nfn g(a: f32) -> f32 { f(a) }\nfn kernel(i: i32) { x[i] = f(1.0); }", 2, 23, "recursion is not allowed");
    rejects(
        "fn kernel(i: i32, j: i32) { }",
        1,
        1,
        "this kernel loops over 1 axes",
    );
    rejects(
        "fn kernel(i: i32) { x[i] = sqrt(k); }",
        1,
        28,
        "convert integers with `as f32`",
    );
    rejects(
        "fn kernel(i: i32) { x[(i, 1)] = 0.0; }",
        1,
        23,
        "`x` has 1 axes but is indexed with 2",
    );
    rejects(
        "fn kernel(i: i32) { x[i] = nope(1.0); }",
        1,
        28,
        "unknown function `nope`",
    );
    rejects(
        "fn kernel(i: i32) { x[i] = 1.0 }\nfn kernel(i: i32) {}",
        2,
        4,
        "defined twice",
    );
    rejects("fn main() {}", 1, 1, "entry function `fn kernel");
    rejects(
        "fn kernel(i: i32) { if k { } }",
        1,
        24,
        "a condition must be bool",
    );
    rejects(
        "fn kernel(i: i32) { let v = vec2(1.0, 2.0); x[i] = v.z; }",
        1,
        52,
        "not a valid swizzle",
    );
    rejects("fn kernel(i: i32) { x[i] = 1.0 +; }", 1, 33, "syntax error");
    rejects(
        "fn kernel(i: i32) { x[i] = dt as vec2; }",
        1,
        28,
        "cannot convert f32 to vec2<f32>",
    );
    rejects(
        "fn kernel(i: i32) { grid_v[(i, 0)] *= 2.0; x = 1.0; }",
        1,
        44,
        "`x` is a field",
    );
    rejects(
        "fn kernel(i: i32) { n[i] = 99999999999; }",
        1,
        28,
        "does not fit in i32",
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn lowered_ir_validates() {
    let fields = env_fields();
    let params = vec![("dt".to_string(), Type::F32)];
    let env = KernelEnv {
        dims: 1,
        params: &params,
        fields: &fields,
    };
    let code = "fn f(v: vec2) -> f32 { let mut a = 0.0; for c in 0..2 { a += v[c]; } a }\n\
                fn kernel(i: i32) { let mut w = vec2(1.0, dt); w.y += 1.0; if f(w) > 1.0 && i > 0 { x[i] += 1.0; } else { x[i] = 0.0; } }";
    let lk = lower_kernel(code, &env).unwrap();
    let mut program = Program::default();
    let layout = program.layouts.append({
        let mut l =
            weft_ir::ir::LayoutNode::new("L", weft_ir::ir::LayoutKind::Dense, vec![4, 4], None);
        l.cell_words = 4;
        l.cell_bits = 128;
        l.block_words = 16;
        l.tree_words = 16;
        l
    });
    for (name, _, ty, dims) in &fields {
        program.fields.append(weft_ir::ir::Field {
            name: name.clone(),
            ty: *ty,
            storage: weft_ir::ir::Storage::Word,
            layout,
            shape: vec![4; *dims],
            offset_in_cell: 0,
            init: weft_ir::ir::FieldInit::Constant(vec![0; ty.components()]),
        });
    }
    let k = weft_ir::ir::Kernel {
        name: "k".into(),
        iteration: weft_ir::ir::Iteration::Range(vec![4]),
        dims: 1,
        params: vec![weft_ir::ir::KernelParam {
            name: "dt".into(),
            ty: Type::F32,
            value: 0,
            part: 0,
        }],
        entry: lk.entry,
        functions: lk.functions,
        bindings: vec![],
        fault_sites: vec![],
        count_from: None,
        loops_end: false,
        zero_fill: None,
        workgroup: None,
        fused: Vec::new(),
    };
    validate_kernel(&program, &k, false).unwrap();
}

use weft_tests::corpus::{corpus, corpus_graph};
use weft_tests::*;
#[test]
fn probe() {
    for (name, fields, code, range) in corpus() {
        let g = corpus_graph(&fields, &code, &range);
        let mut p = build(&g).unwrap();
        weft_ir::passes::run_pipeline(&mut p, &Default::default(), None).unwrap();
        let k = p.kernel_by_name("k").unwrap();
        let r = weft_codegen::jit::compile_kernel(&p, &p.kernels[k], &Default::default());
        println!("PROBE {:20} {:?} {}", name, range, match r { Ok(k) => format!("lanes={}", k.lanes), Err(e) => e.to_string() });
    }
    for ex in ["julia", "life", "heat", "mpm88", "mass_spring_ad", "sparse_blob", "mpm_quant", "heat_quant", "life_bits"] {
        let mut p = build(&example(ex)).unwrap();
        weft_ir::passes::run_pipeline(&mut p, &Default::default(), None).unwrap();
        for (_, k) in p.kernels.iter() {
            let r = weft_codegen::jit::compile_kernel(&p, k, &Default::default()).unwrap();
            println!("PROBE {} {} lanes={}", ex, k.name, r.lanes);
        }
    }
}

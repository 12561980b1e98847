use std::path::Path;
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_runtime::{SimOptions, Simulation};
#[test]
fn timing() {
    for g in ["julia", "heat", "life", "mpm88"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../graphs");
        let text = std::fs::read_to_string(dir.join(format!("{}.json", g))).unwrap();
        let t = std::time::Instant::now();
        let doc = GraphDoc::parse(&text).unwrap();
        let p = build_program(&doc, &BuildOptions { base_dir: dir.clone() }).unwrap();
        let t1 = t.elapsed();
        let mut sim = Simulation::new(p, &SimOptions::default()).unwrap();
        let t2 = t.elapsed();
        sim.step_frame().unwrap();
        let t3 = t.elapsed();
        println!("{} build {:?} compile {:?} frame {:?}", g, t1, t2 - t1, t3 - t2);
    }
}

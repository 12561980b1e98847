//! Prints a generated chain graph (`weft_tests::chain`) with N kernel
//! nodes, for `weft bench`:
//! `cargo run -p weft-tests --example chain_graph -- 5000 > chain5k.json`
//! (`--fused`: no stencil kernels, so the frame's kernels fuse in long runs).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fused = args.iter().any(|a| a == "--fused");
    let n = match args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(|a| a.parse::<usize>())
    {
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("usage: chain_graph N [--fused] (N: the number of kernel nodes, at least 1)");
            std::process::exit(2);
        }
    };
    let g = if fused {
        weft_tests::chain::chain_graph_fused(n)
    } else {
        weft_tests::chain::chain_graph(n)
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&g).expect("a JSON value prints")
    );
}

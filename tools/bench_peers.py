#!/usr/bin/env python3
"""Weft's CPU backends and the installed peers (Taichi, Warp) on the same
workloads, in one run, with ratios.

Usage (after `cargo build --release`; peers set up as ../shared/peers/README.md says):
    python3 tools/bench_peers.py --peers /tmp/peers            # everything
    python3 tools/bench_peers.py --only julia,mpm88 --runs 1    # a subset
    python3 tools/bench_peers.py --no-peers                      # Weft only (cpu vs vm)
    python3 tools/bench_peers.py --backends wgpu --only julia,mpm88,mpm88_x8   # wgpu vs Taichi Vulkan
    python3 tools/bench_peers.py --only mpm3d,mpm3d_x8 --backends cpu,wgpu     # the 3-D MPM

Weft rows come from `weft bench --json` (median frame time after one warm-up
frame) and, for first-frame latency, from the wall time of
`weft run GRAPH --frames 1 --no-frames` (process start to first frame done;
for wgpu also a second start with the driver's shader cache filled by the
first, in a temporary MESA_SHADER_CACHE_DIR).
Peer rows are the peers' own scripts (`step_s_median`, `first_run_s`).
Runs are round-robin so that machine noise hits every row alike; the table
reports the median over runs. `--backends` picks the Weft backends (default
`cpu,vm`); `wgpu` adds a "weft wgpu" row per workload and Taichi's Vulkan
backend as its peer (same Vulkan device: on a machine without a GPU both
run on lavapipe), and a second table with the wgpu / Taichi Vulkan ratios.
Both Vulkan rows start without Mesa's on-disk shader cache
(MESA_SHADER_CACHE_DISABLE=true, as the peer scripts set it). Prints a Markdown table (and --json FILE writes
the raw rows).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAPHS = os.path.join(ROOT, "graphs")

# mpm88 x8: 65536 particles, 256^2 grid, dt 1e-4 (the peers' CFL-scaled default).
X8_DX = 1 / 256
X8_VOL = (X8_DX * 0.5) ** 2
X8_SETS = [
    "particles.shape=[65536]", "grid.shape=[256,256]",
    f"p2g.dx={X8_DX}", f"p2g.p_vol={X8_VOL}", f"p2g.p_mass={X8_VOL}", "p2g.dt=0.0001",
    f"g2p.dx={X8_DX}", "g2p.dt=0.0001", "grid_update.dt=0.0001", "grid_update.n_grid=256",
]


def sh(cmd, timeout=1800, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return p, time.perf_counter() - t0


def weft_rows(weft, workload, backend, frames, threads, x8_init):
    """(frame seconds, first-frame seconds) for one Weft configuration."""
    # mpm3d_x8 is a graph of its own (graphs/mpm3d_x8.json: 65536 particles,
    # 64^3, dt 4e-4, the peers' --dump-init start), so it needs no --set.
    graph = {"julia": "julia", "mpm88": "mpm88", "mpm88_x8": "mpm88", "life": "life", "heat": "heat",
             "mpm3d": "mpm3d", "mpm3d_x8": "mpm3d_x8"}.get(workload)
    # mass_spring_ad: graphs/mass_spring_ad.json with its tape in on_frame, so
    # that a frame is one forward + backward iteration like the peers' step.
    path = (os.path.join(GRAPHS, graph + ".json") if graph
            else os.path.join(ROOT, "bench", "mass_spring_ad_iter.json"))
    extra = ["--threads", str(threads)]
    bench_frames = frames
    if workload == "julia":
        # The same work as the peers' julia: they render t = 0.03 * {0, 10,
        # ..., 200}, one period of cos(t), 13.3 iterations a pixel on
        # average; Weft's frames 1..5 at speed 0.03 average only 9.5. At
        # speed 0.2 (the param's maximum), frames 1..31 cover the period too
        # (t = 0.2 .. 6.2): 13.3 iterations a pixel, and 14.9 vs the peers'
        # 14.8 counting the slowest of each 8 neighbouring pixels (what
        # 8-wide SIMD pays for).
        extra += ["--set", "paint.speed=0.2"]
        bench_frames = 31
    if workload == "mpm88_x8":
        for s in X8_SETS:
            extra += ["--set", s]
        extra += ["--init", f"x={x8_init}"]
    # Cold start like the Taichi Vulkan row: no Mesa shader cache from an earlier run.
    env = dict(os.environ, MESA_SHADER_CACHE_DISABLE="true") if backend == "wgpu" else None
    p, _ = sh([weft, "bench", path, "--backend", backend, "--frames", str(bench_frames), "--json"] + extra,
              env=env)
    if p.returncode != 0:
        raise RuntimeError(f"weft bench {workload} {backend}: {p.stderr.strip()}")
    j = json.loads(p.stdout.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory() as out:
        p, wall = sh([weft, "run", path, "--backend", backend, "--frames", "1", "--no-frames",
                      "--out", out] + extra, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"weft run {workload} {backend}: {p.stderr.strip()}")
    warm = None
    if backend == "wgpu":
        # A second process start with the driver's on-disk shader cache
        # filled by the first (what a user sees from the second run on;
        # Mesa's cache stands in for a pipeline cache on lavapipe).
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
            env = dict(os.environ, MESA_SHADER_CACHE_DIR=cache)
            env.pop("MESA_SHADER_CACHE_DISABLE", None)
            cmd = [weft, "run", path, "--backend", backend, "--frames", "1", "--no-frames", "--out", out] + extra
            sh(cmd, env=env)
            p, warm = sh(cmd, env=env)
            if p.returncode != 0:
                raise RuntimeError(f"weft run {workload} {backend} (warm cache): {p.stderr.strip()}")
    return j["frame_ms"]["median"] / 1e3, wall, j["compile_ms"] / 1e3, warm


MPM3D_X8_ARGS = ["--particles", "65536", "--grid", "64", "--dt", "4e-4", "--frames", "4"]

PEERS = {
    # workload: [(framework, label, script, args)]
    "julia": [("taichi", "cpu 2T", "taichi_julia.py", ["--arch", "cpu", "--threads", "2"]),
              ("warp", "cpu", "warp_julia.py", [])],
    "mpm88": [("taichi", "cpu 2T", "taichi_mpm88.py", ["--arch", "cpu", "--threads", "2", "--frames", "6"]),
              ("warp", "cpu", "warp_mpm88.py", ["--frames", "6"])],
    "mass_spring_ad": [("taichi", "cpu 2T", "taichi_massspring_ad.py", ["--arch", "cpu", "--threads", "2"]),
                       ("warp", "cpu", "warp_massspring_ad.py", [])],
    "mpm88_x8": [("taichi", "cpu 2T", "taichi_mpm88.py",
                  ["--arch", "cpu", "--threads", "2", "--particles", "65536", "--grid", "256", "--frames", "4"]),
                 ("warp", "cpu", "warp_mpm88.py", ["--particles", "65536", "--grid", "256", "--frames", "4"])],
    "mpm3d": [("taichi", "cpu 2T", "taichi_mpm3d.py", ["--arch", "cpu", "--threads", "2", "--frames", "6"]),
              ("warp", "cpu", "warp_mpm3d.py", ["--frames", "6"])],
    # dt 4e-4 like graphs/mpm3d_x8.json (the peers' x8 default, 2e-4, is
    # still in free fall after 20 frames).
    "mpm3d_x8": [("taichi", "cpu 2T", "taichi_mpm3d.py", ["--arch", "cpu", "--threads", "2"] + MPM3D_X8_ARGS),
                 ("warp", "cpu", "warp_mpm3d.py", MPM3D_X8_ARGS)],
}

# Peers of the wgpu backend: Taichi on Vulkan (the same device wgpu picks).
VULKAN_PEERS = {
    "julia": ("taichi_julia.py", ["--arch", "vulkan"]),
    "mpm88": ("taichi_mpm88.py", ["--arch", "vulkan", "--frames", "6"]),
    "mpm88_x8": ("taichi_mpm88.py", ["--arch", "vulkan", "--particles", "65536", "--grid", "256", "--frames", "4"]),
    "mpm3d": ("taichi_mpm3d.py", ["--arch", "vulkan", "--frames", "6"]),
    "mpm3d_x8": ("taichi_mpm3d.py", ["--arch", "vulkan"] + MPM3D_X8_ARGS),
}


def peer_row(python, peers, script, args):
    p, _ = sh([python, os.path.join(peers, script)] + args)
    lines = [l for l in p.stdout.strip().splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"{script}: {p.stderr.strip()[-500:]}")
    j = json.loads(lines[-1])
    return j["step_s_median"], j["first_run_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft", default=os.path.join(ROOT, "target", "release", "weft"))
    ap.add_argument("--peers", default="/tmp/peers", help="a copy of shared/peers with its .venv")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--only", default="julia,mpm88,mpm88_x8,mass_spring_ad,life,heat")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--frames", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--backends", default="cpu,vm", help="Weft backends: any of cpu, vm, wgpu")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    workloads = a.only.split(",")
    backends = a.backends.split(",")
    python = os.path.join(a.peers, ".venv", "bin", "python")
    use_peers = not a.no_peers and os.path.exists(python)
    x8_init = os.path.join(tempfile.gettempdir(), "weft_mpm88_x8_x0.npy")
    if "mpm88_x8" in workloads and not os.path.exists(x8_init):
        if not use_peers:
            sys.exit("mpm88_x8 needs the peers' venv to write its initial positions (taichi_mpm88.py --dump-init)")
        sh([python, os.path.join(a.peers, "taichi_mpm88.py"), "--particles", "65536", "--grid", "256",
            "--frames", "1", "--substeps", "1", "--dump-init", x8_init])

    rows = {}  # (workload, who) -> list of (frame_s, first_s)

    def add(key, val):
        rows.setdefault(key, []).append(val)

    for r in range(a.runs):
        for w in workloads:
            for backend in backends:
                if backend == "vm" and w in ("mpm88_x8", "mpm3d_x8", "mass_spring_ad") and r > 0:
                    continue  # the interpreter takes ~15 s a frame here; one run is enough
                frames = a.frames if not (backend == "vm" and (w.startswith("mpm") or w == "mass_spring_ad")) else 1
                f, first, _, warm = weft_rows(a.weft, w, backend, frames, a.threads, x8_init)
                add((w, "weft " + backend), (f, first))
                if warm is not None:
                    add((w, "weft wgpu, shader cache warm"), (None, warm))
            if use_peers and "wgpu" in backends and w in VULKAN_PEERS:
                script, args = VULKAN_PEERS[w]
                try:
                    add((w, "taichi vulkan"), peer_row(python, a.peers, script, args))
                except RuntimeError as e:
                    print(f"warning: {e}", file=sys.stderr)
            if use_peers and backends != ["wgpu"]:
                for fw, label, script, args in PEERS.get(w, []):
                    try:
                        add((w, f"{fw} {label}"), peer_row(python, a.peers, script, args))
                    except RuntimeError as e:
                        print(f"warning: {e}", file=sys.stderr)
            print(f"run {r + 1}/{a.runs}: {w} done", file=sys.stderr)

    def med(key, k):
        v = rows.get(key)
        return statistics.median(x[k] for x in v) if v else None

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"\nMachine: {cpu}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}; "
          f"Weft threads: {a.threads}; median of {a.runs} run(s)\n")
    fmt = lambda x: f"{x * 1e3:.2f} ms" if x is not None else "—"
    ratio = lambda x, y: f"{x / y:.2f}×" if x is not None and y else "—"
    if "cpu" in backends or "vm" in backends:
        print("| workload | weft cpu | weft vm | taichi cpu 2T | warp cpu | cpu vs vm | cpu / warp | cpu / taichi |")
        print("|---|---|---|---|---|---|---|---|")
        for w in workloads:
            j, v = med((w, "weft cpu"), 0), med((w, "weft vm"), 0)
            t, wp = med((w, "taichi cpu 2T"), 0), med((w, "warp cpu"), 0)
            print(f"| {w} | {fmt(j)} | {fmt(v)} | {fmt(t)} | {fmt(wp)} | {ratio(v, j)} faster | "
                  f"{ratio(j, wp)} | {ratio(j, t)} |")
    if "wgpu" in backends:
        # Both rows of one run ran back to back, so the per-run ratio
        # cancels most of the machine's slow/fast swings; its median is the
        # steadier figure when the runs disagree.
        print("\n| workload | weft wgpu | taichi vulkan | wgpu / taichi vulkan | median of per-run ratios (runs) |")
        print("|---|---|---|---|---|")
        for w in workloads:
            g, t = med((w, "weft wgpu"), 0), med((w, "taichi vulkan"), 0)
            pairs = [x[0] / y[0] for x, y in zip(rows.get((w, "weft wgpu"), []), rows.get((w, "taichi vulkan"), [])) if y[0]]
            paired = f"{statistics.median(pairs):.2f}× ({', '.join(f'{r:.2f}' for r in pairs)})" if pairs else "—"
            print(f"| {w} | {fmt(g)} | {fmt(t)} | {ratio(g, t)} | {paired} |")
    print("\nFirst frame (process start to first frame done; peers: first frame incl. JIT compile):\n")
    cols = [f"weft {b}" for b in backends]
    if backends != ["wgpu"]:
        cols += ["taichi cpu 2T", "warp cpu"]
    if "wgpu" in backends:
        cols += ["weft wgpu, shader cache warm", "taichi vulkan"]
    cold = "wgpu" in backends
    print("| workload | " + " | ".join(cols) + (" | wgpu / taichi vulkan (cold; warm cache) |" if cold else " |"))
    print("|---|" + "---|" * (len(cols) + cold))
    for w in workloads:
        f = lambda key: f"{med((w, key), 1):.3f} s" if rows.get((w, key)) else "—"
        extra = ""
        if cold:
            t = med((w, "taichi vulkan"), 1) if rows.get((w, "taichi vulkan")) else None
            g = med((w, "weft wgpu"), 1) if rows.get((w, "weft wgpu")) else None
            h = med((w, "weft wgpu, shader cache warm"), 1) if rows.get((w, "weft wgpu, shader cache warm")) else None
            extra = f" {ratio(g, t)}; {ratio(h, t)} |"
        print(f"| {w} | " + " | ".join(f(c) for c in cols) + " |" + extra)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{k[0]}|{k[1]}": v for k, v in rows.items()}, f, indent=1)


if __name__ == "__main__":
    main()

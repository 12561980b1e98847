#!/usr/bin/env python3
"""Runs the peers' taichi_mpm3d.py with Taichi's fast_math off and Weft's
graphs/mpm3d.json (or mpm3d_x8.json) from the same start, both
single-threaded, and compares the particle positions after N frames.

Single-threaded, the float atomic additions on the grid happen in particle
order in both; with fast_math off Taichi keeps the kernels' arithmetic as
written, which graphs/mpm3d.json follows (docs/performance.md, "Correctness
reference"). Expected: max |dx| = 0.

Usage (run it with the peers' venv python; peers set up as
../shared/peers/README.md says):
    /tmp/peers/.venv/bin/python tools/compare_taichi_mpm3d.py --peers /tmp/peers [--x8] [--weft target/debug/weft]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Executes the peer script with ti.init(fast_math=False) and saves x, v, J.
RUNNER = r"""
import sys, numpy as np, taichi as ti
script, out = sys.argv[1], sys.argv[2]
sys.argv = [script] + sys.argv[3:]
orig = ti.init
ti.init = lambda *a, **k: orig(*a, fast_math=False, **k)
ns = {"__name__": "__main__"}
exec(compile(open(script).read(), script, "exec"), ns)
np.save(out + "/x.npy", ns["F_x"].to_numpy())
np.save(out + "/v.npy", ns["F_v"].to_numpy())
np.save(out + "/J.npy", ns["F_J"].to_numpy())
"""

ap = argparse.ArgumentParser()
ap.add_argument("--peers", default="/tmp/peers")
ap.add_argument("--weft", default=os.path.join(ROOT, "target", "release", "weft"))
ap.add_argument("--frames", type=int, default=20)
ap.add_argument("--x8", action="store_true", help="mpm3d_x8: 65536 particles, 64^3, dt 4e-4")
a = ap.parse_args()

graph = os.path.join(ROOT, "graphs", "mpm3d_x8.json" if a.x8 else "mpm3d.json")
size = ["--particles", "65536", "--grid", "64", "--dt", "4e-4"] if a.x8 else []
with tempfile.TemporaryDirectory() as tmp:
    ti_out, weft_out = os.path.join(tmp, "taichi"), os.path.join(tmp, "weft")
    os.makedirs(ti_out)
    runner = os.path.join(tmp, "runner.py")
    with open(runner, "w") as f:
        f.write(RUNNER)
    p = subprocess.run([sys.executable, runner, os.path.join(a.peers, "taichi_mpm3d.py"), ti_out,
                        "--arch", "cpu", "--threads", "1", "--frames", str(a.frames)] + size,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"taichi_mpm3d.py failed: {p.stderr[-2000:]}")
    p = subprocess.run([a.weft, "run", graph, "--backend", "cpu", "--threads", "1", "--frames", str(a.frames),
                        "--no-frames", "--out", weft_out, "--dump", "x", "--dump", "v", "--dump", "J"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"weft run failed: {p.stderr[-2000:]}")
    for name in ["x", "v", "J"]:
        t = np.load(os.path.join(ti_out, name + ".npy"))
        w = np.load(os.path.join(weft_out, name + ".npy")).reshape(t.shape)
        diff = np.abs(t.astype(np.float64) - w.astype(np.float64))
        print(f"{name}: max |diff| {diff.max():.3g}, {(t != w).sum()} of {t.size} values differ; "
              f"sum taichi {t.astype(np.float64).sum()!r}, weft {w.astype(np.float64).sum()!r}")

#!/usr/bin/env python3
"""Markdown tables from what tools/gpu_check.sh brought back.

Usage: python3 tools/gpu/summarize.py DIR [--bandwidth-tbs 4.8]

DIR holds bench.jsonl (one `weft bench --json` object a line, every example
on cuda and wgpu) and workloads.jsonl (the peers' workloads). Prints, per
example and backend: compile (first frame's set-up), frame median, the
kernels' share of the frame (sum of per-kernel medians x launches a frame,
from the profiled pass, over the frame median); then the peers' workloads
with their slowest kernels; then each example's memory lines, from which
docs/performance.md estimates bandwidth-bound kernels' bytes moved.
"""
import argparse
import json
import os

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--bandwidth-tbs", type=float, default=4.8)
a = ap.parse_args()


def rows(name):
    p = os.path.join(a.dir, name)
    if not os.path.exists(p):
        return []
    out = []
    for line in open(p):
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def share(r):
    """Kernel time per frame (ms) from the profiled pass, and launches per frame."""
    frames = r["frames"]
    k = sum(v["median_ms"] * v["launches"] / frames for v in r["kernels"].values())
    n = sum(v["launches"] / frames for v in r["kernels"].values())
    return k, n


print("| graph | backend | compile ms | frame median ms (min–max) | kernels ms/frame (launches) | kernels' share |")
print("|---|---|---|---|---|---|")
for r in rows("bench.jsonl"):
    g = os.path.basename(r["graph"]).removesuffix(".json")
    f = r["frame_ms"]
    k, n = share(r)
    print(f"| {g} | {r['backend']} | {r['compile_ms']:.0f} | {f['median']:.3f} ({f['min']:.3f}–{f['max']:.3f}) "
          f"| {k:.3f} ({n:.0f}) | {100 * k / f['median']:.0f} % |" if f["median"] else "")

print()
print("| workload | backend | frame median ms | kernels ms/frame | slowest kernels (median ms × launches/frame) |")
print("|---|---|---|---|---|")
for w in rows("workloads.jsonl"):
    r = w["r"]
    k, _ = share(r)
    top = sorted(r["kernels"].items(), key=lambda kv: -kv[1]["median_ms"] * kv[1]["launches"])[:3]
    tops = ", ".join(f"{name} {v['median_ms'] * 1e3:.1f} µs × {v['launches'] // r['frames']}" for name, v in top)
    tag = " (again)" if w.get("again") else ""
    print(f"| {w['workload']}{tag} | {r['backend']} | {r['frame_ms']['median']:.3f} | {k:.3f} | {tops} |")

print()
print(f"Memory lines of each example (for bandwidth estimates; card: {a.bandwidth_tbs} TB/s):")
seen = set()
for r in rows("bench.jsonl"):
    g = os.path.basename(r["graph"])
    if g in seen:
        continue
    seen.add(g)
    print(f"- {g}: " + "; ".join(r.get("memory", [])))

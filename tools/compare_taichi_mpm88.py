#!/usr/bin/env python3
"""Runs Taichi's mpm88.py and Weft's graphs/mpm88.json from the same start and
compares particle positions after N frames (50 substeps each).

Both run single-threaded so the floating-point atomic additions on the grid
happen in the same (particle) order. Taichi runs with fast_math off.

Usage: python3 tools/compare_taichi_mpm88.py [--frames 20] [--weft target/release/weft]
Needs: pip install taichi numpy
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import taichi as ti

ap = argparse.ArgumentParser()
ap.add_argument("--frames", type=int, default=20)
ap.add_argument("--weft", default="target/release/weft")
ap.add_argument("--graph", default="graphs/mpm88.json")
ap.add_argument("--x0", default="graphs/mpm88_x0.npy")
args = ap.parse_args()

ti.init(arch=ti.cpu, cpu_max_num_threads=1, fast_math=False, default_fp=ti.f32, random_seed=0, log_level=ti.WARN)

# --- Taichi's mpm88.py, unchanged except for the initial positions ---
n_particles = 8192
n_grid = 128
dx = 1 / n_grid
dt = 2e-4
p_rho = 1
p_vol = (dx * 0.5) ** 2
p_mass = p_vol * p_rho
gravity = 9.8
bound = 3
E = 400

x = ti.Vector.field(2, float, n_particles)
v = ti.Vector.field(2, float, n_particles)
C = ti.Matrix.field(2, 2, float, n_particles)
J = ti.field(float, n_particles)
grid_v = ti.Vector.field(2, float, (n_grid, n_grid))
grid_m = ti.field(float, (n_grid, n_grid))


@ti.kernel
def substep():
    for i, j in grid_m:
        grid_v[i, j] = [0, 0]
        grid_m[i, j] = 0
    for p in x:
        Xp = x[p] / dx
        base = int(Xp - 0.5)
        fx = Xp - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
        stress = -dt * 4 * E * p_vol * (J[p] - 1) / dx**2
        affine = ti.Matrix([[stress, 0], [0, stress]]) + p_mass * C[p]
        for i, j in ti.static(ti.ndrange(3, 3)):
            offset = ti.Vector([i, j])
            dpos = (offset - fx) * dx
            weight = w[i].x * w[j].y
            grid_v[base + offset] += weight * (p_mass * v[p] + affine @ dpos)
            grid_m[base + offset] += weight * p_mass
    for i, j in grid_m:
        if grid_m[i, j] > 0:
            grid_v[i, j] /= grid_m[i, j]
        grid_v[i, j].y -= dt * gravity
        if i < bound and grid_v[i, j].x < 0:
            grid_v[i, j].x = 0
        if i > n_grid - bound and grid_v[i, j].x > 0:
            grid_v[i, j].x = 0
        if j < bound and grid_v[i, j].y < 0:
            grid_v[i, j].y = 0
        if j > n_grid - bound and grid_v[i, j].y > 0:
            grid_v[i, j].y = 0
    for p in x:
        Xp = x[p] / dx
        base = int(Xp - 0.5)
        fx = Xp - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        new_v = ti.Vector.zero(float, 2)
        new_C = ti.Matrix.zero(float, 2, 2)
        for i, j in ti.static(ti.ndrange(3, 3)):
            offset = ti.Vector([i, j])
            dpos = (offset - fx) * dx
            weight = w[i].x * w[j].y
            g_v = grid_v[base + offset]
            new_v += weight * g_v
            new_C += 4 * weight * g_v.outer_product(dpos) / dx**2
        v[p] = new_v
        x[p] += dt * v[p]
        J[p] *= 1 + dt * new_C.trace()
        C[p] = new_C


x0 = np.load(args.x0).astype(np.float32)
x.from_numpy(x0)
v.from_numpy(np.tile(np.array([0, -1], np.float32), (n_particles, 1)))
J.from_numpy(np.ones(n_particles, np.float32))
C.from_numpy(np.zeros((n_particles, 2, 2), np.float32))
for frame in range(args.frames):
    for s in range(50):
        substep()
xt = x.to_numpy()

with tempfile.TemporaryDirectory() as out:
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    subprocess.run([args.weft, "run", args.graph, "--frames", str(args.frames), "--no-frames",
                    "--init", f"x={args.x0}", "--dump", "x", "--out", out], check=True, env=env)
    xw = np.load(os.path.join(out, "x.npy"))

d = np.abs(xt - xw)
print(f"frames: {args.frames} ({args.frames * 50} substeps), particles: {n_particles}")
print(f"max |x_taichi - x_weft| = {d.max():.3e}, mean = {d.mean():.3e}, median = {np.median(d):.3e}")
print(f"particles within 1e-5: {np.mean(d.max(axis=1) < 1e-5) * 100:.2f}%, within 1e-3: {np.mean(d.max(axis=1) < 1e-3) * 100:.2f}%")
print(f"mean position taichi {xt.mean(axis=0)}, weft {xw.mean(axis=0)}")
sys.exit(0)

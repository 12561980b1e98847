#!/usr/bin/env python3
"""mpm88 hand-written in CUDA C and launched through CuPy: the peer a person
writing CUDA by hand would get, for same-card ratios with `weft bench
--backend cuda` (tools/gpu_check.sh runs both in one session).

The kernels are Taichi's mpm88.py line for line (../shared/peers/taichi_mpm88.py):
clear the grid, P2G with float atomics, grid update, G2P; 50 substeps a frame.
Same start as the peers: positions numpy default_rng(seed).random((n, 2)) * 0.4
+ 0.2 (float32), v = (0, -1), J = 1, C = 0. Prints one JSON line like the
peers' scripts: median seconds per frame over frames 2..N (each frame waits
for the GPU), first frame incl. NVRTC compile, checksum after N frames.

Usage: python3 peer_mpm88_cupy.py [--particles 65536 --grid 256] [--frames 20] [--no-fma]

NVRTC contracts a * b + c into fused multiply-adds by default; Weft keeps
products and sums apart (`--fmad=false`, like its interpreter). `--no-fma`
gives Weft's arithmetic here. Both land inside the peers' reference
checksums after 20 frames (../shared/peers/README.md), as Weft does from
the same start (docs/performance.md, "cuda and wgpu on an NVIDIA H200").
"""
import argparse
import json
import statistics
import time

import cupy as cp
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--particles", type=int, default=8192)
ap.add_argument("--grid", type=int, default=128)
ap.add_argument("--frames", type=int, default=20)
ap.add_argument("--substeps", type=int, default=50)
ap.add_argument("--dt", type=float, default=None, help="default: 2e-4 at grid 128, scaled by 128/grid")
ap.add_argument("--seed", type=int, default=42)
ap.add_argument("--no-fma", action="store_true",
                help="compile with --fmad=false (products and sums rounded apart, as Weft and NumPy do)")
args = ap.parse_args()

n, n_grid = args.particles, args.grid
dx = 1.0 / n_grid
dt = args.dt if args.dt is not None else 2e-4 * 128 / n_grid
p_vol = (dx * 0.5) ** 2
p_mass = p_vol
gravity, bound, E = 9.8, 3, 400.0

SRC = r"""
// The particle's base grid node, its offset from it and the quadratic
// B-spline weights per axis (P2G and G2P share them).
__device__ __forceinline__ void stencil(float2 xp, float dx, int& bx, int& by, float& fx, float& fy,
                                        float* wx, float* wy) {
    float Xx = xp.x / dx, Xy = xp.y / dx;
    bx = (int)(Xx - 0.5f); by = (int)(Xy - 0.5f);
    fx = Xx - bx; fy = Xy - by;
    wx[0] = 0.5f * (1.5f - fx) * (1.5f - fx); wx[1] = 0.75f - (fx - 1.0f) * (fx - 1.0f); wx[2] = 0.5f * (fx - 0.5f) * (fx - 0.5f);
    wy[0] = 0.5f * (1.5f - fy) * (1.5f - fy); wy[1] = 0.75f - (fy - 1.0f) * (fy - 1.0f); wy[2] = 0.5f * (fy - 0.5f) * (fy - 0.5f);
}

extern "C" __global__ void p2g(const float2* x, const float2* v, const float4* C, const float* J,
                               float2* grid_v, float* grid_m, int n, int n_grid,
                               float dx, float dt, float p_vol, float p_mass, float E) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    int bx, by;
    float fx, fy, wx[3], wy[3];
    stencil(x[p], dx, bx, by, fx, fy, wx, wy);
    float stress = -dt * 4.0f * E * p_vol * (J[p] - 1.0f) / (dx * dx);
    float4 c = C[p];
    float a00 = stress + p_mass * c.x, a01 = p_mass * c.y, a10 = p_mass * c.z, a11 = stress + p_mass * c.w;
    float mvx = p_mass * v[p].x, mvy = p_mass * v[p].y;
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            float dpx = (i - fx) * dx, dpy = (j - fy) * dx;
            float w = wx[i] * wy[j];
            int g = (bx + i) * n_grid + (by + j);
            atomicAdd(&grid_v[g].x, w * (mvx + a00 * dpx + a01 * dpy));
            atomicAdd(&grid_v[g].y, w * (mvy + a10 * dpx + a11 * dpy));
            atomicAdd(&grid_m[g], w * p_mass);
        }
    }
}

extern "C" __global__ void grid_update(float2* grid_v, const float* grid_m, int n_grid,
                                       float dt, float gravity, int bound) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_grid * n_grid) return;
    int i = g / n_grid, j = g % n_grid;
    float2 gv = grid_v[g];
    float m = grid_m[g];
    if (m > 0.0f) { gv.x /= m; gv.y /= m; }
    gv.y -= dt * gravity;
    if (i < bound && gv.x < 0.0f) gv.x = 0.0f;
    if (i > n_grid - bound && gv.x > 0.0f) gv.x = 0.0f;
    if (j < bound && gv.y < 0.0f) gv.y = 0.0f;
    if (j > n_grid - bound && gv.y > 0.0f) gv.y = 0.0f;
    grid_v[g] = gv;
}

extern "C" __global__ void g2p(float2* x, float2* v, float4* C, float* J, const float2* grid_v,
                               int n, int n_grid, float dx, float dt) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    int bx, by;
    float fx, fy, wx[3], wy[3];
    stencil(x[p], dx, bx, by, fx, fy, wx, wy);
    float vx = 0, vy = 0, c00 = 0, c01 = 0, c10 = 0, c11 = 0;
    float k = 4.0f / (dx * dx);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            float dpx = (i - fx) * dx, dpy = (j - fy) * dx;
            float w = wx[i] * wy[j];
            float2 gv = grid_v[(bx + i) * n_grid + (by + j)];
            vx += w * gv.x; vy += w * gv.y;
            c00 += k * w * gv.x * dpx; c01 += k * w * gv.x * dpy;
            c10 += k * w * gv.y * dpx; c11 += k * w * gv.y * dpy;
        }
    }
    v[p] = make_float2(vx, vy);
    x[p] = make_float2(x[p].x + dt * vx, x[p].y + dt * vy);
    J[p] *= 1.0f + dt * (c00 + c11);
    C[p] = make_float4(c00, c01, c10, c11);
}
"""

rng = np.random.default_rng(args.seed)
x0 = (rng.random((n, 2)) * 0.4 + 0.2).astype(np.float32)
x = cp.asarray(x0)
v = cp.asarray(np.tile(np.array([0.0, -1.0], np.float32), (n, 1)))
C = cp.zeros((n, 4), cp.float32)
J = cp.ones(n, cp.float32)
grid_v = cp.zeros((n_grid * n_grid, 2), cp.float32)
grid_m = cp.zeros(n_grid * n_grid, cp.float32)

t_compile = time.perf_counter()
mod = cp.RawModule(code=SRC, options=("--fmad=false",) if args.no_fma else ())
k_p2g, k_grid, k_g2p = (mod.get_function(f) for f in ("p2g", "grid_update", "g2p"))
B = 256
pb, gb = ((n + B - 1) // B,), ((n_grid * n_grid + B - 1) // B,)
f32, i32 = np.float32, np.int32


def frame():
    for _ in range(args.substeps):
        grid_v.fill(0)
        grid_m.fill(0)
        k_p2g(pb, (B,), (x, v, C, J, grid_v, grid_m, i32(n), i32(n_grid), f32(dx), f32(dt), f32(p_vol),
                         f32(p_mass), f32(E)))
        k_grid(gb, (B,), (grid_v, grid_m, i32(n_grid), f32(dt), f32(gravity), i32(bound)))
        k_g2p(pb, (B,), (x, v, C, J, grid_v, i32(n), i32(n_grid), f32(dx), f32(dt)))
    cp.cuda.Device().synchronize()


frame()
first = time.perf_counter() - t_compile
times = []
for _ in range(args.frames - 1):
    t = time.perf_counter()
    frame()
    times.append(time.perf_counter() - t)
xs, vs, Js = x.get().astype(np.float64), v.get().astype(np.float64), J.get().astype(np.float64)
print(json.dumps({
    "framework": "cupy (hand-written CUDA C)", "fma": not args.no_fma, "backend": "cuda", "workload": "mpm88",
    "size": {"particles": n, "grid": n_grid, "dt": dt, "substeps": args.substeps},
    "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
    "first_run_s": first, "step_s_median": statistics.median(times) if times else None,
    "checksum": {"after_frames": args.frames, "x_sum": float(xs.sum()), "x_sqsum": float((xs * xs).sum()),
                 "v_sum": float(vs.sum()), "J_sum": float(Js.sum()), "finite": bool(np.isfinite(xs).all())},
}))

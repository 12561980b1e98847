#!/usr/bin/env python3
"""NumPy reference for graphs/smoke3d.json: the same scheme, in float32,
in the kernels' arithmetic order (independent code: vectorised NumPy, not
the graph's kernels). Writes density.npy, temperature.npy and vel.npy after
FRAMES frames.

    tools/smoke3d_reference.py --n 16 --frames 3 --out DIR
"""
import argparse
import os

import numpy as np

F = np.float32


def run(n, frames, dt=0.5, buoyancy=1.0, weight=0.05, density_decay=0.995,
        temperature_decay=0.98, inflow=1.0, sweeps=40):
    dt, buoyancy, weight = F(dt), F(buoyancy), F(weight)
    density_decay, temperature_decay, inflow = F(density_decay), F(temperature_decay), F(inflow)
    vel = np.zeros((n, n, n, 3), F)
    dens = np.zeros((n, n, n), F)
    temp = np.zeros((n, n, n), F)
    idx = np.indices((n, n, n)).astype(np.int32)  # (3, n, n, n)
    pf = np.moveaxis(idx, 0, -1).astype(F)  # cell centres, (n, n, n, 3)

    def sample(a, q):
        # q: (n, n, n, 3) clamped positions; a: (n, n, n) or (n, n, n, 3).
        b = np.clip(np.floor(q).astype(np.int32), 0, n - 2)
        t = q - b.astype(F)
        def at(ox, oy, oz):
            return a[b[..., 0] + ox, b[..., 1] + oy, b[..., 2] + oz]
        tx, ty, tz = t[..., 0], t[..., 1], t[..., 2]
        if a.ndim == 4:
            tx, ty, tz = tx[..., None], ty[..., None], tz[..., None]
        lerp = lambda x, y, s: x + (y - x) * s
        c00 = lerp(at(0, 0, 0), at(1, 0, 0), tx)
        c10 = lerp(at(0, 1, 0), at(1, 1, 0), tx)
        c01 = lerp(at(0, 0, 1), at(1, 0, 1), tx)
        c11 = lerp(at(0, 1, 1), at(1, 1, 1), tx)
        return lerp(lerp(c00, c10, ty), lerp(c01, c11, ty), tz)

    r = F(0.08) * F(n)
    c = np.array([F(0.5) * F(n - 1), F(0.15) * F(n), F(0.5) * F(n - 1)], F)
    dd = pf - c
    dist = np.sqrt((dd[..., 0] * dd[..., 0] + dd[..., 1] * dd[..., 1]) + dd[..., 2] * dd[..., 2])
    src = dist < r

    def shift(a, axis, o, clamp):
        # a[p + o along axis]: clamped to the grid, or zero outside.
        out = np.roll(a, -o, axis=axis)
        sl = [slice(None)] * a.ndim
        sl[axis] = slice(n - 1, n) if o > 0 else slice(0, 1)
        if clamp:
            out[tuple(sl)] = a[tuple(sl)]
        else:
            out[tuple(sl)] = 0
        return out

    for _ in range(frames):
        back = pf - dt * vel
        q = np.clip(back, F(0), F(n - 1))
        v = sample(vel, q)
        d = sample(dens, q) * density_decay
        tt = sample(temp, q) * temperature_decay
        v[..., 1] = v[..., 1] + dt * (buoyancy * tt - weight * d)
        d = np.where(src, F(1), d)
        tt = np.where(src, F(1), tt)
        v[..., 1] = np.where(src, np.maximum(v[..., 1], inflow), v[..., 1])
        dx = shift(v[..., 0], 0, 1, False) - shift(v[..., 0], 0, -1, False)
        dy = shift(v[..., 1], 1, 1, False) - shift(v[..., 1], 1, -1, False)
        dz = shift(v[..., 2], 2, 1, False) - shift(v[..., 2], 2, -1, False)
        div = F(0.5) * ((dx + dy) + dz)
        p = np.zeros((n, n, n), F)
        for _ in range(2 * sweeps):
            s = ((shift(p, 0, 1, True) + shift(p, 0, -1, True))
                 + (shift(p, 1, 1, True) + shift(p, 1, -1, True))) \
                + (shift(p, 2, 1, True) + shift(p, 2, -1, True))
            p = (s - div) / F(6)
        g = np.stack([shift(p, a, 1, True) - shift(p, a, -1, True) for a in range(3)], -1)
        vel = v - F(0.5) * g
        dens, temp = d, tt
    return vel, dens, temp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--frames", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    vel, dens, temp = run(a.n, a.frames)
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "vel.npy"), vel)
    np.save(os.path.join(a.out, "density.npy"), dens)
    np.save(os.path.join(a.out, "temperature.npy"), temp)


if __name__ == "__main__":
    main()

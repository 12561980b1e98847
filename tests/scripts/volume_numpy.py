#!/usr/bin/env python3
"""An independent NumPy ray-march of a `volume` view (emission and mip
modes), vectorised over pixels, for tests/tests/views.rs.

Reads one JSON object on stdin: the field `values` (row-major, axis 0 = x),
`shape`, `domain`, the camera frame (`eye`, `right`, `up`, `back`, `focal`,
`near`, `width`, `height`), `mode`, `lo`, `hi`, `density`, `step`,
`background` (bytes), and the colormap polynomial `poly` (7 rows of RGB
coefficients). Writes the RGB bytes (row-major, top row first) as JSON.
Float32 throughout, following weft_ir::passes::views::volume's definition;
numpy's exp and summation order may differ by an ulp from the kernels'.
"""
import json
import sys

import numpy as np

f32 = np.float32
a = json.load(sys.stdin)
vals = np.array(a["values"], dtype=f32).reshape(a["shape"])
n = np.array(a["shape"])
dom = np.array(a["domain"], dtype=f32)
W, H = a["width"], a["height"]
eye = np.array(a["eye"], dtype=f32)
u, v, w = (np.array(a[k], dtype=f32) for k in ("right", "up", "back"))
fp, near = f32(a["focal"]), f32(a["near"])
ys, xs = np.mgrid[0:H, 0:W]
pa = ((xs.astype(f32) + f32(0.5)) - f32(W * 0.5)) / fp
pb = (f32(H * 0.5) - (ys.astype(f32) + f32(0.5))) / fp
d = np.stack([(pa * u[i] + pb * v[i]) - w[i] for i in range(3)], -1).astype(f32)
dn = np.where(d == 0, f32(1e-30), d).astype(f32)
inv = (f32(1) / dn).astype(f32)
ta = ((dom[:3] - eye).astype(f32) * inv).astype(f32)
tb = ((dom[3:] - eye).astype(f32) * inv).astype(f32)
t0 = np.maximum(np.minimum(ta, tb).max(-1), near)
t1 = np.maximum(ta, tb).min(-1)
cell = ((dom[3:].astype(np.float64) - dom[:3]) / n).astype(f32)
sc = (n / (dom[3:].astype(np.float64) - dom[:3])).astype(f32)
ds = f32(a["step"]) * cell.min()
ln = np.sqrt((d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2])
dt = (ds / ln).astype(f32)
hit = t0 < t1
cnt = np.where(hit, np.minimum(np.ceil((t1 - t0) / dt), 4096), 0).astype(np.int64)
poly = np.array(a["poly"], dtype=f32)


def cmap(t):
    t = np.where(np.isnan(t), f32(0), np.clip(t, 0, 1)).astype(f32)
    out = np.empty(t.shape + (3,), f32)
    for k in range(3):
        c = np.full(t.shape, poly[6][k], f32)
        for i in range(5, -1, -1):
            c = (c * t + poly[i][k]).astype(f32)
        out[..., k] = np.clip(c, 0, 1)
    return out


def sample(p):
    g = ((p - dom[:3]) * sc - f32(0.5)).astype(f32)
    g = np.clip(g, 0, (n - 1).astype(f32)).astype(f32)
    fl = np.floor(g)
    f = (g - fl).astype(f32)
    i0 = fl.astype(np.int64)
    i1 = np.minimum(i0 + 1, n - 1)
    idx = [(i0[..., k], i1[..., k]) for k in range(3)]

    def at(x, y, z):
        return vals[idx[0][x], idx[1][y], idx[2][z]]

    def lerp(a_, b_, t):
        return (a_ + (b_ - a_) * t).astype(f32)

    fx, fy, fz = f[..., 0], f[..., 1], f[..., 2]
    c00 = lerp(at(0, 0, 0), at(1, 0, 0), fx)
    c10 = lerp(at(0, 1, 0), at(1, 1, 0), fx)
    c01 = lerp(at(0, 0, 1), at(1, 0, 1), fx)
    c11 = lerp(at(0, 1, 1), at(1, 1, 1), fx)
    return lerp(lerp(c00, c10, fy), lerp(c01, c11, fy), fz)


lo, span = f32(a["lo"]), f32(a["hi"] - a["lo"])
bg = np.array(a["background"], dtype=f32) / f32(255)
C = np.zeros((H, W, 3), f32)
A = np.zeros((H, W), f32)
best = np.full((H, W), -np.inf, f32)
for s in range(int(cnt.max()) if cnt.size else 0):
    t = (t0 + (f32(s) + f32(0.5)) * dt).astype(f32)
    live = (s < cnt) & (t < t1) & (A < f32(0.99))
    p = (eye + t[..., None] * d).astype(f32)
    val = sample(p)
    tn = ((val - lo) / span).astype(f32)
    if a["mode"] == "emission":
        tc = np.where(np.isnan(tn), f32(0), np.clip(tn, 0, 1)).astype(f32)
        al = (f32(1) - np.exp(-((f32(a["density"]) * tc) * f32(a["step"])))).astype(f32)
        wgt = np.where(live, (f32(1) - A) * al, f32(0)).astype(f32)
        C = (C + wgt[..., None] * cmap(tn)).astype(f32)
        A = (A + wgt).astype(f32)
    else:
        best = np.where(live & np.isfinite(val) & (val > best), val, best)
if a["mode"] == "emission":
    rgb = C + (f32(1) - A)[..., None] * bg
else:
    rgb = np.where(np.isfinite(best)[..., None], cmap(((best - lo) / span).astype(f32)), bg)
out = (np.clip(rgb, 0, 1) * f32(255) + f32(0.5)).astype(np.uint8)
json.dump(out.reshape(-1).tolist(), sys.stdout)

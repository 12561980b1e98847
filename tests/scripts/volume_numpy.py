#!/usr/bin/env python3
"""An independent NumPy ray-march of a `volume` view (emission, mip and
lit modes), vectorised over pixels (and over transmittance cells), for
tests/tests/views.rs.

Reads one JSON object on stdin: the field `values` (row-major, axis 0 = x),
`shape`, `domain`, the camera frame (`eye`, `right`, `up`, `back`, `focal`,
`near`, `width`, `height`), `mode`, `lo`, `hi`, `density`, `step`,
`background` (bytes), and the colormap polynomial `poly` (7 rows of RGB
coefficients). Lit mode adds `lit`: {albedo, ambient, lights: [{kind:
"directional" | "point", vec: toward or position, color, intensity}],
shadow_density, shadow_cells, jitter, emission: null or {values, lo, hi,
intensity, stops: the blackbody ramp's 5 colours}}. Writes the RGB bytes (row-major,
top row first) as JSON.
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


def sample(p, grid=None):
    """Trilinear value at world points p (..., 3) of `vals` or `grid`."""
    g_vals = vals if grid is None else grid
    gn = np.array(g_vals.shape)
    gsc = (gn / (dom[3:].astype(np.float64) - dom[:3])).astype(f32)
    g = ((p - dom[:3]) * gsc - f32(0.5)).astype(f32)
    g = np.clip(g, 0, (gn - 1).astype(f32)).astype(f32)
    fl = np.floor(g)
    f = (g - fl).astype(f32)
    i0 = fl.astype(np.int64)
    i1 = np.minimum(i0 + 1, gn - 1)
    idx = [(i0[..., k], i1[..., k]) for k in range(3)]

    def at(x, y, z):
        return g_vals[idx[0][x], idx[1][y], idx[2][z]]

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
lit = a.get("lit")


def unit(x):
    return np.where(np.isnan(x), f32(0), np.clip(x, 0, 1)).astype(f32)


def hash01(h):
    """The 32-bit integer mix of volume_light.rs, into [0, 1)."""
    h = h.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h = (h * np.uint32(0x7FEB352D)).astype(np.uint32)
    h ^= h >> np.uint32(15)
    h = (h * np.uint32(0x846CA68B)).astype(np.uint32)
    h ^= h >> np.uint32(16)
    return ((h >> np.uint32(8)).astype(f32) * f32(1.0 / 16777216.0)).astype(f32)


def transmittance(light):
    """The light's transmittance grid: every coarse cell marched at once."""
    k = lit["shadow_cells"]
    m = -(-n // k)
    cc = ((dom[3:].astype(np.float64) - dom[:3]) / m).astype(f32)
    ii = np.stack(np.meshgrid(*[np.arange(x) for x in m], indexing="ij"), -1)
    q = (dom[:3] + (ii.astype(f32) + f32(0.5)) * cc).astype(f32)
    vec = np.array(light["vec"], dtype=f32)
    if light["kind"] == "directional":
        L = np.broadcast_to(vec, q.shape).astype(f32)
        tend = np.full(q.shape[:-1], np.inf, f32)
    else:
        v = (vec - q).astype(f32)
        r = np.sqrt((v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1]) + v[..., 2] * v[..., 2])
        L = (v / np.maximum(r, f32(1e-20))[..., None]).astype(f32)
        tend = r.astype(f32)
    Ln = np.where(L == 0, f32(1e-30), L).astype(f32)
    inv = (f32(1) / Ln).astype(f32)
    out = np.maximum((dom[:3] - q) * inv, (dom[3:] - q) * inv).astype(f32)
    tend = np.minimum(out.min(-1), tend).astype(f32)
    dss = cell.min()
    ns = np.minimum(np.ceil(tend / dss), 4096).astype(np.int64)
    g = f32(f32(a["density"]) * f32(lit["shadow_density"]))
    if lit["jitter"]:
        lin = ((ii[..., 0] * m[1] + ii[..., 1]) * m[2] + ii[..., 2]).astype(np.uint32)
        o = hash01(lin)
    else:
        o = np.full(q.shape[:-1], f32(0.5), f32)
    cut = f32(16) / g
    tau = np.zeros(q.shape[:-1], f32)
    alive = np.ones(q.shape[:-1], bool)
    for s_ in range(int(ns.max())):
        ts = ((f32(s_) + o) * dss).astype(f32)
        take = alive & (s_ < ns) & (ts < tend)
        p = (q + ts[..., None] * L).astype(f32)
        tc = unit(((sample(p) - lo) / span).astype(f32))
        tau = np.where(take, (tau + tc).astype(f32), tau)
        alive &= ~(take & (tau >= cut))
    return np.exp(-(g * tau)).astype(f32)


def blackbody(t):
    """The blackbody ramp: linear between five stops at 0, 1/4, .., 1."""
    stops = np.array(lit["emission"]["stops"], f32)
    sv = (t * f32(4)).astype(f32)
    k = (sv >= 1).astype(np.int64) + (sv >= 2) + (sv >= 3)
    u = (sv - k.astype(f32)).astype(f32)
    lo_c, hi_c = stops[k], stops[k + 1]
    return (lo_c + (hi_c - lo_c) * u[..., None]).astype(f32)


if lit and lit.get("emission"):
    evals = np.array(lit["emission"]["values"], dtype=f32).reshape(a["shape"])
if lit:
    grids = [transmittance(L) for L in lit["lights"]] if lit["shadow_density"] > 0 else []
    if lit["jitter"]:
        off = hash01(ys.astype(np.uint32) * np.uint32(W) + xs.astype(np.uint32))
    else:
        off = np.full((H, W), f32(0.5), f32)
else:
    off = np.full((H, W), f32(0.5), f32)
C = np.zeros((H, W, 3), f32)
A = np.zeros((H, W), f32)
best = np.full((H, W), -np.inf, f32)
for s in range(int(cnt.max()) if cnt.size else 0):
    t = (t0 + (f32(s) + off) * dt).astype(f32)
    live = (s < cnt) & (t < t1) & (A < f32(0.99))
    p = (eye + t[..., None] * d).astype(f32)
    val = sample(p)
    tn = ((val - lo) / span).astype(f32)
    if a["mode"] == "lit":
        tc = unit(tn)
        al = (f32(1) - np.exp(-((f32(a["density"]) * tc) * f32(a["step"])))).astype(f32)
        light = np.broadcast_to(np.array(lit["ambient"], f32), (H, W, 3)).astype(f32)
        for li, L in enumerate(lit["lights"]):
            T = sample(p, grids[li]) if grids else np.ones((H, W), f32)
            k = (f32(L["intensity"]) * T).astype(f32)
            if L["kind"] == "point":
                v = (np.array(L["vec"], f32) - p).astype(f32)
                r2 = (v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1]) + v[..., 2] * v[..., 2]
                k = (k * (f32(1) / np.maximum(r2, f32(1e-4)))).astype(f32)
            light = (light + np.array(L["color"], f32) * k[..., None]).astype(f32)
        scat = (np.array(lit["albedo"], f32) * light).astype(f32)
        rest = (f32(1) - A).astype(f32)
        wgt = np.where(live, rest * al, f32(0)).astype(f32)
        em = np.zeros((H, W, 3), f32)
        glow = lit.get("emission")
        if glow:
            ev = sample(p, evals)
            te = unit(((ev - f32(glow["lo"])) / f32(glow["hi"] - glow["lo"])).astype(f32))
            kk = (f32(glow["intensity"]) * te).astype(f32)
            em = (f32(a["step"]) * (kk[..., None] * blackbody(te))).astype(f32)
        live_rest = np.where(live, rest, f32(0))[..., None]
        C = ((C + wgt[..., None] * scat) + live_rest * em).astype(f32)
        A = (A + wgt).astype(f32)
    elif a["mode"] == "emission":
        tc = np.where(np.isnan(tn), f32(0), np.clip(tn, 0, 1)).astype(f32)
        al = (f32(1) - np.exp(-((f32(a["density"]) * tc) * f32(a["step"])))).astype(f32)
        wgt = np.where(live, (f32(1) - A) * al, f32(0)).astype(f32)
        C = (C + wgt[..., None] * cmap(tn)).astype(f32)
        A = (A + wgt).astype(f32)
    else:
        best = np.where(live & np.isfinite(val) & (val > best), val, best)
if a["mode"] in ("emission", "lit"):
    rgb = C + (f32(1) - A)[..., None] * bg
else:
    rgb = np.where(np.isfinite(best)[..., None], cmap(((best - lo) / span).astype(f32)), bg)
out = (np.clip(rgb, 0, 1) * f32(255) + f32(0.5)).astype(np.uint8)
json.dump(out.reshape(-1).tolist(), sys.stdout)

"""Writes the start state of graphs/mass_spring_ad.json: the numpy setup of
../shared/peers/taichi_massspring_ad.py and warp_massspring_ad.py (seed 0),
so Weft differentiates exactly the peers' system.

    python3 tools/mass_spring_ad_init.py graphs/
"""
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "graphs"
seed = 0
NX, NY, H = 40, 25, 0.01
N = NX * NY
ii, jj = np.meshgrid(np.arange(NX), np.arange(NY), indexing="ij")
idx = lambda i, j: i * NY + j  # noqa: E731
x0 = np.stack([0.2 + ii * H, 0.4 + jj * H], axis=-1).reshape(N, 2)
springs = []
for i in range(NX):
    for j in range(NY):
        if i + 1 < NX:
            springs.append((idx(i, j), idx(i + 1, j)))
        if j + 1 < NY:
            springs.append((idx(i, j), idx(i, j + 1)))
        if i + 1 < NX and j + 1 < NY:
            springs.append((idx(i, j), idx(i + 1, j + 1)))
            springs.append((idx(i + 1, j), idx(i, j + 1)))
springs = np.array(springs, dtype=np.int32)
rest = np.linalg.norm(x0[springs[:, 0]] - x0[springs[:, 1]], axis=1)
centre = x0.mean(axis=0)
rng = np.random.default_rng(seed)
v0 = np.array([1.0, 1.5]) + 5.0 * np.stack([-(x0[:, 1] - centre[1]), x0[:, 0] - centre[0]], axis=-1)
v0 = v0 + 0.2 * rng.standard_normal((N, 2))
np.save(f"{out}/mass_spring_ad_x0.npy", np.ascontiguousarray(x0.astype(np.float32)))
np.save(f"{out}/mass_spring_ad_v0.npy", np.ascontiguousarray(v0.astype(np.float32)))
np.save(f"{out}/mass_spring_ad_sa.npy", np.ascontiguousarray(springs[:, 0]))
np.save(f"{out}/mass_spring_ad_sb.npy", np.ascontiguousarray(springs[:, 1]))
np.save(f"{out}/mass_spring_ad_rest.npy", np.ascontiguousarray(rest.astype(np.float32)))
print(len(springs), "springs")

#!/usr/bin/env python3
"""Writes the meshes the shipped examples use (graphs/meshes/), so they
are made by a script in the repository rather than taken from elsewhere.

    python3 tools/make_meshes.py

torus.obj: a torus of major radius 0.6 and minor radius 0.22 about the
y axis, 32 x 16 quads (fanned into triangles by the reader), outward
winding, 6 decimals.
"""
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "graphs", "meshes")


def torus(path, major=0.6, minor=0.22, nu=32, nv=16):
    lines = ["# torus: major 0.6, minor 0.22, 32 x 16 (tools/make_meshes.py)"]
    for i in range(nu):
        u = 2 * math.pi * i / nu
        for j in range(nv):
            v = 2 * math.pi * j / nv
            r = major + minor * math.cos(v)
            lines.append("v %.6f %.6f %.6f" % (r * math.cos(u), minor * math.sin(v), r * math.sin(u)))
    at = lambda i, j: (i % nu) * nv + (j % nv) + 1
    for i in range(nu):
        for j in range(nv):
            # Counter-clockwise seen from outside the tube.
            lines.append("f %d %d %d %d" % (at(i, j), at(i, j + 1), at(i + 1, j + 1), at(i + 1, j)))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    torus(os.path.join(OUT, "torus.obj"))

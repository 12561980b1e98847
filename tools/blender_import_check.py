"""Imports Weft's exports into Blender headless and checks what Blender sees.

    python3 tools/blender_import_check.py PLY_FIRST PLY_COUNT VDB FIELD VOXEL_SIZE

PLY_FIRST: the first file of a PLY sequence (x_0001.ply): every file of the
sequence (PLY_COUNT of them, numbered on) is imported with Blender's own PLY
importer and must give as many vertices as its header says, at the same
positions, with every other property as a point attribute. VDB: one .vdb file, loaded as a Volume object: it must hold one
float grid named FIELD whose transform is the one
Weft writes (voxel size VOXEL_SIZE, voxel (0, 0, 0)'s centre at VOXEL_SIZE / 2). Needs `pip install bpy` (Blender as a Python module,
Python 3.11) or runs inside `blender --background --python`.
Prints "blender ok ..." and exits 0 when everything matches.
"""

import os
import re
import struct
import sys

import bpy


def ply_header(path):
    with open(path, "rb") as f:
        data = f.read()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    head = data[:end].decode()
    n = int(re.search(r"element vertex (\d+)", head).group(1))
    props = re.findall(r"property (\w+) (\w+)", head)
    stride = 4 * len(props)
    xyz = [struct.unpack_from("<3f", data, end + i * stride) for i in range(n)]
    return n, xyz, [name for _, name in props[3:]]


def main(argv):
    first, count, vdb, field = argv[0], int(argv[1]), argv[2], argv[3]
    size = float(argv[4])
    m = re.search(r"(\d+)(\.ply)$", first)
    if not m:
        sys.exit("PLY_FIRST must end in a frame number and .ply: " + first)
    start, width = int(m.group(1)), len(m.group(1))
    bpy.ops.wm.read_factory_settings(use_empty=True)
    for i in range(count):
        path = first[: m.start(1)] + str(start + i).zfill(width) + ".ply"
        n, xyz, extra = ply_header(path)
        before = set(bpy.data.objects)
        bpy.ops.wm.ply_import(filepath=path)
        new = [o for o in bpy.data.objects if o not in before]
        if len(new) != 1:
            sys.exit("%s: Blender made %d objects" % (path, len(new)))
        mesh = new[0].data
        if len(mesh.vertices) != n:
            sys.exit("%s: Blender has %d vertices, the file %d" % (path, len(mesh.vertices), n))
        missing = [a for a in extra if a not in mesh.attributes]
        if missing:
            sys.exit("%s: Blender dropped the properties %s" % (path, missing))
        for k in (0, n // 2, n - 1):
            got = tuple(mesh.vertices[k].co)
            if any(abs(a - b) > 0.0 for a, b in zip(got, xyz[k])):
                sys.exit("%s: vertex %d at %s, the file says %s" % (path, k, got, xyz[k]))
    vol = bpy.data.volumes.new(field)
    vol.filepath = os.path.abspath(vdb)
    vol.grids.load()
    if not vol.grids.is_loaded:
        sys.exit("%s: Blender could not load its grids: %s" % (vdb, vol.grids.error_message))
    names = [g.name for g in vol.grids]
    if names != [field]:
        sys.exit("%s: grids %s, expected [%s]" % (vdb, names, field))
    g = vol.grids[0]
    if g.data_type != "FLOAT":
        sys.exit("%s: grid type %s" % (vdb, g.data_type))
    # Blender's Volume object holds the grid; its matrix is OpenVDB's transform.
    mat = [list(r) for r in g.matrix_object]
    want = [[size if r == c else 0.0 for c in range(3)] + [size / 2 if r < 3 else 1.0] for r in range(4)]
    want[3][:3] = [0.0, 0.0, 0.0]
    if any(abs(a - b) > 1e-9 for ra, rb in zip(mat, want) for a, b in zip(ra, rb)):
        sys.exit("%s: grid transform %s, expected %s" % (vdb, mat, want))
    print("blender ok: %d PLY files, grid %s %s, transform %s" % (count, g.name, g.data_type, mat))


if __name__ == "__main__":
    args = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]
    main(args)

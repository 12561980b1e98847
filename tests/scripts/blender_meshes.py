"""Makes a known scene in Blender (the bpy module, headless) and exports it
in every mesh format Weft reads, for tests/tests/mesh_files.rs.

    python3 blender_meshes.py OUT_DIR

The scene: Suzanne (the monkey) at the origin, and a small UV sphere moved,
turned and scaled unevenly (its transform is applied by each exporter, or
by Weft for glTF's nodes). Written to OUT_DIR:

  expected.json     the evaluated meshes' world-space vertex positions
                    (Blender's own, Z up) and their triangle count
                    (`mesh.loop_triangles`), per object and in all
  scene.obj         OBJ, axes told explicitly: forward Y, up Z (no change)
  scene.ply         binary PLY, forward Y, up Z (no change)
  scene_ascii.ply   ASCII PLY, the same
  scene.stl         binary STL, forward Y, up Z (no change)
  scene_ascii.stl   ASCII STL, the same
  scene.glb         GLB, Y up (glTF's convention: Blender's (x, y, z) is
                    written as (x, z, -y))
  scene.gltf        glTF JSON with its buffers in scene.bin, Y up
  scene.usda        USD text, Z up (no change), only with --usd (Weft does
                    not read USD yet)
"""

import json
import os
import sys
import time

import bpy

start = time.time()
out = sys.argv[-1]
os.makedirs(out, exist_ok=True)

bpy.ops.wm.read_factory_settings(use_empty=True)
bpy.ops.mesh.primitive_monkey_add(size=2.0, location=(0.0, 0.0, 0.0))
bpy.ops.mesh.primitive_uv_sphere_add(
    segments=8,
    ring_count=5,
    radius=0.5,
    location=(2.5, -1.0, 0.75),
    rotation=(0.3, 0.0, 0.9),
    scale=(1.0, 2.0, 0.5),
)

depsgraph = bpy.context.evaluated_depsgraph_get()
objects = {}
for ob in bpy.context.scene.objects:
    if ob.type != "MESH":
        continue
    ev = ob.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    mesh.calc_loop_triangles()
    world = ob.matrix_world
    objects[ob.name] = {
        "positions": [list(world @ v.co) for v in mesh.vertices],
        "triangles": len(mesh.loop_triangles),
    }
    ev.to_mesh_clear()
expected = {
    "objects": objects,
    "vertices": sum(len(o["positions"]) for o in objects.values()),
    "triangles": sum(o["triangles"] for o in objects.values()),
}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f)

# Positions only where the exporter allows: every extra attribute could
# split a vertex in two.
axes = dict(forward_axis="Y", up_axis="Z", global_scale=1.0)
bpy.ops.wm.obj_export(
    filepath=os.path.join(out, "scene.obj"),
    export_normals=False,
    export_uv=False,
    export_materials=False,
    **axes,
)
for name, ascii in [("scene.ply", False), ("scene_ascii.ply", True)]:
    bpy.ops.wm.ply_export(
        filepath=os.path.join(out, name),
        ascii_format=ascii,
        export_normals=False,
        export_uv=False,
        export_colors="NONE",
        **axes,
    )
for name, ascii in [("scene.stl", False), ("scene_ascii.stl", True)]:
    bpy.ops.wm.stl_export(filepath=os.path.join(out, name), ascii_format=ascii, **axes)
for name, fmt in [("scene.glb", "GLB"), ("scene.gltf", "GLTF_SEPARATE")]:
    bpy.ops.export_scene.gltf(
        filepath=os.path.join(out, name),
        export_format=fmt,
        export_yup=True,
        export_normals=False,
        export_texcoords=False,
        export_materials="NONE",
    )
if "--usd" in sys.argv:
    bpy.ops.wm.usd_export(
        filepath=os.path.join(out, "scene.usda"),
        export_normals=False,
        export_uvmaps=False,
        export_materials=False,
    )

print("blender meshes ok %.1f s" % (time.time() - start))

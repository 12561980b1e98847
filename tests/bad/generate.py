"""Regenerates the bad-graph corpus (NAME.json + NAME.expect.txt) and the .npy
fixtures in this folder: `python3 tests/bad/generate.py` (needs numpy).
Hand edits to the generated files are lost when it runs again."""
import json, os, numpy as np
OUT = os.path.dirname(os.path.abspath(__file__))

def base(code="fn kernel(i: i32) {\n    x[i] = x[i] + 1.0;\n}\n", shape=[16], ftype="f32", kparams=None):
    kp = {"over": "x", "code": code}
    if kparams is not None:
        kp = kparams
    return {
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "g", "kind": "dense", "params": {"shape": shape}, "pos": [0, 0]},
            {"id": "x", "kind": "field", "params": {"type": ftype}, "pos": [200, 0]},
            {"id": "k", "kind": "kernel", "params": kp, "pos": [400, 0]},
            {"id": "tick", "kind": "on_frame", "pos": [400, -100]},
        ],
        "wires": [{"from": "g.cells", "to": "x.layout"}, {"from": "x.field", "to": "k.x"}],
        "exec": [{"from": "tick.then", "to": "k"}],
    }

def node(d, id):
    return next(n for n in d["nodes"] if n["id"] == id)

cases = {}
def case(name, doc, node_id, *contains, at=None):
    cases[name] = (doc, node_id, contains, at)

def raw(name, text, node_id, *contains):
    cases[name] = (text, node_id, contains, None)

# ---- document level ----
raw("doc_malformed_json", '{\n  "format": "weft-graph",\n  "version": 1,\n  "nodes": [\n    { "id": "g" "kind": "dense" }\n  ]\n}\n', "-", "invalid JSON at line 5:17")
raw("doc_trailing_comma", '{\n  "format": "weft-graph",\n  "version": 1,\n  "nodes": [],\n}\n', "-", "invalid JSON at line 5:1")
raw("doc_not_object", '[ "weft-graph", 1 ]\n', "-", "must be a JSON object")
d = base(); d["format"] = "weft-grahp"; case("doc_wrong_format", d, "-", '"format" is "weft-grahp" but must be "weft-graph"')
d = base(); del d["format"]; case("doc_missing_format", d, "-", 'missing "format"')
d = base(); del d["version"]; case("doc_missing_version", d, "-", 'missing "version"')
d = base(); d["frames"] = [{"id": "box", "rect": [0, 0, -5, 10]}]; case("frame_negative_size", d, "-", "frame 'box': \"rect\" must be [x, y, width, height]")
d = base(); d["frames"] = [{"id": "box", "rect": [0, 0, 5, 10]}, {"id": "box", "rect": [9, 9, 5, 10]}]; case("frame_duplicate_id", d, "-", "frame 'box': another frame has the same id")
d = base(); d["frames"] = [{"id": "box", "rect": [0, 0, 5, 10], "colour": [1, 0, 0]}]; case("frame_unknown_key", d, "-", "frame 'box': unknown field `colour`")
d = base(); d["version"] = -1; case("doc_negative_version", d, "-", "must be a positive integer")
d = base(); d["version"] = "1"; case("doc_string_version", d, "-", "must be a positive integer")
d = base(); d["version"] = 7; case("doc_future_version", d, "-", "newer than this weft", "upgrade weft")
d = base(); del d["nodes"]; case("doc_missing_nodes", d, "-", 'missing "nodes"')
d = base(); d["nodes"] = {"g": {}}; case("doc_nodes_not_list", d, "-", '"nodes" must be a list')
d = base(); d["comment"] = "hi"; case("doc_unknown_key", d, "-", "unknown field `comment`")
d = base(); d["wires"] = {"from": "g.cells", "to": "x.layout"}; case("doc_wires_not_list", d, "-", 'graph: "wires": invalid type')
d = base(); d["seed"] = -1; case("doc_negative_seed", d, "-", 'graph: "seed": invalid value: integer `-1`, expected u32')
d = base(); del node(d, "x")["id"]; case("doc_node_without_id", d, "-", 'node #2 has no string "id"')

# ---- nodes and params ----
d = base(); node(d, "x")["size"] = 3; case("node_unknown_key", d, "x", "unknown field `size`")
d = base(); node(d, "x")["pos"] = "left"; case("node_bad_pos", d, "x", "invalid type")
d = base(); node(d, "tick")["id"] = "tick tock!"; d["exec"][0]["from"] = "tick tock!.then"; case("node_bad_id_chars", d, "tick tock!", "node ids must be 1-64 letters")
d = base(); node(d, "tick")["id"] = "x"; d["exec"] = []; case("node_duplicate_id", d, "x", "duplicate node id")
d = base(); node(d, "tick")["kind"] = "on_frames"; case("node_unknown_kind", d, "tick", "unknown node kind 'on_frames'")
d = base(); node(d, "g")["params"]["size"] = [16]; case("param_unknown", d, "g", "'dense' has no parameter 'size' (it has: shape)")
d = base(); node(d, "g")["params"]["shape"] = 16; case("param_shape_not_list", d, "g", "expected a list of 1-3 positive integers")
d = base(); node(d, "g")["params"]["shape"] = [0]; case("param_shape_zero", d, "g", "between 1 and 2^30, got 0")
d = base(); node(d, "g")["params"]["shape"] = [-4]; case("param_shape_negative", d, "g", "got -4")
d = base(); node(d, "g")["params"]["shape"] = [2.5]; case("param_shape_float", d, "g", "extents must be integers, got 2.5")
d = base(); node(d, "g")["params"]["shape"] = [2, 2, 2, 2]; case("param_shape_four_axes", d, "g", "a shape has 1 to 3 axes, got 4")
d = base(); node(d, "g")["params"]["shape"] = []; case("param_shape_empty", d, "g", "a shape has 1 to 3 axes, got 0")
d = base(); node(d, "g")["params"]["shape"] = [65536, 65537]; case("param_shape_over_cap", d, "g", "the layout needs more than 4294967296 words (16 GiB)")
d = base(shape=[1 << 30, 1 << 30, 1 << 30]); case("param_shape_huge_3d", d, "g", "the layout needs more than 4294967296 words (16 GiB) of storage; word addresses are 32-bit on every backend")
d = base(shape=[65536, 32769], ftype="vec2", code="fn kernel(i: i32, j: i32) {\n    x[(i, j)] = vec2(0.0, 0.0);\n}\n"); case("param_shape_over_cap_vec2", d, "g", "the layout needs more than 4294967296 words")
d = base(); del node(d, "g")["params"]["shape"]; case("param_shape_missing", d, "g", "required parameter 'shape' is missing")
d = base(); del node(d, "k")["params"]["code"]; case("param_code_missing", d, "k", "a kernel needs 'code' (kernel language) or 'expr'")
d = base(); node(d, "k")["params"]["code"] = ["fn kernel(i: i32) {}"]; case("param_code_not_string", d, "k", "expected kernel code as a string")
d = base(); node(d, "x")["params"]["type"] = "float"; case("param_field_type_unknown", d, "x", "expected one of f32, i32")
d = base(); node(d, "x")["params"]["init"] = [1, 2]; case("param_init_wrong_length", d, "x", "has 1 component but the list has 2")
d = base(ftype="i32", code="fn kernel(i: i32) {\n    x[i] = x[i] + 1;\n}\n"); node(d, "x")["params"]["init"] = 1.5; case("param_init_not_int", d, "x", "1.5 does not fit a i32 field")
d = base(); node(d, "x")["params"]["init"] = "zero"; case("param_init_string", d, "x", "expected a number, a list of numbers")
d = base(); node(d, "k")["params"]["scalars"] = {"2dt": 0.1}; case("param_scalar_bad_name", d, "k", "scalar name '2dt' is not a valid identifier")
d = base(); node(d, "k")["params"]["scalars"] = {"n": {"type": "f64"}}; case("param_scalar_bad_type", d, "k", "needs \"type\": \"f32\"")
d = base(); node(d, "k")["params"]["scalars"] = {"n": {"type": "u32", "default": -1}}; case("param_scalar_out_of_range", d, "k", "'n': -1 is not a valid u32")

# ---- data wires ----
d = base(); d["wires"][1]["from"] = "y.field"; case("wire_missing_from_node", d, "k", "refers to missing node 'y'")
d = base(); d["wires"][0]["to"] = "y.layout"; case("wire_missing_to_node", d, "g", "refers to missing node 'y'")
d = base(); d["wires"][0]["to"] = "x.parent"; case("wire_missing_input_port", d, "x", "'field' has no input port 'parent' (inputs: layout)")
d = base(); d["wires"][0]["from"] = "g.children"; case("wire_missing_output_port", d, "g", "'dense' has no output port 'children' (outputs: cells)")
d = base(); d["wires"][1]["to"] = "k.y"; case("wire_kernel_unused_port", d, "k", "the kernel's body uses no field named 'y'")
d = base(); d["nodes"].append({"id": "y", "kind": "field"}); d["wires"].append({"from": "g.cells", "to": "y.layout"}); d["wires"].append({"from": "x.field", "to": "y.layout"})
case("wire_field_to_layout", d, "y", "cannot wire field output 'x.field' to layout input 'y.layout'")
d = base(); d["wires"].append({"from": "x.field", "to": "g.parent"}); case("wire_field_to_parent", d, "g", "cannot wire field output")
d = base(); d["nodes"].append({"id": "h", "kind": "dense", "params": {"shape": [16]}}); d["wires"].append({"from": "h.cells", "to": "x.layout"})
case("wire_two_into_one_input", d, "x", "more than one wire reaches this input")
d = base(); del d["wires"][0]; case("wire_field_without_layout", d, "x", "required input 'layout' is not wired")
d = base(code="fn kernel(i: i32) {\n    x[i] = y[i];\n}\n"); case("wire_kernel_field_unwired", d, "k", "the code uses field 'y' but no field is wired to port 'y'")
d = base(); d["nodes"].append({"id": "v", "kind": "image"}); case("wire_view_unwired", d, "v", "required input 'field' is not wired")

# ---- layout ----
d = base(); d["nodes"].append({"id": "blk", "kind": "dense", "params": {"shape": [4, 4]}}); d["wires"].append({"from": "g.cells", "to": "blk.parent"})
case("layout_nested_axes", d, "blk", "has 2 axes but its parent 'g' has 1")
d = base(); d["nodes"].insert(0, {"id": "a", "kind": "dense", "params": {"shape": [4]}}); d["nodes"].insert(1, {"id": "b", "kind": "dense", "params": {"shape": [4]}})
d["wires"] += [{"from": "a.cells", "to": "b.parent"}, {"from": "b.cells", "to": "a.parent"}]
case("layout_parent_cycle", d, "a", "layout nodes form a cycle")
d = base(); d["wires"].append({"from": "g.cells", "to": "g.parent"}); case("layout_self_parent", d, "g", "layout nodes form a cycle")

# ---- kernels: range / over ----
d = base(); node(d, "k")["params"]["range"] = [16]; case("kernel_range_and_over", d, "k", "give either 'range' or 'over', not both")
d = base(); del node(d, "k")["params"]["over"]; case("kernel_neither_range_nor_over", d, "k", "a kernel needs either 'range'")
d = base(); node(d, "k")["params"]["over"] = "y"; case("kernel_over_not_port", d, "k", "'y' is not one of this kernel's field ports")
d = base(); del node(d, "k")["params"]["over"]; node(d, "k")["params"]["range"] = [1 << 30, 1 << 30, 1 << 30]
node(d, "k")["params"]["code"] = "fn kernel(i: i32, j: i32, l: i32) {\n    x[0] = 1.0;\n}\n"
case("kernel_range_over_cap", d, "k", "iterations exceed the cap")

# ---- exec ----
d = base(); d["exec"][0]["from"] = "tick.next"; case("exec_missing_pin", d, "tick", "'on_frame' has no execution output 'next' (it has: then)")
d = base(); d["exec"][0]["to"] = "x"; case("exec_into_field", d, "x", "'field' nodes cannot be the target of an execution wire")
d = base(); d["exec"][0]["from"] = "ghost.then"; case("exec_missing_node", d, "k", "refers to missing node 'ghost'")
d = base(); d["nodes"].append({"id": "k2", "kind": "kernel", "params": {"over": "x", "code": "fn kernel(i: i32) {\n    x[i] = 0.0;\n}\n"}}); d["wires"].append({"from": "x.field", "to": "k2.x"})
d["exec"].append({"from": "tick.then", "to": "k2"}); case("exec_two_from_one_pin", d, "tick", "more than one execution wire leaves this pin")
d = base(); d["nodes"].append({"id": "k2", "kind": "kernel", "params": {"over": "x", "code": "fn kernel(i: i32) {\n    x[i] = 0.0;\n}\n"}}); d["wires"].append({"from": "x.field", "to": "k2.x"})
d["exec"] = [{"from": "k.then", "to": "k2"}, {"from": "k2.then", "to": "k"}]; case("exec_cycle", d, "k|k2", "execution wires form a cycle")
d = base(); d["exec"].append({"from": "k.then", "to": "k"}); d["exec"] = [{"from": "k.then", "to": "k"}]; case("exec_self_loop", d, "k", "execution wires form a cycle")
d = base(); d["nodes"].append({"id": "sub", "kind": "repeat", "params": {"count": 0}}); d["exec"] = [{"from": "tick.then", "to": "sub"}, {"from": "sub.body", "to": "k"}]
case("exec_repeat_count_zero", d, "sub", "count must be 1 to 1000000, got 0")
d = base(code="fn kernel(i: i32) {\n    x[i] = x[i] + rate;\n}\n"); node(d, "k")["params"]["scalars"] = {"rate": {"type": "f32", "default": 0.5, "min": 0.0, "max": 0.25}}
case("scalar_default_out_of_range", d, "k", "scalar 'rate' default 0.5 is outside its range 0 to 0.25")
d = base(code="fn kernel(i: i32) {\n    x[i] = x[i] + rate;\n}\n"); node(d, "k")["params"]["scalars"] = {"rate": {"type": "f32", "min": 1.0, "max": 0.0}}
case("scalar_min_above_max", d, "k", "scalar 'rate' has min 1 above max 0")
d = base(code="fn kernel(i: i32) {\n    x[i] = x[i] + rate;\n}\n"); node(d, "k")["params"]["scalars"] = {"rate": {"type": "f32", "max": "big"}}
case("scalar_non_numeric_max", d, "k", "scalar 'rate' has a non-numeric max")
d = base(); d["nodes"].append({"id": "sub", "kind": "repeat", "params": {"count": 2.5}}); case("exec_repeat_count_float", d, "sub", "expected an integer")

# ---- views ----
d = base(); d["nodes"].append({"id": "view", "kind": "image"}); d["wires"].append({"from": "x.field", "to": "view.field"}); case("view_image_1d", d, "view", "an image needs a 2D scalar, vec3 or vec4 field; 'x' is 1-D f32")
d = base(); d["nodes"].append({"id": "dots", "kind": "particles"}); d["wires"].append({"from": "x.field", "to": "dots.positions"}); case("view_particles_not_vec2", d, "dots", "particles need a 1D vec2 (2-D) or vec3 (3-D) field; 'x' is 1-D f32")
d = base(); d["nodes"].append({"id": "view", "kind": "image", "params": {"min": 0.0}}); d["wires"].append({"from": "x.field", "to": "view.field"})
node(d, "g")["params"]["shape"] = [4, 4]; node(d, "k")["params"]["code"] = "fn kernel(i: i32, j: i32) {\n    x[(i, j)] = 1.0;\n}\n"
case("view_image_min_without_max", d, "view", "give both 'min' and 'max'")
d = base(ftype="vec2", code="fn kernel(i: i32) {\n    x[i] = vec2(0.5, 0.5);\n}\n"); d["nodes"].append({"id": "dots", "kind": "particles", "params": {"domain": [1, 1, 0, 0]}}); d["wires"].append({"from": "x.field", "to": "dots.positions"})
case("view_particles_bad_domain", d, "dots", "domain must be")
d = base(ftype="vec2", code="fn kernel(i: i32) {\n    x[i] = vec2(0.5, 0.5);\n}\n"); d["nodes"].append({"id": "dots", "kind": "particles", "params": {"width": 0}}); d["wires"].append({"from": "x.field", "to": "dots.positions"})
case("view_particles_zero_width", d, "dots", "width must be 1 to 8192, got 0")
d = base(ftype="vec2", code="fn kernel(i: i32) {\n    x[i] = vec2(0.5, 0.5);\n}\n"); d["nodes"].append({"id": "dots", "kind": "particles", "params": {"radius": 300.0}}); d["wires"].append({"from": "x.field", "to": "dots.positions"})
case("view_particles_radius_out_of_range", d, "dots", "radius must be 0 to 256, got 300.0")

# ---- npy init ----
d = base(); node(d, "x")["params"]["init"] = {"npy": "no_such_file.npy"}; case("npy_missing_file", d, "x", "cannot read", "no_such_file.npy")
d = base(); node(d, "x")["params"]["init"] = {"npy": "fixture_i32_16.npy"}; case("npy_wrong_dtype", d, "x", "holds I32 data but field 'x' is f32")
d = base(); node(d, "x")["params"]["init"] = {"npy": "fixture_f32_8.npy"}; case("npy_wrong_shape", d, "x", "has shape [8] but field 'x' needs [16]")
d = base(ftype="vec2", code="fn kernel(i: i32) {\n    x[i] = x[i] * 0.5;\n}\n"); node(d, "x")["params"]["init"] = {"npy": "fixture_f32_16.npy"}; case("npy_vec2_needs_components", d, "x", "needs [16, 2]")
d = base(); node(d, "x")["params"]["init"] = {"npy": "fixture_bad_magic.npy"}; case("npy_not_npy", d, "x", "not a .npy file")
d = base(); node(d, "x")["params"]["init"] = {"npy": "fixture_truncated.npy"}; case("npy_truncated_data", d, "x", "bytes of data but its shape needs")

# ---- kernel code ----
def code_case(name, code, at, *contains, shape=[16], ftype="f32", over="x", extra=None):
    d = base(code=code, shape=shape, ftype=ftype)
    node(d, "k")["params"]["over"] = over
    if extra: extra(d)
    case(name, d, "k", *contains, at=at)

code_case("code_syntax_error", "fn kernel(i: i32) {\n    x[i] = ;\n}\n", None, "syntax error")
code_case("code_not_rust", "kernel(i) { x[i] = 1 }", None, "syntax error")
code_case("code_no_entry", "fn main(i: i32) {\n    x[i] = 1.0;\n}\n", None, "needs an entry function `fn kernel")
code_case("code_unknown_name", "fn kernel(i: i32) {\n    x[i] = speed * 2.0;\n}\n", None, "unknown name `speed`")
def two_fields(d):
    node(d, "x")["id"] = "grid_m"
    d["wires"] = [{"from": "g.cells", "to": "grid_m.layout"}, {"from": "g.cells", "to": "grid_v.layout"}, {"from": "grid_m.field", "to": "k.grid_m"}, {"from": "grid_v.field", "to": "k.grid_v"}]
    d["nodes"].insert(2, {"id": "grid_v", "kind": "field", "params": {"type": "vec2"}})
code_case("code_type_mismatch", "fn kernel(i: i32, j: i32) {\n    let x = grid_m[(i, j)] * 0.5;\n    grid_v[(i, j)] = x;\n}\n", None, "`x` is f32 but `grid_v[(i, j)]` expects vec2<f32>", shape=[8, 8], over="grid_m", extra=two_fields)
code_case("code_wrong_loop_indices", "fn kernel(i: i32) {\n    x[(i, 0)] = 1.0;\n}\n", None, "this kernel loops over 2 axes", shape=[4, 4])
code_case("code_recursion", "fn fact(n: i32) -> i32 {\n    if n <= 1 { 1 } else { n * fact(n - 1) }\n}\n\nfn kernel(i: i32) {\n    x[i] = fact(i) as f32;\n}\n", None, "recursion is not allowed")
code_case("code_mutual_recursion", "fn a(n: i32) -> i32 {\n    b(n)\n}\nfn b(n: i32) -> i32 {\n    a(n)\n}\nfn kernel(i: i32) {\n    x[i] = a(i) as f32;\n}\n", None, "recursion is not allowed")
code_case("code_break_outside_loop", "fn kernel(i: i32) {\n    if i > 3 {\n        break;\n    }\n    x[i] = 1.0;\n}\n", None, "`break` outside a loop")
code_case("code_assign_immutable", "fn kernel(i: i32) {\n    let v = x[i];\n    v = v + 1.0;\n    x[i] = v;\n}\n", None, "`v` is not mutable")
code_case("code_unknown_function", "fn kernel(i: i32) {\n    x[i] = smoothstep3(0.0, 1.0, x[i]);\n}\n", None, "unknown function `smoothstep3`")
code_case("code_builtin_wrong_types", "fn kernel(i: i32) {\n    x[i] = sqrt(true);\n}\n", None, "sqrt")
code_case("code_builtin_wrong_arity", "fn kernel(i: i32) {\n    x[i] = max(x[i]);\n}\n", None, "`max` takes 2 argument(s), got 1")
code_case("code_index_too_few_axes", "fn kernel(i: i32, j: i32) {\n    x[i] = 1.0;\n}\n", None, "`x` has 2 axes but is indexed with 1 index(es)", shape=[4, 4])
code_case("code_float_index", "fn kernel(i: i32) {\n    x[i as f32] = 1.0;\n}\n", None, "indices must be integers")
code_case("code_if_not_bool", "fn kernel(i: i32) {\n    if i {\n        x[i] = 1.0;\n    }\n}\n", None, "but a condition must be bool")
code_case("code_assign_field_whole", "fn kernel(i: i32) {\n    x[i] = 1.0;\n    x = 2.0;\n}\n", None, "`x` is a field")
code_case("code_macro", "fn kernel(i: i32) {\n    println!(\"{}\", i);\n    x[i] = 1.0;\n}\n", None, "macros are not supported")
code_case("code_missing_return", "fn half(v: f32) -> f32 {\n    let h = v * 0.5;\n}\nfn kernel(i: i32) {\n    x[i] = half(x[i]);\n}\n", None, "`half` must return a value of type f32")
code_case("code_scalar_assigned", "fn kernel(i: i32) {\n    dt = 0.5;\n    x[i] = dt;\n}\n", None, "`dt` is a kernel parameter and cannot be assigned", extra=lambda d: node(d, "k")["params"].__setitem__("scalars", {"dt": 0.1}))
code_case("code_unknown_label", "fn kernel(i: i32) {\n    for a in 0..4 {\n        break 'outer;\n    }\n    x[i] = 1.0;\n}\n", "3:15", "unknown loop label `'outer`")
code_case("code_match_without_wildcard", "fn kernel(i: i32) {\n    let v = match i {\n        0 => 1.0,\n        1..=4 => 2.0,\n    };\n    x[i] = v;\n}\n", "2:13", "needs a last arm `_ => ...`")
code_case("code_match_float", "fn kernel(i: i32) {\n    let v = match x[i] {\n        _ => 1.0,\n    };\n    x[i] = v;\n}\n", "2:19", "`match` works on i32 and u32 values; `x[i]` is f32")
code_case("code_const_overflow", "const BIG: i32 = 2147483647 + 1;\nfn kernel(i: i32) {\n    x[i] = BIG as f32;\n}\n", "1:18", "`2147483647 + 1` is 2147483648, which does not fit in i32")
code_case("code_const_not_constant", "const K: f32 = sqrt(2.0);\nfn kernel(i: i32) {\n    x[i] = K;\n}\n", "1:16", "`sqrt(2.0)` is not a constant expression")

AT = {'code_nested_too_deep': '2:111', 'code_expression_too_long': '2:3082', 'code_assign_field_whole': '3:5', 'code_assign_immutable': '3:5', 'code_break_outside_loop': '3:9', 'code_builtin_wrong_arity': '2:12', 'code_builtin_wrong_types': '2:12', 'code_float_index': '2:7', 'code_if_not_bool': '2:8', 'code_index_too_few_axes': '2:7', 'code_macro': '2:5', 'code_missing_return': '1:24', 'code_mutual_recursion': '5:5', 'code_no_entry': '1:1', 'code_not_rust': '1:7', 'code_recursion': '2:32', 'code_scalar_assigned': '2:5', 'code_syntax_error': '2:12', 'code_type_mismatch': '3:22', 'code_unknown_function': '2:12', 'code_unknown_name': '2:12', 'code_wrong_loop_indices': '1:1'}
code_case("code_nested_too_deep", "fn kernel(i: i32) {\n    x[i] = " + "(" * 150 + "1.0" + ")" * 150 + ";\n}\n", None, "code nests brackets more than 100 levels deep")
code_case("code_expression_too_long", "fn kernel(i: i32) {\n    x[i] = 1.0" + " + 1.0" * 600 + ";\n}\n", None, "more than 512 operators")
d = base(); node(d, "x")["params"]["init"] = {"npy": "/dev/zero"}; case("npy_device_file", d, "x", "cannot read /dev/zero")
d = base(); node(d, "x")["params"]["init"] = {"npy": "."}; case("npy_directory", d, "x", "cannot read", "not a regular .npy file")
raw("doc_eof_after_newline", '{\n  "format": "weft-graph",\n', "-", "invalid JSON at line 3:1: EOF while parsing")
d = base(); d["version"] = 0; case("doc_version_zero", d, "-", '"version" is 0 but must be a positive integer')

for name, (doc, nid, contains, at) in cases.items():
    at = at or AT.get(name)
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=2) + "\n"
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        f.write(text)
    with open(os.path.join(OUT, name + ".expect.txt"), "w") as f:
        f.write("node: %s\n" % nid)
        for c in contains:
            f.write("contains: %s\n" % c)
        if at:
            f.write("at: %s\n" % at)

np.save(os.path.join(OUT, "fixture_i32_16.npy"), np.arange(16, dtype=np.int32))
np.save(os.path.join(OUT, "fixture_f32_8.npy"), np.zeros(8, dtype=np.float32))
np.save(os.path.join(OUT, "fixture_f32_16.npy"), np.zeros(16, dtype=np.float32))
with open(os.path.join(OUT, "fixture_bad_magic.npy"), "wb") as f:
    f.write(b"PK\x03\x04 this is not a numpy file at all")
b = open(os.path.join(OUT, "fixture_f32_16.npy"), "rb").read()
with open(os.path.join(OUT, "fixture_truncated.npy"), "wb") as f:
    f.write(b[:len(b) - 20])
print(len(cases), "cases")

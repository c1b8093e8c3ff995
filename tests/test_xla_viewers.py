"""The sharding, memory and schedule viewers, on data built from recorded XLA dumps."""
from __future__ import annotations

import json
import os
import re

import viewers
from compiler.capture import xla_dump
from viewers import memory, mesh, timeline

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "xla")


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


def mesh_data(name: str = "<script>x</script>") -> dict:
    shardings = json.loads(fixture("mlp_xla_stats.json"))["shardings"]
    arrays = []
    for role, dims, text in (("parameter 0", [64, 128], shardings["parameters"][0]),
                             ("parameter 1", [128, 256], shardings["parameters"][1])):
        parsed = xla_dump.parse_sharding(text)
        arrays.append({"role": role, "name": name, "shape": f"f32{dims}", "dims": dims, "sharding": text,
                       "type": parsed["type"], "subgroups": parsed.get("subgroups", []),
                       "tile_dims": parsed.get("tile_dims"), "tile_devices": parsed.get("devices"),
                       "tiles": xla_dump.sharding_tiles(dims, parsed, 8)})
    module = xla_dump.parse_hlo_text(fixture("mlp_propagated.txt"))
    return {"devices": 8, "partitioner": "gspmd", "from_stage": "xla.pass:0003",
            "arrays": arrays, "collectives": xla_dump.collectives(xla_dump.parse_hlo_text(fixture("mlp_spmd.txt")), 8),
            "instructions": [{"name": i.name, "opcode": i.opcode, "shape": i.shape, "sharding": i.sharding or "",
                              "computation": i.computation, "line": i.line} for i in module.instructions()]}


def test_mesh_draws_one_box_per_tile_labelled_with_its_devices():
    html = viewers.render("mesh", json.dumps(mesh_data()), {})
    arrays = re.findall(r'<svg class="mesh-array".*?</svg>', html, re.S)
    meshes = re.findall(r'<svg class="mesh-devices".*?</svg>', html, re.S)
    assert len(arrays) == len(meshes) == 2
    assert arrays[0].count("<rect") == 4 and arrays[1].count("<rect") == 2
    labels = re.findall(r">([\d,]+)</text>", arrays[1])
    assert labels == ["0,2,4,6", "1,3,5,7"]
    # The device mesh of w ([1,2,4]<=[4,2]T(1,0)): 2 rows of 4; each device has its tile's colour.
    cells = re.findall(r'device (\d+) holds \[([^\]]*)\].*?fill="(#\w+)"', meshes[1])
    assert [int(d) for d, _, _ in cells] == [0, 2, 4, 6, 1, 3, 5, 7]
    colour = {d: c for d, _, c in cells}
    assert len({colour[d] for d in "0246"}) == 1 and colour["0"] != colour["1"]
    assert dict((d, r) for d, r, _ in cells)["1"] == "0:128 x 128:256"
    # The collective and its groups are listed; names are escaped.
    assert "all-reduce" in html and "{0,1} {2,3} {4,5} {6,7}" in html
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_mesh_caps_tiles_and_survives_bad_json():
    data = mesh_data("x")
    data["arrays"][0]["tiles"] = data["arrays"][0]["tiles"] * 100
    assert "too many to draw" in mesh.render(json.dumps(data), {})
    assert "<pre" in mesh.render("{not json", {})


def memory_data() -> dict:
    allocations = xla_dump.parse_buffer_assignment(fixture("mlp_buffer_assignment.txt"))
    data = xla_dump.memory_timeline(allocations, xla_dump.parse_live_range(fixture("mlp_live_range.txt")))
    data["xla_memory_stats"] = json.loads(fixture("mlp_xla_stats.json"))["memory"]
    return data


def test_memory_chart_marks_the_peak_and_lists_what_is_live():
    data = memory_data()
    html = viewers.render("memory", json.dumps(data), {})
    svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)
    assert svg.count("<rect") == len(data["blocks"])
    assert f'({data["peak_bytes"]} bytes)' in html
    assert f'temp_size_in_bytes = {data["xla_memory_stats"]["temp_size_in_bytes"]}' in html
    for value in data["live_at_peak"]:
        assert value["name"] in html
    # The tallest block reaches the peak line.
    peak_y = float(re.search(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg).group(1))
    tops = [float(y) for y in re.findall(r'<rect x="[\d.]+" y="([\d.]+)"', svg)]
    assert min(tops) == peak_y


def test_timeline_one_box_per_scheduled_instruction():
    module = xla_dump.parse_hlo_text(fixture("mlp_optimized.txt"))
    sched = xla_dump.schedule(module)
    html = viewers.render("timeline", json.dumps({"computations": sched, "scheduled": True}), {})
    svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)
    boxes = re.findall(r'<rect [^>]*data-line="(\d+)"', svg)
    assert len(boxes) == sum(len(c["instructions"]) for c in sched)
    all_reduce = next(i for c in sched for i in c["instructions"] if i["opcode"] == "all-reduce")
    colour = timeline.kind_of("all-reduce")[1]
    assert re.search(rf'fill="{colour}" data-line="{all_reduce["line"]}"', svg)
    assert timeline.kind_of("fusion")[0] == "kernel"


def test_memory_survives_bad_json():
    assert "<pre" in memory.render("nope", {})


def test_graph_draws_svg_without_external_resources_and_caps_size():
    # Graphviz runs in the worker (compiler/dot_drawing.py); the page shows the sanitised drawing.
    from compiler import dot_drawing
    dot = ('digraph G {\n stylesheet=<\n  data:text/css,\n  @import url(https://fonts.example/x.css);\n >\n'
           ' a [label="<b>"]; b [label="add"]; a -> b;\n}\n')
    svg, why = dot_drawing.draw(dot)
    html = viewers.render("svg", svg, {})
    assert "<svg" in html and html.count('class="node"') == 2
    assert "fonts.example" not in html and "&lt;b&gt;" in html
    # the DOT stage itself is shown as text: the web process never runs Graphviz
    assert "<svg" not in viewers.render("dot", dot, {}) and "stylesheet" in viewers.render("dot", dot, {})
    big = "digraph G {\n" + "".join(f" n{i} [label=\"{i}\"];\n" for i in range(dot_drawing.MAX_NODES + 1)) + "}\n"
    assert dot_drawing.draw(big) == (None, f"the graph has {dot_drawing.MAX_NODES + 1} nodes, more than the "
                                           f"{dot_drawing.MAX_NODES} drawn")

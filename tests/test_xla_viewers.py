"""The sharding, memory and schedule viewers, on data built from recorded XLA dumps."""
from __future__ import annotations

import json
import os
import re

import pytest

import viewers
from compiler.xla import hlo_text, sharding
from compiler.xla import memory as xla_memory
from viewers import code, memory, mesh, timeline

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "xla")


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


def mesh_data(name: str = "<script>x</script>") -> dict:
    shardings = json.loads(fixture("mlp_xla_stats.json"))["shardings"]
    arrays = []
    for role, dims, text in (("parameter 0", [64, 128], shardings["parameters"][0]),
                             ("parameter 1", [128, 256], shardings["parameters"][1])):
        parsed = sharding.parse_sharding(text)
        arrays.append({"role": role, "name": name, "shape": f"f32{dims}", "dims": dims, "sharding": text,
                       "type": parsed["type"], "subgroups": parsed.get("subgroups", []),
                       "tile_dims": parsed.get("tile_dims"), "tile_devices": parsed.get("devices"),
                       "tiles": sharding.sharding_tiles(dims, parsed, 8)})
    module = hlo_text.parse_hlo_text(fixture("mlp_propagated.txt"))
    return {"devices": 8, "partitioner": "gspmd", "from_stage": "xla.pass:0003",
            "arrays": arrays, "collectives": sharding.collectives(hlo_text.parse_hlo_text(fixture("mlp_spmd.txt")), 8),
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
    allocations = xla_memory.parse_buffer_assignment(fixture("mlp_buffer_assignment.txt"))
    data = xla_memory.memory_timeline(allocations, xla_memory.parse_live_range(fixture("mlp_live_range.txt")))
    data["xla_memory_stats"] = json.loads(fixture("mlp_xla_stats.json"))["memory"]
    return data


def test_a_program_with_no_temp_buffer_says_so_instead_of_an_empty_chart():
    """Every value an argument or the output: XLA's temp allocation is empty. The stage says so in
    a sentence, with the arguments' and outputs' sizes; before, it drew an axis ticked "1 B, 0 B,
    0 B" over nothing and a table of headers with no row (the sixth walk)."""
    html = viewers.render("memory", fixture("no_temp_memory.json"), {})
    text = re.sub(r"<[^>]+>", "", html)
    assert text.startswith("No temporary buffer") and "temp_size_in_bytes = 0" in text, text
    assert "arguments 3104, outputs 512 bytes" in text
    assert "<svg" not in html and "<table" not in html


def test_a_program_with_no_temp_buffer_is_summarised_so(tmp_path):
    """The line above the results said "temp buffers peak at 0 B" for such a program (the eighth
    walk); it says there is none, linked to the memory stage."""
    from compiler.model import Stage
    from tests.conftest import glance_of_bundle
    text = fixture("no_temp_memory.json")
    module = "HloModule relu, entry_computation_layout={(f32[16,32]{1,0})->f32[16,32]{1,0}}\n"
    stages = [Stage("xla.optimized", "Optimized HLO", "Optimized", "hlo", len(module)),
              Stage("xla.memory", "Memory over program order", "Memory", "memory", len(text),
                    meta={"peak_bytes": 0, "temp_size_in_bytes": 0})]
    items = glance_of_bundle(tmp_path, "hlo", stages, lambda key: module if key == "xla.optimized" else text)
    assert [(i["text"], i["stage"]) for i in items] == [("no temp buffer", "xla.memory")], items


def test_memory_chart_marks_the_peak_and_lists_what_is_live():
    data = memory_data()
    html = viewers.render("memory", json.dumps(data), {})
    svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)
    assert svg.count('<rect class="block"') == len(data["blocks"])
    peak = f'<span class="peak-bytes">{data["peak_bytes"]}</span> bytes) live at step <b class="peak-step">8</b>'
    assert peak in html
    assert "heap's 8448 bytes are equal to XLA's temp_size_in_bytes = 8448" in html
    table = re.search(r'<table class="memory-peak">.*?</table>', html, re.S).group(0)
    assert re.findall(r"<code>([^<]+)</code>", table) == ["add_tanh_fusion{}", "wrapped_reduce-window{}"]
    # The peak marker sits on the live-bytes line, at the peak step, at the line's highest point.
    marker = re.search(r'<circle class="peak" cx="([\d.]+)" cy="([\d.]+)"[^>]*data-step="(\d+)" '
                       r'data-bytes="(\d+)"', svg)
    points = [tuple(map(float, p.split(","))) for p in
              re.search(r'<polyline class="live" points="([^"]+)"', svg).group(1).split()]
    assert (marker.group(1), marker.group(2)) == ("%.1f" % points[8][0], "%.1f" % points[8][1])
    assert float(marker.group(2)) == min(y for _, y in points)  # SVG y grows downwards
    assert (int(marker.group(3)), int(marker.group(4))) == (data["peak_at"], data["peak_bytes"])


def test_memory_chart_says_what_the_packing_wastes():
    allocations = xla_memory.parse_buffer_assignment(fixture("attention_buffer_assignment.txt"))
    data = xla_memory.memory_timeline(allocations, xla_memory.parse_live_range(fixture("attention_live_range.txt")))
    data["xla_memory_stats"] = json.loads(fixture("attention_xla_stats.json"))["memory"]
    html = viewers.render("memory", json.dumps(data), {})
    assert "XLA packed the heap into 40960 bytes: 8192 bytes (8.00 KiB) of it hold no live value" in html
    assert "equal to XLA's temp_size_in_bytes = 40960" in html


def test_timeline_one_box_per_scheduled_instruction():
    module = hlo_text.parse_hlo_text(fixture("mlp_optimized.txt"))
    sched = hlo_text.schedule(module)
    html = viewers.render("timeline", json.dumps({"computations": sched, "scheduled": True}), {})
    svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)
    boxes = re.findall(r'<rect [^>]*data-line="(\d+)"', svg)
    assert len(boxes) == sum(len(c["instructions"]) for c in sched)
    all_reduce = next(i for c in sched for i in c["instructions"] if i["opcode"] == "all-reduce")
    colour = timeline.kind_of("all-reduce")[1]
    assert re.search(rf'fill="{colour}" data-line="{all_reduce["line"]}"', svg)
    assert timeline.kind_of("fusion")[0] == "kernel"


def test_cpu_schedule_is_readable_by_name_busiest_computation_first():
    """Each instruction of a CPU schedule can be read by name: a step table per computation
    (step, name, opcode, XLA's cost analysis), the busiest computation (most flops) first, and
    labels on the boxes that are wide enough."""
    module = hlo_text.parse_hlo_text(fixture("mlp_optimized.txt"))
    sched = hlo_text.schedule(module)
    sched = [c for c in sched if c["instructions"]]
    entry = next(c for c in sched if c["entry"])
    small = min((c for c in sched if not c["entry"]), key=lambda c: len(c["instructions"]))
    for n, ins in enumerate(small["instructions"]):  # XLA's costs on the small one make it the busiest
        ins.update(flops=1e9 + n, bytes_accessed=4096.0, transcendentals=0.0)
    html = viewers.render("timeline", json.dumps({"computations": sched, "scheduled": True}), {})
    captions = re.findall(r"<caption>([^:<]+)", html)
    assert captions[0] == small["computation"] and entry["computation"] + " (ENTRY)" in captions
    table = re.search(rf"<caption>{re.escape(small['computation'])}:.*?</table>", html, re.S).group(0)
    rows = re.findall(r'<tr data-line="(\d+)"><td class="num">(\d+)</td><td><code>([^<]+)</code></td>'
                      r'<td>([^<]+)</td>', table)
    assert [(int(line), int(step), name, op) for line, step, name, op in rows] == [
        (i["line"], n, i["name"], i["opcode"]) for n, i in enumerate(small["instructions"])]
    assert "1,000,000,000" in table and "XLA&#x27;s cost analysis" in table
    # the drawing: the busiest computation's row on top; boxes of a short schedule carry their names
    svg = re.search(r'<svg class="timeline".*?</svg>', html, re.S).group(0)
    first_row = re.findall(r'<text x="174" y="[\d.]+" text-anchor="end"[^>]*>([^<]+)</text>', svg)[0]
    assert first_row == small["computation"][:30]
    labels = re.findall(r'<text class="box-label"[^>]*>([^<]+)</text>', svg)
    assert labels and all(len(label) <= 14 for label in labels)


def test_memory_survives_bad_json():
    assert "<pre" in memory.render("nope", {})


def test_graph_is_drawn_in_the_worker_without_external_resources_and_capped():
    from compiler import graph_drawing
    dot = ('digraph G {\n stylesheet=<\n  data:text/css,\n  @import url(https://fonts.example/x.css);\n >\n'
           ' a [label="<b>", URL="https://example.com/a"]; b [label="add", href="javascript:alert(1)"]; a -> b;\n}\n')
    fmt, svg, why = graph_drawing.draw(dot)
    assert (fmt, why) == ("svg", "")
    html = viewers.render("svg", svg, {})
    assert "<svg" in html and html.count('class="node"') == 2
    assert "fonts.example" not in html and "&lt;b&gt;" in html
    assert "example.com" not in svg and "javascript" not in svg and "<a " not in svg  # links are dropped
    big = "digraph G {\n" + "".join(f" n{i} [label=\"{i}\"];\n" for i in range(graph_drawing.MAX_NODES + 1)) + "}\n"
    fmt, text, why = graph_drawing.draw(big)
    assert fmt == "dot" and text == big and "more than the 1500 drawn" in why
    assert "<svg" not in viewers.render("dot", big, {})  # DOT that was not drawn is shown as code


HOSTILE_SVG = """<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="a()">
<script>alert(1)</script><foreignObject><iframe src="https://x.example"/></foreignObject>
<a xlink:href="javascript:b()" target="_top"><text x="1" style="fill:url(https://y.example/f)">kept</text></a>
<rect fill="url(#grad)" onclick="c()"/><image href="https://z.example/i.png"/><use xlink:href="#r"/>
</svg>"""


def test_svg_stages_are_sanitized_when_written_and_when_shown():
    from compiler import formats
    for html in (formats.get("svg").encode(HOSTILE_SVG), viewers.render("svg", HOSTILE_SVG, {})):
        for bad in ("script", "alert", "foreignObject", "iframe", "javascript", "onload", "onclick", "target=",
                    "x.example", "y.example", "z.example", "<image", "<use", "<a ", "style="):
            assert bad not in html, bad
        assert ">kept</text>" in html and 'fill="url(#grad)"' in html
    with pytest.raises(formats.FormatError):
        formats.get("svg").encode('<!DOCTYPE svg [<!ENTITY a "aaaa">]><svg xmlns="http://www.w3.org/2000/svg">&a;</svg>')
    assert "&lt;html&gt;" in viewers.render("svg", "<html>not svg</html>", {})


def test_hlo_stack_frame_tables_are_folded_and_kept():
    """XLA prints its stack-frame tables (FileNames ... StackFrames: 43 lines of paths here) between
    `HloModule` and the first computation: the viewer folds them under one line that says what they
    are; every line stays in the markup, numbered as in the raw text."""
    text = fixture("attention_spmd.txt")
    lines = text.split("\n")
    first, last = code.hlo_metadata_lines(lines)
    assert lines[first] == "FileNames" and lines[first - 2].startswith("HloModule")
    assert lines[last].startswith("13 {file_location_id=13") and not lines[last + 1].strip()
    html = code.render(text, "hlo")
    fold = re.search(r'<details class="fold hlo-metadata"><summary class="fold-summary">(.*?)</summary>(.*?)</details>',
                     html)
    assert fold and fold.group(1).startswith(f"lines {first + 1}–{last + 1} ({last - first + 1} lines, folded): "
                                             "XLA's stack-frame tables (FileNames, FunctionNames, FileLocations, "
                                             "StackFrames)")
    assert fold.group(2).count('class="ln"') == last - first + 1 and html.count('class="ln"') == len(lines) - 1
    assert 'data-line="1"' in html.split("<details")[0]  # the module's header stays above the fold
    # a module without the tables, a later page of a long one, another format: nothing is folded
    assert code.hlo_metadata_lines(fixture("mlp_optimized.txt").split("\n")) is None
    assert "<details" not in code.render("\n".join(lines[60:]), "hlo", first_line=61)
    assert "<details" not in code.render(text, "text")


def test_schedule_and_memory_tables_say_what_an_empty_cell_lacks():
    """No blank cell in the schedule's step tables or the memory peak's table: an instruction XLA's
    cost analysis has no figure for, and a value at the peak that is its own buffer (not updated in
    place of another), each show a dash that says so on hover (viewers/cells.py, as resources do)."""
    module = hlo_text.parse_hlo_text(fixture("mlp_optimized.txt"))
    sched = [c for c in hlo_text.schedule(module) if c["instructions"]]
    entry = next(c for c in sched if c["entry"])
    entry["instructions"][0].update(flops=1e6, bytes_accessed=4096.0, transcendentals=0.0)  # costed, the rest not
    html = viewers.render("timeline", json.dumps({"computations": sched, "scheduled": True}), {})
    table = re.search(r'<table class="data schedule-steps"><caption>[^<]*\(ENTRY\).*?</table>', html, re.S).group(0)
    assert not re.findall(r"<td[^>]*></td>", table)
    assert table.count("XLA&#x27;s cost analysis gives no figure for this instruction") == \
        3 * (len(entry["instructions"]) - 1)
    memory_html = viewers.render("memory", json.dumps(memory_data()), {})
    peak = re.search(r'<table class="memory-peak">.*?</table>', memory_html, re.S).group(0)
    assert not re.findall(r"<t[dh][^>]*></t[dh]>", peak)
    assert 'title="its own buffer: not updated in place of another value"' in peak

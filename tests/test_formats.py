"""The stage formats (compiler/formats.py): every format a pipeline writes is declared and has a
viewer; JSON formats reject what their schema does not describe, when a pipeline writes them."""
from __future__ import annotations

import ast
import json
import os

import pytest

import viewers
from compiler import formats
from compiler.pipeline import Bundle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_format_has_a_viewer_and_every_viewer_a_format():
    assert set(viewers.VIEWERS) == set(formats.FORMATS)
    for name, fmt in formats.FORMATS.items():
        kinds = [fmt.lexer is not None and not fmt.json_any, fmt.schema is not None, fmt.json_any, fmt.svg]
        assert sum(kinds) == 1, name  # exactly one of: code, typed JSON, any JSON, drawing


def _values(expr: ast.expr) -> set[str]:
    """The strings an expression can evaluate to: a constant, either side of `a if c else b`, the
    values of a dict literal it indexes."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.IfExp):
        return _values(expr.body) | _values(expr.orelse)
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Dict):
        return set().union(*(_values(v) for v in expr.value.values))
    return set()


def _written_formats() -> dict[str, set[str]]:
    """Format names each module under compiler/ writes: the 4th argument (or fmt=) of every
    `.add(...)` call with five or more arguments, resolved through local string assignments
    (`fmt = "cpp" if ... else "python"`); graph_drawing.add_graph writes svg or dot."""
    found: dict[str, set[str]] = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "compiler")):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path == os.path.join(ROOT, "compiler", "graph_drawing.py"):
                continue  # graph_drawing writes what draw() returns: its callers count as svg or dot
            tree = ast.parse(open(path, encoding="utf-8").read())
            assigned: dict[str, set[str]] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    assigned.setdefault(node.targets[0].id, set()).update(_values(node.value))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "StageSpec" \
                        and len(node.args) >= 4:
                    arg = node.args[3]
                    if isinstance(arg, ast.Attribute) and arg.attr == "format":
                        continue  # a spec copied from another spec
                    values = assigned.get(arg.id, set()) if isinstance(arg, ast.Name) else _values(arg)
                    if not values:
                        raise AssertionError(f"{path}:{node.lineno}: a stage format this test cannot read")
                    found.setdefault(path, set()).update(values)
                    continue
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                if node.func.attr == "add_graph":
                    found.setdefault(path, set()).update({"svg", "dot"})
                    continue
                if node.func.attr != "add":
                    continue
                if len(node.args) >= 5 and isinstance(node.args[3], ast.Attribute) and node.args[3].attr == "format":
                    continue  # writing a StageSpec (compiler/pytorch/trace_stages.py): its format is read below
                arg = next((k.value for k in node.keywords if k.arg == "fmt"), None)
                if arg is None and len(node.args) >= 5:
                    arg = node.args[3]
                if arg is None:
                    continue
                values = assigned.get(arg.id, set()) if isinstance(arg, ast.Name) else _values(arg)
                if not values:
                    raise AssertionError(f"{path}:{node.lineno}: a stage format this test cannot read")
                found.setdefault(path, set()).update(values)
    return found


def test_pipelines_write_only_declared_formats():
    written = _written_formats()
    everything = set().union(*written.values())
    # the scan sees the pipelines' stages: code, drawings and every typed JSON format
    assert {"python", "cpp", "mlir", "hlo", "ptx", "sass", "svg", "mesh", "memory", "timeline", "profile"} <= everything
    for path, names in written.items():
        undeclared = names - set(formats.FORMATS)
        assert not undeclared, (os.path.relpath(path, ROOT), undeclared)


def test_bundle_rejects_a_value_that_does_not_fit_its_format(tmp_path):
    bundle = Bundle(str(tmp_path / "out"))
    good = {"table": [{"name": "addmm", "calls": 1, "self_us": 2.5, "total_us": 3, "self_device_us": 0}],
            "events": [{"name": "addmm", "start_us": 0, "dur_us": 2.5, "thread": 1}], "where": "host CPU"}
    stage = bundle.add("run.kernels", "Profile", "Timings", "profile", good)
    stored = json.loads(open(tmp_path / "out" / stage.file).read())
    assert stored["table"][0] == {"name": "addmm", "calls": 1, "self_us": 2.5, "total_us": 3.0, "self_device_us": 0.0}
    with pytest.raises(formats.FormatError, match="unknown field `extra`"):
        bundle.add("a", "A", "G", "profile", dict(good, extra=1))
    with pytest.raises(formats.FormatError, match=r"Expected `int`, got `str` - at `\$.table\[0\].calls`"):
        bundle.add("b", "B", "G", "profile", dict(good, table=[dict(good["table"][0], calls="1")]))
    with pytest.raises(formats.FormatError, match="unknown stage format 'pdf'"):
        bundle.add("c", "C", "G", "pdf", "%PDF")
    with pytest.raises(formats.FormatError, match="text format"):
        bundle.add("d", "D", "G", "python", {"not": "text"})
    assert [s.key for s in bundle.manifest.stages] == ["run.kernels"]  # nothing half-written


def test_viewers_read_the_typed_record():
    data = {"computations": [{"computation": "main", "entry": True, "instructions": [
        {"name": "dot.1", "opcode": "dot", "line": 7, "bytes": 64, "flops": 2048.0, "bytes_accessed": 96.0},
        {"name": "copy", "opcode": "copy", "line": 8, "bytes": 64}]}], "scheduled": True, "module": "m"}
    text = formats.get("timeline").encode(data)
    assert '"flops"' in text and text.count('"flops"') == 1  # an absent cost stays absent
    record = formats.get("timeline").decode(text)
    assert record.computations[0].instructions[0].flops == 2048.0
    assert record.computations[0].instructions[1].flops is None
    html = viewers.render("timeline", text)
    assert "2,048 flops, 96 bytes accessed" in html and 'data-line="8"' in html
    # a stage whose JSON does not fit the schema is shown as text, escaped
    assert "<pre" in viewers.render("timeline", '{"computations": [{"computation": "<b>"}]}')


def test_timings_are_declared_and_read_in_one_place(tmp_path):
    bundle = Bundle(str(tmp_path / "out"))
    bundle.timing("compile", {"dynamo_tracing_s": 0.25, "total_s": 2, "source": "events", "events": {"a": 1.0}})
    with pytest.raises(formats.FormatError, match="unknown timing 'compile_time'"):
        bundle.timing("compile_time", {})
    with pytest.raises(formats.FormatError, match="is a JSON object or list"):
        bundle.timing("run", 3.5)
    run = {"eager_ms": 2, "compiled_ms": 1.0, "accuracy": {"compared": 1}, "where": "cpu"}
    read = formats.Timings.read({**bundle.manifest.timings, "run": run, "job": {"wall_s": 1.5},
                                 "kernels": [{"kernel": "k"}]})
    assert read.compile.phases_s == [("dynamo tracing", 0.25), ("total", 2.0)] and read.compile.events == {"a": 1.0}
    assert read.run.medians_ms == [("eager", 2.0), ("compiled", 1.0)] and read.run.accuracy == {"compared": 1}
    assert set(read.others) == {"job"}  # lists (per-launch kernel times) are not tables


def test_bundle_manifest_file_is_the_manifest(tmp_path):
    """The manifest file, written with each stage's entry encoded once, reads back as the manifest."""
    import json as json_module

    from compiler.pipeline import Bundle, read_manifest
    bundle = Bundle(str(tmp_path / "out"))
    bundle.add("a", "A", "G", "text", "one\ntwo\n", source_map=[[1, 3], [2, 4]], meta={"note": '"stages": []'})
    bundle.progress('still "stages": [] going')
    bundle.add("b", "B", "G", "json", {"x": [1, 2]})
    bundle.timing("compile", {"stages": [], "total_ms": 1.0})
    bundle.finish()
    with open(tmp_path / "out" / "manifest.json", encoding="utf-8") as f:
        written = json_module.load(f)
    assert written == bundle.manifest.to_json()
    assert [s.key for s in read_manifest(str(tmp_path / "out")).stages] == ["a", "b"]
    assert written["stages"][0]["source_map"] == [[1, 3], [2, 4]] and written["timings"]["compile"]["stages"] == []

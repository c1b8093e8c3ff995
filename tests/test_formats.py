"""The stage formats (compiler/formats/): every format has a viewer and every viewer a format; a
pipeline can write only a declared format (Bundle.add looks each one up, the runner's bundle
reader refuses any other), and JSON formats reject what their schema does not describe."""
from __future__ import annotations

import json
import os
import re

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
        bundle.add("c", "C", "G", "pdf", "%PDF")  # an undeclared format is refused as it is written
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


def test_a_profiled_compiled_graph_is_named_in_words_not_by_its_hash():
    """The profile names a compiled graph's call (a hash, as the profiler gives it) by its `labels`:
    in the table and the timeline the words show, the profiler's own name only on hover."""
    raw = "## Call CompiledFxGraph fe6gjwoaj3c4qh6z7s3cxperi66grh65li7h32d2a4nccbhrnwtn ##"
    words = "compiled graph [0/0], backward: forward(), line 9"
    data = {"table": [{"name": raw, "calls": 1, "self_us": 9.0, "total_us": 30.0},
                      {"name": "aten::addmm", "calls": 1, "self_us": 20.0, "total_us": 20.0}],
            "events": [{"name": raw, "start_us": 0, "dur_us": 30.0},
                       {"name": "aten::addmm", "start_us": 1, "dur_us": 20.0}],
            "where": "host CPU", "labels": {raw: words}}
    html = viewers.render("profile", formats.get("profile").encode(data))
    shown = re.sub(r'title="[^"]*"|<title>.*?</title>', "", html)
    assert "fe6gjwoaj" not in shown and f">{words}</span>" in shown and "<code>aten::addmm</code>" in shown
    assert f'title="as the profiler names it: {raw}"' in html
    # the timeline's row: the words, cut to its label column, whole on hover
    row = re.search(r"<title>" + re.escape(words) + r"</title><text[^>]*>([^<]*)</text>", html)
    assert row and row.group(1).endswith("…") and words.startswith(row.group(1)[:-1]) and len(row.group(1)) > 30, row
    # a profile stored before labels existed still reads
    old = {k: v for k, v in data.items() if k != "labels"}
    assert f"<code>{raw}</code>" in viewers.render("profile", formats.get("profile").encode(old))


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


def test_compile_ids_say_frame_compile_and_attempt_on_hover():
    """Dynamo's compile ids as PyTorch names them, in a stage's text (the Compiles index's `[0/0_1]`,
    a graph break's `compile 0/0_1`): each is wrapped with a title saying frame, compile and
    attempt, and the line's text is unchanged (viewers/compile_ids.py)."""
    from viewers import code, compile_ids
    text = "- [0/0_1] forward, line 6: a graph of 1 op\n## graph break 1 (compile 1/2)\nno id here [3]\n"
    html = code.render(text, "text")
    titles = re.findall(r'<abbr class="compile-id" title="([^"]+)">([^<]+)</abbr>', html)
    assert [shown for _, shown in titles] == ["[0/0_1]", "1/2"]
    assert titles[0][0].startswith("compile id 0/0_1: frame 0, compile 0, attempt 1.")
    assert titles[1][0].startswith("compile id 1/2: frame 1, compile 2, attempt 0.") and "recompile 2" in titles[1][0]
    assert re.sub(r"<[^>]+>", "", html).count("[0/0_1] forward") == 1
    assert compile_ids.explain("Post-grad graph (backward) [0/0]").startswith("compile id 0/0: frame 0, compile 0")
    assert compile_ids.explain("Kernel resources") == ""


def test_code_the_lexer_cannot_read_is_plain_text_not_a_boxed_error():
    """Pygments marks what its lexer cannot read as an error token (class `err`, drawn in a red
    box): PTX's predicate `@%p2` and nvdisasm's `.elftype @"ET_EXEC"` are the lexer's limits, not
    errors in the compiler's text, so the code view draws them as plain text."""
    ptx = "\t@%p2 ld.global.b32 { %r1 }, [ %rd1 + 0 ];\n\tst.global.b32 [ %rd2 + 0 ], { %r1 };\n"
    sass = '\t.elftype\t@"ET_EXEC"\n        /*0000*/                   LDC R1, c[0x0][0x28] ;\n'
    for fmt, text in (("ptx", ptx), ("sass", sass)):
        html = viewers.render(fmt, text, {})
        assert 'class="err"' not in html, (fmt, html)
        assert "@" in html and ("ld.global.b32" in html or "ET_EXEC" in html), fmt

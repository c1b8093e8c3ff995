"""A PyTorch program's recompiles and call sites, read from recorded traces (no torch run):

- tests/fixtures/torch/recompile_graph_break_loop.py (recorded as /tmp/walk3/bugreport.py with plain
  TORCH_TRACE): a `@torch.compile` function with a print graph break, called at module level in a
  loop over sizes 8, 16, 32: four compiles, the two of `fn` and the two of its resume function;
- tests/fixtures/torch/main_guard_loop.py (recorded as /tmp/walk3/report.py, run by runpy with
  irscope's start-of-compile call stacks logged, as the pytorch pipeline logs them): the same in
  `main()` under the `__main__` guard, and a second decorated function with no graph break.
"""
from __future__ import annotations

import json
import os

from compiler.pipeline import Bundle
from compiler.pytorch import compile_index
from compiler.pytorch import trace as torch_trace
from compiler.pytorch.trace_stages import guards_explained, write_trace

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "torch")
BUGREPORT = ("/tmp/walk3/bugreport.py",)
MAIN_GUARD = ("/tmp/walk3/report.py",)


def _entries(name: str) -> list[torch_trace.TraceEntry]:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return torch_trace.parse(f.read())


def _source_line(name: str, text: str) -> int:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return [line.strip() for line in f].index(text) + 1


def test_the_recompile_in_the_summary_opens_the_stage_that_says_why_it_recompiled(tmp_path):
    """Before: "2 recompiles" opened `dynamo.guards_explained:0/1_1`, guards with no failed guard.
    It opens `dynamo.recompiles`, whose first lines are each recompile's failed guard."""
    from tests.conftest import glance_of_bundle
    bundle = Bundle(str(tmp_path / "bundle"))
    write_trace(bundle, _entries("recompile_graph_break_loop.trace"), BUGREPORT)
    stages = bundle.manifest.stages

    def text_of(key: str) -> str:
        stage = next(s for s in stages if s.key == key)
        with open(os.path.join(bundle.directory, stage.file), encoding="utf-8") as f:
            return f.read()

    items = glance_of_bundle(tmp_path, "pytorch", stages, text_of)
    recompiles = next(i for i in items if i["text"] == "2 recompiles")
    assert recompiles["stage"] == "dynamo.recompiles" and recompiles["warn"], items
    assert "tensor 'x' size mismatch at index 0. expected 8, actual 16" in text_of("dynamo.recompiles")
    # the guards of the recompile say, at their top, the guard of 0/0 that failed
    explained = json.loads(text_of("dynamo.guards_explained:0/1_1"))
    assert [(f["compile_id"], f["input"], f["before"], f["after"]) for f in explained["recompile"]] == [
        ("0/0", "x", "8", "16")], explained["recompile"]
    assert explained["frame"] == "fn at bugreport.py:4"
    guards = next(s for s in stages if s.key == "dynamo.guards_explained:0/1_1")
    assert guards.meta["recompile"] is True and guards.title.endswith("(recompile)"), guards


def test_a_recompile_whose_analysis_restarted_keeps_its_failed_guard():
    """The print restarted Dynamo's analysis of each compile of `fn`: its recompile reasons are
    logged under the first attempt (0/1), its guards under the last (0/1_1). Before, the guards
    of 0/1_1 found no reason (`"recompile": []`) and no function (`"frame": ""`)."""
    entries = _entries("recompile_graph_break_loop.trace")
    explained = guards_explained(entries, "0/1_1", BUGREPORT)
    assert explained is not None and len(explained["recompile"]) == 1, explained
    assert "size mismatch at index 0. expected 8, actual 16" in explained["recompile"][0]["reason"]
    assert explained["frame"] == "fn at bugreport.py:4"
    assert guards_explained(entries, "0/0_1", BUGREPORT)["recompile"] == []  # the first compile: none


def test_compiles_of_a_decorated_function_called_at_module_level_are_under_the_calling_line():
    """Before: `[0/0_1] fn` and `[0/1_1] fn` were "called from no line of yours": dynamo_start's
    stack of a `@torch.compile`d function misses the frame that called it. The graph break's user
    traceback (0/0) and the stacks torch logged while it traced (0/1) name line 15."""
    entries = _entries("recompile_graph_break_loop.trace")
    call = _source_line("recompile_graph_break_loop.py", "out = fn(x, y)")
    records = compile_index.compiles(entries, BUGREPORT)
    assert [(r["compile_id"], r["call_line"], r["call_text"]) for r in records] == [
        ("0/0_1", call, "out = fn(x, y)"), ("1/0", call, "out = fn(x, y)"),
        ("0/1_1", call, "out = fn(x, y)"), ("1/1", call, "out = fn(x, y)")]
    text, _ = compile_index.text_and_map(compile_index.by_call_site(records))
    assert "called from no line of yours" not in text and text.startswith(
        f"# 4 compiles of 2 functions, called from 1 line of yours\n\n## line {call}: out = fn(x, y)\n"), text


def test_compiles_of_a_function_called_from_main_under_the_main_guard_are_under_the_line_in_main():
    """Before: the decorated functions' compiles were grouped under the `main()` line of the
    `__main__` guard (the only frame of the user's left on dynamo_start's stack), their resume
    function's under the loop's line in main(). Each is now under the line in main() that called it:
    `step`'s (a graph break) and `scale`'s (none: only irscope's call stack says it)."""
    entries = _entries("main_guard_loop.trace")
    step = _source_line("main_guard_loop.py", "out = step(torch.randn(n, 128), torch.randn(n, 128))")
    scale = _source_line("main_guard_loop.py", "print(scale(torch.randn(4)))")
    guard = _source_line("main_guard_loop.py", "main()")
    records = compile_index.compiles(entries, MAIN_GUARD)
    assert [(r["compile_id"], r["function"], r["call_line"]) for r in records] == [
        ("0/0_1", "step", step), ("1/0", "torch_dynamo_resume_in_step_at_7", step),
        ("0/1_1", "step", step), ("1/1", "torch_dynamo_resume_in_step_at_7", step), ("2/0", "scale", scale)]
    groups = compile_index.by_call_site(records)
    assert [(g["line"], len(g["compiles"])) for g in groups] == [(step, 4), (scale, 1)]
    # without irscope's call stacks (a trace made elsewhere) `scale`, which left no other stack,
    # falls back to dynamo_start's, which misses main()'s frame
    plain = [e for e in entries if e.name != compile_index.CALL_STACK_ARTIFACT]
    assert len(plain) < len(entries)
    by_id = {r["compile_id"]: r["call_line"] for r in compile_index.compiles(plain, MAIN_GUARD)}
    assert by_id == {"0/0_1": step, "1/0": step, "0/1_1": step, "1/1": step, "2/0": guard}, by_id


def test_irscope_logs_each_compiles_call_stack_as_an_artifact_of_the_compile():
    """The pytorch pipeline's start-of-compile callback writes the real stack, outermost first, as
    the artifact compile_index reads; a lazily compiled backward (another trigger) writes none."""
    import types

    from compiler.pytorch import pipeline

    logged = []
    fake_torch = types.SimpleNamespace(_logging=types.SimpleNamespace(
        trace_structured=lambda name, metadata_fn, payload_fn: logged.append((name, metadata_fn(), payload_fn()))))
    import sys
    real = sys.modules.get("torch")
    sys.modules["torch"] = fake_torch
    try:
        pipeline._call_stack(types.SimpleNamespace(callback_trigger=types.SimpleNamespace(name="DYNAMO")))
        pipeline._call_stack(types.SimpleNamespace(callback_trigger=types.SimpleNamespace(name="LAZY_BACKWARD")))
    finally:
        if real is not None:
            sys.modules["torch"] = real
        else:
            del sys.modules["torch"]
    assert len(logged) == 1, logged
    name, metadata, payload = logged[0]
    assert name == "artifact" and metadata == {"name": compile_index.CALL_STACK_ARTIFACT, "encoding": "json"}
    frames = json.loads(payload)
    assert frames[-1]["name"] == "test_irscope_logs_each_compiles_call_stack_as_an_artifact_of_the_compile"
    assert frames[-1]["filename"] == __file__ and "pipeline._call_stack(" in frames[-1]["loc"]


def test_an_abandoned_attempt_is_no_graph_and_a_recompiles_kernels_count(tmp_path):
    """Dynamo's first attempt of a compile that it restarted (0/0, then 0/0_1) wrote a graph of its
    own: the summary counts one graph, the restart's; a recompile's kernels named as the first
    compile's (Inductor restarts its names per graph) are kernels of their own."""
    from compiler.model import Stage
    from tests.conftest import glance_of_bundle
    keys = ["dynamo.fx_graph:0/0", "dynamo.fx_graph:0/0_1", "kernel:cpp_fused_sin_0", "kernel:cpp_fused_sin_0:0/1",
            "dynamo.fx_graph:0/1"]
    stages = [Stage(key, key, "Dynamo", "python" if key.startswith("dynamo") else "cpp", 10) for key in keys]
    items = {i["text"]: i["stage"] for i in glance_of_bundle(tmp_path, "pytorch", stages, lambda key: "x = 1\n" * 2)}
    assert items["2 graphs"] == "dynamo.fx_graph:0/0_1" and "3 graphs" not in items, items
    assert "1 recompile" in items and "2 kernels" in items, items

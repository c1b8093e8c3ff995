"""Stages from the structured trace as PyTorch writes it (compiler/pytorch/trace_stages.py and
trace_stream.py), on the trace recorded from a real torch.compile run of
tests/fixtures/torch/graph_break_print.py (frame 0/0_1: a Linear up to a print; frame 1/0: the
softmax after it), fed one entry at a time as the worker's thread would read them."""
from __future__ import annotations

import json
import os
import threading

import pytest

from compiler.pipeline import Bundle
from compiler.pytorch import trace as torch_trace
from compiler.pytorch.trace_stages import USERS_FILE_NAME, TraceStages, user_file_names
from compiler.pytorch.trace_stream import StageStream, TraceTail, phase_of

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "torch", "graph_break_print.trace")
USER = ("/tmp/t1/m.py",)
SOFTMAX_LINE = 9


@pytest.fixture(scope="module")
def entries():
    with open(FIXTURE, encoding="utf-8") as f:
        return torch_trace.parse(f.read())


def _index(entries, name: str, cid: str) -> int:
    return next(i for i, e in enumerate(entries) if e.name == name and e.compile_id == cid)


@pytest.fixture(scope="module")
def fed(entries, tmp_path_factory):
    """The bundle's stage keys after each entry, and the bundle at the end (after finish)."""
    bundle = Bundle(str(tmp_path_factory.mktemp("bundle")))
    stages = TraceStages(bundle, USER)
    after = []
    for entry in entries:
        stages.add(entry)
        after.append([s.key for s in bundle.manifest.stages])
    stages.finish({})
    return after, bundle


def test_a_graph_is_a_stage_the_moment_its_entry_is_read(entries, fed):
    after, _ = fed
    graph = _index(entries, "dynamo_output_graph", "0/0_1")
    assert after[graph - 1] == []
    assert after[graph] == ["dynamo.fx_graph:0/0_1", "dynamo.fx_graph_drawing:0/0_1"]
    joint = _index(entries, "aot_joint_graph", "0/0_1")
    assert after[joint][-1] == "inductor.pre_grad_graph:0/0_1"  # held until AOTAutograd's first graph
    assert after[joint][-2] == "aot.joint_graph:0/0_1"
    assert "inductor.pre_grad_graph:0/0_1" not in after[joint - 1]
    # the second frame's graph arrives while nothing of it was compiled yet
    second = _index(entries, "dynamo_output_graph", "1/0")
    assert after[second][-2:] == ["dynamo.fx_graph:1/0", "dynamo.fx_graph_drawing:1/0"]
    assert not any(k.endswith(":1/0") for k in after[second - 1])


def test_a_stage_that_names_the_users_file_says_it_is_the_source_in_the_editor(fed, tmp_path):
    """Dynamo's and AOTAutograd's graphs name the job's copy of the user's file (`# File:
    /tmp/t1/m.py:5 in forward`): the stage's meta `file_names` says that file is the source in the
    editor (shown beside the stage); the text keeps the name. A stage that does not name it says
    nothing, nor does an imported trace, whose file is not the one in the editor."""
    _, bundle = fed
    stages = {s.key: s for s in bundle.manifest.stages}
    for key in ("dynamo.fx_graph:0/0_1", "aot.forward_graph:0/0_1"):
        with open(os.path.join(bundle.directory, stages[key].file), encoding="utf-8") as f:
            assert "/tmp/t1/m.py" in f.read()
        (named,) = stages[key].meta["file_names"]
        assert (named["path"], named["file"], named["name"]) == ("/tmp/t1/m.py", "m.py", USERS_FILE_NAME), key
        assert "named m.py" in named["about"]
    assert "the editor" in USERS_FILE_NAME
    assert "file_names" not in stages["inductor.output_code:0/0_1"].meta
    from compiler.pytorch.trace_stages import write_trace
    imported = Bundle(str(tmp_path / "imported"))
    with open(FIXTURE, encoding="utf-8") as f:
        write_trace(imported, torch_trace.parse(f.read()), USER, link_lines=False)
    assert not any("file_names" in s.meta for s in imported.manifest.stages)


def test_output_code_waits_for_the_provenance_that_maps_its_kernels(entries, fed):
    after, bundle = fed
    code = _index(entries, "inductor_output_code", "0/0_1")
    provenance = _index(entries, "inductor_provenance_tracking_kernel_stack_traces", "0/0_1")
    assert code < provenance
    assert not any(k.startswith("inductor.output_code") for k in after[provenance - 1])
    new = after[provenance][len(after[provenance - 1]):]
    assert new[0] == "inductor.output_code:0/0_1" and all(k.startswith("kernel:") for k in new[1:])
    # the fused softmax kernel of frame 1/0 maps to the softmax line, from the provenance entries
    key = "kernel:cpp_fused__softmax_add_relu_threshold_backward_0"
    stage = next(s for s in bundle.manifest.stages if s.key == key)
    assert {b for a, b in stage.source_map} == {SOFTMAX_LINE}


def test_groups_appear_in_compiler_order_and_finish_adds_the_whole_trace_stages(fed):
    after, bundle = fed
    keys = [s.key for s in bundle.manifest.stages]
    groups = list(dict.fromkeys(s.group for s in bundle.manifest.stages))
    assert groups == ["Dynamo", "AOTAutograd", "Inductor", "Kernels"]
    assert "dynamo.graph_breaks" not in after[-1] and keys[-1] == "dynamo.graph_breaks"
    assert keys.index("dynamo.guards:0/0_1") < keys.index("dynamo.fx_graph:1/0")
    for cid in ("0/0_1", "1/0"):
        order = [k for k in keys if k.endswith(":" + cid)]
        assert order == [f"dynamo.fx_graph:{cid}", f"dynamo.fx_graph_drawing:{cid}", f"aot.joint_graph:{cid}",
                         f"inductor.pre_grad_graph:{cid}", f"aot.forward_graph:{cid}", f"aot.backward_graph:{cid}",
                         f"inductor.post_grad_graph:{cid}", f"inductor.output_code:{cid}", f"dynamo.guards:{cid}",
                         f"dynamo.guards_explained:{cid}"]


def test_progress_names_the_phase_pytorch_starts(entries):
    phases = [p for p in (phase_of(e) for e in entries) if p]
    assert phases[:2] == ["Dynamo: compiling frame 0/0", "Dynamo: tracing the bytecode of frame 0/0"]
    assert "Inductor: loading the output code, compiling its kernels [0/0_1]" in phases
    assert phases.index("AOTAutograd: tracing the joint graph [1/0]") < \
        phases.index("Inductor: lowering to Inductor IR [1/0]") < \
        phases.index("Inductor: loading the output code, compiling its kernels [1/0]")
    assert phase_of(next(e for e in entries if e.name == "dynamo_output_graph")) is None


class _Handler:
    """Stands in for PyTorch's trace handler: a file and the lock it writes each entry under.
    The lock reports when another thread starts waiting for it."""

    def __init__(self, path: str):
        self._stream_path = path
        self._lock = threading.RLock()
        self.waiting = threading.Event()

    @property
    def lock(self):
        handler = self

        class _Watched:
            def __enter__(self):
                if threading.current_thread() is not threading.main_thread():
                    handler.waiting.set()
                handler._lock.acquire()

            def __exit__(self, *exc):
                handler._lock.release()
        return _Watched()


def test_the_tail_reads_only_whole_entries(tmp_path, entries):
    """An entry written in two parts (as a long payload is) is read whole: the tail waits for the
    handler's lock, which PyTorch holds from the entry's first byte to its flush."""
    text = open(FIXTURE, encoding="utf-8").read()
    start = text.index("{\"dynamo_output_graph\"")
    start = text.rindex("\n", 0, start) + 1
    end = text.index("\n", start)
    while text[end + 1:end + 2] == "\t":
        end = text.index("\n", end + 1)
    record = text[start:end + 1]
    path = tmp_path / "trace.log"
    path.write_text("")
    handler = _Handler(str(path))
    internal = type("I", (), {"LOG_TRACE_HANDLER": handler})
    torch_like = type("T", (), {"_logging": type("L", (), {"_internal": internal})})
    tail = TraceTail(str(tmp_path), torch_like)
    got = []
    with handler.lock:
        with open(path, "a", encoding="utf-8") as f:
            f.write(record[: len(record) // 2])
            f.flush()
            reader = threading.Thread(target=lambda: got.extend(tail.read()))
            reader.start()
            assert handler.waiting.wait(timeout=30), "the tail read without taking the handler's lock"
            f.write(record[len(record) // 2:])
            f.flush()
    reader.join(timeout=30)
    assert [e.name for e in got] == ["dynamo_output_graph"]
    expected = next(e for e in entries if e.name == "dynamo_output_graph")
    assert got[0].payload == expected.payload and got[0].compile_id == "0/0_1"


def test_the_stream_feeds_stages_and_progress_then_reads_the_rest_at_the_end(tmp_path, entries):
    text = open(FIXTURE, encoding="utf-8").read()
    path = tmp_path / "trace.log"
    path.write_text(text)
    handler = _Handler(str(path))
    internal = type("I", (), {"LOG_TRACE_HANDLER": handler})
    torch_like = type("T", (), {"_logging": type("L", (), {"_internal": internal})})
    bundle = Bundle(str(tmp_path / "out"))
    progress: list[str] = []
    stream = StageStream(TraceStages(bundle, USER), TraceTail(str(tmp_path), torch_like), progress.append)
    stream.start()
    stream.stop()
    read = stream.finish({("0/0", "bytecode"): "ORIGINAL BYTECODE forward /tmp/t1/m.py line 5\n"})
    assert len(read) == len(entries)
    keys = [s.key for s in bundle.manifest.stages]
    assert "inductor.output_code:1/0" in keys and keys[-1] == "dynamo.bytecode:0/0_1"
    # only the original bytecode was logged: its title and explanation say so
    bytecode = bundle.manifest.stages[-1]
    assert bytecode.title == "Bytecode, original only [0/0_1]" and bytecode.meta == {
        "explained_as": "original_only", "file_names": user_file_names("ORIGINAL BYTECODE /tmp/t1/m.py", USER)}
    assert progress and progress[-1].startswith(("Dynamo", "AOTAutograd", "Inductor"))
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["stages"][0]["key"] == keys[0]


TRAINING = os.path.join(os.path.dirname(__file__), "fixtures", "torch", "training_step.trace")


def test_a_training_steps_forward_and_backward_stages_say_which_is_which(tmp_path):
    """Inductor compiles a training step's forward and backward graphs under one compile id: their
    post-grad graphs and output codes have distinct keys and titles that say forward or backward.
    The trace's graph entries as PyTorch wrote them for tests/fixtures/torch/training_step.py
    (recorded at /tmp/t1/train.py; the entries no stage here reads were left out)."""
    with open(TRAINING, encoding="utf-8") as f:
        entries = torch_trace.parse(f.read())
    bundle = Bundle(str(tmp_path / "out"))
    stages = TraceStages(bundle, ("/tmp/t1/train.py",))
    for entry in entries:
        stages.add(entry)
    stages.finish({})
    titles = {s.key: s.title for s in bundle.manifest.stages}
    assert titles["inductor.post_grad_graph:0/0"] == "Post-grad graph (forward) [0/0]"
    assert titles["inductor.post_grad_graph:0/0.backward"] == "Post-grad graph (backward) [0/0]"
    assert titles["inductor.output_code:0/0"] == "Output code (forward) [0/0]"
    assert titles["inductor.output_code:0/0.backward"] == "Output code (backward) [0/0]"
    assert "tangents_1" in (tmp_path / "out" / next(s.file for s in bundle.manifest.stages
                                                     if s.key == "inductor.post_grad_graph:0/0.backward")).read_text()
    assert len(set(titles.values())) == len(titles), titles  # no two stages share a label
    # the graph-break trace: AOTAutograd split each graph for autograd, but no backward ran, so each
    # compile id has its forward's post-grad graph only, labelled so; and none of them without a side
    forward_only = Bundle(str(tmp_path / "forward-only"))
    with open(FIXTURE, encoding="utf-8") as f:
        plain = TraceStages(forward_only, USER)
        for entry in torch_trace.parse(f.read()):
            plain.add(entry)
    assert {s.key: s.title for s in forward_only.manifest.stages if s.key.startswith("inductor.post_grad_graph:")} == \
        {"inductor.post_grad_graph:0/0_1": "Post-grad graph (forward) [0/0_1]",
         "inductor.post_grad_graph:1/0": "Post-grad graph (forward) [1/0]"}

"""End-to-end tests of the `cute` language (NVIDIA's CuTe DSL) on virtual targets (no GPU needed).

The language's own example and variants of it are compiled for sm_80, sm_90 and sm_100 in one
child process (this file run as a script), as the worker would run them; an independent run of
CuTe DSL alone, compiling the same function for the same fake tensors with its own compile-only
API, must give the same PTX.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from testbed.bundle_jobs import Job
    from tests.conftest import Background

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow
SOURCE_FILE = "kernels.py"


def _example() -> str:
    from compiler.cute.pipeline import EXAMPLE
    return EXAMPLE


def _direct_call() -> str:
    """The example calling the @cute.jit function itself instead of cute.compile(...) first."""
    return _example().replace("add_compiled = cute.compile(add, a_, b_, c_)\nadd_compiled(a_, b_, c_)\n",
                              "add(a_, b_, c_)\n")


def _type_error() -> str:
    """A kernel that stores a Python string into a tensor: CuTe refuses it while tracing the kernel."""
    return _example().replace("gC[mi, ni] = gA[mi, ni] + gB[mi, ni]", 'gC[mi, ni] = "not a number"')


def _independent() -> str:
    """CuTe DSL alone: the example's functions compiled for CuTe's own fake tensors (the same dtype,
    shape, strides, alignment and memory space irscope gives the virtual CUDA tensors), nothing called."""
    source = _example()
    head = source[:source.index("M, N = 2048, 2048")]
    return head + '''
from cutlass.cute.runtime import make_fake_tensor
fake = [make_fake_tensor(cutlass.Float16, (2048, 2048), (2048, 1), memspace=cute.AddressSpace.gmem, assumed_align=16)
        for _ in range(3)]
cute.compile(add, *fake)
'''


def _plan(base: str) -> list[tuple[str, str, str]]:
    return [("cuda:sm_90", _example(), os.path.join(base, "sm_90")),
            ("cuda:sm_80", _example(), os.path.join(base, "sm_80")),
            ("cuda:sm_100", _example(), os.path.join(base, "sm_100")),
            ("cuda:sm_90", _direct_call(), os.path.join(base, "direct")),
            ("cuda:sm_90", _type_error(), os.path.join(base, "type_error"))]


def _run_job(source: str, target: str, out: str) -> None:
    """Child-process side: run one job as the worker would and write bundle + error.json."""
    sys.path.insert(0, ROOT)
    from compiler import registry
    from testbed.bundle_jobs import run_job
    run_job(registry.guess(SOURCE_FILE, source, ("triton", "gluon", "helion", "cute")), source, {"target": target}, out)


def start_in_background(base: str) -> Background:
    """The module's jobs, one child process each (CuTe's settings are read once per process), run
    one after another by a parent child (tests/conftest.py starts it when collection ends)."""
    from tests.conftest import start_child
    os.makedirs(os.path.join(base, "sources"))
    args = []
    for i, (target, source, out) in enumerate(_plan(base)):
        path = os.path.join(base, "sources", f"{i}.py")
        with open(path, "w") as f:
            f.write(source)
        args += [target, path, out]
    with open(os.path.join(base, "sources", "independent.py"), "w") as f:
        f.write(_independent())
    return start_child([sys.executable, __file__, *args], base)



@pytest.fixture(scope="module")
def jobs(request, tmp_path_factory) -> dict[str, Job]:
    from testbed.bundle_jobs import Job
    from tests.conftest import take_background
    base = take_background(request, start_in_background, tmp_path_factory)
    found = {os.path.basename(out): Job(out) for _, _, out in _plan(base)}
    found["base"] = base  # type: ignore[assignment]
    return found


def _line(source: str, needle: str) -> int:
    return next(i for i, text in enumerate(source.splitlines(), start=1) if needle in text)


def test_example_compiles_to_every_stage_on_a_virtual_h100(jobs):
    job = jobs["sm_90"]
    assert job.error is None
    for stage in ("ir", "ir_clean", "ptx", "sass", "metadata"):
        assert f"cute.{stage}:add" in job.stages, sorted(job.stages)
    ir = job.text("cute.ir:add")
    # the traced module: the kernel on global-memory f16 tensors of the example's layout, launched by the host
    assert '!cute.memref<f16, gmem, align<16>, "(2048,2048):(2048,1)">' in ir
    assert "cuda.kernel @kernel_cutlass_add_kernel" in ir and "cuda.launch_ex" in ir
    assert "cute.memref.load" in ir and "arith.addf" in ir
    ptx = job.text("cute.ptx:add")
    assert ".target sm_90a" in ptx and ".reqntid 256, 1, 1" in ptx
    assert "ld.global.b16" in ptx and "add.f16" in ptx and "st.global.b16" in ptx
    sass = job.text("cute.sass:add")
    assert re.search(r"\bHADD2?\b", sass) and "LDG" in sass and "STG" in sass and "EXIT" in sass
    timings = job.manifest["timings"]["target"]
    assert timings["virtual"] and timings["cute_arch"] == "sm_90a"
    calls = json.loads(job.text("cute.launches"))
    source = _example()
    assert calls == [{"function": calls[0]["function"], "line": _line(source, "add_compiled(a_, b_, c_)"),
                      "how": "compiled function called", "launched": False}]


def test_stages_link_to_the_users_lines(jobs):
    job, source = jobs["sm_90"], _example()
    body = set(range(_line(source, "def add_kernel"), _line(source, "gC[mi, ni] =") + 1))
    store = _line(source, "gC[mi, ni] =")
    for stage in ("cute.ir:add", "cute.ptx:add", "cute.sass:add"):
        lines = job.mapped_lines(stage)
        assert store in lines, (stage, sorted(lines))
        assert lines <= body | {_line(source, "@cute.kernel"), _line(source, "@cute.jit")} | set(
            range(_line(source, "def add(mA"), _line(source, "M, N = 2048") + 1)) | {
            _line(source, "add_compiled = cute.compile")}, (stage, sorted(lines))
    # the PTX's global store is on the line of the store
    ptx = job.text("cute.ptx:add").splitlines()
    stores = [n for n, text in enumerate(ptx, start=1) if "st.global.b16" in text]
    assert {src for n, src in job.stages["cute.ptx:add"]["source_map"] if n in stores} == {store}
    # the host ops on the arguments name the user's cute.compile line, not irscope's hooks
    ir = job.text("cute.ir:add")
    assert "compiler/cute" not in ir and '"add_compiled = cute.compile(add, a_, b_, c_)"' in ir


def test_resource_table_is_the_cubins(jobs):
    job = jobs["sm_90"]
    table = json.loads(job.text("kernels.resources"))
    [row] = table["kernels"]
    meta = json.loads(job.text("cute.metadata:add"))
    [kernel] = meta["kernels"]
    assert row["kernel"] == "add/add_kernel" and row["stage"] == "cute.metadata:add"
    assert row["registers"] == kernel["cubin_resource_usage"]["REG"] == kernel["ptxas"]["registers"] > 0
    assert row["num_warps"] == 8 and kernel["threads_per_block"] == 256
    assert row["spill_stores_bytes"] == 0 and not row["spills"]
    occupancy = row["occupancy"]
    assert 0 < occupancy["percent"] <= 100 and occupancy["limited_by"]
    # the row's lines are the user's lines the IR's source map links from the kernel's op: its body,
    # never the host code's alone (the sizes, the cute.compile call)
    from compiler.cute.stages import kernel_lines
    source = _example()
    ir_map = job.stages["cute.ir:add"]["source_map"]
    assert row["lines"] == kernel_lines(job.text("cute.ir:add"), ir_map, kernel["kernel"])
    assert _line(source, "gC[mi, ni] =") in row["lines"] and _line(source, "def add_kernel") + 1 in row["lines"]
    assert set(row["lines"]) <= job.mapped_lines("cute.ir:add")
    assert not {_line(source, "M, N = 2048"), _line(source, "add_compiled = cute.compile")} & set(row["lines"])
    # no stages and no config in CuTe: their dashes say why
    assert row["num_stages"] is None and row["config"] == {}
    assert "CuTe" in row["why_empty"]["stages"] and "CuTe" in row["why_empty"]["config"]


def test_stages_say_their_file_is_the_users_source(jobs):
    """The IR's loc()s, the PTX's .file and the SASS name the job's kernels.py: each stage's meta
    `file_names` says it is the program in the editor, as Triton's kernel stages do."""
    from compiler.kernels.program import USERS_FILE_NAME
    job = jobs["sm_90"]
    for stage in ("cute.ir:add", "cute.ptx:add", "cute.sass:add"):
        [named] = job.stages[stage]["meta"]["file_names"]
        assert named["file"] == SOURCE_FILE and named["name"] == USERS_FILE_NAME, (stage, named)
        assert named["path"].endswith("/" + SOURCE_FILE) and SOURCE_FILE in named["about"]


@pytest.mark.parametrize("name, ptx_target", [("sm_80", ".target sm_80"), ("sm_100", ".target sm_100a")])
def test_other_targets(jobs, name, ptx_target):
    job = jobs[name]
    assert job.error is None
    assert ptx_target in job.text("cute.ptx:add")
    assert job.manifest["timings"]["target"]["name"] == f"cuda:{name}"


def test_a_direct_call_compiles_and_is_recorded(jobs):
    job = jobs["direct"]
    assert job.error is None
    calls = json.loads(job.text("cute.launches"))
    assert [c["how"] for c in calls] == ["@cute.jit function called directly"]
    assert calls[0]["line"] == _line(_direct_call(), "add(a_, b_, c_)") and not calls[0]["launched"]
    assert _same_kernel(job.text("cute.ptx:add"), jobs["sm_90"].text("cute.ptx:add"))


def _same_kernel(a: str, b: str) -> bool:
    """Equal but for the path of the job's source file in `.file`."""
    def strip(text: str) -> str:
        return re.sub(r'^\s*\.file\s+\d+\s+"[^"]*"', "", text, flags=re.M)
    return strip(a) == strip(b)


def test_an_independent_cute_run_compiles_the_same_ptx(jobs):
    base = jobs["base"]
    out = os.path.join(base, "independent")
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_KEEP": "ptx", "CUTE_DSL_DUMP_DIR": out,
           "CUTE_DSL_LINEINFO": "1", "CUTE_DSL_CACHE_DIR": os.path.join(base, "independent-cache")}
    os.makedirs(out)
    done = subprocess.run([sys.executable, os.path.join(base, "sources", "independent.py")], env=env, cwd=out,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [ptx_file] = [f for f in os.listdir(out) if f.endswith(".ptx")]
    with open(os.path.join(out, ptx_file)) as f:
        independent = f.read()
    assert ".entry kernel_cutlass_add_kernel" in independent
    assert _same_kernel(independent, jobs["sm_90"].text("cute.ptx:add"))


def test_a_cute_error_names_the_users_line(jobs):
    job = jobs["type_error"]
    assert job.error is not None
    line = _line(_type_error(), 'gC[mi, ni] = "not a number"')
    assert job.error["line"] == line, job.error
    assert job.error["message"].startswith(f"line {line}: ") and "\x1b[" not in job.error["message"]



def test_an_assertion_that_a_run_would_decide_says_so_on_a_virtual_target(tmp_path):
    """CUTLASS's cooperative-launch tutorial asserts that a launch too large failed: on a virtual
    target no launch runs, so the assertion fails. Still the user's error, at their line, and the
    message says why it could not hold here; on a GPU, the plain error."""
    import types

    from compiler.cute.pipeline import CutePipeline
    from compiler.model import JobSettings
    source = "expectedly_failed = False\nassert expectedly_failed\n"
    path = str(tmp_path / SOURCE_FILE)
    with open(path, "w") as f:
        f.write(source)
    with pytest.raises(AssertionError) as raised:
        exec(compile(source, path, "exec"), {})
    ctx = types.SimpleNamespace(settings=JobSettings())
    virtual = CutePipeline()._error(raised.value, path, False, ctx).error
    assert virtual.kind.value == "UserCodeError" and virtual.line == 2, virtual
    assert virtual.message.startswith("line 2: AssertionError") and "cannot hold" in virtual.message, virtual
    on_a_gpu = CutePipeline()._error(raised.value, path, True, ctx).error
    assert on_a_gpu.message == "line 2: AssertionError", on_a_gpu


if __name__ == "__main__":
    # child process: triples of (target, source file, output directory), each job in a process of its own
    argv = sys.argv[1:]
    if len(argv) > 3:
        for i in range(0, len(argv), 3):
            subprocess.run([sys.executable, __file__, *argv[i:i + 3]], check=True)
    else:
        target, source_path, out = argv
        with open(source_path) as f:
            _run_job(f.read(), target, out)

"""Parsers of Triton's output (compiler/kernels/mlir_passes.py, compiler/kernels/gpu_lines.py) on recorded fixtures."""
from __future__ import annotations

import os

import pytest

from compiler import mlir_text
from compiler.kernels import gpu_lines, mlir_passes
from compiler.kernels.nvidia_tools import parse_ptxas_log
from compiler.kernels.stages import parse_amdgcn_usage
from compiler.model import JobSettings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "triton")
SOURCE = "/tmp/tx/job/kernels.py"  # the path the fixtures' locations name (see README.md)
LOAD_X, LOAD_Y, STORE = 11, 12, 13
KERNEL_LINES = set(range(7, 14))


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


def test_parse_dumps_reads_every_header():
    dumps = mlir_passes.parse_dumps(fixture("add_kernel.sm_90.ttir.passes.mlir"))
    assert [d.name for d in dumps][:3] == ["InlinerPass", "CanonicalizerPass", "CanonicalizerPass"]
    assert dumps[-1].name == "TritonLoopUnroll" and dumps[-1].argument == "triton-loop-unroll"
    assert all(d.when == "Before" for d in dumps)
    assert dumps[1].op == "tt.func" and dumps[1].symbol == "@add_kernel"
    assert dumps[0].argument.startswith("inline{")
    assert all(d.ir.lstrip().startswith("#loc") and "tt.func public @add_kernel" in d.ir for d in dumps)


def test_pass_records_diff_consecutive_dumps_and_end_at_the_stage_output():
    stages = [("ttir", fixture("add_kernel.sm_90.ttir.passes.mlir"), fixture("add_kernel.sm_90.ttir")),
              ("ttgir", fixture("add_kernel.sm_90.ttgir.passes.mlir"), fixture("add_kernel.sm_90.ttgir"))]
    records = mlir_passes.pass_records(stages)
    assert [r.index for r in records] == list(range(1, len(records) + 1))
    ttir = [r for r in records if r.stage == "ttir"]
    ttgir = [r for r in records if r.stage == "ttgir"]
    assert len(ttir) == 8 and len(ttgir) > 30
    # the canonicalizer folds the overflow checks Triton's frontend emits around pid * BLOCK
    canon = ttir[1]
    assert canon.name == "CanonicalizerPass" and canon.changed and canon.removed > canon.added
    assert any("arith.cmpi sle" in line for line in canon.diff if line.startswith("-"))
    assert not ttir[0].changed  # nothing to inline in a kernel with no calls
    convert = ttgir[0]
    assert convert.name == "ConvertTritonToTritonGPU" and convert.changed
    assert any(line.startswith("+#blocked = #ttg.blocked<{") for line in convert.diff)  # the layout it adds
    # diffs are location-free: renumbered #loc aliases are not changes
    assert not any("loc(" in line for r in records for line in r.diff)
    # the last ttgir pass is compared with the stage output Triton kept: the canonicalizer at the
    # end changed nothing, and an op added to that output shows up as its change
    assert ttgir[-1].name == "CanonicalizerPass" and not ttgir[-1].changed and ttgir[-1].diff == []
    edited = fixture("add_kernel.sm_90.ttgir").replace("    tt.return", "    gpu.barrier\n    tt.return", 1)
    last = mlir_passes.pass_records([("ttgir", fixture("add_kernel.sm_90.ttgir.passes.mlir"), edited)])[-1]
    assert last.changed and last.added == 1 and last.removed == 0 and "+    gpu.barrier" in last.diff
    log = mlir_passes.render_pass_log(records)
    assert log.count("// pass ") == len(records)
    assert f"// pass 9/{len(records)} [ttgir] ConvertTritonToTritonGPU on builtin.module: changed" in log


def test_strip_locations():
    ir = '#loc1 = loc("/a.py":3:1)\n  %0 = tt.load %p : tensor<4x!tt.ptr<f32>> loc(#loc1)\n'
    assert mlir_text.strip_locations(ir) == "  %0 = tt.load %p : tensor<4x!tt.ptr<f32>>\n"
    nested = '  %x = arith.addf %a, %b : f32 loc(callsite("f"("/a.py":1:2) at #loc3))\n'
    assert mlir_text.strip_locations(nested) == "  %x = arith.addf %a, %b : f32\n"


# The load of line 11 in each stage: TTIR's tt.load; TTGIR's tt.load on NVIDIA, a buffer load on AMD.
LOAD_OPS = {("sm_90", "ttir"): "tt.load", ("sm_90", "ttgir"): "tt.load",
            ("gfx942", "ttir"): "tt.load", ("gfx942", "ttgir"): "amdg.buffer_load"}


@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
def test_mlir_source_map(arch):
    for stage in ("ttir", "ttgir"):
        text = fixture(f"add_kernel.{arch}.{stage}")
        pairs = mlir_text.source_map(text, SOURCE)
        lines = text.splitlines()
        assert {s for _, s in pairs} <= KERNEL_LINES
        loads = [lines[a - 1] for a, s in pairs if s == LOAD_X]
        assert any(f"= {LOAD_OPS[arch, stage]} " in line for line in loads), loads
        stores = [lines[a - 1] for a, s in pairs if s == STORE]
        assert any("store" in line for line in stores)
        # alias definitions are not mapped, only operations
        assert not any(lines[a - 1].startswith("#loc") for a, _ in pairs)
    assert mlir_text.source_map(fixture("add_kernel.sm_90.ttir"), "/elsewhere.py") == []


def test_mlir_callsite_prefers_the_users_frame():
    text = ('#loc1 = loc("/lib/core.py":50:3)\n#loc2 = loc("/u.py":7:9)\n'
            '  %0 = arith.addf %a, %b : f32 loc(callsite(#loc1 at #loc2))\n'
            '  %1 = arith.mulf %a, %b : f32 loc(callsite("/u.py":3:1 at #loc2))\n')
    assert mlir_text.source_map(text, "/u.py") == [[3, 7], [4, 3]]


@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
def test_llvm_source_map(arch):
    text = fixture(f"add_kernel.{arch}.llir")
    pairs = gpu_lines.llvm_source_map(text, SOURCE)
    lines = text.splitlines()
    assert {s for _, s in pairs} <= KERNEL_LINES
    assert any("define" in lines[a - 1] for a, s in pairs if s == 7)  # the DISubprogram line
    assert any("!dbg" in lines[a - 1] for a, s in pairs if s == LOAD_X)
    assert LOAD_Y in {s for _, s in pairs}


def test_ptx_source_map_uses_the_loc_before_inline_asm():
    text = fixture("add_kernel.sm_90.ptx")
    pairs = gpu_lines.ptx_source_map(text, SOURCE)
    lines = text.splitlines()
    mapped = {s for _, s in pairs}
    # LLVM counts the lines of the vectorised ld.global asm as lines 12..15; only real lines remain
    assert mapped <= KERNEL_LINES and {LOAD_X, LOAD_Y, STORE} <= mapped
    ld = [s for a, s in pairs if "ld.global.v4.b32" in lines[a - 1]]
    assert ld and set(ld) <= {LOAD_X, LOAD_Y}
    st = [s for a, s in pairs if "st.global.v4.b32" in lines[a - 1]]
    assert st and set(st) == {STORE}


def test_amdgcn_source_map():
    text = fixture("add_kernel.gfx942.amdgcn")
    pairs = gpu_lines.ptx_source_map(text, SOURCE)
    lines = text.splitlines()
    assert {LOAD_X, STORE} <= {s for _, s in pairs}
    assert any(lines[a - 1].strip().startswith("buffer_load_dwordx4") for a, s in pairs if s in (LOAD_X, LOAD_Y))


def test_sass_source_map():
    text = fixture("add_kernel.sm_90.sass")
    valid = gpu_lines.source_lines(gpu_lines.llvm_source_map(fixture("add_kernel.sm_90.llir"), SOURCE))
    pairs = gpu_lines.sass_source_map(text, SOURCE, valid)
    lines = text.splitlines()
    assert {s for _, s in pairs} <= valid
    # without the inline-asm correction the loads (counted at lines 14, 15) stay unmapped
    assert not any("LDG" in lines[a - 1] for a, _ in pairs)
    assert any("STG" in lines[a - 1] for a, s in pairs if s == STORE)
    assert all(lines[a - 1].lstrip().startswith("/*") for a, _ in pairs)  # instructions only
    unfiltered = gpu_lines.sass_source_map(text, SOURCE)
    assert len(unfiltered) >= len(pairs)


def test_resource_parsers():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\nptxas info    : Function properties for k\n"
           "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 16 bytes smem")
    assert parse_ptxas_log(log) == {"registers": 255, "barriers": 1, "spill_stores_bytes": 4, "spill_loads_bytes": 4,
                                    "stack_frame_bytes": 8, "shared_bytes_static": 16}
    usage = parse_amdgcn_usage(fixture("add_kernel.gfx942.amdgcn"))
    assert usage["vgpr_count"] > 0 and usage["sgpr_count"] > 0 and usage["vgpr_spill_count"] == 0


def test_inline_asm_line_counting_is_undone_for_sass():
    fix = gpu_lines.ptx_inline_asm_lines(fixture("add_kernel.sm_90.ptx"), SOURCE)
    # the vectorised loads of lines 11 and 12 are the 4th asm line of their blocks
    assert fix == {14: LOAD_X, 15: LOAD_Y}
    text = fixture("add_kernel.sm_90.sass")
    valid = gpu_lines.source_lines(gpu_lines.llvm_source_map(fixture("add_kernel.sm_90.llir"), SOURCE))
    lines = text.splitlines()
    pairs = gpu_lines.sass_source_map(text, SOURCE, valid, fix)
    ldg = {s for a, s in pairs if "LDG" in lines[a - 1]}
    assert ldg == {LOAD_X, LOAD_Y}


def test_spread_hands_each_helpers_records_over_and_leaves_what_it_did_not_finish(tmp_path):
    """compiler/kernels/parallel.py with units that report a compilation each: this process's
    units report directly; each helper's finished units reach the capture through their files, in
    unit order; a unit that raised, a helper that died and one that stood still (killed after
    `stalled_s` without CPU time) leave their unit and every later unit of that share to the
    caller. No helper is left behind."""
    import signal
    import time

    from compiler.kernels import parallel
    from compiler.kernels.capture import CompiledRecord, KernelCapture

    seen: list[tuple[str, int]] = []
    capture = KernelCapture(str(tmp_path / "dumps"), JobSettings().pass_dump_bytes,
                            on_compiled=lambda r: seen.append((r.hash, os.getpid())))

    def compiles(name):
        def unit():
            capture.on_compiled(CompiledRecord(hash=name, name=str(os.getpid()), complete=True))
        unit.__name__ = name
        return unit

    def raises():
        raise RuntimeError("a config Triton could not compile")

    def dies():
        os.kill(os.getpid(), signal.SIGKILL)

    def stands_still():
        time.sleep(600)

    shares = [[compiles("a"), compiles("b")],
              [compiles("c"), compiles("d")],
              [compiles("e"), raises, compiles("f")],
              [dies, compiles("g")],
              [compiles("h"), stands_still, compiles("i")]]
    started = time.monotonic()
    left = parallel.spread(shares, capture, str(tmp_path / "records"), stalled_s=3.0)
    assert time.monotonic() - started < 30
    names = [name for name, _ in seen]  # helpers' records are taken between this process's units
    assert sorted(names) == ["a", "b", "c", "d", "e", "h"] and names[0] == "a" and names.index("c") < names.index("d")
    assert {pid for _, pid in seen} == {os.getpid()}  # handed over here, not called in a helper
    assert [getattr(u, "__name__", "") for u in left] == ["raises", "f", "dies", "g", "stands_still", "i"]
    assert sorted(capture.records) == ["c", "d", "e", "h"]  # adopted (a and b went straight to on_compiled)
    helpers = {int(r.name) for r in capture.records.values()}
    assert len(helpers) == 3 and os.getpid() not in helpers
    for pid in helpers:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # waited for already


def test_spread_stops_its_helpers_when_this_processs_own_unit_fails(tmp_path):
    """A compilation of the job's own share raising (a compile error the job reports): the error
    reaches the caller and no helper outlives it (a helper still busy is killed and reaped)."""
    import time

    from compiler.kernels import parallel
    from compiler.kernels.capture import KernelCapture

    capture = KernelCapture(str(tmp_path / "dumps"), JobSettings().pass_dump_bytes)
    marks = tmp_path / "marks"
    marks.mkdir()

    def busy():
        (marks / str(os.getpid())).write_text("")
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            pass

    def fails():
        deadline = time.monotonic() + 30  # until the helpers have started
        while len(os.listdir(marks)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        raise RuntimeError("the job's own config failed to compile")

    with pytest.raises(RuntimeError, match="own config failed"):
        parallel.spread([[fails], [busy], [busy]], capture, str(tmp_path / "records"))
    helpers = [int(name) for name in os.listdir(marks)]
    assert len(helpers) == 2
    for pid in helpers:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # killed and reaped


_DUMPS_BOTH_WAYS = r'''
import json, os, sys
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from compiler.kernels import dump_stream
from compiler.kernels.capture import KernelCapture
from compiler.model import JobSettings

@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)

def writes():  # write(2) calls this process made so far
    with open("/proc/self/io") as f:
        return int(f.read().split("syscw: ")[1].split()[0])

stream, out = dump_stream.available, {}
for mode in ("stderr", "stream"):  # stderr first: it needs MLIR_DUMP_PATH unset, as Triton starts
    dump_stream.available = stream if mode == "stream" else (lambda dump_dir: False)
    capture = KernelCapture(os.path.join(sys.argv[1], mode), JobSettings().pass_dump_bytes)
    knobs.cache.dir = os.path.join(sys.argv[1], mode, "cache")
    before = writes()
    with capture.installed():
        triton.compile(ASTSource(scale, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}),
                       target=GPUTarget("cuda", 90, 32))
    record = capture.ordered()[0]
    out[mode] = {"writes": writes() - before,
                 "dumps": {ext: open(path).read() for ext, path in record.dump_paths.items()}}
json.dump(out, open(os.path.join(sys.argv[1], "out.json"), "w"))
'''


def test_pass_dumps_go_through_tritons_buffered_stream_and_read_as_they_did_on_stderr(tmp_path):
    """compiler/kernels/dump_stream.py: one kernel compiled (sm_90, compile-only) with its per-pass
    dumps on unbuffered stderr, then through Triton's MLIR_DUMP_PATH stream pointed at each stage's
    file: every stage's file is the same text, with no byte of the flushes in it, and the
    compile's write calls fall from one per printed token (tens of thousands) to under 200."""
    import json
    import subprocess
    import sys

    script = tmp_path / "both_ways.py"  # a file: @triton.jit reads the kernel's source from it
    script.write_text(_DUMPS_BOTH_WAYS)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    stderr, stream = out["stderr"], out["stream"]
    assert sorted(stream["dumps"]) == ["llir", "ttgir", "ttir"]
    for ext, text in stream["dumps"].items():
        assert text == stderr["dumps"][ext], ext
        assert text.startswith("// -----// IR Dump Before ") and "irscope.flush" not in text and "xxxxxxxx" not in text
        assert len(mlir_passes.parse_dumps(text)) > 5, ext
    assert stderr["writes"] > 20_000 and stream["writes"] < 200, (stderr["writes"], stream["writes"])


_DUMP_BUDGET = r'''
import json, os, sys
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from compiler.kernels.capture import KernelCapture

@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)

dumps = os.path.join(sys.argv[1], "dumps")
capture = KernelCapture(dumps, int(sys.argv[2]))
knobs.cache.dir = os.path.join(sys.argv[1], "cache")
with capture.installed():
    for block in (64, 128):
        triton.compile(ASTSource(scale, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": block}),
                       target=GPUTarget("cuda", 90, 32))
json.dump({"records": [{"dumped": sorted(r.dump_paths), "skipped": r.dumps_skipped, "final": sorted(r.final_ir),
                        "ptx": ".entry scale" in (r.asm("ptx") or "")} for r in capture.ordered()],
           "files": sorted(name for name in os.listdir(dumps) if name.endswith(".passes.mlir"))},
          open(os.path.join(sys.argv[1], "out.json"), "w"))
'''


def test_pass_dumps_stop_at_their_budget_and_later_stages_compile_undumped(tmp_path):
    """A program of many kernels and autotune configs dumps more passes than a job's disk holds
    (Triton's fused-attention tutorial: 2.7 GB; the job ended InternalError, "No space left on
    device"). KernelCapture keeps dumps up to its budget: with a budget of one byte, the first
    stage of the first kernel is dumped, and every later stage compiles without dumps, its record
    saying how much was kept already, each kernel still compiled to PTX with its final IR."""
    import json
    import subprocess
    import sys

    script = tmp_path / "budget.py"  # a file: @triton.jit reads the kernel's source from it
    script.write_text(_DUMP_BUDGET)
    done = subprocess.run([sys.executable, str(script), str(tmp_path), "1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    first, second = out["records"]
    assert first["dumped"] == ["ttir"] and second["dumped"] == [], out
    assert first["skipped"] > 0 and second["skipped"] == first["skipped"], out
    assert first["final"] == second["final"] == ["llir", "ttgir", "ttir"] and first["ptx"] and second["ptx"], out
    assert len(out["files"]) == 1 and out["files"][0].endswith(".ttir.passes.mlir"), out["files"]


def test_a_triton_compile_errors_cause_is_the_line_after_its_location_and_excerpt():
    """Triton's CompilationError reads "at 5:8:", the kernel's lines up to a caret, then the cause:
    the cause is what the headline leads with, also when a helper's error is wrapped by its caller's."""
    import ast

    from triton.compiler.errors import CompilationError

    from compiler.kernels.program import _compile_error_reason
    src = "def k(x):\n    a = tl.load(x)\n    c = tl.dot(a, a)\n"
    node = ast.parse(src).body[0].body[1].value
    inner = CompilationError(src, node, "input and other must have equal ranks >= 2\nmore of it")
    assert str(inner).startswith("at 3:8:")
    assert _compile_error_reason(inner) == "input and other must have equal ranks >= 2"
    try:
        raise CompilationError(src, node, None) from inner
    except CompilationError as outer:
        assert _compile_error_reason(outer) == "input and other must have equal ranks >= 2"
    assert _compile_error_reason(CompilationError(src, node, None)) is None


def test_inductors_generated_kernel_file_is_named_beside_its_stages():
    """The hashed file every `.loc` of an Inductor kernel's IR names is said in words, linked to the
    stage that shows it (compiler/pytorch/gpu_codegen.py); the compiler's text keeps the name."""
    from types import SimpleNamespace

    from compiler.pytorch.gpu_codegen import _file_names
    record = SimpleNamespace(source_file="/tmp/work/inductor-cache/mg/cmge5kqt37.py", name="triton_poi_fused_sin_0")
    (named,) = _file_names(record, "triton_poi_fused_sin_0.0")
    assert named["file"] == "cmge5kqt37.py" and named["path"] == record.source_file
    assert named["name"].startswith("the Triton code Inductor generated for kernel triton_poi_fused_sin_0")
    assert named["stage"] == "triton.source:triton_poi_fused_sin_0.0"
    assert _file_names(SimpleNamespace(source_file="", name="k"), "k.0") == []


def test_a_kernel_named_past_the_stage_keys_room_keeps_valid_distinct_keys():
    """Inductor names a kernel after up to ten of the ops it fused: a training graph's passed 200
    characters and the job ended 'the key ... is not a stage key' after it compiled (the fifth
    walk). The name is cut with a digest of the whole, the same for each of its configs."""
    from types import SimpleNamespace

    from compiler.formats import KERNEL_NAME_ROOM, kernel_of
    from compiler.kernels.capture import qualifiers
    from service.bundle_reader import KEY_RE
    stem = ("triton_per_fused__log_softmax__log_softmax_backward_data_add_arange_gelu_gelu_backward_mul"
            "_native_layer_norm")
    long_a = stem + "_native_layer_norm_backward_nll_loss_backward_nll_loss_forward_pow_sum_mean_0"
    long_b = stem + "_native_layer_norm_backward_tanh_tanh_backward_where_1"
    assert len(long_a) > 180 and len(long_b) > KERNEL_NAME_ROOM
    names = qualifiers([SimpleNamespace(name=n) for n in (long_a, long_a, long_b, "triton_poi_fused_sin_0")])
    assert names[3] == "triton_poi_fused_sin_0"  # a name that fits is kept whole
    assert kernel_of(names[0]) == kernel_of(names[1]) != kernel_of(names[2])  # one kernel's configs, another kernel
    assert names[0].endswith(".0") and names[1].endswith(".1") and names[0].startswith(stem[:100])
    for q in names:
        assert len(kernel_of(q)) <= KERNEL_NAME_ROOM
        for prefix in ("triton.metadata", "triton.source", "kernel"):
            assert KEY_RE.match(f"{prefix}:{q}:1/2_1.backward"), q

"""The kernel families of the corpus (tests/programs/triton, helion, gluon, cute: programs written
the way Triton's tutorials and Helion's, Gluon's and CuTe DSL's examples are, each pasted whole)
compiled on a virtual H100 (`target: cuda:sm_90`) through the real runner and sandbox.

Every program must end `done` with every kernel it calls compiled to PTX and SASS, and its checks,
benchmarks and value reads answered as notices at their lines (compiler/kernels/virtual_checks.py,
compiler/kernels/value_reads.py): each program below names its kernels and the notices it carries.
One app compiles them all, submitted at once (the module's wall time is its slowest jobs').
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass

import pytest

from compiler.kernels.value_reads import STOPPED
from compiler.kernels.virtual_checks import (
    EVENT_NOT_TIMED,
    GRAPH_NOT_REPLAYED,
    NOT_COMPARED,
    NOT_PROFILED,
    NOT_TIMED,
    PROFILE_NOT_WRITTEN,
)
from tests.conftest import make_app, needs_bwrap, seed_kernel_toolchain_cache, stage_text, wait_job
from tests.programs.families import HERE, family

pytestmark = [needs_bwrap, pytest.mark.slow]
KERNEL_FAMILIES = ("triton", "helion", "gluon", "cute")


@dataclass(frozen=True)
class Expect:
    kernels: tuple[str, ...]  # each compiled to PTX and SASS (Triton's kernel names; CuTe's @cute.jit functions)
    notices: tuple[tuple[str, str], ...] = ()  # (the line's text, the notice), in the order the program ran them
    stopped_at: str = ""  # the line where reading a fake tensor's value ended the program
    stopped_by: str = STOPPED  # the notice of that line: why it ended there


PROGRAMS: dict[str, Expect] = {
    "triton/vector_add.py": Expect(("add_kernel",), (
        ("torch.testing.assert_close(got, expected)", "torch.testing.assert_close: " + NOT_COMPARED),
        ("ms, min_ms, max_ms = triton.testing.do_bench(lambda: add(x, y)", "triton.testing.do_bench: " + NOT_TIMED),
        ("benchmark.run(print_data=True, show_plots=True)", "triton.testing.perf_report vector-add-performance.run: "
                                                             "not timed: called once per line (Triton, Torch) at the "
                                                             "first x value (size=4096)"))),
    "triton/fused_softmax.py": Expect(("softmax_kernel",), (
        ("assert torch.allclose(softmax(x)", "torch.allclose: " + NOT_COMPARED),
        ("ms = triton.testing.do_bench(lambda: naive_softmax(x))", "triton.testing.do_bench: " + NOT_TIMED))),
    "triton/matmul_autotune.py": Expect(("matmul_kernel",), (
        ("if torch.allclose(triton_output, torch_output", "torch.allclose: " + NOT_COMPARED),
        ("benchmark.run(show_plots=True, print_data=True)", "triton.testing.perf_report matmul-performance-fp16.run"))),
    "triton/layer_norm.py": Expect(("ln_forward", "ln_backward_dx"), (
        ("assert torch.allclose(y_tri, y_ref", "torch.allclose: " + NOT_COMPARED),)),
    "triton/flash_attention_fwd.py": Expect(("attn_fwd",), (
        ("torch.testing.assert_close(out, ref", "torch.testing.assert_close: " + NOT_COMPARED),
        ("ms = triton.testing.do_bench(lambda: attention(q, k, v))", "triton.testing.do_bench: " + NOT_TIMED))),
    "triton/descriptor_matmul.py": Expect(("matmul_tma_kernel",), (
        ("torch.testing.assert_close(c, a @ b.T", "torch.testing.assert_close: " + NOT_COMPARED),
        ("ms = triton.testing.do_bench(fn)", "triton.testing.do_bench: " + NOT_TIMED),
        # the loop's second do_bench is the same notice at the same line: said once
        ('("cublas", lambda: cublas.matmul(a, b, c_ref))', "cuBLAS CublasLt.matmul: not run"),
        ('proton.start("matmul_tma", hook="triton")', "triton.profiler.start: " + NOT_PROFILED)),
        stopped_at="import triton.profiler.viewer as proton_viewer", stopped_by=PROFILE_NOT_WRITTEN),
    "triton/seeded_dropout.py": Expect(("seeded_dropout_kernel",), (
        ('assert torch.equal(a, b), "the same seed gives the same mask"', "torch.equal: " + NOT_COMPARED),
        ('print(f"dropout: {start.elapsed_time(end)', "torch.cuda.Event.elapsed_time: " + EVENT_NOT_TIMED),
        ("print(triton.testing.do_bench_cudagraph(", "triton.testing.do_bench_cudagraph: " + NOT_TIMED))),
    "triton/row_stats_item.py": Expect(("row_mean_kernel",), stopped_at="err = (means - x.mean(dim=1)).abs().max()"),
    "helion/softmax.py": Expect(("_helion_softmax", "_helion_softmax_steps", "_helion_softmax_online"), (
        ("run_example(kernels,", "helion._testing.run_example: helion softmax, helion steps, helion online, torch "
                                 "called once each; " + NOT_COMPARED),)),
    # a torch.compile baseline, as Helion's examples compare with one: Inductor's kernel compiled too,
    # its graph then run on the fake tensors
    "helion/rms_norm.py": Expect(("_helion_rms_norm_fwd", "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"), (
        ("run_example(rms_norm, baselines", "helion._testing.run_example: helion, torch, compile called once each"),
        ("run_example(lambda x: rms_norm(x, module.weight)", "helion._testing.run_example: helion, nn.RMSNorm "
                                                            "called once each"))),
    "helion/reductions.py": Expect(("_helion_sum_rows", "_helion_mean_rows", "_helion_long_sum"), (
        ("run_example(sum_rows,", "helion._testing.run_example"),
        ("run_example(mean_rows,", "helion._testing.run_example"),
        ("run_example(long_sum,", "helion._testing.run_example"))),
    # leaky_relu compares a half-precision tile with 0: Inductor's lowering rounds the scalar to the
    # tensor's dtype with torch.tensor(0, dtype=...).item(), on the device under Helion's compile
    "helion/elementwise.py": Expect(("_helion_add", "_helion_leaky_relu", "_helion_swiglu_fwd", "_helion_swiglu_bwd"), (
        ("run_example(add, torch.add", "helion._testing.run_example"),
        ("run_example(leaky_relu,", "helion._testing.run_example"),
        ("run_example(swiglu,", "helion._testing.run_example: helion, torch called once each, forward and "
                                "backward"))),
    "helion/matmul.py": Expect(("_helion_matmul", "_helion_bmm"), (
        ("run_example(matmul, torch.matmul", "helion._testing.run_example"),
        ("run_example(with_bias,", "helion._testing.run_example"),
        ("run_example(bmm, torch.bmm", "helion._testing.run_example"))),
    "gluon/blocked_copy.py": Expect(("memcpy_1d_kernel",), (
        ("torch.testing.assert_close(input, output, atol=0, rtol=0)", "torch.testing.assert_close: " + NOT_COMPARED),
        ("ms = triton.testing.do_bench(lambda: memcpy_1d(", "triton.testing.do_bench: " + NOT_TIMED))),
    "gluon/row_sum_layouts.py": Expect(("row_sum_kernel",), (
        ("torch.testing.assert_close(out, x.float().sum(dim=1)", "torch.testing.assert_close: " + NOT_COMPARED),
        ("ms = triton.testing.do_bench(lambda: row_sum(x, num_warps=num_warps))", "triton.testing.do_bench"))),
    "gluon/layout_conversion.py": Expect(("transpose_kernel",), (
        ("torch.testing.assert_close(transpose(x)", "torch.testing.assert_close: " + NOT_COMPARED),
        ("ms = triton.testing.do_bench_cudagraph(", "triton.testing.do_bench_cudagraph: " + NOT_TIMED))),
    "cute/elementwise_add.py": Expect(("naive_add",), (
        ("torch.testing.assert_close(c, a + b)", "torch.testing.assert_close: " + NOT_COMPARED),
        ("avg_us = testing.benchmark(compiled", "cutlass.cute.testing.benchmark: " + NOT_TIMED))),
    "cute/scale_events.py": Expect(("scale", "scale_signalled"), (
        ('print(f"{start.elapsed_time(end)', "torch.cuda.Event.elapsed_time: " + EVENT_NOT_TIMED),
        ("assert torch.allclose(y, x * 2.0)", "torch.allclose: " + NOT_COMPARED),
        ("graph.replay()", "torch.cuda.CUDAGraph.replay: " + GRAPH_NOT_REPLAYED),
        ("torch.testing.assert_close(y, x * 3.0)", "torch.testing.assert_close: " + NOT_COMPARED))),
    "cute/relu_item.py": Expect(("relu",), stopped_at="zeros = int((y == 0).sum().item())"),
    # no kernel at all: two host functions (test_a_cute_function_without_a_kernel_...)
    "cute/layouts_on_the_host.py": Expect(()),
    # a persistent grid sized by cutlass.utils.HardwareInfo, as CUTLASS's persistent GEMMs size theirs
    "cute/persistent_scale.py": Expect(("scale",), (
        ("sms = hardware_info.get_device_multiprocessor_count()", "cutlass.utils.HardwareInfo."
                                                                  "get_device_multiprocessor_count: 132: the virtual "
                                                                  "NVIDIA H100 80GB HBM3's published SM count"),
        ("max_active_clusters = hardware_info.get_max_active_clusters(1)",
         "cutlass.utils.HardwareInfo.get_max_active_clusters: 132: estimated, no driver to ask"),
        ("word = checkCudaErrors(cudart.cudaMalloc(4))", "cuda.bindings.runtime.cudaMalloc: 0x7e0000000000: an "
                                                         "address of the virtual GPU for 4 bytes, given by no driver"),
        ("checkCudaErrors(cudart.cudaMemset(word, 0, 4))", "cuda.bindings.runtime.cudaMemset: not written"),
        ("torch.testing.assert_close(y, x * alpha)", "torch.testing.assert_close: " + NOT_COMPARED))),
    # cute.testing.autotune_jit: each block size compiled for each shape it was called with
    "cute/scale_autotune_jit.py": Expect(("scale",), (
        ("scale(x, y, 3.0, n)", "cutlass.cute.testing.autotune_jit: not timed: nothing ran on the virtual GPU; "
                                "each config was compiled and called once"),
        ("torch.testing.assert_close(y, x * 3.0)", "torch.testing.assert_close: " + NOT_COMPARED))),
    # operands as CUTLASS's GEMM examples make them: cutlass.torch's FP8 matrix (its values written by
    # CuTe's own _convert kernel), a compact dynamic shape with a divisibility, a TVM FFI launch
    "cute/fp8_operands_tvm_ffi.py": Expect(("_convert", "fp8_copy", "scale"), (
        ("torch.testing.assert_close(b_torch.view(torch.uint8)", "torch.testing.assert_close: " + NOT_COMPARED),
        ("torch.testing.assert_close(y, x * 0.5)", "torch.testing.assert_close: " + NOT_COMPARED))),
    # CuTe's experimental API (CUTLASS's cute_ext examples): its own variables' prefix, its dumps read
    "cute/scale_experimental.py": Expect(("scale",), (
        ("torch.testing.assert_close(y, x * 2.0)", "torch.testing.assert_close: " + NOT_COMPARED),)),
    # FP8 kept in uint8 and retyped (`.element_type = ...`), tuned with cutlass.testing.tune
    "cute/fp8_copy_tune.py": Expect(("fp8_copy",), (
        ('best = testing.tune(configured, params_dict={"threads": [128, 256]})',
         "cutlass.testing.tune: not timed: nothing ran on the virtual GPU; each of the 2 configs was made and called "
         "once (2 compiled), and the first that compiled is returned: {'threads': 128}"),
        ("us = testing.benchmark(compiled, kernel_arguments", "cutlass.testing.benchmark: " + NOT_TIMED),
        ('assert torch.equal(src, dst), "the copy differs"', "torch.equal: " + NOT_COMPARED))),
}


def _programs() -> list[str]:
    return [os.path.relpath(path, HERE) for name in KERNEL_FAMILIES for path in family(name).programs()]


def _line(program: str, text: str) -> int:
    with open(os.path.join(HERE, program), encoding="utf-8") as f:
        lines = [n for n, line in enumerate(f, start=1) if text in line]
    assert len(lines) == 1, (program, text, lines)
    return lines[0]


@dataclass
class CompiledPrograms:
    client: object
    jobs: dict[str, dict]  # program (family/file.py) -> the finished job's JSON

    def text(self, program: str, key: str) -> str:
        return stage_text(self.client, self.jobs[program]["id"], key)

    def meta(self, program: str, key: str) -> dict:
        return self.client.get(f"/api/jobs/{self.jobs[program]['id']}/stages/{key}?format=json").get_json()["meta"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> CompiledPrograms:
    languages = ",".join(sorted({family(name).language for name in KERNEL_FAMILIES}))
    base = tmp_path_factory.mktemp("kernel-programs")
    seed_kernel_toolchain_cache(str(base / "var"))  # as a server whose warm-up built it
    app = make_app(base, languages=languages, workers=2, spare_workers=1,
                   wall_time_limit_s=600, max_queued_jobs=0, rate_limit="")
    client = app.test_client()
    try:
        ids = {}
        for program in _programs():
            fam = family(program.split("/")[0])
            with open(os.path.join(HERE, program), encoding="utf-8") as f:
                body = {"language": fam.language, "source": f.read(), "options": fam.options}
            response = client.post("/api/compile", json=body)
            assert response.status_code in (200, 202), (program, response.get_json())
            ids[program] = response.get_json()["job"]
        yield CompiledPrograms(client, {program: wait_job(client, job_id, timeout=900)
                                        for program, job_id in ids.items()})
    finally:
        app.extensions["irscope"].runner.shutdown()


def test_every_kernel_family_has_its_programs_and_each_says_what_it_must_show():
    programs = _programs()
    assert len(programs) >= 18
    for name in KERNEL_FAMILIES:
        assert len(family(name).programs()) >= 3, name
    assert sorted(programs) == sorted(PROGRAMS)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_ends_done_with_every_kernel_compiled(compiled, program):
    expect = PROGRAMS[program]
    job = compiled.jobs[program]
    assert job["status"] == "done", job.get("error")
    keys = [stage["key"] for stage in job["stages"]]
    prefix = "cute" if program.startswith("cute/") else "triton"
    for kernel in expect.kernels:
        for stage in ("ptx", "sass"):
            pattern = re.compile(rf"{prefix}\.{stage}:{re.escape(kernel)}(\.\d+)?$")
            assert any(pattern.match(key) for key in keys), (kernel, stage, keys)
    target = job["timings"]["target"]
    assert target["virtual"]
    if expect.kernels:
        assert ".target sm_90a" in compiled.text(program, next(k for k in keys if k.startswith(f"{prefix}.ptx:")))


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_checks_and_benchmarks_are_notices_at_their_lines(compiled, program):
    expect = PROGRAMS[program]
    wanted = [(_line(program, text), said) for text, said in expect.notices]
    if expect.stopped_at:
        wanted.append((_line(program, expect.stopped_at), expect.stopped_by))
    keys = [stage["key"] for stage in compiled.jobs[program]["stages"]]
    if not wanted:
        assert "run.notices" not in keys
        return
    notices = compiled.text(program, "run.notices").splitlines()
    assert len(set(notices)) == len(notices), notices  # a notice a loop repeats is said once
    at = 0
    for line, said in wanted:  # in the order the program reached them
        found = [n for n in range(at, len(notices)) if notices[n].startswith(f"line {line}: ") and said in notices[n]]
        assert found, (line, said, notices)
        at = found[0] + 1
    if expect.stopped_at:  # the value read was the program's end: nothing after it ran
        assert notices[-1].endswith(expect.stopped_by) and at == len(notices)


def test_a_cute_function_without_a_kernel_shows_its_host_ir_and_a_host_fake_tensor_stays_in_host_memory(compiled):
    """A @cute.jit function that only prints layouts while CuTe traces it compiles a host function
    and no kernel: its IR is the job's result (the job was "compiled no CuTe function" before). A
    tensor the program makes under its own FakeTensorMode on the CPU reaches CuTe as PyTorch exports
    it, in host memory, as on a GPU machine (it was exported as device memory, and CuTe refused to
    print a device tensor from host code); the program's stream_sync after the call waits for nothing."""
    program = "cute/layouts_on_the_host.py"
    keys = [stage["key"] for stage in compiled.jobs[program]["stages"]]
    assert [k for k in keys if k.startswith("cute.")] == [
        "cute.ir:show_layouts", "cute.ir_clean:show_layouts", "cute.metadata:show_layouts",
        "cute.ir:show_tensor", "cute.ir_clean:show_tensor", "cute.metadata:show_tensor", "cute.launches"]
    assert "func.func @cutlass_show_layouts_False()" in compiled.text(program, "cute.ir_clean:show_layouts")
    assert "!cute.memref<f32, generic" in compiled.text(program, "cute.ir:show_tensor")
    stdout = compiled.text(program, "run.stdout")
    assert "row-major (4,8):(8,1), its size 32" in stdout and "column-major (4,8):(1,4)" in stdout
    meta = json.loads(compiled.text(program, "cute.metadata:show_tensor"))
    assert meta["kernels"] == [] and meta["calls"][0]["how"] == "compiled function called"


def test_cute_tensors_of_fake_ones_take_cutes_own_layout_marks_and_tvm_ffi_calls_are_recorded(compiled):
    """A FakeTensor given to CuTe's from_dlpack exports what a CUDA tensor would (PyTorch's DLPack
    dtype, shape, strides, device), so CuTe's own marks make the layout: a compact dynamic extent
    of divisibility 8 makes the outer stride a multiple of 8 too (what CUTLASS's attention examples
    need for their 128-bit copies), and cutlass.torch's FP8 operands convert (a SymInt compared with
    1 failed them). A function compiled for TVM FFI is recorded where it is called."""
    program = "cute/fp8_operands_tvm_ffi.py"
    assert '!cute.memref<f16, gmem, align<16>, "(?,?{div=8}):(?{i64 div=8},1)">' in compiled.text(
        program, "cute.ir:scale")
    launches = json.loads(compiled.text(program, "cute.launches"))
    said = [(launch["how"], launch["line"], launch["launched"]) for launch in launches]
    assert said == [("@cute.jit function called directly", _line(program, "a, a_torch = cutlass_torch."), False),
                    ("@cute.jit function called directly", _line(program, "b, b_torch = cutlass_torch."), False),
                    ("compiled function called", _line(program, "copy(a, b)"), False),
                    ("compiled function called", _line(program, "scaled(x, y, 0.5)"), False)], said
    assert "_convert" in launches[0]["function"] and "scale" in launches[-1]["function"]


def test_a_compiled_kernel_launched_directly_is_recorded_with_its_registers(compiled):
    """fused_softmax.py compiles its kernel with `warmup`, loads it (`_init_handles`: registers from
    the cubin, as the driver reports them) to size its grid, and launches the compiled kernel."""
    program = "triton/fused_softmax.py"
    launches = json.loads(compiled.text(program, "triton.launches"))
    direct = [launch for launch in launches if launch["line"] == _line(program, "kernel[(programs, 1, 1)](")]
    assert len(direct) == 1 and direct[0]["kernel"] == "softmax_kernel" and direct[0]["grid"][0] > 0
    assert "compiled kernel launched directly" in direct[0]["note"]


def test_a_value_read_ends_the_program_and_later_kernels_do_not_compile(compiled):
    job = compiled.jobs["triton/row_stats_item.py"]
    keys = [stage["key"] for stage in job["stages"]]
    assert not any(key.startswith("triton.ptx:scale_kernel") for key in keys)  # after the read: never reached
    assert compiled.text("triton/row_stats_item.py", "run.stdout") == "torch.Size([4])\n"
    assert "note" not in compiled.meta("triton/row_stats_item.py", "run.stdout")  # it printed no tensor


def test_a_tensor_printed_on_the_virtual_gpu_says_why_it_reads_fake_tensor(compiled):
    """Triton's matmul tutorial prints both outputs: on a virtual GPU they are fake tensors, and the
    Program output stage says so in its note."""
    meta = compiled.meta("triton/matmul_autotune.py", "run.stdout")
    assert "triton_output_with_fp16_inputs=FakeTensor(" in compiled.text("triton/matmul_autotune.py", "run.stdout")
    assert meta["executed"] is False and "its tensors are PyTorch's fake tensors" in meta["note"], meta


def test_one_warm_up_builds_the_kernel_languages_virtual_device_and_their_jobs_load_it(tmp_path):
    """The virtual CUDA device's library (g++ against torch's headers, about 1.5 s of a core here) is
    the kernel languages' one toolchain cache: a server's start-up warm-up builds it once for Triton,
    Gluon, Helion and CuTe (compiler/kernels/toolchain_cache.py), and their jobs load it. A job on a server without it
    builds its own, and says so."""
    from compiler import registry
    cold = make_app(tmp_path / "cold", languages="triton", workers=1)  # no warm-up
    warm = make_app(tmp_path / "warm", languages="triton,gluon,helion,cute", workers=1, warm_toolchain_cache=True)
    try:
        cold_client, warm_client = cold.test_client(), warm.test_client()
        cold_id = cold_client.post("/api/compile", json={"language": "triton", "source": registry.get("triton").example,
                                                         "options": {"target": "cuda:sm_90"}}).get_json()["job"]
        toolchain_dir = tmp_path / "warm" / "var" / "toolchain"
        built = toolchain_dir / "triton.warm-up-seconds"  # the first warm-up's, written once it is built
        for _ in range(600):
            if built.exists():
                break
            time.sleep(0.5)
        assert built.exists(), sorted(os.listdir(toolchain_dir)) if toolchain_dir.exists() else "no toolchain dir"
        warm.extensions["irscope"].runner.background.submit(lambda: None).result(timeout=300)  # every warm-up ran
        caches = sorted(name for name in os.listdir(toolchain_dir) if (toolchain_dir / name).is_dir())
        assert len(caches) == 1 and caches[0].startswith("virtual-cuda-"), caches
        assert sorted(os.listdir(toolchain_dir / caches[0])) == ["virtual_cuda"]
        assert [n for n in os.listdir(toolchain_dir / caches[0] / "virtual_cuda") if n.endswith(".so")]
        warm_id = warm_client.post("/api/compile", json={"language": "cute", "source": registry.get("cute").example,
                                                         "options": {"target": "cuda:sm_90"}}).get_json()["job"]
        cold_job, warm_job = wait_job(cold_client, cold_id, timeout=600), wait_job(warm_client, warm_id, timeout=600)
    finally:
        cold.extensions["irscope"].runner.shutdown()
        warm.extensions["irscope"].runner.shutdown()
    assert cold_job["status"] == "done" and warm_job["status"] == "done", (cold_job.get("error"), warm_job.get("error"))
    cold_target, warm_target = cold_job["timings"]["target"], warm_job["timings"]["target"]
    assert cold_target["virtual_device_from_toolchain_cache"] is False and cold_target["virtual_device_build_s"] > 1
    assert warm_target["virtual_device_from_toolchain_cache"] is True and warm_target["virtual_device_build_s"] == 0
    assert "cute.ptx:add" in {stage["key"] for stage in warm_job["stages"]}

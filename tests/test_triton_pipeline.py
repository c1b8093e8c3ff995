"""End-to-end tests of the `triton` language on virtual targets (no GPU needed).

A row softmax, a vector add and a tiled matmul are compiled for sm_80, sm_90 and gfx942. The
jobs run in a child process (this file run as a script), each job on a virtual CUDA target in a
child of its own: the compile-only Triton driver, the virtual CUDA device and the FakeTensorMode
they install are process-wide, and the worker runs each job in a fresh process too.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from torch.testing import FileCheck

from compiler.kernels import value_reads, virtual_checks

if TYPE_CHECKING:  # the child process this file also is imports no test helper at module level
    from testbed.bundle_jobs import Job
    from tests.conftest import Background

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow  # the module's jobs compile 3 kernels for 4 targets (about half a minute)

KERNELS = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * row_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + offs, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))


x = torch.randn(64, 781, device="cuda")
out = torch.empty_like(x)
softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
v = torch.randn(5000, device="cuda")
add_kernel[lambda meta: (triton.cdiv(v.numel(), meta["BLOCK"]),)](v, v, torch.empty_like(v), v.numel(), BLOCK=1024)
a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
matmul_kernel[(2, 2)](a, b, c, 256, 256, 128, *a.stride(), *b.stride(), *c.stride(), BM=128, BN=128, BK=32)
print("launched", c.shape)
'''

# Reads a value on a virtual target after one launch: the kernel is shown, the program ends at line 13.
READS_VALUES = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)

x = torch.ones(128, device="cuda")
double[(1,)](x, BLOCK=128)
print(float(x.sum()))
'''

# Triton rejects the kernel while compiling it: the error names the user's line of the arange.
COMPILE_ERROR = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def bad(x_ptr):
    offs = tl.arange(0, 100)
    tl.store(x_ptr + offs, 1.0)


bad[(1,)](torch.empty(128, device="cuda"))
'''

# A Hopper-only instruction in inline PTX on an A100: ptxas refuses it; the error names line 10.
WGMMA_ON_SM80 = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def fence(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("wgmma.fence.sync.aligned; mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                  is_pure=False, pack=1)
    tl.store(x_ptr + offs, y)


x = torch.zeros(128, device="cuda", dtype=torch.int32)
fence[(1,)](x, BLOCK=128)
'''

# The same matmul twice: as ptxas allocates it (168 registers on sm_90), and held to 96 registers
# with Triton's `maxnreg`, so ptxas spills the accumulator to local memory.
SPILLS = ("import torch\nimport triton\nimport triton.language as tl\n\n\n"
          + KERNELS[KERNELS.index("@triton.jit\ndef matmul_kernel"):KERNELS.index("\n\nx = torch.randn")] + '''


a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
args = (a, b, c, 256, 256, 128, *a.stride(), *b.stride(), *c.stride())
matmul_kernel[(2, 2)](*args, BM=128, BN=128, BK=32)
matmul_kernel[(2, 2)](*args, BM=128, BN=128, BK=32, maxnreg=96)
''')

TARGETS = ("cuda:sm_80", "cuda:sm_90", "hip:gfx942")
OPTIONS = {"helion_configs": {"configs": 3}}  # a job's options besides its target, by its directory


def HELION_WRONG_SHAPES() -> str:  # noqa: N802 - a source, like the constants above (imported late)
    """Helion's example calling its matmul on shapes its assert refuses."""
    from compiler.helion.pipeline import EXAMPLE as HELION_EXAMPLE
    return HELION_EXAMPLE.replace("z = add(matmul(x, y), matmul(x, y))", "z = matmul(x, x)")


# Two Helion kernels over a reduction, as Helion's own examples write them (a row softmax with its
# config, a row sum in a loop with none): Helion 1.5.1 cannot enumerate a reduction dimension's block
# sizes (iter_search_dimensions raises NotImplementedError), which failed the job at the user's line.
HELION_REDUCTIONS = '''import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16], num_warps=4))
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@helion.kernel()
def row_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n):
            acc += x[tile_m, tile_n].to(torch.float32).sum(dim=1)
        out[tile_m] = acc.to(x.dtype)
    return out


def main():
    x = torch.randn(4096, 2560, device="cuda", dtype=torch.float16)
    print(softmax(x).shape, row_sum(x).shape)


if __name__ == "__main__":
    main()
'''

# Programs as the projects publish them, checks and benchmarks included: Triton's vector-add
# tutorial (its DEVICE line, an assert_close against PyTorch, do_bench) and a file of Helion kernels
# checked with Helion's run_example from a main(). Before, on a virtual GPU, the first comparison
# raised on fake tensors and the job failed with the file's later kernels never compiled.
TUTORIAL_ADD = '''import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor):
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]), )
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


torch.manual_seed(0)
size = 98432
x = torch.rand(size, device=DEVICE)
y = torch.rand(size, device=DEVICE)
output_torch = x + y
output_triton = add(x, y)
torch.testing.assert_close(output_triton, output_torch)
ms = triton.testing.do_bench(lambda: add(x, y))
print(f"add: {ms:.3f} ms")
'''

HELION_RUN_EXAMPLE = '''from __future__ import annotations

import torch

import helion
from helion._testing import DEVICE
from helion._testing import run_example
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[32, 32], num_warps=4))
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16], num_warps=4))
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


def check(n: int, m: int) -> None:
    x = torch.randn([n, m], device=DEVICE, dtype=torch.float16)
    y = torch.randn([n, m], device=DEVICE, dtype=torch.float16)
    run_example(add, torch.add, (x, y))
    run_example(softmax, lambda t: torch.nn.functional.softmax(t, dim=1), (x,))


def main() -> None:
    check(1024, 1024)


if __name__ == "__main__":
    main()
'''

# A Helion kernel written and never called (the fifth walk's): Helion compiles on the first call.
HELION_NOT_CALLED = '''import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[32, 32]))
def scale_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tm, tn in hl.tile(a.size()):
        out[tm, tn] = 2.0 * a[tm, tn] + b[tm, tn]
    return out
'''

# A published program's habit: it checks the GPU before it compiles, and says why it skips its kernel.
GPU_CHECKED = '''import torch
import triton
import triton.language as tl


@triton.jit
def doubled_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * 2, mask=offs < n)


def on_blackwell():
    major, _ = torch.cuda.get_device_capability()
    return major >= 10


if __name__ == "__main__":
    if not on_blackwell():
        print("This kernel needs a Blackwell GPU (compute capability 10.0)")
    else:
        x = torch.randn(4096, device="cuda")
        y = torch.empty_like(x)
        doubled_copy[(4,)](x, y, x.numel(), BLOCK=1024)
'''

SOURCE_FILE = "kernels.py"


def _line(source: str, needle: str, nth: int = 0) -> int:
    lines = [i for i, text in enumerate(source.splitlines(), start=1) if needle in text]
    return lines[nth]


def _run_job(source: str, target: str, out: str) -> None:
    """Child-process side: run one job as the worker would and write bundle + error.json."""
    sys.path.insert(0, ROOT)
    from compiler import registry
    from testbed.bundle_jobs import run_job
    language = registry.guess(SOURCE_FILE, source, ("triton", "gluon", "helion"))
    run_job(language, source, {"target": target, **OPTIONS.get(os.path.basename(out), {})}, out)



def _plan(base: str) -> list[tuple[str, str, str]]:
    """(target, source, output directory) of every job the module fixture compiles."""
    plan = [(t, KERNELS, os.path.join(base, t.replace(":", "_"))) for t in TARGETS]
    plan.append(("cuda:sm_90", READS_VALUES, os.path.join(base, "reads_values")))
    plan.append(("cuda:sm_100", KERNELS, os.path.join(base, "sm_100")))
    plan.append(("cuda:sm_90", COMPILE_ERROR, os.path.join(base, "compile_error")))
    plan.append(("cuda:sm_80", WGMMA_ON_SM80, os.path.join(base, "wgmma_on_sm80")))
    plan.append(("cuda:sm_90", SPILLS, os.path.join(base, "spills")))
    # Gluon's own example, as the `gluon` language offers it: a row softmax whose layout is written
    # out for 32-thread warps, so on gfx942 (64-thread wavefronts) the layout is wrong
    from compiler.gluon.pipeline import EXAMPLE as gluon
    plan.append(("cuda:sm_90", gluon, os.path.join(base, "gluon")))
    plan.append(("hip:gfx942", gluon, os.path.join(base, "gluon_layout_error")))
    # Helion's example, as the `helion` language offers it: a matmul with its config, an add without
    from compiler.helion.pipeline import EXAMPLE as HELION_EXAMPLE
    plan.append(("cuda:sm_90", HELION_EXAMPLE, os.path.join(base, "helion")))
    plan.append(("cuda:sm_90", HELION_WRONG_SHAPES(), os.path.join(base, "helion_wrong_shapes")))
    plan.append(("cuda:sm_90", HELION_EXAMPLE, os.path.join(base, "helion_configs")))
    plan.append(("cuda:sm_90", HELION_REDUCTIONS, os.path.join(base, "helion_reductions")))
    plan.append(("cuda:sm_90", TUTORIAL_ADD, os.path.join(base, "tutorial_add")))
    plan.append(("cuda:sm_90", HELION_RUN_EXAMPLE, os.path.join(base, "helion_run_example")))
    plan.append(("cuda:sm_90", HELION_NOT_CALLED, os.path.join(base, "helion_not_called")))
    plan.append(("cuda:sm_90", GPU_CHECKED, os.path.join(base, "gpu_checked")))
    return plan


def start_in_background(base: str) -> Background:
    """The module's jobs, in one child process (tests/conftest.py starts it when collection ends)."""
    from tests.conftest import start_child
    os.makedirs(os.path.join(base, "sources"))
    args = []
    for i, (target, source, out) in enumerate(_plan(base)):
        path = os.path.join(base, "sources", f"{i}.py")
        with open(path, "w") as f:
            f.write(source)
        args += [target, path, out]
    return start_child([sys.executable, __file__, *args], base)


@pytest.fixture(scope="module")
def jobs(request, tmp_path_factory) -> dict[str, Job]:
    from testbed.bundle_jobs import Job
    from tests.conftest import take_background
    plan = _plan(take_background(request, start_in_background, tmp_path_factory))
    result = {t: Job(out) for t, _, out in plan[:len(TARGETS)]}
    directories = {os.path.basename(out): out for _, _, out in plan}
    for name in ("reads_values", "compile_error", "wgmma_on_sm80", "spills", "gluon", "gluon_layout_error", "helion",
                 "helion_wrong_shapes", "helion_configs", "helion_reductions", "tutorial_add", "helion_run_example",
                 "helion_not_called", "gpu_checked"):
        result[name] = Job(directories[name])
    result["cuda:sm_100"] = Job(directories["sm_100"])
    return result


@pytest.mark.parametrize("target", TARGETS)
def test_every_kernel_has_every_stage(jobs, target):
    job = jobs[target]
    assert job.error is None
    final = "ptx" if target.startswith("cuda") else "amdgcn"
    for kernel in ("softmax_kernel", "add_kernel", "matmul_kernel"):
        for stage in ("source", "ttir", "ttgir", "llir", final, "passes", "metadata"):
            assert f"triton.{stage}:{kernel}" in job.stages, (stage, kernel, sorted(job.stages))
        if target.startswith("cuda"):
            assert f"triton.sass:{kernel}" in job.stages
    assert "tt.dot" in job.text("triton.ttir:matmul_kernel")
    assert "run.stdout" in job.stages and "launched" in job.text("run.stdout")


@pytest.mark.parametrize("target, ptx_target, sass_header, mma", [
    # nvdisasm reads the cubin's ELF header (sm_80); for sm_90a it falls back to cuobjdump's listing
    ("cuda:sm_80", ".target sm_80", "EF_CUDA_SM80", "HMMA.16816.F32"),
    # the tiled matmul uses tensor cores: HMMA on Ampere, warpgroup MMA on Hopper
    ("cuda:sm_90", ".target sm_90a", ".target\tsm_90a", "HGMMA.64x128x16.F32"),
])
def test_ptx_names_the_target_and_sass_is_real(jobs, target, ptx_target, sass_header, mma):
    job = jobs[target]
    FileCheck().check(ptx_target).check(".entry matmul_kernel").run(job.text("triton.ptx:matmul_kernel"))
    sass = job.text("triton.sass:matmul_kernel")
    FileCheck().check(sass_header).check(mma).check("EXIT").run(sass)
    assert "LDG" in job.text("triton.sass:add_kernel")


def test_the_ptx_note_reads_as_sentences(jobs):
    """The PTX stage's note is shown as its first sentence, the rest folded: both are sentences a
    newcomer can read, not a fragment ending in a colon."""
    from app.ide import _first_sentence
    note = jobs["cuda:sm_90"].stages["triton.ptx:matmul_kernel"]["meta"]["note"]
    first, rest = _first_sentence(note)
    assert re.fullmatch(r"[A-Z][^:]*\.", first) and ".loc" in first and "inline-asm block" in first, first
    assert re.fullmatch(r"[A-Z].*\.", rest), rest


def test_kernel_stages_say_the_file_their_locations_name_is_the_source_in_the_editor(jobs):
    """Every location of a kernel the user wrote names the job's copy of the program
    (`.loc 1 16 11 // kernels.py:16:11`): each kernel stage says, beside it, that kernels.py is the
    source in the editor (stage meta `file_names`, as Helion's generated module is said); the
    compiler's text keeps the name. Gluon's kernels say it too."""
    from compiler.kernels.program import USERS_FILE_NAME
    job = jobs["cuda:sm_90"]
    ptx = job.text("triton.ptx:matmul_kernel")
    assert re.search(rf"^\s*\.loc\s+\d+ \d+ \d+\s+// {SOURCE_FILE}:\d+:\d+", ptx, re.M)
    for stage in ("ttir", "ptx", "sass"):
        (named,) = job.stages[f"triton.{stage}:matmul_kernel"]["meta"]["file_names"]
        assert (named["file"], named["name"]) == (SOURCE_FILE, USERS_FILE_NAME) and "stage" not in named, named
        assert f"named {SOURCE_FILE}" in named["about"]
        assert re.search(rf'^\s*\.file\s+\d+ "{re.escape(named["path"])}"', ptx, re.M)
    assert "the program in the editor" in USERS_FILE_NAME
    (named,) = jobs["gluon"].stages["triton.ptx:softmax_kernel"]["meta"]["file_names"]
    assert named["file"] == SOURCE_FILE and named["name"] == USERS_FILE_NAME


def test_sm100_blackwell(jobs):
    job = jobs["cuda:sm_100"]
    assert job.error is None
    assert ".target sm_100a" in job.text("triton.ptx:matmul_kernel")
    # Blackwell's tensor-core MMA (tcgen05) is UTCHMMA in SASS
    FileCheck().check(".target\tsm_100a").check("UTCHMMA").run(job.text("triton.sass:matmul_kernel"))
    meta = json.loads(job.text("triton.metadata:matmul_kernel"))
    assert meta["registers"] > 0 and "ptxas-blackwell" in meta["ptxas_log"]


def test_gfx942_amdgcn(jobs):
    job = jobs["hip:gfx942"]
    asm = job.text("triton.amdgcn:matmul_kernel")
    assert "gfx942" in asm and "v_mfma" in asm  # the matmul lowers to MFMA instructions
    meta = json.loads(job.text("triton.metadata:matmul_kernel"))
    assert meta["target"] == "hip:gfx942" and meta["warp_size"] == 64
    assert meta["amdgcn_usage"]["vgpr_count"] > 0


@pytest.mark.parametrize("target", TARGETS)
def test_passes_listed_with_diffs(jobs, target):
    job = jobs[target]
    stage = job.stages["triton.passes:softmax_kernel"]
    passes = stage["meta"]["passes"]
    assert len(passes) > 30
    assert {p["stage"] for p in passes} == {"ttir", "ttgir", "llir"}
    names = [p["name"] for p in passes]
    # the stages' pass managers, in order: TTIR's canonicalisation before the TTGIR conversion
    assert names.index("CanonicalizerPass") < names.index("ConvertTritonToTritonGPU")
    first_ttgir = next(p for p in passes if p["stage"] == "ttgir")
    assert first_ttgir["name"] == "ConvertTritonToTritonGPU" and first_ttgir["changed"]
    assert any(not p["changed"] for p in passes)
    text = job.text("triton.passes:softmax_kernel")
    assert "--- before ConvertTritonToTritonGPU" in text and "+++ after ConvertTritonToTritonGPU" in text
    assert any(line.startswith("+") and "ttg." in line for line in text.splitlines())


@pytest.mark.parametrize("target", TARGETS)
def test_source_maps_reach_the_load_line(jobs, target):
    job = jobs[target]
    load = _line(KERNELS, "x = tl.load(in_ptr")
    final = "ptx" if target.startswith("cuda") else "amdgcn"
    stages = ["source", "ttir", "ttgir", "llir", final] + (["sass"] if target.startswith("cuda") else [])
    for stage in stages:
        assert load in job.mapped_lines(f"triton.{stage}:softmax_kernel"), stage
    if target.startswith("cuda"):  # the SASS lines of the load line include its global loads
        sass = job.text("triton.sass:softmax_kernel").splitlines()
        assert any("LDG" in sass[a - 1] for a, s in job.stages["triton.sass:softmax_kernel"]["source_map"]
                   if s == load)
    # a TTIR line mapped to the load line really is a load
    ttir = job.text("triton.ttir:softmax_kernel").splitlines()
    mapped = [ttir[a - 1] for a, s in job.stages["triton.ttir:softmax_kernel"]["source_map"] if s == load]
    assert any("tt.load" in line for line in mapped)
    # nothing maps outside the kernels' lines
    last_kernel_line = _line(KERNELS, "tl.store(c_ptr")
    for stage in stages:
        assert max(job.mapped_lines(f"triton.{stage}:matmul_kernel")) <= last_kernel_line


@pytest.mark.parametrize("target", TARGETS)
def test_ir_stages_link_line_by_line_through_the_compilers_locations(jobs, target):
    """Every IR stage carries its lines' locations; the final assembly's located lines link back to
    TTGIR lines (measured: all of them for the three kernels on every target)."""
    from compiler import formats
    job = jobs[target]
    final = "ptx" if target.startswith("cuda") else "amdgcn"
    for kernel in ("softmax_kernel", "add_kernel", "matmul_kernel"):
        stages = ["ttir", "ttgir", "llir", final] + (["sass"] if target.startswith("cuda") else [])
        located = {s: formats.check_ir_locations(job.stages[f"triton.{s}:{kernel}"]["meta"]["ir_locations"])
                   for s in stages}
        ttgir_chains = located["ttgir"].chains
        lines = located[final].by_line()
        linked = sum(1 for chains in lines.values()
                     if any(formats.chains_linked(c, t) for c in chains for t in ttgir_chains))
        assert len(lines) > 20 and linked >= 0.95 * len(lines), (kernel, linked, len(lines))
        # the worker's own count, shown on the page, is the same figure
        to_ttgir = next(link for link in job.stages[f"triton.{final}:{kernel}"]["meta"]["ir_links"]
                        if link["title"] == "TTGIR")
        assert (to_ttgir["linked_lines"], to_ttgir["located_lines"]) == (linked, len(lines))
    # the matmul's TTGIR has ops the layout passes made (the TTIR has none of them): they carry the
    # location of the op they serve, so they link to that op's TTIR line (shared-memory buffers to
    # the loads they stage for the dot)
    ttgir = job.text("triton.ttgir:matmul_kernel").splitlines()
    ttir = job.text("triton.ttir:matmul_kernel").splitlines()
    ttgir_lines = formats.check_ir_locations(job.stages["triton.ttgir:matmul_kernel"]["meta"]["ir_locations"]).by_line()
    ttir_lines = formats.check_ir_locations(job.stages["triton.ttir:matmul_kernel"]["meta"]["ir_locations"]).by_line()

    def ttir_partners(n: int) -> list[str]:
        return [ttir[m - 1] for m, theirs in ttir_lines.items()
                if any(formats.chains_linked(a, b) for a in ttgir_lines.get(n, []) for b in theirs)]
    allocs = [n for n, line in enumerate(ttgir, start=1) if "= ttg.local_alloc" in line]
    converts = [n for n, line in enumerate(ttgir, start=1) if "ttg.convert_layout" in line]
    assert allocs and not any("ttg." in line for line in ttir)
    assert all(any("tt.load" in line for line in ttir_partners(n)) for n in allocs), [ttgir[n - 1] for n in allocs]
    assert all(ttir_partners(n) for n in converts)


def test_metadata_and_launches(jobs):
    job = jobs["cuda:sm_90"]
    meta = json.loads(job.text("triton.metadata:matmul_kernel"))
    assert meta["registers"] > 0 and meta["cubin_resource_usage"]["REG"] == meta["registers"]
    assert meta["shared_memory_bytes"] > 0  # the tiles are staged through shared memory
    assert meta["num_warps"] == 4
    # the tile sizes, and the unit strides Triton specialises into constants
    assert meta["constexprs"] == {"BM": 128, "BN": 128, "BK": 32, "sak": 1, "sbn": 1, "scn": 1}
    assert set(meta["compile_times_ms"]) >= {"ttir", "ttgir", "llir", "ptx", "cubin"}
    assert "Used" in meta["ptxas_log"] and meta["spill_stores_bytes"] == 0
    launches = json.loads(job.text("triton.launches"))
    assert [launch["kernel"] for launch in launches] == ["softmax_kernel", "add_kernel", "matmul_kernel"]
    assert launches[0]["grid"] == [64, 1, 1]
    assert launches[1]["grid"] == [5, 1, 1]  # the grid function saw BLOCK=1024
    assert launches[2]["grid"] == [2, 2, 1]
    assert launches[2]["line"] == _line(KERNELS, "matmul_kernel[(2, 2)]")
    args = {a["name"]: a for a in launches[2]["arguments"]}
    assert args["a_ptr"]["dtype"] == "float16" and args["a_ptr"]["shape"] == [256, 128]
    assert args["BM"]["constexpr"] and args["BM"]["value"] == 128
    assert all(launch["timing_ms"] is None for launch in launches)  # nothing ran, nothing timed
    target = job.manifest["timings"]["target"]
    assert target["name"] == "cuda:sm_90" and target["virtual"] and not target["executed"]
    assert "kernels" not in job.manifest["timings"]


@pytest.mark.parametrize("target", TARGETS)
def test_every_kernel_has_a_row_of_resources_with_its_occupancy(jobs, target):
    """kernels.resources: one row per compiled kernel, its numbers the kernel's own (the cubin's REG
    and SHARED, or the AMDGCN listing's VGPRs, SGPRs and LLVM's occupancy), and its theoretical
    occupancy on the target."""
    job = jobs[target]
    table = json.loads(job.text("kernels.resources"))
    assert sorted(r["stage"] for r in table["kernels"]) == sorted(k for k in job.stages
                                                                  if k.startswith("triton.metadata:"))
    assert job.stages["kernels.resources"]["group"] == "Triton"  # (a Gluon job's are Gluon's)
    for row in table["kernels"]:
        meta = json.loads(job.text(row["stage"]))
        assert row["registers"] == meta["registers"] > 0 and row["num_warps"] == meta["num_warps"]
        assert row["target"] == target and meta["occupancy"] == row["occupancy"]
        occ = row["occupancy"]
        assert 0 < occ["percent"] <= 100
        if target.startswith("cuda"):
            assert row["registers"] == meta["cubin_resource_usage"]["REG"]
            assert row["static_shared_bytes"] == meta["cubin_resource_usage"]["SHARED"]
            assert row["dynamic_shared_bytes"] == meta["shared_memory_bytes"]
            assert occ["warps_per_sm"] == occ["blocks_per_sm"] * row["num_warps"] and occ["limited_by"]
            assert occ["model"].startswith("theoretical, the CUDA Occupancy Calculator's model")
        else:
            kernel = row["kernel"]
            listing = job.text(f"triton.amdgcn:{kernel}")
            assert occ["waves_per_simd"] == int(re.search(r";\s*Occupancy:\s+(\d+)", listing).group(1))
            assert row["sgprs"] == int(re.search(r"\.sgpr_count:\s+(\d+)", listing).group(1))
    matmul = next(r for r in table["kernels"] if r["kernel"] == "matmul_kernel")
    assert matmul["config"] == {"BM": 128, "BN": 128, "BK": 32, "sak": 1, "sbn": 1, "scn": 1}
    # each kernel's source lines: those its TTIR's locations name, its def line to its end
    defs = [(n, line.split("def ", 1)[1].split("(")[0]) for n, line in enumerate(KERNELS.splitlines(), start=1)
            if line.startswith("def ")]
    for row in table["kernels"]:
        start = next(n for n, name in defs if name == row["kernel"])
        end = next((n for n, _ in defs if n > start), len(KERNELS.splitlines()) + 1)
        ttir = job.text(f"triton.ttir:{row['kernel']}")
        assert row["lines"] and all(start <= line < end for line in row["lines"]), (row["kernel"], row["lines"])
        assert f"kernels.py\":{row['lines'][-1]}:" in ttir
    assert not any(r["spills"] for r in table["kernels"]) and job.stages["kernels.resources"]["meta"]["spilling"] == []


def test_a_kernel_held_to_fewer_registers_spills_and_is_flagged(jobs):
    """The matmul compiled twice: as ptxas allocates it, and with `maxnreg=96`. The second spills
    (ptxas's own figures), is flagged in the table, and fits more blocks until shared memory limits."""
    import viewers
    job = jobs["spills"]
    assert job.error is None, job.error
    rows = {r["kernel"]: r for r in json.loads(job.text("kernels.resources"))["kernels"]}
    free, held = rows["matmul_kernel.0"], rows["matmul_kernel.1"]
    assert held["config"]["maxnreg"] == 96 and "maxnreg" not in free["config"]
    assert held["registers"] <= 96 < free["registers"]
    log = json.loads(job.text(held["stage"]))["ptxas_log"]
    assert held["spill_stores_bytes"] > 0 and f"{held['spill_stores_bytes']} bytes spill stores" in log
    assert f"{held['spill_loads_bytes']} bytes spill loads" in log
    assert held["spills"] and not free["spills"]
    assert job.stages["kernels.resources"]["meta"]["spilling"] == ["matmul_kernel.1"]
    assert free["occupancy"]["limited_by"] == ["registers"]
    assert held["occupancy"]["blocks_per_sm"] > free["occupancy"]["blocks_per_sm"]
    assert held["occupancy"]["limited_by"] == ["shared memory"]
    html = viewers.render("resources", job.text("kernels.resources"), job.stages["kernels.resources"]["meta"])
    assert '<tr class="kernel spills" data-kernel="matmul_kernel.1"><td><a href="#stage=triton.metadata%3A' \
           'matmul_kernel.1">matmul_<wbr>kernel.1</a> <span class="badge spill-flag"' in html
    assert '<tr class="kernel" data-kernel="matmul_kernel.0">' in html
    assert "spills</b> registers to local memory: matmul_kernel.1." in html


def test_a_gluon_kernel_keeps_its_written_layout_down_to_sass(jobs):
    """The `gluon` language's example on a virtual sm_90: TTGIR (no TTIR: Gluon starts there) with
    the layout the source writes out, its ops mapped to the user's lines, PTX for sm_90a, SASS and
    the kernel's resources."""
    from compiler.gluon.pipeline import EXAMPLE
    job = jobs["gluon"]
    assert job.error is None, job.error
    assert "triton.ttir:softmax_kernel" not in job.stages
    ttgir = job.text("triton.ttgir:softmax_kernel")
    assert ("#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], "
            "order = [0]}>") in ttgir
    assert "tensor<1024xf32, #blocked>" in ttgir and '"ttg.num-warps" = 4' in ttgir
    lines = job.mapped_lines("triton.ttgir:softmax_kernel")
    assert {_line(EXAMPLE, "gl.arange("), _line(EXAMPLE, "gl.max("), _line(EXAMPLE, "gl.exp(")} <= lines
    assert ".target sm_90a" in job.text("triton.ptx:softmax_kernel")
    assert "EXIT" in job.text("triton.sass:softmax_kernel")
    row = json.loads(job.text("kernels.resources"))["kernels"][0]
    assert row["kernel"] == "softmax_kernel" and row["num_warps"] == 4 and row["registers"] > 0
    assert row["occupancy"]["percent"] > 0
    # in the stage bar under Gluon's own name (as CuTe's under CuTe's), not Triton's
    kernel_stages = [k for k in job.stages if k.startswith("triton.") and ":" in k] + ["kernels.resources"]
    assert {job.stages[k]["group"] for k in kernel_stages} == {"Gluon"}


def test_a_gluon_layout_the_target_cannot_take_is_an_error_naming_the_line(jobs):
    """32-thread warps written into the layout, compiled for gfx942's 64-thread wavefronts: Triton's
    verifier says why (MLIR prints it; the job's error carries it) at the user's line."""
    from compiler.gluon.pipeline import EXAMPLE
    error = jobs["gluon_layout_error"].error
    assert error["kind"] == "CompileError" and error["line"] == _line(EXAMPLE, "gl.max(")
    assert "Layout has 32 threads per warp, but the module specifies 64 threads per warp." in error["message"]
    assert "has an invalid layout: #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32]" in error["message"]


def test_helion_kernels_over_a_reduction_list_their_config_space_and_compile(jobs):
    """Before: "line 36: NotImplementedError", raised by irscope's listing of the config space
    (Helion cannot enumerate a reduction dimension's block sizes), and no kernel shown. Now the
    field is a row saying so with Helion's own description, every other field is enumerated, and
    both kernels compile to PTX (the row sum, in a loop over the reduction, enumerates all)."""
    job = jobs["helion_reductions"]
    assert job.error is None, job.error
    softmax = {d["name"]: d for d in json.loads(job.text("helion.config:softmax"))["search_space"]}
    loops = softmax["reduction_loops"]
    assert loops["choices"] is None and loops["items"] == 1
    assert "ReductionLoopSpec(block_ids=[1], size_hint=2560" in loops["not_enumerated"], loops
    assert softmax["num_warps"]["values"] == [1, 2, 4, 8, 16, 32] and softmax["block_sizes"]["items"] == 1
    table = job.text("helion.config_space:softmax")
    assert re.search(r"^reduction_loops\s+\?\s+1 item\(s\); Helion does not enumerate this field", table, re.M), table
    row_sum = {d["name"]: d for d in json.loads(job.text("helion.config:row_sum"))["search_space"]}
    assert all(d.get("not_enumerated") is None for d in row_sum.values()) and row_sum["block_sizes"]["items"] == 2
    for kernel in ("_helion_softmax", "_helion_row_sum"):
        assert re.search(r"^\.target sm_90a?$", job.text(f"triton.ptx:{kernel}"), re.M), kernel


def test_published_programs_checks_and_benchmarks_are_answered_without_values_on_a_virtual_gpu(jobs):
    """Triton's tutorial and a Helion file with run_example end done on a virtual H100, every kernel
    compiled; each check says "not compared" and each benchmark "not timed" at its line, and the
    benchmark's time is NaN, never an invented number."""
    tutorial = jobs["tutorial_add"]
    assert tutorial.error is None, tutorial.error
    assert re.search(r"^\.target sm_90a?$", tutorial.text("triton.ptx:add_kernel"), re.M)
    notices = tutorial.text("run.notices").splitlines()
    assert notices == [
        f"line {_line(TUTORIAL_ADD, 'torch.testing.assert_close(')}: torch.testing.assert_close: "
        f"{virtual_checks.NOT_COMPARED}",
        f"line {_line(TUTORIAL_ADD, 'triton.testing.do_bench(')}: triton.testing.do_bench: {virtual_checks.NOT_TIMED}"]
    assert tutorial.text("run.stdout") == "add: nan ms\n"
    helion_job = jobs["helion_run_example"]
    assert helion_job.error is None, helion_job.error
    for kernel in ("_helion_add", "_helion_softmax"):  # the second run_example's kernel compiled too
        assert re.search(r"^\.target sm_90a?$", helion_job.text(f"triton.ptx:{kernel}"), re.M), kernel
    lines = [int(n.split(":")[0][5:]) for n in helion_job.text("run.notices").splitlines()]
    assert lines == [_line(HELION_RUN_EXAMPLE, "run_example(add"), _line(HELION_RUN_EXAMPLE, "run_example(softmax")]
    assert "helion._testing.run_example: helion, torch called once each; not compared" in \
        helion_job.text("run.notices")


def test_a_helion_kernel_shows_its_config_space_and_triton_code_linked_to_the_users_lines(jobs):
    """The `helion` language's example on a virtual sm_90: each kernel's config (the matmul's given
    one, Helion's default for the add, which names none), its config space from Helion's ConfigSpec,
    the Triton module Helion generated linked through its `# src[...]` comments, and that module
    compiled by Triton to PTX and SASS with the user's lines on every IR stage."""
    from compiler.helion import kernels as helion_kernels
    from compiler.helion.pipeline import EXAMPLE as source
    job = jobs["helion"]
    assert job.error is None, job.error
    matmul = json.loads(job.text("helion.config:matmul"))
    assert matmul["chosen"] == helion_kernels.CHOSEN_GIVEN
    assert matmul["config"]["block_sizes"] == [64, 64, 32] and matmul["config"]["num_warps"] == 4
    assert "@helion.kernel(config=helion.Config(" in matmul["decorator"]
    space = {d["name"]: d for d in matmul["search_space"]}
    assert space["block_sizes"]["items"] == 3 and space["num_warps"]["values"] == [1, 2, 4, 8, 16, 32]
    add = json.loads(job.text("helion.config:add"))
    assert add["chosen"] == helion_kernels.CHOSEN_DEFAULT and add["config"]["block_sizes"]
    table = job.text("helion.config_space:matmul")
    assert re.search(r"^num_warps\s+6\s+1, 2, 4, 8, 16, 32$", table, re.M), table
    code = job.text("helion.triton_code:matmul")
    addmm, store = _line(source, "torch.addmm("), _line(source, "out[tile_m, tile_n] = acc")
    assert "@triton.jit\ndef _helion_matmul(" in code and f"# src[{SOURCE_FILE}:{addmm}]" in code
    assert {addmm, store} <= job.mapped_lines("helion.triton_code:matmul")
    for stage in ("ttir", "ttgir", "llir", "ptx", "sass"):
        assert {addmm, store} <= job.mapped_lines(f"triton.{stage}:_helion_matmul"), stage
    assert ".target sm_90a" in job.text("triton.ptx:_helion_matmul")
    assert "mma" in job.text("triton.ttgir:_helion_matmul")  # the addmm became a tensor-core dot
    # the file Helion's module is loaded from, named after the user's file and kernel (PyTorch's
    # code cache names it by its hash), which every location names, is said in words beside each
    # kernel stage
    ptx = job.text("triton.ptx:_helion_matmul")
    for stage in ("ttir", "ptx", "sass"):
        (named,) = job.stages[f"triton.{stage}:_helion_matmul"]["meta"]["file_names"]
        assert named["stage"] == "helion.triton_code:matmul" and "your kernel matmul" in named["name"]
        assert re.search(rf'^\s*\.file\s+\d+ "{re.escape(named["path"])}"', ptx, re.M)
        assert named["file"] == os.path.basename(named["path"]) == "kernels.helion.matmul.py"
    rows = {r["kernel"]: r for r in json.loads(job.text("kernels.resources"))["kernels"]}
    assert set(rows) == {"_helion_matmul", "_helion_add"}
    # each row's config leads with the Helion config it was compiled with, in short
    assert rows["_helion_matmul"]["config"]["block_sizes"] == "[64, 64, 32]"
    assert rows["_helion_matmul"]["config"]["num_warps"] == 4
    assert rows["_helion_add"]["config"]["block_sizes"] == str(add["config"]["block_sizes"])
    launches = json.loads(job.text("triton.launches"))
    assert [launch["kernel"] for launch in launches] == ["_helion_matmul", "_helion_matmul", "_helion_add"]
    assert {launch["line"] for launch in launches} == {_line(source, "z = add(")}


def test_a_helion_kernel_refusing_its_inputs_names_the_kernels_line_and_the_call(jobs):
    """The assert runs in the host code Helion generated; the error names the user's line it came
    from (through Helion's # src comments) and the line that called the kernel."""
    source = HELION_WRONG_SHAPES()
    error = jobs["helion_wrong_shapes"].error
    assert error["kind"] == "UserCodeError" and error["line"] == _line(source, "assert k == k2")
    assert error["message"] == (f"line {error['line']}: AssertionError: size mismatch 512 != 1024, in the code "
                                f"Helion generated from it, called at line {_line(source, 'z = matmul(x, x)')}")


def test_a_helion_file_that_calls_no_kernel_is_told_how_helion_compiles(jobs):
    """Helion compiles a kernel when it is called: a file that only defines one is told so, not
    Triton's kernel[grid] advice (the fifth walk), and its page opens nothing beside the error (its
    output is empty: app/ide.py stage_to_open)."""
    from types import SimpleNamespace

    from app.ide import stage_to_open
    job = jobs["helion_not_called"]
    error = job.error
    assert error["kind"] == "InputError" and error["line"] is None, error
    assert error["message"].startswith("the program compiled no Helion kernel: Helion compiles a `@helion.kernel` "
                                       "function when it is called"), error
    assert "kernel[grid]" not in error["message"]
    stages = [SimpleNamespace(key=k, group=s["group"], size=s["size"], format=s["format"])
              for k, s in job.stages.items()]
    assert stage_to_open(SimpleNamespace(finished=True, status="failed", stages=stages)) == ""


def test_a_program_that_checks_its_gpu_and_compiles_nothing_is_told_what_it_printed_and_saw(jobs):
    """Triton's block-scaled matmul tutorial prints that it needs a Blackwell GPU and compiles
    nothing on an H100: the job says so with the line the program printed and the target its check
    saw, instead of only Triton's kernel[grid] advice."""
    error = jobs["gpu_checked"].error
    assert error["kind"] == "InputError" and error["line"] is None, error
    assert error["message"].startswith("the program compiled no Triton kernel: launch one with kernel[grid](...)")
    assert "the last line it printed: 'This kernel needs a Blackwell GPU (compute capability 10.0)'" in error["message"]
    assert "it saw cuda:sm_90" in error["message"] and "\n" not in error["message"]  # the page shows it unfolded
    assert "needs a Blackwell GPU" in jobs["gpu_checked"].text("run.stdout")


def test_a_program_that_printed_nothing_is_told_only_how_its_kernels_compile():
    from compiler.user_code import compiled_nothing
    assert compiled_nothing("the program compiled no Gluon kernel", " \n\n", "cuda:sm_90") == \
        "the program compiled no Gluon kernel"
    long = compiled_nothing("no kernel", "first\n" + "x" * 500 + "\n\n", "cuda:sm_100")
    assert "'" + "x" * 200 + "…'" in long and "first" not in long and "it saw cuda:sm_100" in long


def test_helion_configs_sampled_from_the_space_are_compiled_beside_the_chosen_one(jobs):
    """configs=3: each kernel's chosen config and two sampled from its config space, each with its
    Triton module and Triton's stages, so any two can be diffed."""
    from compiler.helion import kernels as helion_kernels
    job = jobs["helion_configs"]
    assert job.error is None, job.error
    for kernel, chosen in (("matmul", helion_kernels.CHOSEN_GIVEN), ("add", helion_kernels.CHOSEN_DEFAULT)):
        configs = [json.loads(job.text(f"helion.config:{kernel}.{n}")) for n in range(3)]
        assert configs[0]["chosen"] == chosen
        assert [c["chosen"] for c in configs[1:]] == [helion_kernels.CHOSEN_SAMPLED.format(i=i, n=3) for i in (2, 3)]
        assert len({json.dumps(c["config"], sort_keys=True) for c in configs}) == 3, configs
        codes = [job.text(f"helion.triton_code:{kernel}.{n}") for n in range(3)]
        assert len(set(codes)) == 3 and all(f"def _helion_{kernel}(" in code for code in codes)
        for n in range(3):
            assert ".target sm_90a" in job.text(f"triton.ptx:_helion_{kernel}.{n}")
    rows = sorted(r["kernel"] for r in json.loads(job.text("kernels.resources"))["kernels"])
    assert rows == sorted(f"_helion_{k}.{n}" for k in ("matmul", "add") for n in range(3))


def test_reading_values_on_a_virtual_target_ends_the_program_at_that_line(jobs):
    """A value read on a virtual target is the program's end, not an error: its kernels compiled
    before it are the job's, and a notice names the line (compiler/kernels/value_reads.py)."""
    job = jobs["reads_values"]
    assert job.error is None
    assert "triton.ptx:double" in job.stages
    assert job.text("run.notices").splitlines() == [
        f"line {_line(READS_VALUES, 'print(float(x.sum()))')}: float(): {value_reads.STOPPED}"]


def test_triton_compile_error_names_the_users_line(jobs):
    error = jobs["compile_error"].error
    assert error["kind"] == "CompileError"
    assert error["line"] == _line(COMPILE_ERROR, "tl.arange(0, 100)")
    # the cause leads, on the headline, with the user's line; Triton's location and excerpt follow
    headline, _, rest = error["message"].partition("\n")
    assert headline.startswith(f"line {error['line']}: ") and "power of 2" in headline, error
    assert "at " not in headline and rest.strip().startswith("at "), error


def test_an_instruction_the_target_lacks_names_the_users_line(jobs):
    """wgmma exists from sm_90 on: on an A100 ptxas refuses the PTX, and the error names the line of
    the inline asm (through the PTX's .loc) and the launch, with ptxas's own reason."""
    job = jobs["wgmma_on_sm80"]
    error = job.error
    line = _line(WGMMA_ON_SM80, "tl.inline_asm_elementwise(")
    assert error["kind"] == "CompileError" and error["line"] == line, error
    assert error["message"].startswith(f"line {line}: ptxas rejected the PTX of kernel fence: Instruction "
                                       "'wgmma.fence' not supported on .target 'sm_80'"), error
    assert f"launched at line {_line(WGMMA_ON_SM80, 'fence[(1,)]')}" in error["message"]


def test_syntax_error_names_its_line(tmp_path):
    sys.path.insert(0, ROOT)
    from compiler.model import Request
    from compiler.pipeline import Bundle, JobContext, UserError
    from compiler.triton.pipeline import TritonPipeline
    source = "import triton\n\n@triton.jit\ndef k(x_ptr):\n    y = (1,\n"
    pipeline = TritonPipeline()
    ctx = JobContext(workdir=str(tmp_path), bundle=Bundle(str(tmp_path / "b")))
    with pytest.raises(UserError) as e:
        pipeline.run(Request("triton", source, pipeline.normalise_options({})), ctx)
    assert e.value.error.kind == "SyntaxError" and e.value.error.line == 5


def test_schema_imports_no_compiler():
    code = ("import sys; sys.path.insert(0, %r); from compiler.registry import get; p = get('triton'); "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(sys.modules); "
            "print([o.choices for o in p.options])" % ROOT)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "cuda:sm_90" in done.stdout and "hip:gfx942" in done.stdout


def test_a_recorder_that_raises_is_irscopes_internal_error_not_the_launch_line(tmp_path):
    """irscope's launch recorder broken (one of the helpers it calls is gone): the job's error is an
    InternalError naming the recorder's function and file, with no line of the user's blamed, and
    the traceback in the worker's output."""
    out = str(tmp_path / "broken")
    code = (f"import sys; sys.path.insert(0, {ROOT!r})\n"
            "from compiler import registry\nfrom compiler.kernels import launches\n"
            "launches._describe_arg = None  # the recorder's first call now raises inside the recorder\n"
            "from testbed.bundle_jobs import run_job\n"
            f"run_job('triton', registry.get('triton').example, {{'target': 'cuda:sm_90'}}, {out!r})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    from testbed.bundle_jobs import Job
    error = Job(out).error
    assert error["kind"] == "InternalError" and error["line"] is None
    assert error["message"].startswith("irscope's own code failed in _record (compiler/kernels/launches.py, line ")
    assert "TypeError: 'NoneType' object is not callable, while running your line" in error["message"]
    assert 'File "' + ROOT + '/compiler/kernels/launches.py"' in done.stderr  # the traceback, for the report


@pytest.mark.gpu
def test_real_gpu_runs_and_times_every_launch(tmp_path):
    """On a CUDA machine (bench/gpu_check.py): target auto runs the program and times launches."""
    out = str(tmp_path / "real")
    src = tmp_path / "kernels.py"
    src.write_text(KERNELS)
    done = subprocess.run([sys.executable, __file__, "auto", str(src), out], capture_output=True, text=True,
                          timeout=600, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-4000:]
    from testbed.bundle_jobs import Job
    job = Job(out)
    assert job.error is None
    target = job.manifest["timings"]["target"]
    assert target["executed"] and not target["virtual"] and target["name"] == target["worker_device"]
    launches = json.loads(job.text("triton.launches"))
    assert len(launches) == 3
    for launch in launches:
        t = launch["timing_ms"]
        assert 0 < t["p20"] <= t["median"] <= t["p80"]
    assert [k["kernel"] for k in job.manifest["timings"]["kernels"]] == ["softmax_kernel", "add_kernel",
                                                                         "matmul_kernel"]
    assert "launched" in job.text("run.stdout")


if __name__ == "__main__":
    # child process: triples of (target, source file, output directory)
    argv = sys.argv[1:]
    if len(argv) > 3:
        # A job on a virtual CUDA target installs the virtual CUDA device (PyTorch's hooks, for the
        # program's torch.cuda calls and autograd), once per process as in a worker, and Triton's
        # driver is process-wide: each job runs in a process of its own, forked from this one after
        # the kernel languages' imports, as a spare template forks each job (compiler/spare_template.py).
        import importlib
        import traceback
        sys.path.insert(0, ROOT)
        from compiler.kernels.program import PREWARM_MODULES
        for module in PREWARM_MODULES:
            importlib.import_module(module)
    for i in range(0, len(argv), 3):
        target, source_path, out = argv[i:i + 3]
        with open(source_path) as f:
            source = f.read()
        if len(argv) == 3:
            _run_job(source, target, out)
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _run_job(source, target, out)
                code = 0
            except BaseException:  # noqa: BLE001 - said on the child's output, its status says it failed
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, (target, source_path, status)

"""End to end: XLA:GPU for virtual GPUs (no GPU needed). The sharded-MLP lesson (JAX, 8 virtual
H100s: examples/sharded-mlp-h100), the sharded-MLP HLO for cuda:h100 (with Triton's IR dumped) and
for cuda:a100 (Triton GEMM off, so dots become cuBLAS calls, with the analytical latency estimator)
compile with the real XLA:GPU of the jax-cuda12 plugin; every stage is checked against what XLA
itself wrote.

The lesson is the session's lesson job (tests/conftest.py `lesson_jobs`, compiled once in the real
sandbox for the gallery's tests too); the two HLO jobs run in one child process started when
collection ends, this file run as a script, so they overlap with the modules before it.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import Background

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow  # three XLA:GPU compiles, SASS of every PTX module (about a minute)

A100_OPTIONS = {"xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_analytical_latency_estimator": True}


def _plan(base: str) -> dict[str, tuple[str, str, dict, str]]:
    """name -> (language, source, options, output directory)."""
    sys.path.insert(0, ROOT)
    from compiler import registry
    hlo = registry.get("hlo").example
    return {
        "hlo_h100": ("hlo", hlo, {"target": "cuda:h100", "triton_ir": True}, os.path.join(base, "hlo_h100")),
        "hlo_a100": ("hlo", hlo, {"target": "cuda:a100", "xla_options": A100_OPTIONS}, os.path.join(base, "hlo_a100")),
    }


def _run_job(language: str, source: str, options: dict, out: str) -> None:
    """Child-process side: run one job as the worker would and write its bundle."""
    sys.path.insert(0, ROOT)
    from compiler import registry
    from compiler.model import Request
    from compiler.pipeline import Bundle, JobContext
    pipeline = registry.get(language)
    workdir = os.path.join(out, "work")
    os.makedirs(workdir, exist_ok=True)
    bundle = Bundle(os.path.join(out, "bundle"))
    pipeline.run(Request(language, source, pipeline.normalise_options(options)), JobContext(workdir=workdir,
                                                                                             bundle=bundle))
    bundle.finish()


def start_in_background(base: str) -> "Background":
    from tests.conftest import start_child
    return start_child([sys.executable, __file__, base], base)


class Job:
    """A job's manifest and stage texts: a result bundle on disk, or a job of a store."""

    def __init__(self, out: str | None = None, store=None, job_id: str = ""):
        self.store, self.job_id = store, job_id
        if store is not None:
            job = store.get_job(job_id)
            self.source = job.request.source
            self.manifest = {"status": job.status, "timings": job.timings,
                             "stages": [store.stage_text(job_id, s.key)[0].to_json() for s in job.stages]}
        else:
            self.directory = os.path.join(out, "bundle")
            with open(os.path.join(self.directory, "manifest.json"), encoding="utf-8") as f:
                self.manifest = json.load(f)
        self.stages = {s["key"]: s for s in self.manifest["stages"]}

    def text(self, key: str) -> str:
        if self.store is not None:
            return self.store.stage_text(self.job_id, key)[1]
        with open(os.path.join(self.directory, self.stages[key]["file"]), encoding="utf-8") as f:
            return f.read()

    def data(self, key: str) -> dict:
        return json.loads(self.text(key))

    def entry_schedule(self) -> dict:
        return next(c for c in self.data("xla.schedule")["computations"] if c["entry"])


@pytest.fixture(scope="module")
def jobs(request, tmp_path_factory, lesson_jobs) -> dict[str, Job]:
    from tests.conftest import take_background
    base = take_background(request, start_in_background, tmp_path_factory)
    found = {name: Job(out) for name, (_, _, _, out) in _plan(base).items()}
    found["lesson"] = Job(store=lesson_jobs.store, job_id=lesson_jobs.ids[("sharded-mlp-h100", "a")])
    return found


GPU_STAGES = ("xla.stablehlo", "xla.passes", "xla.sharding", "xla.spmd", "xla.optimized",
              "xla.schedule", "xla.buffer_assignment", "xla.memory", "xla.cost", "xla.fusions", "xla.debug_options",
              "xla.sass", "xla.graph")


@pytest.mark.parametrize("name", ["lesson", "hlo_h100", "hlo_a100"])
def test_every_gpu_stage_is_there_and_says_it_is_virtual(jobs, name):
    job = jobs[name]
    assert job.manifest["status"] == "done"
    assert set(GPU_STAGES) <= set(job.stages)
    # the HLO jobs' Input is the module XLA received; the JAX lesson's input is Python, not echoed
    assert ("xla.input" in job.stages) == (name != "lesson")
    assert any(k.startswith("xla.llvm_ir:") for k in job.stages) and any(k.startswith("xla.ptx:") for k in job.stages)
    target = job.manifest["timings"]["target"]
    product = "H100" if name != "hlo_a100" else "A100"
    assert target["virtual"] and not target["executed"]
    assert target["summary"].startswith(f"virtual {product}: compiled by XLA:GPU, not run; autotuning off, "
                                        "default tile configs")
    # nothing ran, so nothing was timed: no run timing at all
    assert "run" not in job.manifest["timings"]
    optimized = job.text("xla.optimized")
    assert optimized.startswith("HloModule") and "is_scheduled=true" in optimized.split("\n")[0]


def test_ptx_targets_sm_90_and_sass_comes_from_it(jobs):
    for name, arch in (("lesson", "sm_90a"), ("hlo_h100", "sm_90a"), ("hlo_a100", "sm_80")):
        job = jobs[name]
        ptx_keys = [k for k in job.stages if k.startswith("xla.ptx:")]
        for key in ptx_keys:
            assert re.search(rf"^\.target {arch}\b", job.text(key), re.M), (name, key)
        sass = job.text("xla.sass")
        assert sass.count("// ===== PTX ") == len(ptx_keys)
        assert f"-arch={arch}" in sass
        assert job.stages["xla.sass"]["meta"]["ptxas"].endswith(os.path.join("cuda_nvcc", "bin", "ptxas"))
    # the lesson's bf16 GEMMs are tensor-core MMAs in the SASS
    assert re.search(r"\bHMMA\.\d+\.F32\.BF16\b", jobs["lesson"].text("xla.sass"))


def test_the_resource_table_holds_every_kernel_of_xlas_ptx(jobs):
    """XLA:GPU's kernels, as every GPU job's: one row per kernel of every PTX module XLA dumped, with
    the registers of the cubin the ptxas XLA used assembled and the occupancy on the target; the
    dot's Triton GEMM fusion is marked."""
    for name in ("lesson", "hlo_h100", "hlo_a100"):
        job = jobs[name]
        rows = job.data("kernels.resources")["kernels"]
        entries = [(key, kernel) for key in job.stages if key.startswith("xla.ptx:")
                   for kernel in re.findall(r"^\.visible \.entry (\S+?)\(", job.text(key), re.M)]
        assert len(rows) == len(entries) >= 2, name
        assert [(r["stage"], r["kernel"].removesuffix(" (Triton fusion)")) for r in rows] == entries
        for row in rows:
            assert row["registers"] > 0 and row["num_warps"] > 0, row
            assert row["target"] == job.manifest["timings"]["target"]["name"], row
            assert 0 < row["occupancy"]["percent"] <= 100 and row["occupancy"]["limited_by"], row
        triton = [r for r in rows if r["kernel"].endswith(" (Triton fusion)")]
        gemms = [d for d in job.stages["xla.fusions"]["meta"]["fusions"] if d["decision"].startswith("Triton")]
        assert len(triton) >= 1 if gemms else not triton, (name, [r["kernel"] for r in rows])


def test_lesson_each_all_reduce_overlaps_the_next_gradient_gemm(jobs):
    job = jobs["lesson"]
    entry = job.entry_schedule()
    pairs = entry["async_pairs"]
    optimized = job.text("xla.optimized")
    # the data-parallel gradients of the 4 weights: 4 async all-reduces in the optimized module
    assert len(pairs) == 4 == optimized.count(" all-reduce-start(")
    assert all(p["opcode"] == "all-reduce" for p in pairs)
    decisions = {d["name"]: d for d in job.stages["xla.fusions"]["meta"]["fusions"]}
    overlapped = [p for p in pairs if any(decisions.get(c, {}).get("decision", "").startswith("Triton GEMM")
                                          for c in p["compute"])]
    assert len(overlapped) >= 3
    order = [i["name"] for i in entry["instructions"]]
    by_name = {i["name"]: i for i in entry["instructions"]}
    for p in pairs:
        # the pair's indices are positions in the scheduled order, and `between` is what lies there
        assert order[p["start_index"]] == p["start"] and order[p["done_index"]] == p["done"]
        assert p["between"] == order[p["start_index"] + 1: p["done_index"]]
        # the scheduler's own estimates put the compute between start and done
        for name in p["compute"]:
            assert by_name[p["start"]]["start"] <= by_name[name]["start"] <= by_name[name]["end"] \
                <= by_name[p["done"]]["end"]
    assert entry["statistics"]["total_cycles"] > 0
    assert entry["statistics"]["all_reduce_wasted_cycles"] >= 0
    assert "not measurements" in job.data("xla.schedule")["estimates"]


def test_lesson_fusion_decisions_and_source_lines(jobs):
    job = jobs["lesson"]
    source = job.source.split("\n")
    decisions = job.stages["xla.fusions"]["meta"]["fusions"]
    gemms = [d for d in decisions if d["decision"].startswith("Triton GEMM")]
    assert gemms and all(d["tiling"]["output_tiles"] and d["tiling"]["num_warps"] for d in gemms)
    # each row of the table names its instruction and links to the JAX line of the matmul
    table = job.text("xla.fusions").split("\n")
    pairs = dict(map(tuple, job.stages["xla.fusions"]["source_map"]))
    for row, line in pairs.items():
        name = table[row - 1].split()[0]
        if any(d["name"] == name for d in gemms):
            assert "@" in source[line - 1], (name, source[line - 1])
    assert any(table[row - 1].split()[0] in {d["name"] for d in gemms} for row in pairs)
    # the optimized module's all-reduces come from the user's matmul lines too (the gradients' dots)
    opt = job.text("xla.optimized").split("\n")
    opt_pairs = job.stages["xla.optimized"]["source_map"]
    starts = [u for a, u in opt_pairs if " all-reduce-start(" in opt[a - 1]]
    assert starts and all("@" in source[u - 1] for u in starts)


def test_hlo_h100_partitioned_scheduled_and_triton_ir(jobs):
    job = jobs["hlo_h100"]
    assert "all-reduce" in {c["opcode"] for c in job.stages["xla.spmd"]["meta"]["collectives"]}
    assert len(job.entry_schedule()["async_pairs"]) >= 1
    memory = job.data("xla.memory")
    assert memory["peak_bytes"] == memory["xla_memory_stats"]["temp_size_in_bytes"] > 0
    # the dot became a Triton GEMM fusion; its TTIR and TTGIR were dumped by XLA
    gemm = next(d for d in job.stages["xla.fusions"]["meta"]["fusions"] if d["decision"].startswith("Triton GEMM"))
    ttir = job.text(f"xla.triton:{gemm['name']}.ttir")
    ttgir = job.text(f"xla.triton:{gemm['name']}.ttgir")
    assert "tt.dot" in ttir and "ttg." not in ttir
    assert "#ttg." in ttgir and "tt.func" in ttgir
    assert "ConvertTritonToTritonGPU" in job.stages[f"xla.triton:{gemm['name']}.ttgir"]["meta"]["passes"]
    # the dot's metadata names the input's `dot` instruction: its line in the user's HLO
    source = job.text("xla.input").split("\n")
    table = job.text("xla.fusions").split("\n")
    pairs = dict(map(tuple, job.stages["xla.fusions"]["source_map"]))
    row = next(r for r in pairs if table[r - 1].split()[0] == gemm["name"])
    assert source[pairs[row] - 1].strip().startswith("dot = ")


def test_hlo_a100_cublas_and_the_estimator_option(jobs):
    job = jobs["hlo_a100"]
    decisions = job.stages["xla.fusions"]["meta"]["fusions"]
    cublas = [d for d in decisions if d["decision"] == "cuBLAS"]
    assert cublas and all(d["target"].startswith("__cublas$") for d in cublas)
    assert not any(d["decision"].startswith("Triton GEMM") for d in decisions)
    options = job.text("xla.debug_options")
    assert "xla_gpu_enable_triton_gemm: false" in options
    assert "xla_gpu_enable_analytical_latency_estimator: true" in options
    assert not any(k.startswith("xla.triton:") for k in job.stages)  # triton_ir is off by default


def test_in_the_sandbox_ptxas_and_nvdisasm_are_found(tmp_path):
    """Through the real runner and bubblewrap (the venv bound read-only): XLA:GPU finds the wheel's
    ptxas (it compiles the kernels with it; without it the compile fails) and the SASS stage lists
    machine code; the CPU target still compiles and runs in the same sandbox with the plugin there."""
    from tests.conftest import compile_and_wait, make_app, needs_bwrap, stage_text
    if needs_bwrap.args[0]:
        pytest.skip(needs_bwrap.kwargs["reason"])
    app = make_app(tmp_path, languages="hlo", workers=1)
    try:
        client = app.test_client()
        from compiler import registry
        example = registry.get("hlo").example
        job = compile_and_wait(client, "hlo", example, {"target": "cuda:a100", "devices": 8}, timeout=600)
        assert job["status"] == "done", job.get("error")
        assert job["timings"]["job"]["sandbox"] == "bubblewrap"
        keys = [s["key"] for s in job["stages"]]
        ptx = [k for k in keys if k.startswith("xla.ptx:")]
        assert ptx and all(".target sm_80" in stage_text(client, job["id"], k) for k in ptx)
        sass = stage_text(client, job["id"], "xla.sass")
        assert "ptxas failed" not in sass and "disassembly failed" not in sass
        assert re.search(r"^\s+/\*[0-9a-f]{4}\*/\s+\w+", sass, re.M)  # nvdisasm's instruction lines
        cpu = compile_and_wait(client, "hlo", example, {"target": "cpu", "devices": 8, "time_run": False}, timeout=600)
        assert cpu["status"] == "done", cpu.get("error")
        assert "target" not in cpu["timings"] and "xla.asm" in [s["key"] for s in cpu["stages"]]
    finally:
        app.extensions["irscope"].runner.shutdown()


if __name__ == "__main__":
    for language, source, options, out in _plan(sys.argv[1]).values():
        _run_job(language, source, options, out)

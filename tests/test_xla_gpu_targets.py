"""The virtual XLA:GPU targets and the parsers of XLA:GPU's dumps, on fixtures recorded from real
compiles (tests/fixtures/xla/README.md); fast: nothing here compiles."""
from __future__ import annotations

import json
import os
import re

import pytest
from google.protobuf import text_format

from compiler import registry
from compiler.pipeline import OptionError
from compiler.targets.xla_gpu import XLA_GPU_TARGETS, get_xla_gpu_target, virtual_note
from compiler.xla import dump_index, gpu_code, gpu_schedule, hlo_text
from compiler.xla.protos import message_class, parse_text_proto

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "xla")


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("name", list(XLA_GPU_TARGETS))
def test_target_config_is_a_gpu_target_config_proto_of_the_pinned_xla(name):
    """Each config parses, strictly (no unknown field), as the GpuTargetConfigProto of the installed
    jaxlib's own descriptor - what the topology API parses it with - and describes its product."""
    target = get_xla_gpu_target(name)
    text = target.config_text()
    assert re.search(r"^# Source: openxla/xla, xla/backends/gpu/target_config/specs/\w+\.txtpb$", text, re.M)
    cls = message_class("stream_executor.GpuTargetConfigProto", "xla/stream_executor/device_description.proto")
    config = cls()
    text_format.Parse(text, config)  # raises on a field this XLA does not know
    assert config.platform_name == "CUDA" and config.device_description_str == target.product
    capability = config.gpu_device_info.cuda_compute_capability
    assert target.arch.startswith(f"sm_{capability.major}{capability.minor}")
    assert config.gpu_device_info.core_count == {"cuda:a100": 108, "cuda:h100": 132, "cuda:b200": 148}[name]


def test_virtual_note_says_what_differs_from_a_real_device():
    assert virtual_note(get_xla_gpu_target("cuda:h100")).startswith(
        "virtual H100: compiled by XLA:GPU, not run; autotuning off, default tile configs")


def test_target_option_and_reserved_dump_options():
    pipeline = registry.get("jax")
    assert pipeline.normalise_options({"target": "cuda:h100"})["target"] == "cuda:h100"
    assert pipeline.normalise_options({})["target"] == "cpu"
    with pytest.raises(OptionError, match="must be one of"):
        pipeline.normalise_options({"target": "cuda:h200"})
    # irscope sets the scheduler's dump itself; the estimator choices pass through, checked
    with pytest.raises(OptionError, match="set by irscope itself"):
        pipeline.normalise_options({"xla_options": {"xla_dump_latency_hiding_schedule": False}})
    options = pipeline.normalise_options({"xla_options": {"xla_gpu_enable_analytical_sol_latency_estimator": "true"}})
    assert options["xla_options"] == {"xla_gpu_enable_analytical_sol_latency_estimator": True}


def test_dump_index_sorts_a_gpu_dump():
    names = fixture("gpu_a100_dump_names.txt").split()
    # with the names XLA gives the scheduler's dump and a Triton fusion's dumps (as on cuda:h100)
    index = dump_index.index_dump(names + ["sharded_matmul.schedule.txt",
                                           "module_0001.sharded_matmul.gemm_fusion_dot.ttir.txt",
                                           "module_0001.sharded_matmul.gemm_fusion_dot.before_validation.ttir.txt",
                                           "sharded_matmul.gemm_fusion_dot.triton-to-llvm.txt"])
    assert index.prefix == "module_0001.sharded_matmul"
    assert index.after_optimizations == "module_0001.sharded_matmul.sm_8.0_gpu_after_optimizations.txt"
    assert index.buffer_assignment.endswith("sm_8.0_gpu_after_optimizations-buffer-assignment.txt")
    assert index.live_range.endswith("-live-range.txt")
    assert index.debug_options == "module_0001.sharded_matmul.debug_options"
    assert sorted(index.ptx) == sorted(n.split(".")[2] for n in names if n.endswith(".ptx"))
    assert set(index.ptx) <= set(index.llvm_ir)
    assert index.schedule == "sharded_matmul.schedule.txt"
    assert index.ttir == {"gemm_fusion_dot": "module_0001.sharded_matmul.gemm_fusion_dot.ttir.txt"}
    assert index.triton_passes == {"gemm_fusion_dot": "sharded_matmul.gemm_fusion_dot.triton-to-llvm.txt"}
    # the cuBLAS-LT rewriter's helper modules (module_0002...) dump snapshots too: not this module's
    snapshots = [n for n in names if dump_index.parse_snapshot_name(n)]
    assert [s.file for s in index.snapshots] == [n for n in snapshots if n.startswith("module_0001.")]
    assert len(index.snapshots) < len(snapshots)


def test_latency_hiding_schedule_dump():
    records = gpu_schedule.schedule_records(parse_text_proto(fixture("gpu_h100_schedule.txt"), "xla.ScheduleProto"))
    optimized = hlo_text.parse_hlo_text(fixture("gpu_h100_optimized.txt"))
    entry = records[optimized.entry.name]
    names = [r["name"] for r in entry["instructions"]]
    # the scheduler's order is the scheduled module's order, every instruction with its estimate
    assert names == [i.name for i in optimized.entry.instructions]
    times = {r["name"]: r for r in entry["instructions"]}
    assert all(r["start"] <= r["end"] for r in entry["instructions"])
    assert times["all-reduce-start"]["end"] <= times["all-reduce-done"]["start"]
    assert 0 < entry["statistics"]["total_cycles"] <= max(r["end"] for r in entry["instructions"])
    assert entry["cycles_per_microsecond"] >= 1


def test_async_pairs_with_what_is_scheduled_between():
    a100 = hlo_text.parse_hlo_text(fixture("gpu_a100_cublas_optimized.txt"))
    pairs = gpu_schedule.async_pairs(a100.entry)
    order = [i.name for i in a100.entry.instructions]
    assert [p["opcode"] for p in pairs] == ["all-gather"]
    p = pairs[0]
    assert order[p["start_index"]] == p["start"] == "all-gather-start"
    assert order[p["done_index"]] == p["done"]
    assert p["between"] == order[p["start_index"] + 1: p["done_index"]] and p["compute"]
    h100 = hlo_text.parse_hlo_text(fixture("gpu_h100_optimized.txt"))
    assert [(p["opcode"], p["done_index"] - p["start_index"]) for p in gpu_schedule.async_pairs(h100.entry)] == \
        [("all-reduce", 1)]


def test_fusion_decisions_triton_tiles_and_cublas():
    h100 = gpu_code.fusion_decisions(hlo_text.parse_hlo_text(fixture("gpu_h100_optimized.txt")))
    gemm = next(d for d in h100 if d["decision"].startswith("Triton GEMM"))
    text = fixture("gpu_h100_optimized.txt")
    config = json.loads(re.search(rf"%{gemm['name']} = .*?backend_config=(\{{.*\}})$", text, re.M).group(1))
    assert gemm["tiling"] == config["fusion_backend_config"]["block_level_fusion_config"]
    assert gemm["op_name"] == "dot"
    a100 = gpu_code.fusion_decisions(hlo_text.parse_hlo_text(fixture("gpu_a100_cublas_optimized.txt")))
    cublas = [d for d in a100 if d["decision"] == "cuBLAS"]
    assert len(cublas) == 1 and cublas[0]["target"] == "__cublas$lt$matmul"
    table = gpu_code.render_decisions(a100)
    assert table.split("\n")[2 + a100.index(cublas[0])].split()[:2] == [cublas[0]["name"], "cuBLAS"]


def test_ptxas_location_and_ptx_target():
    assert gpu_code.cuda_data_dir(fixture("gpu_a100_debug_options.txt")).endswith("nvidia/cuda_nvcc")
    assert gpu_code.ptx_target("//\n.version 8.4\n.target sm_90a\n.address_size 64\n") == "sm_90a"


def test_triton_ir_takes_the_module_before_its_lowering_to_llvm():
    dump = ("// -----// IR Dump Before ConvertTritonToTritonGPU: convert-triton-to-tritongpu ('builtin.module' "
            "operation) //----- //\nmodule {\n  tt.func @k() {\n    tt.return\n  }\n}\n"
            "// -----// IR Dump Before TritonGPUCoalesce: tritongpu-coalesce ('builtin.module' operation) //----- //\n"
            "#blocked = #ttg.blocked<{}>\nmodule attributes {\"ttg.num-warps\" = 2 : i32} {\n  tt.func @k() {\n"
            "    tt.return\n  }\n}\n"
            "// -----// IR Dump Before ConvertTritonGPUToLLVM: convert-triton-gpu-to-llvm ('builtin.module' "
            "operation) //----- //\n#blocked = #ttg.blocked<{}>\nmodule attributes {\"ttg.num-warps\" = 2 : i32} {\n"
            "  tt.func @k() {\n    tt.return\n  }\n}\n"
            "// -----// IR Dump Before Canonicalizer: canonicalize ('builtin.module' operation) //----- //\n"
            "module {\n  llvm.func @k() {\n    llvm.return\n  }\n}\n")
    ir = gpu_code.triton_ir(dump)
    assert ir["passes"] == ["ConvertTritonToTritonGPU", "TritonGPUCoalesce", "ConvertTritonGPUToLLVM", "Canonicalizer"]
    assert "tt.func" in ir["ttgir"] and "ttg.num-warps" in ir["ttgir"] and "llvm.func" not in ir["ttgir"]


def test_estimated_timeline_view_draws_each_async_pair():
    import viewers
    optimized = hlo_text.parse_hlo_text(fixture("gpu_a100_cublas_optimized.txt"))
    comps = hlo_text.schedule(optimized)
    entry = next(c for c in comps if c["entry"])
    entry["async_pairs"] = gpu_schedule.async_pairs(optimized.entry)
    for step, ins in enumerate(entry["instructions"]):  # made-up estimates: one unit per step
        ins["start"], ins["end"] = float(step), float(step) + 0.5
    entry["statistics"] = {"total_cycles": 9.5}
    html = viewers.render("timeline", json.dumps({"computations": [entry], "scheduled": True,
                                                  "estimates": "unit steps"}), {})
    pair = entry["async_pairs"][0]
    assert html.count('class="async"') == 1
    assert f"{pair['start']} .. {pair['done']}" in html and pair["compute"][0] in html
    assert "total_cycles: 9.5" in html and "unit steps" in html


def test_a_cpu_job_records_and_shows_no_cuda_plugin(tmp_path):
    """The versions a job records (and is cached by, and its status line shows) are those that
    compiled it: XLA:CPU is jaxlib's, so an HLO job for the CPU names no CUDA plugin or ptxas; a
    virtual XLA:GPU target compiles with the plugin and names it."""
    from service.toolchain import toolchain
    from tests.conftest import make_app
    app = make_app(tmp_path, languages="hlo,jax")
    try:
        jobs = app.extensions["irscope"].jobs
        cuda = {"jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cuda-nvcc-cu12"}
        for language in ("hlo", "jax"):
            cpu = jobs.plan(jobs.parse({"language": language, "source": registry.get(language).example}))
            assert cpu.request.options["target"] == "cpu"
            assert {"irscope", "jax", "jaxlib"} <= set(cpu.toolchain) and not cuda & set(cpu.toolchain), cpu.toolchain
            gpu = jobs.plan(jobs.parse({"language": language, "source": registry.get(language).example,
                                        "options": {"target": "cuda:h100"}}))
            assert cuda <= set(gpu.toolchain), gpu.toolchain
            assert gpu.key != cpu.key
        # the language's whole list, for what is not one job (a toolchain's warm-up, its listing)
        assert cuda <= set(toolchain("hlo"))
    finally:
        app.extensions["irscope"].runner.shutdown()

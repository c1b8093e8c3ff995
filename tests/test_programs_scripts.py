"""The script families of the corpus (tests/programs/: pytorch, distributed, kernelbench, jax):
programs written the way people publish them (tutorials, training loops, bug-report repros,
torchrun scripts, KernelBench problems, JAX docs) compile as pasted, every compile captured.

One app (two workers, the session's PyTorch toolchain cache seeded, one spare per kind: PyTorch
jobs fork from warm templates, the host's and the virtual H100's) takes every program at once;
each test says what one program must have produced. The corpus keeps one program per capability
and its sizes tiny: this module's jobs are the suite's time. Beside the corpus, a few programs of our own
pin the fixes the corpus needed (each named after what was wrong before).
"""
from __future__ import annotations

import json
import os
import re
from urllib.parse import quote

import pytest

from tests.conftest import make_app, seed_toolchain_cache, stage_text, wait_job
from tests.programs.families import family

FAMILIES = ("pytorch", "distributed", "kernelbench", "jax")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


# name -> (language, source, options)
JOBS: dict[str, tuple[str, str, dict]] = {}
for _name in FAMILIES:
    _family = family(_name)
    for _path in _family.programs():
        JOBS[f"{_name}/{os.path.basename(_path)[:-3]}"] = (_family.language, _read(_path), dict(_family.options))

# A tutorial's timing on a GPU: the model moved with .cuda(), CUDA events around the compiled call,
# then the loss read with .item(). Before: refused ("target cuda:sm_90: your program makes and runs
# its own tensors, and this worker has no such GPU"). Now: compile-only on the virtual H100, the
# events and synchronize a notice (no invented time), the .item() line ends the program, job done.
TIMED_ON_GPU = '''\
import torch
import torch.nn as nn


def timed(fn):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    result = fn()
    end.record()
    torch.cuda.synchronize()
    return result, start.elapsed_time(end) / 1000


net = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)).cuda().half()
fast = torch.compile(net)
x = torch.randn(8, 32, device="cuda", dtype=torch.half)
out, seconds = timed(lambda: fast(x))
print("compiled call took", seconds)
print("mean", out.mean().item())
print("never reached")
'''
TIMED_LINES = {"elapsed_time": 12, "synchronize": 11, "item": 20}
JOBS["own/timed_on_gpu"] = ("pytorch", TIMED_ON_GPU, {"target": "cuda:sm_90"})

# Before: a torchrun script was refused ("devices=2: a program that calls torch.compile itself runs
# as one process"). Now it is rank 0 of the world; `torch.cuda.device_count()` is the world's size
# (a node of that many GPUs, as torchrun sees it), as scripts that check it before starting ask.
ENOUGH_GPUS = '''\
import sys

import torch
import torch.distributed as dist


def main():
    if torch.cuda.device_count() < 2:
        print("needs 2 GPUs")
        sys.exit()
    dist.init_process_group()
    compiled = torch.compile(lambda t: t.exp().sum(0))
    compiled(torch.randn(4, 4, device="cuda"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''
JOBS["own/enough_gpus"] = ("pytorch", ENOUGH_GPUS, {"target": "cuda:sm_90", "devices": 2})

# A program whose only compile is after it reads a fake tensor's value: the notice is not enough,
# nothing was compiled, so the job fails saying so.
VALUE_FIRST = '''\
import torch

x = torch.randn(4, device="cuda")
if x.sum() > 0:
    x = x * 2
torch.compile(torch.sin)(x)
'''
JOBS["own/value_first"] = ("pytorch", VALUE_FIRST, {"target": "cuda:sm_90"})


class Jobs:
    def __init__(self, app, ids: dict[str, str]):
        self.client, self.ids = app.test_client(), ids

    def job(self, name: str) -> dict:
        return wait_job(self.client, self.ids[name], timeout=900)

    def keys(self, name: str) -> list[str]:
        return [s["key"] for s in self.job(name)["stages"]]

    def text(self, name: str, key: str) -> str:
        self.job(name)  # ended (a test run alone reads a job no earlier test waited for)
        return stage_text(self.client, self.ids[name], key)

    def stage(self, name: str, key: str) -> dict:
        self.job(name)
        return self.client.get(f"/api/jobs/{self.ids[name]}/stages/{quote(key, safe='')}?format=json").get_json()


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, pytorch_toolchain_cache):
    data = tmp_path_factory.mktemp("scripts") / "var"
    seed_toolchain_cache(pytorch_toolchain_cache, str(data))
    app = make_app(data.parent, workers=2, spare_workers=1, languages="pytorch,jax", warm_toolchain_cache=True)
    client = app.test_client()
    ids = {}
    for name, (language, source, options) in JOBS.items():
        response = client.post("/api/compile", json={"language": language, "source": source, "options": options})
        assert response.status_code in (200, 202), (name, response.get_json())
        ids[name] = response.get_json()["job"]
    yield Jobs(app, ids)
    app.extensions["irscope"].runner.shutdown()


def _graphs(keys: list[str]) -> list[str]:
    return [k.split(":", 1)[1] for k in keys if k.startswith("dynamo.fx_graph:")]


def _done(jobs: Jobs, name: str) -> list[str]:
    job = jobs.job(name)
    assert job["status"] == "done", (name, job["error"])
    return jobs.keys(name)


def _has_code(keys: list[str], graphs: list[str]) -> None:
    for cid in graphs:
        assert any(k.startswith(f"inductor.output_code:{cid}") for k in keys), (cid, keys)


# --- pytorch: tutorials, training loops, repros ------------------------------------------------

# name -> (frames compiled at least, graph breaks made, recompiles made, backward compiled)
PYTORCH = {
    "tutorial_three_ways": (3, False, False, False),
    "module_compile_inference": (1, False, False, False),
    "train_loop_sgd": (1, False, False, True),
    "compiled_adam_step": (1, False, False, False),
    "print_graph_break": (2, True, False, False),
    "recompile_on_shapes": (2, False, True, False),
    "dynamic_true": (1, False, False, False),
    "max_autotune_no_cudagraphs": (1, False, False, False),
    "export_then_compile": (1, False, False, False),
}


def test_the_pytorch_family_is_all_here():
    assert sorted(PYTORCH) == sorted(n.split("/")[1] for n in JOBS if n.startswith("pytorch/"))


@pytest.mark.parametrize("name", sorted(PYTORCH))
def test_pytorch_program_compiles_every_frame(jobs, name):
    frames, breaks, recompiles, backward = PYTORCH[name]
    keys = _done(jobs, f"pytorch/{name}")
    graphs = _graphs(keys)
    assert len(graphs) >= frames, (name, graphs)
    _has_code(keys, graphs)
    run_mode = jobs.job(f"pytorch/{name}")["timings"]["run_mode"]
    assert run_mode["mode"] == "program"
    if breaks:
        assert any(k.startswith("dynamo.graph_breaks") or k.startswith("dynamo.graph_break") for k in keys), keys
    if recompiles:
        assert any(re.fullmatch(r"\d+/[1-9]\d*", g) for g in graphs), (name, graphs)  # a frame's second compile
    # the Kernels group's table lists every compile's kernels (a recompile's, named as the first's, too)
    kernels = [k for k in keys if k.startswith("kernel:")]
    if kernels:
        table = json.loads(jobs.text(f"pytorch/{name}", "kernels.resources"))["kernels"]
        assert [r["stage"] for r in table] == kernels, (name, table)
    if backward:
        assert any(k.startswith("inductor.output_code:") and k.endswith(".backward") for k in keys), keys


def test_dynamic_true_compiles_one_symbolic_graph(jobs):
    keys = _done(jobs, "pytorch/dynamic_true")
    assert _graphs(keys) == ["0/0"]
    assert re.search(r"f32\[s\d+, s\d+\]", jobs.text("pytorch/dynamic_true", "dynamo.fx_graph:0/0"))  # sizes symbolic


def test_the_programs_output_is_kept(jobs):
    assert "centered ready" in jobs.text("pytorch/print_graph_break", "run.stdout")
    assert "epoch 2 loss" in jobs.text("pytorch/train_loop_sgd", "run.stdout")  # argparse's defaults in main()


# --- distributed: torchrun scripts on a virtual world -----------------------------------------

DISTRIBUTED = sorted(n for n in JOBS if n.startswith("distributed/"))


@pytest.mark.parametrize("name", DISTRIBUTED)
def test_torchrun_script_compiles_rank_0_with_its_collectives(jobs, name):
    keys = _done(jobs, name)
    graphs = _graphs(keys)
    assert graphs, keys
    _has_code(keys, graphs)
    assert "distributed.collectives" in keys
    run_mode = jobs.job(name)["timings"]["run_mode"]
    assert run_mode["mode"] == "compile-only" and "virtual world of 4 ranks" in run_mode["sentence"]


def test_tensor_parallel_training_shards_and_stops_at_the_loss_read(jobs):
    name = "distributed/tp_mlp_train"
    keys = _done(jobs, name)
    assert "distributed.placements" in keys and any(k.startswith("triton.ptx:") for k in keys)
    assert any(k.endswith(".backward") and k.startswith("inductor.output_code:") for k in keys)
    source = JOBS[name][1].splitlines()
    line = next(n for n, text in enumerate(source, 1) if "loss.item()" in text)
    assert f"line {line}: a tensor's value read" in jobs.text(name, "run.notices")


def test_fsdp2_on_a_virtual_gpu_takes_its_streams_and_gathers_each_block(jobs):
    """FSDP2 on GPUs (nccl, `.cuda()`, each block sharded): its all-gather and reduce-scatter
    streams are the virtual GPU's one stream (before: "torch.cuda.Stream requires CUDA support" at
    the first forward). Forward and backward compile, its eager collectives are recorded, and the
    loss read ends the program."""
    name = "distributed/fsdp2_train_gpu"
    keys = _done(jobs, name)
    assert any(k.startswith("inductor.output_code:") and k.endswith(".backward") for k in keys), keys
    graphs = json.loads(jobs.stage(name, "distributed.collectives")["text"])["graphs"]
    eager = [c["op"] for g in graphs if g["compile_id"] == "eager" for c in g["collectives"]]
    assert any("all_gather" in op for op in eager) and any("reduce_scatter" in op for op in eager), eager
    source = JOBS[name][1].splitlines()
    line = next(n for n, text in enumerate(source, 1) if "loss.item()" in text)
    assert f"line {line}: a tensor's value read" in jobs.text(name, "run.notices")


def test_sequence_parallel_training_gathers_and_scatters_the_sequence(jobs):
    """PyTorch's examples' habits: a GPU-count guard at import, the mesh started by
    init_device_mesh alone, a rank-0 logger, AdamW, and the loss logged with `.item()`."""
    name = "distributed/sequence_parallel_train"
    keys = _done(jobs, name)
    assert "inductor.output_code:0/0.backward" in keys
    text = str(jobs.stage(name, "distributed.collectives"))
    assert "all_gather_into_tensor" in text and "reduce_scatter_tensor" in text
    source = JOBS[name][1].splitlines()
    line = next(n for n, text in enumerate(source, 1) if "loss.item()" in text)
    assert f"line {line}: a tensor's value read" in jobs.text(name, "run.notices")


# --- kernelbench: Model / get_inputs / get_init_inputs with einops ---------------------------

KERNELBENCH = sorted(n for n in JOBS if n.startswith("kernelbench/"))


@pytest.mark.parametrize("name", KERNELBENCH)
def test_kernelbench_problem_with_einops_compiles(jobs, name):
    keys = _done(jobs, name)
    assert "dynamo.fx_graph:0/0" in keys and "inductor.output_code:0/0" in keys
    assert "einops" in JOBS[name][1]
    assert "rearrange" in JOBS[name][1] or "repeat" in JOBS[name][1]


# --- jax: several jitted functions per program ------------------------------------------------

JAX = sorted(n for n in JOBS if n.startswith("jax/"))


@pytest.mark.parametrize("name", JAX)
def test_jax_program_lists_every_jitted_function(jobs, name):
    keys = _done(jobs, name)
    meta_text = jobs.text(name, "xla.jitted")
    own = re.search(r"(\d+) of the program's own jitted functions", meta_text)
    assert own and int(own.group(1)) >= 2, meta_text
    # each function of its own has its stages, grouped by the line that called it, and what JAX
    # dumped and XLA optimized names the function; the operations run eagerly have none
    modules = jobs.stage(name, "xla.jitted")["meta"]["modules"]
    mine = [m for m in modules if m["own"]]
    for m in mine:
        for base in ("xla.stablehlo", "xla.passes", "xla.optimized", "xla.schedule", "xla.memory", "xla.cost"):
            assert f"{base}:{m['key']}" in keys, (base, m, keys)
        assert f"module @{m['module']} " in jobs.text(name, f"xla.stablehlo:{m['key']}")
        assert jobs.text(name, f"xla.optimized:{m['key']}").startswith(f"HloModule {m['module']},")
        group = f"{m['module']} (defined line {m['defined']}, called line {m['called']})"
        assert m["called"] and m["group"] == group, m
    qualified = {k.split(":", 1)[1].split("/", 1)[0] for k in keys if k.startswith("xla.") and ":" in k}
    assert qualified == {m["key"] for m in mine}, qualified


# --- the fixes, on programs of our own --------------------------------------------------------

def test_a_gpu_tutorials_timing_is_a_notice_and_its_value_read_ends_it(jobs):
    keys = _done(jobs, "own/timed_on_gpu")
    assert "dynamo.fx_graph:0/0" in keys and any(k.startswith("triton.sass:") for k in keys)
    notices = jobs.text("own/timed_on_gpu", "run.notices")
    assert f"line {TIMED_LINES['elapsed_time']}: torch.cuda.Event.elapsed_time: not timed" in notices
    assert f"line {TIMED_LINES['synchronize']}: torch.cuda.synchronize" in notices
    assert f"line {TIMED_LINES['item']}: a tensor's value read" in notices
    out = jobs.text("own/timed_on_gpu", "run.stdout")
    assert "compiled call took nan" in out and "never reached" not in out
    assert "virtual" in jobs.job("own/timed_on_gpu")["timings"]["run_mode"]["sentence"]


def test_a_torchrun_script_sees_a_node_of_the_worlds_size(jobs):
    keys = _done(jobs, "own/enough_gpus")
    assert "needs 2 GPUs" not in jobs.text("own/enough_gpus", "run.stdout")
    assert "dynamo.fx_graph:0/0" in keys


def test_a_value_read_before_any_compile_fails_saying_nothing_compiled(jobs):
    job = jobs.job("own/value_first")
    assert job["status"] == "failed"
    assert "compiled nothing" in job["error"]["message"]
    assert "line 4: a tensor's value read" in jobs.text("own/value_first", "run.notices")

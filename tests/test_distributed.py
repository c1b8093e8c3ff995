"""PyTorch distributed on a virtual world (option `devices`): the cost model, the output code
parser on recorded output code, the viewer, and the pipeline itself in child processes of its own
(the fake process group and the patched DeviceMesh are process-wide): Inductor's bucketing seen
through the graphs and the output code, a source's own init_process_group answered, and each bad
input a sentence naming the user's line. The lessons (tests/test_examples.py) compile the
tensor-parallel MLP on 8 virtual H100s, sequence parallel, FSDP2 and a 2 x 4 mesh in the sandbox.
"""
from __future__ import annotations

import json
import os
import re
import sys

import pytest

from compiler import formats
from compiler.pytorch import collectives
from viewers import render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "torch")


def _fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


# --- the cost model -------------------------------------------------------------------------------

def test_ring_costs_follow_the_stated_model():
    # all_reduce of 32 KiB over 8: 2*7/8 of it in 14 steps; all_gather/reduce_scatter 7/8 in 7 steps
    assert collectives.ring_cost("all_reduce", 32768, 8) == (57344, 14)
    assert collectives.ring_cost("all_gather_into_tensor", 32768, 8) == (28672, 7)
    assert collectives.ring_cost("reduce_scatter_tensor", 32768, 8) == (28672, 7)
    assert collectives.ring_cost("all_to_all_single", 800, 4) == (600, 3)
    assert collectives.ring_cost("broadcast", 1000, 4) == (1000, 3)
    assert collectives.ring_cost("all_reduce", 1000, 1) == (0, 0)
    nvlink = collectives.INTERCONNECTS["nvlink4"]
    # 14 steps x 3 us + 57344 B / 450 GB/s = 42 + 0.127 us
    assert collectives.estimate_us(57344, 14, nvlink) == pytest.approx(42.127, abs=1e-3)
    assert collectives.estimate_us(57344, 14, nvlink, bandwidth_gbs=50.0, latency_us=0.0) == \
        pytest.approx(1.147, abs=1e-3)
    assert collectives.interconnect_for("auto", "cuda:sm_90").key == "nvlink4"
    assert collectives.interconnect_for("auto", "cuda:sm_80").key == "nvlink3"
    assert collectives.interconnect_for("auto", "host").key == "ib-ndr"


def test_output_code_parser_reads_recorded_output_code():
    bucketed = collectives.output_code_collectives(_fixture("output_code_bucketed_all_reduce.py.txt"))
    # Inductor bucketed the two branches' all-reduces into one in-place call on a flat buffer
    assert [(c["op"], c["buffer"], c["shape"], c["wait"]) for c in bucketed] == [
        ("all_reduce", "buf10", "f32[4096]", False), ("wait_tensor", "buf10", "f32[4096]", True)]
    lines = _fixture("output_code_bucketed_all_reduce.py.txt").splitlines()
    assert "all_reduce_.default(buf10" in lines[bucketed[0]["line"] - 1]
    sp = [c for c in collectives.output_code_collectives(_fixture("output_code_sequence_parallel.py.txt"))
          if not c["wait"]]
    assert [c["op"] for c in sp] == ["all_gather_into_tensor", "reduce_scatter_tensor"]


def test_viewer_states_the_model_and_escapes_what_the_job_wrote():
    value = {"devices": 8, "comm": {"interconnect": "NVLink 4", "bandwidth_gbs": 450.0, "latency_us": 3.0,
                                    "source": "datasheet", "model": collectives.MODEL},
             "graphs": [{"compile_id": "0/0", "graph": "forward", "before_passes": 2,
                         "output_code_stage": "inductor.output_code:0/0",
                         "output_code_calls": [{"line": 276, "op": "all_reduce", "buffer": "buf10",
                                                "shape": "f32[4096]"}],
                         "collectives": [{"op": "<script>x</script>", "node": "n", "mesh_dim": "tp", "group_size": 8,
                                          "ranks": list(range(8)), "input": "f32[16, 128]", "output": "f32[16, 128]",
                                          "tensor_bytes": 8192, "input_bytes": 8192, "output_bytes": 8192,
                                          "sent_bytes": 14336, "steps": 14, "estimate_us": 42.03, "line": 17}] * 2}],
             "note": "rank 0"}
    html = render("collectives", formats.get("collectives").encode(value), {})
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "estimates, not measurements" in html and "450 GB/s" in html and "3 µs per step" in html
    assert "merged them into 1 call" in html and "line 276" in html and "line 17" in html
    assert "42.03 µs" in html


# --- the pipeline, in child processes ------------------------------------------------------------

TWO_BRANCHES = '''\
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

dist.init_process_group("nccl")  # as under torchrun: answered by irscope's world


class TwoBranches(nn.Module):
    def __init__(self, dim=128):
        super().__init__()
        self.up_a, self.down_a = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.up_b, self.down_b = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.down_a(torch.relu(self.up_a(x))) * self.down_b(torch.sigmoid(self.up_b(x)))


mesh = init_device_mesh("cpu", (8,))
plan = {"up_a": ColwiseParallel(), "down_a": RowwiseParallel(), "up_b": ColwiseParallel(), "down_b": RowwiseParallel()}
model = parallelize_module(TwoBranches(), mesh, plan)
example_inputs = (torch.randn(16, 128),)
'''
FORWARD_LINE = 17

MESH_TOO_BIG = '''\
import torch
from torch.distributed.device_mesh import init_device_mesh

mesh = init_device_mesh("cpu", (2, 8))
model = torch.nn.Linear(4, 4)
example_inputs = (torch.randn(2, 4),)
'''

OWN_WORLD = '''\
import torch
import torch.distributed as dist

dist.init_process_group("gloo", rank=0, world_size=4)
model = torch.nn.Linear(4, 4)
example_inputs = (torch.randn(2, 4),)
'''

# A tensor-parallel MLP as torchrun scripts write it: the model moved with .cuda() before
# parallelize_module, in a main() the script calls. Before: "_apply(): Couldn't swap Linear.weight"
# (the source runs on fake tensors in a world, and Module._apply swaps a fake parameter in place).
TP_CUDA = '''\
import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self, dim=256, hidden=1024):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def main():
    mesh = init_device_mesh("cuda", (8,))
    return parallelize_module(MLP().cuda(), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})


model = main()
example_inputs = (torch.randn(16, 256, device="cuda"),)
'''

# name -> (source, options)
COMPILES = {
    "tp_cuda": (TP_CUDA, {"devices": 8, "target": "cuda:sm_90"}),
    "tp_on_device": (TP_CUDA.replace("MLP().cuda()", "MLP()"), {"devices": 8, "target": "cuda:sm_90"}),
    "bucketed": (TWO_BRANCHES, {"devices": 8, "interconnect": "nvlink4", "link_latency_ns": 1000,
                                "inductor_config": {"bucket_all_reduces_fx": "all"}}),
    "mesh_too_big": (MESH_TOO_BIG, {"devices": 8}),
    "no_world": (MESH_TOO_BIG, {}),
    "own_world": (OWN_WORLD, {"devices": 8}),
}


def _child(out: str, name: str) -> None:
    sys.path.insert(0, ROOT)
    from testbed.bundle_jobs import run_job
    source, options = COMPILES[name]
    run_job("pytorch", source, options, out)


def start_in_background(base: str):
    """The module's compiles (tests/conftest.py starts them when collection ends)."""
    from tests.conftest import start_children  # the child this file also is does not import conftest
    return start_children(__file__, COMPILES, base)


@pytest.fixture(scope="module")
def jobs(request, tmp_path_factory):
    from testbed.bundle_jobs import Job
    from tests.conftest import take_background
    base = take_background(request, start_in_background, tmp_path_factory)
    return {name: Job(os.path.join(base, name)) for name in COMPILES}


def test_collectives_before_and_after_inductors_bucketing(jobs):
    job = jobs["bucketed"]
    assert job.error is None
    value = json.loads(job.text("distributed.collectives"))
    (graph,) = value["graphs"]
    # the graph's two all-reduces (one per branch), each of the 16 x 128 partial output, from forward
    assert graph["before_passes"] == 2 and [c["op"] for c in graph["collectives"]] == ["all_reduce"] * 2
    for call in graph["collectives"]:
        assert (call["input"], call["group_size"], call["mesh_dim"], call["line"]) == \
            ("f32[16, 128]", 8, "dim 0", FORWARD_LINE)
        assert (call["tensor_bytes"], call["sent_bytes"], call["steps"]) == (8192, 14336, 14)
        # the job's link: NVLink 4's 450 GB/s, latency set to 1 us per step by link_latency_ns
        assert call["estimate_us"] == pytest.approx(14 * 1.0 + 14336 / 450e3, abs=1e-3)
        assert call["inductor_estimate_us"] > 0
    assert value["comm"]["latency_us"] == 1.0 and "link_latency_ns" in value["comm"]["source"]
    # ... which Inductor merged into one call on a flat buffer of both in the output code
    (call,) = graph["output_code_calls"]
    assert (call["op"], call["shape"]) == ("all_reduce", "f32[4096]")
    code = job.text(graph["output_code_stage"]).splitlines()
    assert "_c10d_functional.all_reduce_.default(" in code[call["line"] - 1]
    # the user's forward line is what the collectives stage links to
    assert FORWARD_LINE in job.mapped_lines("distributed.collectives")
    placements = json.loads(job.text("distributed.placements"))
    by_name = {a["name"]: a for a in placements["arrays"]}
    assert by_name["up_a.weight"]["sharding"] == "dim 0=8: Shard(0)"
    assert [t["ranges"] for t in by_name["up_a.weight"]["tiles"]][:2] == [[[0, 64], [0, 128]], [[64, 128], [0, 128]]]
    assert by_name["down_b.weight"]["sharding"] == "dim 0=8: Shard(1)"
    assert by_name["down_b.bias"]["type"] == "replicated"
    assert len(placements["collectives"]) == 2
    # compile-only, and saying why
    run_mode = job.manifest["timings"]["run_mode"]
    assert run_mode["mode"] == "compile-only" and "virtual world of 8 ranks" in run_mode["sentence"]


def test_a_model_moved_with_cuda_before_parallelize_module_compiles_as_one_left_where_it_is(jobs):
    """`.cuda()` on the model of a world (fake tensors) converts by assignment: the job compiles,
    and its placements and Inductor's output code equal those of the same model not moved (on a
    virtual GPU target a module's tensors are made on the CPU and sharded onto the mesh's device)."""
    moved, unmoved = jobs["tp_cuda"], jobs["tp_on_device"]
    assert moved.error is None and unmoved.error is None, (moved.error, unmoved.error)
    placements = json.loads(moved.text("distributed.placements"))
    assert placements == json.loads(unmoved.text("distributed.placements"))
    assert sorted(a["name"] for a in placements["arrays"]) == ["down.bias", "down.weight", "up.bias", "up.weight"]
    def without_paths(text: str) -> str:  # each job's own work directory is named in its output code
        return re.sub(r"\S*/work/", "<work>/", text)
    code = moved.text("inductor.output_code:0/0")
    assert without_paths(code) == without_paths(unmoved.text("inductor.output_code:0/0"))
    assert "device='cuda:0'" in code  # compiled for the virtual H100s, as the unmoved model is
    assert moved.text("distributed.collectives") == unmoved.text("distributed.collectives")


def test_a_mesh_larger_than_the_world_names_the_line(jobs):
    error = jobs["mesh_too_big"].error
    assert error["line"] == 4
    assert "mesh of 16 devices" in error["message"] and "devices: 16" in error["message"]


def test_a_mesh_without_a_world_says_to_set_devices(jobs):
    error = jobs["no_world"].error
    assert error["line"] == 4
    assert "set the option devices" in error["message"]


def test_a_world_of_another_size_names_the_line(jobs):
    error = jobs["own_world"].error
    assert error["line"] == 4
    assert "world_size=4" in error["message"] and "devices: 4" in error["message"]


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])

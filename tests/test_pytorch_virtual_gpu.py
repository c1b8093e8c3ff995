"""The PyTorch pipeline on virtual GPUs: a transformer block that builds its causal mask, position ids
and rotary table on the input's device compiles for virtual sm_80, sm_90 and sm_100 with its
Triton kernels lowered to PTX and SASS (on sm_90 also with job_cpus 1: its other autotune configs
in one process, not two); a conv net with BatchNorm in training mode compiles its forward and
backward graphs and kernels (training: true).

The virtual device is process-wide and irreversible, so each compile runs the pipeline in a child
process of its own (this file run as a script), as it does in the sandboxed worker; all five start
when collection ends (tests/conftest.py) and run side by side.
"""
from __future__ import annotations

import json
import os
import re
import sys

import pytest

# no torch import at module level: the child process this file also is sets TORCH_TRACE first

pytestmark = pytest.mark.slow  # four compiles to PTX and SASS, every autotune config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BLOCK = '''\
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        half = d // heads // 2
        # made on the CPU in __init__, moved with the model
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(half).float() / half)))

    def forward(self, x):
        b, t, d = x.shape
        positions = torch.arange(t, device=x.device)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        shift = torch.zeros(d, device="cuda")
        scale = torch.tensor(1.0 / math.sqrt(d // self.heads)).cuda()
        angles = positions[:, None].float() * self.inv_freq.to(x.device)[None, :]
        cos, sin = angles.cos(), angles.sin()
        q, k, v = self.qkv(self.ln1(x) + shift).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        q1, q2 = q.chunk(2, dim=-1)
        q = torch.cat([q1 * cos - q2 * sin, q1 * sin + q2 * cos], dim=-1)
        att = (q @ k.transpose(-2, -1)) * scale
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


model = Block()
example_inputs = (torch.randn(2, 16, 64),)
'''
MASK_LINE = 22  # torch.ones(t, t, ..., device=x.device).tril()

CONV_BN = '''\
import torch
import torch.nn as nn

model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(8, 4),
)
example_inputs = (torch.randn(4, 3, 16, 16),)
'''

# name -> (source, options)
COMPILES = {
    "block_sm80": (BLOCK, {"target": "cuda:sm_80"}),
    "block_sm90": (BLOCK, {"target": "cuda:sm_90"}),
    "block_sm100": (BLOCK, {"target": "cuda:sm_100"}),
    "train_sm90": (CONV_BN, {"target": "cuda:sm_90", "training": True}),
    "block_sm90_one_cpu": (BLOCK, {"target": "cuda:sm_90"}),
}
# the job's settings where not the defaults (job_cpus 2: the other autotune configs in two processes)
SETTINGS = {"block_sm90_one_cpu": {"job_cpus": 1.0}}


def _child(out: str, name: str) -> None:
    """Run the pytorch pipeline on COMPILES[name] as the worker would, writing its bundle to out."""
    sys.path.insert(0, ROOT)
    from compiler import registry
    from compiler.model import JobSettings, Request
    from compiler.pipeline import Bundle, JobContext, OptionError, UserError
    source, options = COMPILES[name]
    pipeline = registry.get("pytorch")
    request = Request("pytorch", source, pipeline.normalise_options(options))
    workdir = os.path.join(out, "work")
    os.makedirs(workdir, exist_ok=True)
    os.environ.update(pipeline.environment(request, workdir))  # TORCH_TRACE before torch is imported
    os.chdir(workdir)
    bundle = Bundle(os.path.join(out, "bundle"))
    said = []  # every status line the job showed, in order
    progress = bundle.progress
    bundle.progress = lambda text: (said.append(text), progress(text))[-1]
    error = None
    try:
        settings = JobSettings(**SETTINGS.get(name, {}))
        pipeline.run(request, JobContext(workdir=workdir, bundle=bundle, settings=settings))
    except (OptionError, UserError) as e:
        error = {"type": type(e).__name__, "message": str(e)}
    bundle.finish()
    with open(os.path.join(out, "error.json"), "w") as f:
        json.dump(error, f)
    with open(os.path.join(out, "progress.json"), "w") as f:
        json.dump(said, f)


def start_in_background(base: str):
    """The module's compiles (tests/conftest.py starts them when collection ends)."""
    from tests.conftest import start_children  # the child this file also is does not import conftest
    return start_children(__file__, COMPILES, base, timeout_s=1800)


class Result:
    def __init__(self, out: str):
        self.out = out
        with open(os.path.join(out, "error.json")) as f:
            self.error = json.load(f)
        with open(os.path.join(out, "bundle", "manifest.json")) as f:
            self.manifest = json.load(f)
        with open(os.path.join(out, "progress.json")) as f:
            self.progress = json.load(f)
        self.stages = {s["key"]: s for s in self.manifest["stages"]}

    def text(self, key: str) -> str:
        with open(os.path.join(self.out, "bundle", self.stages[key]["file"])) as f:
            return f.read()

    def kernels(self, code_key: str) -> list[str]:
        return sorted(set(re.findall(r"async_compile\.triton\('(\w+)'", self.text(code_key))))

    def written_at(self, key: str) -> float:
        """When the stage's file was written (the bundle writes each stage's file as it is added)."""
        return os.stat(os.path.join(self.out, "bundle", self.stages[key]["file"])).st_mtime_ns / 1e9


@pytest.fixture(scope="module")
def results(request, tmp_path_factory) -> dict[str, Result]:
    from tests.conftest import take_background
    base = take_background(request, start_in_background, tmp_path_factory)
    return {name: Result(os.path.join(base, name)) for name in COMPILES}


@pytest.mark.parametrize("name,arch", [("block_sm80", "sm_80"), ("block_sm90", "sm_90a"), ("block_sm100", "sm_100a")])
def test_transformer_block_with_device_side_masks_reaches_ptx_and_sass(results, name, arch):
    from torch.testing import FileCheck
    r = results[name]
    assert r.error is None, r.error
    assert r.manifest["status"] == "done"
    target = r.manifest["timings"]["target"]
    assert target["virtual"] is True and target["name"] == "cuda:" + arch.rstrip("a")
    # no toolchain cache here: the job built the virtual device's C++ half itself
    assert target["virtual_device_from_toolchain_cache"] is False and target["virtual_device_build_s"] > 0
    assert r.manifest["timings"]["run_mode"]["sentence"].startswith(
        f"compile-only: cuda:{arch.rstrip('a')} is a virtual GPU")
    # Dynamo saw the factory calls on the input's device and the .cuda() / device="cuda" ones
    graph = r.text("dynamo.fx_graph:0/0")
    FileCheck().check("torch.arange(").check("device = device(type='cuda', index=0)").run(graph)
    assert any(b == MASK_LINE for _, b in r.stages["dynamo.fx_graph:0/0"]["source_map"])
    # the parameters require grad and grad mode is on, as the source leaves them: AOTAutograd
    # partitions a joint graph (on the virtual device too), and Inductor compiles the forward
    assert {"aot.joint_graph:0/0", "aot.forward_graph:0/0"} <= set(r.stages)
    assert "cuda:0" in r.text("aot.forward_graph:0/0")
    code = r.text("inductor.output_code:0/0")
    FileCheck().check("async_compile.triton(").check("device_str='cuda'").check("def call(") \
        .check("extern_kernels.mm(").run(code)
    kernels = r.kernels("inductor.output_code:0/0")
    assert len(kernels) >= 5 and any("tril" in k for k in kernels), kernels
    for kernel in kernels:
        configs = [k for k in r.stages if k.startswith(f"triton.ptx:{kernel}.")]
        assert configs, kernel
        for key in configs:
            ptx = r.text(key)
            assert f".target {arch}" in ptx and ".entry " + kernel in ptx
            sass = r.text(key.replace("triton.ptx:", "triton.sass:"))
            assert sass.count("/*0") > 10
            # nvdisasm names an arch-specific target (sm_90a) on a .target line, a plain one in the ELF flags
            assert (f".target\t{arch}" if arch.endswith("a") else f"EF_CUDA_SM{arch[3:]} ") in sass
            meta = json.loads(r.text(key.replace("triton.ptx:", "triton.metadata:")))
            assert meta["registers"] > 0 and meta["target"] == "cuda:" + arch.rstrip("a")
    # the reductions (layer norm, softmax) are autotuned: more than one config each is compiled
    assert any(sum(1 for k in r.stages if k.startswith(f"triton.ptx:{kernel}.")) > 1 for kernel in kernels)
    estimates = json.loads(r.text("inductor.estimates:0/0"))
    assert estimates["total_bytes_read_and_written"] > 0
    assert {k for node in estimates["nodes"] for k in node["kernels"]} & set(kernels)


def test_every_inductor_kernel_config_has_its_resources(results):
    """kernels.resources of an Inductor job: every config of every kernel (forward and backward),
    with the cubin's registers and its theoretical occupancy on the virtual target, and Inductor's
    scheduler estimate of the bytes the kernel reads and writes, the figure of the scheduler node
    the kernel was generated from in the job's `inductor.estimates` stages."""
    from compiler.formats import kernel_of
    for name in COMPILES:
        r = results[name]
        table = json.loads(r.text("kernels.resources"))
        nodes = [node for key in r.stages if key.startswith("inductor.estimates:")
                 for node in json.loads(r.text(key))["nodes"]]
        estimated = {row["kernel"]: row["estimated_bytes"] for row in table["kernels"]
                     if row["estimated_bytes"] is not None}
        assert len(estimated) >= 3, (name, table["kernels"])
        for qualifier, n in estimated.items():
            figures = {node["bytes_read_and_written"] for node in nodes if node.get("kernel") == kernel_of(qualifier)}
            assert figures == {n} and n > 0, (name, qualifier, n, figures)
        metadata = sorted(k for k in r.stages if k.startswith("triton.metadata:"))
        assert len(metadata) >= 3 and sorted(row["stage"] for row in table["kernels"]) == metadata, name
        assert r.stages["kernels.resources"]["group"] == "Kernels"
        for row in table["kernels"]:
            meta = json.loads(r.text(row["stage"]))
            assert row["registers"] == meta["cubin_resource_usage"]["REG"] > 0, row
            assert row["target"] == COMPILES[name][1]["target"] and row["num_warps"] == meta["num_warps"]
            occ = row["occupancy"]
            assert occ["warps_per_sm"] == occ["blocks_per_sm"] * row["num_warps"] > 0 and occ["limited_by"]


def test_kernel_stages_are_written_as_each_kernel_compiles(results):
    """Each kernel config's stages reach the bundle as Triton compiles it, while the compile still
    runs: the first kernel's PTX file is written before the program's output (written once the
    compile returned), the configs of each kernel are numbered in compile order, and the resource
    table comes after the last of them."""
    for name in COMPILES:
        r = results[name]
        keys = [s["key"] for s in r.manifest["stages"]]
        ptx = [k for k in keys if k.startswith("triton.ptx:")]
        assert len(ptx) >= 3, name
        assert r.written_at(ptx[0]) < r.written_at("run.stdout"), name
        assert keys.index("kernels.resources") > keys.index(ptx[-1])
        for kernel in {k.split(":", 1)[1].rsplit(".", 1)[0] for k in ptx}:
            numbers = [int(k.rsplit(".", 1)[1]) for k in ptx if k.split(":", 1)[1].rsplit(".", 1)[0] == kernel]
            assert numbers == list(range(len(numbers))), (name, kernel, numbers)


def test_every_kernels_first_config_comes_before_the_other_autotune_configs(results):
    """The transformer block's kernels (one graph), compiled with one CPU and with two: the PTX of
    each kernel's first config is in the bundle before any kernel's second config is compiled;
    the job's status line said which kernel of how many and which config of how many compiled,
    counted from Inductor's output code and the configs the bundle holds; with two CPUs the other
    configs were compiled in two processes (this one and a helper forked from it), with the same
    TTGIR, PTX (up to its debug sections) and SASS as the one-CPU job's, the job directory's path
    aside; their time is a phase of its own."""
    texts = {}
    for name in ("block_sm90_one_cpu", "block_sm90"):
        r = results[name]
        assert r.error is None, r.error
        ptx = [s["key"].split(":", 1)[1] for s in r.manifest["stages"] if s["key"].startswith("triton.ptx:")]
        configs = {}
        for qualifier in ptx:
            kernel, n = qualifier.rsplit(".", 1)
            configs.setdefault(kernel, []).append(int(n))
        kernels = r.kernels("inductor.output_code:0/0")
        assert sorted(configs) == kernels and max(len(c) for c in configs.values()) >= 2, configs
        assert all(sorted(numbers) == list(range(len(numbers))) for numbers in configs.values()), configs
        firsts = [i for i, q in enumerate(ptx) if q.endswith(".0")]
        assert firsts == list(range(len(kernels))), ptx
        status = [line for line in r.progress if line.startswith("Triton: kernel ")]
        said = [re.fullmatch(r"Triton: kernel (\d+) of (\d+) \((\w+)\), config (\d+) of (\d+)", line).groups()
                for line in status]
        order = list(dict.fromkeys(kernel for _, _, kernel, _, _ in said))  # the module's load order
        for k, n, kernel, _, m in said:
            assert (int(n), int(m)) == (len(kernels), len(configs[kernel])) and order[int(k) - 1] == kernel, (k, kernel)
        named = [(kernel, int(c) - 1) for _, _, kernel, c, _ in said]
        compiled = [(q.rsplit(".", 1)[0], int(q.rsplit(".", 1)[1])) for q in ptx]
        later = sum(len(c) - 1 for c in configs.values())
        several = sum(len(c) > 1 for c in configs.values())
        spread = f"Triton: the other autotune configs of {several} kernels, in 2 processes"
        if name == "block_sm90_one_cpu":
            assert named == compiled and spread not in r.progress  # each status line named the config written next
        else:  # the status named every first config; the other configs, the ones this process compiled
            assert named[:len(kernels)] == compiled[:len(kernels)] and spread in r.progress, r.progress
            assert 0 < len(named) - len(kernels) < later and set(named) < set(compiled)
        assert r.manifest["timings"]["compile"]["later_kernel_configs_s"] > 0
        work = os.path.join(r.out, "work")
        # the PTX's DWARF sections spell the job's directory byte by byte: compared up to them
        texts[name] = {key: r.text(key).replace(work, "WORK").split("\t.section\t.debug")[0] for key in r.stages
                       if key.startswith(("triton.ttgir:", "triton.ptx:", "triton.sass:"))}
    assert texts["block_sm90"] == texts["block_sm90_one_cpu"]


def test_targets_differ_where_the_hardware_does(results):
    """Same model, three architectures: the PTX targets differ and sm_90's heuristics see its own
    device properties (Inductor reads the SM count into the wrapper's grid sizes where it uses it)."""
    ptx = {}
    for name in ("block_sm80", "block_sm90", "block_sm100"):
        r = results[name]
        key = next(k for k in r.stages if k.startswith("triton.ptx:"))
        ptx[name] = re.search(r"^\.target (\S+)", r.text(key), re.M).group(1)
    assert ptx == {"block_sm80": "sm_80", "block_sm90": "sm_90a", "block_sm100": "sm_100a"}


def test_training_compiles_forward_and_backward_with_batchnorm_in_training_mode(results):
    from torch.testing import FileCheck
    r = results["train_sm90"]
    assert r.error is None, r.error
    for key in ("aot.joint_graph:0/0", "aot.forward_graph:0/0", "aot.backward_graph:0/0",
                "inductor.output_code:0/0", "inductor.output_code:0/0.backward", "inductor.estimates:0/0.backward"):
        assert key in r.stages, (key, sorted(r.stages))
    forward = r.text("aot.forward_graph:0/0")
    # training mode: batch statistics (mean and biased variance over N, H, W of the 4*16*16 = 1024
    # values per channel) and the running variance updated with the unbiased one (1024 / 1023)
    FileCheck().check("aten.convolution.default(").check("aten.var_mean.correction(convolution, [0, 2, 3], "
                                                        "correction = 0").check("1.0009775171065494").run(forward)
    assert "cuda:0" in forward
    backward_code = r.text("inductor.output_code:0/0.backward")
    backward_kernels = r.kernels("inductor.output_code:0/0.backward")
    assert any("native_batch_norm_backward" in k for k in backward_kernels), backward_kernels
    assert "convolution_backward" in backward_code  # the conv's weight and input gradients
    for kernel in backward_kernels:
        key = next((k for k in r.stages if k.startswith(f"triton.ptx:{kernel}.")), None)
        assert key is not None, kernel
        assert ".target sm_90a" in r.text(key) and "EXIT" in r.text(key.replace("triton.ptx:", "triton.sass:"))
    assert r.manifest["timings"]["compile"]["total_s"] > 0 and "run" not in r.manifest["timings"]


def test_hip_is_refused_for_inductor():
    from compiler.pipeline import OptionError
    from compiler.pytorch import gpu_codegen
    with pytest.raises(OptionError, match="CUDA"):
        gpu_codegen.virtual_target("hip:gfx942", {})
    with pytest.raises(OptionError, match="max-autotune"):
        gpu_codegen.virtual_target("cuda:sm_90", {"mode": "max-autotune"})



def test_inductor_kernels_link_ptx_to_ttgir_without_a_user_line(results):
    """Inductor's kernels carry no line of the model's file; their IR stages still link line by line
    through the generated kernel's own locations."""
    from compiler import formats
    stages = results["block_sm90"].stages
    configs = [k.split(":", 1)[1] for k in stages if k.startswith("triton.ptx:")]
    assert configs
    for q in configs:
        ptx = formats.check_ir_locations(stages[f"triton.ptx:{q}"]["meta"]["ir_locations"])
        ttgir = formats.check_ir_locations(stages[f"triton.ttgir:{q}"]["meta"]["ir_locations"])
        # the locations name the generated kernel file, not the model's
        assert all(not path.endswith("model.py") for path in ptx.files.values())
        lines = ptx.by_line()
        linked = sum(1 for chains in lines.values()
                     if any(formats.chains_linked(c, t) for c in chains for t in ttgir.chains))
        assert len(lines) > 10 and linked >= 0.9 * len(lines), (q, linked, len(lines))
        # and none of their lines links to the editor: their locations are lines of the generated
        # file, which the page painted on the model's lines of the same numbers (the fifth walk)
        for stage in ("source", "ttir", "ttgir", "llir", "ptx", "sass"):
            assert stages[f"triton.{stage}:{q}"]["source_map"] == [], (stage, q)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])

"""Real models at real sizes: compile-only runs on fake tensors, KernelBench's convention, and every
out-of-memory a MemoryLimit.

The quick tests call the pure parts (conventions, sizes on fake tensors, the run-mode sentence,
the out-of-memory check) in-process. The slow ones submit every job at once to one app, through
the real runner and sandbox with the default limits (6 GiB of address space per process), and each
test asserts many things about the job it waits for.
"""
from __future__ import annotations

import json
import os
import re

import pytest
import torch
from torch.testing import FileCheck

from tests.conftest import make_app, needs_bwrap, seed_toolchain_cache, stage_text, wait_job, wait_spares_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

with open(os.path.join(ROOT, "bench", "models", "kb_softsign_12gb.py"), encoding="utf-8") as _f:
    KERNELBENCH_12GB = _f.read()  # KernelBench's convention; get_inputs() needs 12.0 GB
RAND_LINE = next(n for n, line in enumerate(KERNELBENCH_12GB.splitlines(), 1) if "torch.rand(" in line)

VALUE_12GB = '''import torch


def model(x):
    return x * 2


example_inputs = (torch.rand(3000, 1000000),)
'''

GROWS = '''import torch


class Grows(torch.nn.Module):
    """Allocates far more than any machine has from its second call on."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 1:
            return torch.empty(2**45) + x.sum()
        return x * 2


model = Grows()
example_inputs = (torch.randn(8),)
'''
GROWS_LINE = 14

KERNELBENCH_KWARGS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return torch.nn.functional.silu(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 16, 8, 8)]


def get_init_inputs():
    return {"channels": 16, "groups": 4}
'''

# the run of the 12 GB softsign would peak at several times 12 GB (its input, the outputs the timing keeps)
HOST_SENTENCE = re.compile(r"compile-only: the run would peak at (\d+\.\d) GiB \(estimated on fake tensors\), and "
                           r"the worker allows 50% of its 6 GiB \(setting run_memory_percent\)$")
VIRTUAL_SENTENCE = "compile-only: cuda:sm_90 is a virtual GPU: nothing runs on it"

KERNELBENCH_ACTIVATIONS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(16, 16, 1024, 1024)]


def get_init_inputs():
    return [16, 128]
'''


# --- quick: the pure parts, in-process ---------------------------------------------------------

def _program(source: str, tmp_path):
    import runpy

    from compiler.pytorch import entry_points
    path = tmp_path / "model.py"
    path.write_text(source)
    return entry_points.find(runpy.run_path(str(path)), torch)


def test_kernelbench_inputs_are_sized_on_fake_tensors_without_allocating(tmp_path):
    from compiler.kernels import compile_only
    from compiler.pytorch import entry_points
    program = _program(KERNELBENCH_12GB, tmp_path)
    assert program.convention == entry_points.KERNELBENCH and program.builds_inputs
    mode = compile_only.fake_mode()
    model, inputs = program.build(mode)  # 12 GB if it were real: this process would not survive it
    assert type(model).__name__ == "Model" and inputs[0].shape == (3000, 1_000_000)
    assert isinstance(inputs[0], torch._subclasses.fake_tensor.FakeTensor)
    sizes = entry_points.sizes(model, inputs, torch)
    assert sizes.inputs == 12_000_000_000 and sizes.parameters == 0
    choice = entry_points.choose("auto", sizes, 6144, 50)  # no estimate: the sizes decide, at half the share
    assert choice.compile_only and choice.sentence == (
        "compile-only: inputs need 11.2 GiB, the worker allows 6 GiB and runs models whose inputs and parameters "
        "take at most 25% of it (half of setting run_memory_percent: the run's peak could not be estimated on fake "
        "tensors)")
    virtual = entry_points.choose("auto", sizes, 6144, 50, "cuda:sm_90")
    assert virtual.sentence == VIRTUAL_SENTENCE
    assert entry_points.choose("compile-and-run", sizes, 6144, 50).mode == "compile-and-run"


def test_kernelbench_keyword_arguments_and_parameter_sizes(tmp_path):
    from compiler.kernels import compile_only
    from compiler.pytorch import entry_points
    program = _program(KERNELBENCH_KWARGS, tmp_path)
    model, inputs = program.build(compile_only.fake_mode())
    assert model.norm.num_groups == 4 and model.conv.in_channels == 16
    sizes = entry_points.sizes(model, inputs, torch)
    # conv weight 16*16*3*3 + bias 16, norm weight and bias 16 each, float32; input 2*16*8*8
    assert sizes.parameters == (16 * 16 * 9 + 16 + 32) * 4 and sizes.inputs == 2 * 16 * 64 * 4
    choice = entry_points.choose("auto", sizes, 6144, 50)
    assert choice.mode == "compile-and-run"
    assert choice.sentence == ("compile-and-run: inputs and parameters need 17.2 KiB (inputs 8.0 KiB, parameters "
                               "9.2 KiB), within 25% of the worker's 6 GiB")


def test_the_estimated_peak_decides_and_is_said(tmp_path):
    """The run's peak on fake tensors (peak_memory.estimate) decides `run: auto`: a KernelBench
    convolution whose input (1 GiB) fits but whose output (8 GiB) does not compiles only, and the
    sentence names the estimate; a small model runs, and a float64 reference that alone would not
    fit is left out, saying so; a model fake tensors cannot run falls back to its sizes."""
    from compiler.kernels import compile_only
    from compiler.pytorch import entry_points, measure, peak_memory
    program = _program(KERNELBENCH_ACTIVATIONS, tmp_path)
    mode = compile_only.fake_mode()
    model, inputs = program.build(mode)
    sizes = entry_points.sizes(model, inputs, torch)
    assert sizes.inputs == 16 * 16 * 1024 * 1024 * 4  # 1.07 GB: it fit the old rule's 25% of 6 GiB
    peak = peak_memory.estimate(model, inputs, False, mode, torch, measure.loss_of)
    conv_output = 16 * 128 * 1024 * 1024 * 4
    # the compiling call and both timed sides each keep their 8.6 GB output
    assert peak.error == "" and peak.without_reference_bytes >= sizes.inputs + 3 * conv_output
    choice = entry_points.choose("auto", sizes, 6144, 50, None, peak)
    assert choice.compile_only
    assert choice.sentence == ("compile-only: the run would peak at "
                               f"{entry_points.binary_size(peak.without_reference_bytes)} (estimated on fake tensors), "
                               "and the worker allows 50% of its 6 GiB (setting run_memory_percent)")
    assert choice.to_json()["estimated_peak_bytes"] == peak.peak_bytes
    small = peak_memory.PeakEstimate(peak_bytes=4 * 10**9, without_reference_bytes=10**9, seconds=0.1)
    ran = entry_points.choose("auto", sizes, 6144, 50, None, small)
    assert not ran.compile_only and not ran.float64_reference
    assert ran.sentence == ("compile-and-run: the run would peak at 953.7 MiB (estimated on fake tensors), within 50% "
                            "of the worker's 6 GiB; the accuracy check's float64 eager copy is left out: with it the "
                            "run would peak at 3.7 GiB")
    # a run that keeps its float64 reference names the peak with it, the figure the Timings table
    # names "estimated peak memory of the run" (the eighth walk read 119.6 KiB beside 182.5 KiB)
    kept = entry_points.choose("auto", sizes, 6144, 50, None, peak_memory.PeakEstimate(2 * 2**30, 2**30, 0.1))
    assert kept.float64_reference and kept.sentence == ("compile-and-run: the run would peak at 2.0 GiB (estimated on "
                                                        "fake tensors), within 50% of the worker's 6 GiB")
    failed = peak_memory.PeakEstimate(None, None, 0.0, "DataDependentOutputException: aten._local_scalar_dense")
    fallback = entry_points.choose("auto", entry_points.Sizes(inputs=1000, parameters=0), 6144, 50, None, failed)
    assert not fallback.compile_only and "could not be estimated on fake tensors (DataDependent" in fallback.sentence


def test_models_become_fake_whether_built_fake_or_real():
    """A KernelBench model is built under the fake mode (its parameters are fake already); a `model`
    given as a value is real and is converted. Either way every parameter and buffer is fake, a
    Parameter stays one with its requires_grad, and a parameter shared by two layers stays shared."""
    from torch._subclasses.fake_tensor import FakeTensor

    from compiler.kernels import compile_only
    mode = compile_only.fake_mode()
    with mode:
        built_fake = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
        before = [*built_fake.parameters(), *built_fake.buffers()]
        compile_only.to_fake(built_fake, mode)  # PyTorch's Module._apply refuses this ("Couldn't swap")
    assert all(a is b for a, b in zip(before, [*built_fake.parameters(), *built_fake.buffers()], strict=True))
    real = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    real[0].weight.requires_grad_(False)
    shared = torch.nn.Linear(2, 2)
    real.append(shared)
    real.append(shared)
    with mode:
        fake = compile_only.to_fake(real, mode)
    for model in (built_fake, fake):
        tensors = [*model.parameters(), *model.buffers()]
        assert tensors and all(isinstance(t, FakeTensor) for t in tensors)
        assert all(isinstance(p, torch.nn.Parameter) for p in model.parameters())
    assert [p.requires_grad for p in fake.parameters()] == [False, True, True, True, True, True]
    assert fake[2].weight is fake[3].weight and fake[1].running_var.shape == (2,)


def test_conventions_say_what_is_missing(tmp_path):
    from compiler.pipeline import UserError
    with pytest.raises(UserError, match="`get_init_inputs`"):
        _program("import torch\nclass Model(torch.nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n",
                 tmp_path)
    with pytest.raises(UserError, match="`example_inputs`"):
        _program("import torch\nmodel = torch.nn.Linear(2, 2)\n", tmp_path)
    with pytest.raises(UserError, match="KernelBench"):
        _program("x = 1\n", tmp_path)


def test_an_allocation_no_machine_can_make_is_a_memory_limit_naming_line_and_setting(tmp_path):
    from compiler.model import JobSettings
    from compiler.user_code import is_out_of_memory, user_error
    path = tmp_path / "model.py"
    path.write_text("import torch\n\ndef grow():\n    return torch.empty(2**45)\n")
    import runpy
    namespace = runpy.run_path(str(path))
    with pytest.raises(RuntimeError) as caught:
        namespace["grow"]()
    assert "alloc_cpu.cpp" in str(caught.value)  # PyTorch's C++ allocator refused it
    assert is_out_of_memory(caught.value) and not is_out_of_memory(ValueError("shape mismatch"))
    error = user_error(caught.value, str(path), JobSettings(memory_limit_mb=6144),
                       during="timing eager and compiled calls")
    assert error.error.kind == "MemoryLimit" and error.error.line == 4
    assert error.error.message.startswith("line 4: ran out of memory while timing eager and compiled calls: "
                                          "the sandbox's address-space limit is 6144 MiB (setting memory_limit_mb)")


def test_compile_only_relies_on_these_pytorch_names():
    """compiler/kernels/compile_only.py and compiler/pytorch/estimates.py use these pieces of torch 2.13; an upgrade
    that moves one breaks this test first."""
    import inspect

    from torch._inductor import compile_fx
    from torch._inductor.output_code import CompiledFxGraph
    assert {"inner_compile", "config_patches", "compile_region_name"} <= set(
        inspect.signature(compile_fx.compile_fx).parameters)
    # CompileOnlyInductor.__call__ repeats this body with inner_compile added
    body = inspect.getsource(torch._TorchCompileInductorWrapper.__call__)
    assert "config_patches=all_patches" in body and "compile_region_name=self.name" in body
    assert "self.current_callable(" in inspect.getsource(CompiledFxGraph.__call__)
    # AOTAutograd calls a compiled graph with the boxed list when the callable says so
    from torch._functorch._aot_autograd import utils
    assert 'getattr(f, "_boxed_call", False)' in inspect.getsource(utils.call_func_at_runtime_with_args)
    # the inductor_metrics artifact log hands the scheduler nodes themselves to its handler
    source = inspect.getsource(compile_fx)
    assert '"node_runtimes": node_runtimes' in source and "inductor_metrics_log.info(" in source


# --- slow: real jobs in the sandbox ------------------------------------------------------------

# A KernelBench level-3 style model as its files are written: einops for the patch layout, the
# Model/get_inputs/get_init_inputs convention and module-level sizes. Before: ModuleNotFoundError:
# No module named 'einops' (now pinned in requirements.lock, importable by every job).
KERNELBENCH_EINOPS = """\
import torch
import torch.nn as nn
from einops import rearrange

batch_size = 2
image_size = 32
patch_size = 8
dim = 64


class Model(nn.Module):
    def __init__(self, image_size, patch_size, dim):
        super().__init__()
        self.patch_size = patch_size
        self.to_embedding = nn.Linear(3 * patch_size * patch_size, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, img):
        p = self.patch_size
        x = rearrange(img, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=p, p2=p)
        return self.norm(self.to_embedding(x)).mean(dim=1)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch_size, dim]
"""

# A Hugging Face model built from a config, as model code does without weights (transformers is in
# the job environment, pinned); and one that asks the hub for weights, which a job cannot reach.
HF_FROM_CONFIG = """import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = LlamaForCausalLM(config).eval()
example_inputs = (torch.randint(0, 256, (1, 16)),)
"""
HF_FROM_PRETRAINED = """import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
example_inputs = (torch.randint(0, 256, (1, 16)),)
"""

JOBS = {
    "hf_config": (HF_FROM_CONFIG, {}),
    "hf_pretrained": (HF_FROM_PRETRAINED, {}),
    "kb_einops": (KERNELBENCH_EINOPS, {}),
    "kb12_host": (KERNELBENCH_12GB, {}),
    "kb12_sm90": (KERNELBENCH_12GB, {"target": "cuda:sm_90"}),
    "kb12_forced": (KERNELBENCH_12GB, {"run": "compile-and-run"}),
    "value12": (VALUE_12GB, {}),
    "grows": (GROWS, {}),
    "grows_forced": (GROWS, {"run": "compile-and-run"}),
    "activations": (KERNELBENCH_ACTIVATIONS, {}),
    "kwargs_run": (KERNELBENCH_KWARGS, {}),
    "kwargs_fake": (KERNELBENCH_KWARGS, {"run": "compile-only"}),
}


class Jobs:
    def __init__(self, app, ids: dict[str, str]):
        self.app, self.client, self.ids = app, app.test_client(), ids

    def job(self, name: str) -> dict:
        return wait_job(self.client, self.ids[name], timeout=1500)

    def text(self, name: str, key: str) -> str:
        return stage_text(self.client, self.ids[name], key)

    def keys(self, name: str) -> list[str]:
        return [s["key"] for s in self.job(name)["stages"]]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, pytorch_toolchain_cache):
    data = tmp_path_factory.mktemp("real-models") / "var"
    seed_toolchain_cache(pytorch_toolchain_cache, str(data))
    # as `irscope serve` starts: the host's jobs are forked from a warm PyTorch template, each held by
    # the job's own limits (tests/test_security.py), instead of importing torch one by one
    app = make_app(data.parent, workers=2, warm_toolchain_cache=True, wall_time_limit_s=900, spare_workers=1)
    wait_spares_ready(app.extensions["irscope"].runner.spares, "pytorch")
    client = app.test_client()
    ids = {}
    for name, (source, options) in JOBS.items():
        response = client.post("/api/compile", json={"language": "pytorch", "source": source, "options": options})
        assert response.status_code in (200, 202), (name, response.get_json())
        ids[name] = response.get_json()["job"]
    yield Jobs(app, ids)
    app.extensions["irscope"].runner.shutdown()


@needs_bwrap
@pytest.mark.slow
def test_a_kernelbench_model_importing_einops_compiles_and_runs(jobs):
    job = jobs.job("kb_einops")
    assert job["status"] == "done", job["error"]
    # Dynamo traced einops' own reshape and permute into the graph (its frames name einops' file)
    graph = jobs.text("kb_einops", "dynamo.fx_graph:0/0")
    assert "einops/_backends.py" in graph and "l_img_.reshape([2, 3, 4, 8, 4, 8])" in graph, graph[:2000]
    assert ".permute([0, 2, 4, 3, 5, 1])" in graph and "reshape([2, 16, 192])" in graph
    assert job["timings"]["run"]["compiled_ms"] > 0 and "inductor.output_code:0/0" in jobs.keys("kb_einops")


@needs_bwrap
@pytest.mark.slow
def test_a_transformers_model_built_from_its_config_compiles_and_from_pretrained_says_there_is_no_network(jobs):
    job = jobs.job("hf_config")
    assert job["status"] == "done", job["error"]
    # Dynamo traced transformers' own Llama code: its RMSNorm and rotary embedding, fused by Inductor
    graph = jobs.text("hf_config", "dynamo.fx_graph:0/0")
    assert "transformers/models/llama/modeling_llama.py" in graph and "torch.rsqrt(" in graph, graph[:2000]
    kernels = [k for k in jobs.keys("hf_config") if k.startswith("kernel:")]
    assert any("rsqrt" in k for k in kernels) and any("cos" in k and "sin" in k for k in kernels), kernels
    assert job["timings"]["run"]["compiled_ms"] > 0
    failed = jobs.job("hf_pretrained")
    assert failed["status"] == "failed" and failed["error"]["kind"] == "UserCodeError"
    assert failed["error"]["line"] == 4 and "couldn't connect to 'https://huggingface.co'" in failed["error"]["message"]
    assert "a job has no network" in failed["error"]["message"] and "LlamaForCausalLM(LlamaConfig(" in \
        failed["error"]["message"]


@needs_bwrap
@pytest.mark.slow
def test_12_gb_kernelbench_source_compiles_only_on_the_host_with_every_stage(jobs):
    job = jobs.job("kb12_host")
    assert job["status"] == "done", job["error"]
    run_mode = job["timings"]["run_mode"]
    assert HOST_SENTENCE.match(run_mode["sentence"]), run_mode["sentence"]
    assert run_mode["inputs_bytes"] == 12_000_000_000 and run_mode["estimated_peak_bytes"] >= 4 * 12_000_000_000
    assert "run" not in job["timings"]  # nothing ran: no timing is invented
    keys = jobs.keys("kb12_host")
    for key in ("dynamo.fx_graph:0/0", "dynamo.guards:0/0", "dynamo.bytecode:0/0", "aot.forward_graph:0/0",
                "inductor.pre_grad_graph:0/0", "inductor.post_grad_graph:0/0", "inductor.ir_post_fusion:0/0",
                "inductor.output_code:0/0", "kernel:cpp_fused_abs_add_div_0", "inductor.estimates:0/0"):
        assert key in keys, (key, keys)
    graph = jobs.text("kb12_host", "dynamo.fx_graph:0/0")
    FileCheck().check('f32[3000, 1000000]').check("torch.abs(").run(graph)
    code = jobs.text("kb12_host", "inductor.output_code:0/0")
    FileCheck().check("cpp_fused_abs_add_div_0").check("def call(").check("empty_strided_cpu((3000, 1000000)") \
        .run(code)
    kernel = jobs.text("kb12_host", "kernel:cpp_fused_abs_add_div_0")
    assert "3000000000" in kernel  # the loop bound: every element, as for the real tensor
    estimates = json.loads(jobs.text("kb12_host", "inductor.estimates:0/0"))
    assert estimates["total_bytes_read_and_written"] == 24_000_000_000  # reads 12 GB, writes 12 GB
    assert estimates["nodes"][0]["kernels"] == ["cpp_fused_abs_add_div_0"]
    page = jobs.client.get(f"/j/{job['id']}").get_data(as_text=True)
    assert run_mode["sentence"] in page


@needs_bwrap
@pytest.mark.slow
def test_12_gb_kernelbench_source_compiles_only_on_virtual_sm90_down_to_sass(jobs):
    job = jobs.job("kb12_sm90")
    assert job["status"] == "done", job["error"]
    sentence = job["timings"]["run_mode"]["sentence"]
    assert sentence == VIRTUAL_SENTENCE
    assert job["timings"]["target"]["virtual"] is True and "run" not in job["timings"]
    keys = jobs.keys("kb12_sm90")
    for key in ("dynamo.fx_graph:0/0", "aot.forward_graph:0/0", "inductor.post_grad_graph:0/0",
                "inductor.output_code:0/0", "inductor.estimates:0/0"):
        assert key in keys, (key, keys)
    graph = jobs.text("kb12_sm90", "aot.forward_graph:0/0")
    assert 'f32[3000, 1000000][1000000, 1]cuda:0' in graph
    code = jobs.text("kb12_sm90", "inductor.output_code:0/0")
    FileCheck().check("def triton_poi_fused_abs_add_div_0(").check("device_str='cuda'").check("def call(") \
        .check("empty_strided_cuda((3000, 1000000)").run(code)
    ptx = [k for k in keys if k.startswith("triton.ptx:triton_poi_fused_abs_add_div_0.")]
    assert ptx, keys
    for key in ptx:
        FileCheck().check(".target sm_90a").check(".entry triton_poi_fused_abs_add_div_0").run(
            jobs.text("kb12_sm90", key))
        sass = jobs.text("kb12_sm90", key.replace("triton.ptx:", "triton.sass:"))
        assert "EXIT" in sass and "sm_90a" in sass
    assert VIRTUAL_SENTENCE in jobs.client.get(f"/j/{job['id']}").get_data(as_text=True)


@needs_bwrap
@pytest.mark.slow
def test_running_what_does_not_fit_is_a_memory_limit_at_the_line_that_allocates(jobs):
    forced = jobs.job("kb12_forced")
    assert forced["error"]["kind"] == "MemoryLimit" and forced["error"]["line"] == RAND_LINE, forced["error"]
    assert "memory_limit_mb" in forced["error"]["message"] and "run: compile-only" in forced["error"]["message"]
    value = jobs.job("value12")
    assert value["error"]["kind"] == "MemoryLimit" and value["error"]["line"] == 8, value["error"]
    assert "memory_limit_mb" in value["error"]["message"] and "make `example_inputs` a function" in \
        value["error"]["message"]


@needs_bwrap
@pytest.mark.slow
def test_out_of_memory_while_timing_leaves_a_done_job_with_a_notice(jobs):
    """Forced to run, the model that grows on its second call compiles (its first call), then runs
    out of memory while it is timed: the job is done with every stage, and the notice names the
    phase, the user's line, the allocator's message and the setting."""
    job = jobs.job("grows_forced")
    assert job["status"] == "done" and job["error"] is None, job["error"]
    notice = job["timings"]["not_measured"]
    assert notice["kind"] == "MemoryLimit" and notice["line"] == GROWS_LINE, notice
    assert notice["phase"] == "timing eager and compiled calls" and notice["setting"] == "memory_limit_mb"
    assert "alloc_cpu.cpp" in notice["why"]  # PyTorch's allocator, as the issue saw it
    assert "inductor.output_code:0/0" in [s["key"] for s in job["stages"]]
    page = jobs.client.get(f"/j/{job['id']}").get_data(as_text=True)
    assert "compiled; not measured" in page and "alloc_cpu.cpp" in page


@needs_bwrap
@pytest.mark.slow
def test_the_estimate_foresees_what_a_later_call_allocates(jobs):
    """`run: auto` replays the calls a run makes on fake copies: it sees the second call's 2**45
    floats, so the job compiles only (and the model's own call count was left alone: the compiled
    graph is its first call's)."""
    job = jobs.job("grows")
    assert job["status"] == "done", job["error"]
    run_mode = job["timings"]["run_mode"]
    assert run_mode["mode"] == "compile-only" and run_mode["estimated_peak_bytes"] >= 4 * 2**45
    assert run_mode["sentence"].startswith("compile-only: the run would peak at ")
    assert "run" not in job["timings"]
    assert "x * 2" in jobs.text("grows", "dynamo.fx_graph:0/0").replace("l_x_", "x")


@needs_bwrap
@pytest.mark.slow
def test_a_model_whose_inputs_fit_but_activations_do_not_compiles_only_with_every_stage(jobs):
    job = jobs.job("activations")
    assert job["status"] == "done", job["error"]
    run_mode = job["timings"]["run_mode"]
    assert run_mode["mode"] == "compile-only" and run_mode["inputs_bytes"] == 16 * 16 * 1024 * 1024 * 4
    assert HOST_SENTENCE.match(run_mode["sentence"]), run_mode["sentence"]
    assert run_mode["estimated_peak_bytes"] >= 3 * 16 * 128 * 1024 * 1024 * 4
    keys = jobs.keys("activations")
    for key in ("dynamo.fx_graph:0/0", "aot.forward_graph:0/0", "inductor.post_grad_graph:0/0",
                "inductor.output_code:0/0", "inductor.estimates:0/0"):
        assert key in keys, (key, keys)
    FileCheck().check("extern_kernels.convolution(").run(jobs.text("activations", "inductor.output_code:0/0"))
    assert run_mode["sentence"] in jobs.client.get(f"/j/{job['id']}").get_data(as_text=True)


@needs_bwrap
@pytest.mark.slow
def test_compile_only_output_code_equals_a_real_runs(jobs):
    real, fake = jobs.job("kwargs_run"), jobs.job("kwargs_fake")
    assert real["status"] == fake["status"] == "done", (real["error"], fake["error"])
    assert real["timings"]["run_mode"]["mode"] == "compile-and-run" and real["timings"]["run"]["compiled_ms"] > 0
    # where a run happened, the measured peak stands beside the estimate
    ran = real["timings"]["run_mode"]
    assert 0 < ran["estimated_peak_bytes"] < ran["measured_peak_bytes"], ran
    assert ran["sentence"].startswith("compile-and-run: the run would peak at ")
    assert fake["timings"]["run_mode"]["mode"] == "compile-only" and "run" not in fake["timings"]

    def strip(text: str) -> str:  # the kernel's path in each job's own Inductor cache differs
        return "\n".join(line for line in text.split("\n") if "kernel path:" not in line)

    for key in ("inductor.output_code:0/0", "aot.forward_graph:0/0", "inductor.post_grad_graph:0/0"):
        assert strip(jobs.text("kwargs_run", key)) == strip(jobs.text("kwargs_fake", key)), key
    code = jobs.text("kwargs_fake", "inductor.output_code:0/0")
    FileCheck().check("extern_kernels.convolution(").check("cpp_fused").run(code)
    kernels = [k for k in jobs.keys("kwargs_run") if k.startswith("kernel:")]
    assert kernels and kernels == [k for k in jobs.keys("kwargs_fake") if k.startswith("kernel:")]
    for key in kernels:
        assert jobs.text("kwargs_run", key) == jobs.text("kwargs_fake", key)
    # the compile-only stage says what differs: the guards' view of the inputs' type
    stage = jobs.client.get(f"/api/jobs/{fake['id']}/stages/inductor.output_code:0/0?format=json").get_json()
    assert stage["meta"]["note"].startswith("compile-only: the inputs and parameters are fake tensors")
    real_stage = jobs.client.get(f"/api/jobs/{real['id']}/stages/inductor.output_code:0/0?format=json").get_json()
    assert not real_stage["meta"]["note"].startswith("compile-only")
    guards = jobs.text("kwargs_fake", "dynamo.guards:0/0")
    assert re.search(r"TENSOR_MATCH: check_tensor\(L\['x'\], FakeTensor", guards)


STATE = {"calls": 0}


def test_the_estimate_runs_in_a_child_whose_side_effects_stay_there():
    """peak_memory.in_child forks: what the replayed forward changes (here a module-level counter,
    as a stateful model might) never reaches the job's process, and a forward that waits forever
    is killed at the bound, with a sentence instead of an estimate."""
    from compiler.pytorch import peak_memory

    def changes_state():
        STATE["calls"] += 1
        return peak_memory.PeakEstimate(123, 100, 0.5)

    result = peak_memory.in_child(changes_state, timeout_s=60)
    assert (result.peak_bytes, result.without_reference_bytes, result.error) == (123, 100, "")
    assert STATE["calls"] == 0

    def waits_forever():
        import time
        time.sleep(3600)

    stuck = peak_memory.in_child(waits_forever, timeout_s=1)
    assert stuck.peak_bytes is None and stuck.error == "the estimate did not finish within 1 s"
    assert 1 <= stuck.seconds < 10

"""The PyTorch pipeline end to end: real torch.compile runs in the real sandbox, through the API."""
from __future__ import annotations

import pytest

import dataclasses
import json

from tests.conftest import compile_and_wait, needs_bwrap, stage_text

pytestmark = [needs_bwrap, pytest.mark.slow]

GRAPH_BREAK_MODEL = '''import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        y = self.lin(x)
        print("inside forward", tuple(y.shape))
        return torch.softmax(torch.relu(y) + 1, dim=-1)


model = Net()
example_inputs = (torch.randn(4, 16),)
'''
SOFTMAX_LINE = 12
PRINT_LINE = 11

SOLVE_MODEL = '''import torch


class Solve(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.eye(6) + 0.1 * torch.randn(6, 6))

    def forward(self, b):
        return torch.linalg.solve(self.a, b).tanh()


model = Solve()
example_inputs = lambda: (torch.randn(6, 3),)
'''


def _json(client, job_id, key):
    from urllib.parse import quote
    return client.get(f"/api/jobs/{job_id}/stages/{quote(key, safe='')}?format=json").get_json()


def test_graph_break_model_all_core_stages(client):
    job = compile_and_wait(client, "pytorch", GRAPH_BREAK_MODEL)
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    for required in ("source", "run.stdout", "dynamo.fx_graph:0/0_1", "dynamo.fx_graph:1/0",
                     "inductor.output_code:1/0", "dynamo.graph_breaks", "dynamo.guards:1/0", "aot.forward_graph:1/0",
                     "inductor.post_grad_graph:1/0"):
        assert required in keys, (required, keys)
    # the program's print, from inside the compiled forward
    assert "inside forward (4, 16)" in stage_text(client, job["id"], "run.stdout")
    # the unqualified key finds the first graph
    assert "torch._C._nn.linear" in stage_text(client, job["id"], "dynamo.fx_graph")
    breaks = stage_text(client, job["id"], "dynamo.graph_breaks")
    assert f"model.py:{PRINT_LINE}" in breaks and "print" in breaks
    code = _json(client, job["id"], "inductor.output_code:1/0")
    assert "cpp_fused__softmax_add_relu" in code["text"]  # the fused kernel names the fused ops
    lines = code["text"].split("\n")
    to_softmax = [a for a, b in code["source_map"] if b == SOFTMAX_LINE]
    assert any("cpp_fused__softmax" in lines[a - 1] for a in to_softmax)
    assert any("Vectorized" in lines[a - 1] or "tmp" in lines[a - 1] for a in to_softmax)  # kernel body lines
    graph = _json(client, job["id"], "dynamo.fx_graph:1/0")
    assert any("torch.softmax" in graph["text"].split("\n")[a - 1] for a, b in graph["source_map"] if b == SOFTMAX_LINE)
    # timings: PyTorch's own phase breakdown and measured eager vs compiled
    compile_t = job["timings"]["compile"]
    assert compile_t["total_s"] > 0 and compile_t["inductor_lowering_s"] > 0 and compile_t["dynamo_tracing_s"] > 0
    run = job["timings"]["run"]
    assert run["eager_ms"] > 0 and run["compiled_ms"] > 0 and run["compiled_repeats"] >= 5
    assert run["speedup"] == pytest.approx(run["eager_ms"] / run["compiled_ms"], rel=0.01)
    assert run["accuracy"]["vs_eager"]["max_abs_error"] < 1e-5
    assert run["accuracy"]["vs_float64_eager"]["compared"] == 1
    assert run["memory"]["eager_peak_bytes"] > 0 and run["memory"]["compiled_peak_bytes"] > 0
    assert "host CPU" in run["where"]
    profile = json.loads(stage_text(client, job["id"], "run.kernels"))
    assert any("addmm" in row["name"] for row in profile["table"])  # the extern kernel, as the profiler saw it
    assert profile["events"] and all(e["dur_us"] >= 0 for e in profile["events"])
    # bytecode of every frame, original and modified, linked to the user's lines
    bytecode = _json(client, job["id"], "dynamo.bytecode:0/0_1")
    assert "ORIGINAL BYTECODE forward" in bytecode["text"] and "MODIFIED BYTECODE forward" in bytecode["text"]
    assert any(b == PRINT_LINE for a, b in bytecode["source_map"])
    # fusion decisions and the scheduler IR, per graph, linked to the user's lines
    fusion = _json(client, job["id"], "inductor.fusion:1/0")
    assert "fusion complete" in fusion["text"] and any(b == SOFTMAX_LINE for a, b in fusion["source_map"])
    post = stage_text(client, job["id"], "inductor.ir_post_fusion:1/0")
    assert post.startswith("AFTER FUSION") and "FusedSchedulerNode" in post
    kernel = _json(client, job["id"], "kernel:cpp_fused__softmax_add_relu_threshold_backward_0")
    assert kernel["format"] == "cpp" and 'extern "C"' in kernel["text"]
    assert {b for a, b in kernel["source_map"]} == {SOFTMAX_LINE}
    # the page renders the output code with source colours
    pane = client.get(f"/j/{job['id']}/stage/inductor.output_code:1%2F0").get_data(as_text=True)
    assert f'data-src="{SOFTMAX_LINE}"' in pane


def test_training_builds_backward_graph(client):
    job = compile_and_wait(client, "pytorch", SOLVE_MODEL, {"training": True})
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    assert "aot.backward_graph:0/0" in keys and "aot.joint_graph:0/0" in keys
    backward = stage_text(client, job["id"], "aot.backward_graph:0/0")
    # the gradient of solve reuses the forward's saved LU factors: an adjoint LU solve
    assert "aten.linalg_lu_solve.default" in backward and "adjoint = True" in backward
    assert "tangents_1" in backward
    assert any(k.startswith("inductor.output_code:0/0.backward") for k in keys), keys
    assert job["timings"]["run"]["what"] == "forward + backward"


def test_bad_sources_fail_with_their_line(client):
    job = compile_and_wait(client, "pytorch", "import torch\nmodel = torch.nn.Linear(2, 2\nexample_inputs = ()\n")
    assert job["error"]["kind"] == "SyntaxError" and job["error"]["line"] == 2
    job = compile_and_wait(client, "pytorch", "import torch\nmodel = torch.nn.Linear(2, 2)\n")
    assert job["error"]["kind"] == "InputError" and "example_inputs" in job["error"]["message"]
    source = ("import torch\n\ndef model(x):\n    return x @ torch.ones(3, 3)\n\n"
              "example_inputs = (torch.ones(2, 2),)\n")
    job = compile_and_wait(client, "pytorch", source)
    assert job["status"] == "failed" and job["error"]["line"] == 4, job["error"]
    job = compile_and_wait(client, "pytorch", "model = len\nexample_inputs = ()\n",
                           {"inductor_config": {"no_such_flag": True}})
    assert job["error"]["kind"] == "OptionError" and "no_such_flag" in job["error"]["message"]


CONV_MODEL = '''import torch
import torch.nn as nn

model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(8, 4),
).eval()
example_inputs = (torch.randn(2, 3, 16, 16),)
'''


def test_conv_net_in_eval_mode_is_an_inference_graph(client):
    job = compile_and_wait(client, "pytorch", CONV_MODEL)
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    # parameters still require grad (no hidden no_grad): AOTAutograd builds a joint graph; the
    # module's eval() is the user's and folds batch norm into inference arithmetic
    assert "aot.forward_graph:0/0" in keys
    graph = stage_text(client, job["id"], "dynamo.fx_graph:0/0")
    assert "torch.conv2d" in graph and "torch.nn.functional.batch_norm" in graph
    # BatchNorm2d.eval() as the user left it: running statistics, training=False, momentum, eps
    assert "l_fn_modules_1_buffers_running_var_, l_fn_modules_1_parameters_weight_, " \
           "l_fn_modules_1_parameters_bias_, False, 0.1, 1e-05)" in graph
    code = stage_text(client, job["id"], "inductor.output_code:0/0")
    assert "extern_kernels.convolution" in code or "torch.ops.aten.convolution" in code


EXPORT_MODEL = '''import torch


def model(x, y):
    return torch.softmax(x @ y, dim=-1)


example_inputs = (torch.randn(8, 16), torch.randn(16, 8))
'''


def test_export_path_builds_an_aoti_package(client):
    job = compile_and_wait(client, "pytorch", EXPORT_MODEL, {"export": True})
    assert job["status"] == "done", job["error"]
    program = stage_text(client, job["id"], "export.program")
    assert program.startswith("ExportedProgram:") and "torch.ops.aten.softmax.int(matmul, -1)" in program
    package = stage_text(client, job["id"], "aoti.package")
    assert ".wrapper.cpp" in package and ".wrapper.so" in package
    wrapper = stage_text(client, job["id"], "aoti.wrapper")
    assert "AOTInductorModel::run_impl" in wrapper
    keys = [s["key"] for s in job["stages"]]
    assert "inductor.post_grad_graph:export" in keys, keys
    assert job["timings"]["run"]["compiled_ms"] > 0


RECOMPILE_SOURCE = '''import torch


def model(x):
    return x * 2


example_inputs = (torch.randn(4),)
f = torch.compile(model, backend="eager", dynamic=False)
f(torch.randn(4))
f(torch.randn(5))
'''


def test_recompiles_are_reported_with_the_failed_guard(client):
    job = compile_and_wait(client, "pytorch", RECOMPILE_SOURCE, {"backend": "eager"})
    assert job["status"] == "done", job["error"]
    text = stage_text(client, job["id"], "dynamo.recompiles")
    assert "size mismatch" in text or "tensor 'x'" in text, text


BRANCHY = '''import torch


def model(x):
    y = torch.cos(x)
    print("y computed")
    if y.sum() > 0:
        return y * 2
    return y - 1


example_inputs = (torch.randn(16),)
'''


def test_print_and_data_dependent_branch_each_break_the_graph_at_their_line(client):
    job = compile_and_wait(client, "pytorch", BRANCHY, {"backend": "aot_eager"})
    assert job["status"] == "done", job["error"]
    breaks = _json(client, job["id"], "dynamo.graph_breaks")
    assert "model.py:6" in breaks["text"] and "print" in breaks["text"]
    assert "model.py:7" in breaks["text"] and "data-dependent" in breaks["text"].lower()
    assert {6, 7} <= {b for a, b in breaks["source_map"]}
    assert job["stages"][0]["key"] == "source" and "y computed" in stage_text(client, job["id"], "run.stdout")


TRANSFORMER = '''import math
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


model = Block()
example_inputs = (torch.randn(2, 8, 32),)
'''
TRANSFORMER_SOFTMAX_LINE = 22


def test_transformer_block_fuses_and_maps_back_to_softmax(client):
    job = compile_and_wait(client, "pytorch", TRANSFORMER)
    assert job["status"] == "done", job["error"]
    kernels = [s["key"] for s in job["stages"] if s["key"].startswith("kernel:")]
    assert any("native_layer_norm" in k for k in kernels) and any("gelu" in k for k in kernels), kernels
    # Inductor's pattern matcher turns q@k^T / sqrt(d) -> softmax -> @v into one SDPA call on CPU.
    # PyTorch's provenance ties that call to the q/k/v views (line 20), not to the softmax line:
    # the rewrite drops the replaced nodes' origins, and the page shows what the compiler recorded.
    code = _json(client, job["id"], "inductor.output_code:0/0")
    lines = code["text"].split("\n")
    to_qkv = [lines[a - 1] for a, b in code["source_map"] if b == TRANSFORMER_SOFTMAX_LINE - 2]
    assert any("_scaled_dot_product_flash_attention_for_cpu.default(" in line for line in to_qkv), to_qkv
    graph = _json(client, job["id"], "dynamo.fx_graph:0/0")
    glines = graph["text"].split("\n")
    assert any("torch.softmax(" in glines[a - 1] for a, b in graph["source_map"] if b == TRANSFORMER_SOFTMAX_LINE)
    # and the reverse direction: the GELU kernel's body maps back to the MLP line
    gelu = next(k for k in kernels if "gelu" in k)
    assert TRANSFORMER_SOFTMAX_LINE + 3 in {b for a, b in _json(client, job["id"], gelu)["source_map"]}
    assert "inductor.fusion:0/0" in [s["key"] for s in job["stages"]]


def test_toolchain_cache_seeds_isa_probes_without_changing_what_is_compiled(tmp_path):
    """The warm-up builds Inductor's ISA probes once; a job seeded with them compiles the same
    output code as a cold job and finds only probes (no graph or kernel cache entry) in its cache."""
    import os
    from compiler import runner
    from compiler.toolchain import toolchain
    from tests.conftest import make_app
    app = make_app(tmp_path)
    svc = app.extensions["irscope"]
    client = app.test_client()
    cold = compile_and_wait(client, "pytorch", SOLVE_MODEL.replace("tanh()", "relu()"))
    assert cold["timings"]["compile"]["isa_probes_from_toolchain_cache"] == 0
    tools = toolchain("pytorch")
    assert runner.warm_toolchain(svc.runner.config, "pytorch", tools)
    cache = runner.toolchain_cache_dir(svc.runner.config, "pytorch", tools)
    entries = os.listdir(cache)
    assert len(entries) >= 3
    for name in entries:
        files = os.listdir(os.path.join(cache, name))
        assert any(f.endswith(".so") for f in files) and not any(f.endswith(".py") for f in files)
    svc.jobs.config = dataclasses.replace(svc.jobs.config, reuse_results=False)  # compile the same source again
    warm = compile_and_wait(client, "pytorch", SOLVE_MODEL.replace("tanh()", "relu()"))
    assert warm["id"] != cold["id"]
    assert warm["timings"]["compile"]["isa_probes_from_toolchain_cache"] == len(entries)
    strip = lambda text: "\n".join(line for line in text.split("\n") if "kernel path:" not in line)  # noqa: E731
    assert strip(stage_text(client, warm["id"], "inductor.output_code:0/0")) == \
        strip(stage_text(client, cold["id"], "inductor.output_code:0/0"))


def test_pre_started_worker_has_torch_imported_and_is_used_once(tmp_path):
    import time as _time
    from tests.conftest import make_app
    app = make_app(tmp_path, spare_workers=1)
    svc = app.extensions["irscope"]
    deadline = _time.monotonic() + 60
    while not svc.runner.spares._spares.get("pytorch") and _time.monotonic() < deadline:
        _time.sleep(0.2)
    first = svc.runner.spares._spares["pytorch"][0][1]
    _time.sleep(8)  # let it import torch before the job arrives
    job = compile_and_wait(app.test_client(), "pytorch", SOLVE_MODEL)
    assert job["status"] == "done", job["error"]
    assert job["timings"]["job"]["worker"] == "pre-started"
    assert job["timings"]["compile"]["import_torch_s"] < 0.5  # torch was already imported
    assert "tanh" in stage_text(app.test_client(), job["id"], "dynamo.fx_graph")
    replacement = svc.runner.spares._spares["pytorch"][0][1]
    assert replacement is not first and replacement.alive() and not first.alive()
    svc.runner.shutdown()
    assert not replacement.alive()


def test_virtual_sm90_target_through_the_api(client):
    """No GPU here: target cuda:sm_90 makes Inductor write Triton kernels, compiled to PTX and SASS."""
    source = "import torch\n\ndef model(x):\n    return torch.sin(x) * 2 + 1\n\nexample_inputs = (torch.randn(1024),)\n"
    job = compile_and_wait(client, "pytorch", source, {"target": "cuda:sm_90"})
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    code = stage_text(client, job["id"], "inductor.output_code")
    assert "@triton.jit" in code and "triton_poi_fused_add_mul_sin_0" in code
    ptx = [k for k in keys if k.startswith("triton.ptx:triton_poi_fused_add_mul_sin_0")]
    assert ptx and ".target sm_90" in stage_text(client, job["id"], ptx[0])
    sass = [k for k in keys if k.startswith("triton.sass:")]
    assert sass and stage_text(client, job["id"], sass[0]).strip()
    assert job["timings"]["target"]["virtual"] is True
    assert "run" not in job["timings"]  # nothing ran: no invented timings

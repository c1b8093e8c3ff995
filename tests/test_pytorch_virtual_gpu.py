"""A transformer block (attention, layernorm, GELU MLP) compiled by Inductor for a virtual sm_90.

`run_virtual_gpu` installs a process-wide shim, so the job runs in a child process (this file run
as a script), as it does in the sandboxed worker.
"""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from torch.testing import FileCheck

if TYPE_CHECKING:  # the child process this file also is imports no test helper at module level
    from tests.conftest import Background

pytestmark = pytest.mark.slow  # a transformer block to PTX and SASS for every autotune config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODEL = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


model = Block()
example_inputs = (torch.randn(2, 16, 64),)
'''


def _child(out: str, target: str, options_json: str) -> None:
    sys.path.insert(0, ROOT)
    import runpy

    from compiler.pipeline import Bundle, JobContext, OptionError, UserError
    from compiler.pytorch.gpu_codegen import run_virtual_gpu
    os.environ["TRITON_CACHE_DIR"] = os.path.join(out, "triton-cache")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(out, "inductor-cache")
    path = os.path.join(out, "model.py")
    with open(path, "w") as f:
        f.write(MODEL)
    ns = runpy.run_path(path)
    bundle = Bundle(os.path.join(out, "bundle"))
    error = None
    try:
        run_virtual_gpu(ns["model"], ns["example_inputs"], target, JobContext(workdir=out, bundle=bundle),
                        json.loads(options_json))
    except (OptionError, UserError) as e:
        error = {"type": type(e).__name__, "message": str(e)}
    with open(os.path.join(out, "error.json"), "w") as f:
        json.dump(error, f)


def _run(tmp_path, target: str, options: dict) -> tuple[dict, dict | None, str]:
    out = str(tmp_path)
    done = subprocess.run([sys.executable, __file__, out, target, json.dumps(options)], capture_output=True,
                          text=True, timeout=600, cwd=out)
    assert done.returncode == 0, done.stderr[-4000:]
    return _result(out)


def _result(out: str) -> tuple[dict, dict | None, str]:
    with open(os.path.join(out, "error.json")) as f:
        error = json.load(f)
    bundle = os.path.join(out, "bundle")
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    return manifest, error, bundle


def start_in_background(base: str) -> Background:
    """The module fixture's compile for sm_90 (tests/conftest.py starts it when collection ends)."""
    from tests.conftest import start_child
    return start_child([sys.executable, __file__, base, "cuda:sm_90", json.dumps({"training": False})], base)


@pytest.fixture(scope="module")
def sm90(request, tmp_path_factory):
    from tests.conftest import take_background
    return _result(take_background(request, start_in_background, tmp_path_factory))


def _text(bundle: str, stage: dict) -> str:
    with open(os.path.join(bundle, stage["file"])) as f:
        return f.read()


def test_inductor_generates_a_gpu_wrapper(sm90):
    manifest, error, bundle = sm90
    assert error is None
    stages = {s["key"]: s for s in manifest["stages"]}
    wrapper = _text(bundle, stages["inductor.output_code"])
    FileCheck().check("async_compile.triton(").check("device_str='cuda'").run(wrapper)
    # GEMMs go to cuBLAS (the linear layers' mm, attention's bmm), called from call()
    FileCheck().check("def call(").check("extern_kernels.mm(").check("extern_kernels.bmm(").run(wrapper)
    assert "layer_norm" in wrapper and "gelu" in wrapper  # fused kernels for both
    meta = stages["inductor.output_code"]["meta"]
    assert meta["virtual"] and not meta["executed"]
    assert any("constant_folding" in n for n in meta["notes"])
    target = manifest["timings"]["target"]
    assert target["name"] == "cuda:sm_90" and target["virtual"]


def test_every_config_of_every_kernel_reaches_ptx_and_sass(sm90):
    manifest, _, bundle = sm90
    stages = {s["key"]: s for s in manifest["stages"]}
    wrapper = _text(bundle, stages["inductor.output_code"])
    kernels = sorted(set(re.findall(r"async_compile\.triton\('(\w+)'", wrapper)))
    assert len(kernels) >= 5
    for kernel in kernels:
        configs = sorted(k.split(":", 1)[1] for k in stages if k.startswith(f"triton.ptx:{kernel}."))
        assert configs, kernel
        for q in configs:
            ptx = _text(bundle, stages[f"triton.ptx:{q}"])
            assert ".target sm_90a" in ptx and ".entry " + kernel in ptx
            sass = _text(bundle, stages[f"triton.sass:{q}"])
            assert sass.count("/*0") > 10 and ".target\tsm_90a" in sass
            meta = json.loads(_text(bundle, stages[f"triton.metadata:{q}"]))
            assert meta["registers"] > 0 and meta["target"] == "cuda:sm_90"
            assert stages[f"triton.passes:{q}"]["meta"]["count"] > 30
    # the reductions (layernorm, softmax) are autotuned: more than one config is compiled
    assert any(sum(1 for k in stages if k.startswith(f"triton.ptx:{kernel}.")) > 1 for kernel in kernels)
    # the kernel source maps into itself: a tl.load line of the PTX is a tl.load of the source
    q = next(k.split(":", 1)[1] for k in stages if k.startswith("triton.ptx:") and "layer_norm" in k)
    source = _text(bundle, stages[f"triton.source:{q}"]).splitlines()
    lines = {s for _, s in stages[f"triton.ptx:{q}"]["source_map"]}
    assert any("tl.load" in source[line - 1] for line in lines)


def test_inductor_kernels_link_ptx_to_ttgir_without_a_user_line(sm90):
    """Inductor's kernels carry no line of the model's file; their IR stages still link line by line
    through the generated kernel's own locations."""
    from compiler import formats
    manifest, _, bundle = sm90
    stages = {s["key"]: s for s in manifest["stages"]}
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


def test_training_is_a_clear_option_error(tmp_path):
    _, error, _ = _run(tmp_path, "cuda:sm_90", {"training": True})
    assert error["type"] == "OptionError" and "training" in error["message"] and "virtual" in error["message"]


def test_hip_is_refused_for_inductor(tmp_path):
    _, error, _ = _run(tmp_path, "hip:gfx942", {})
    assert error["type"] == "OptionError" and "CUDA" in error["message"]


if __name__ == "__main__":
    _child(*sys.argv[1:4])

"""The PyTorch pipeline end to end: real torch.compile runs in the real sandbox, through the API.

Every model is compiled once: a module fixture submits all jobs at start-up to one app (two
workers, Inductor's ISA probes and precompiled header already built by the session's warm-up job,
a spare worker that imported torch and ran its warm-up compile), and each test asserts many
things about the job it waits for. One more app starts cold (no toolchain cache, a worker started
for its job), for the comparisons with the spare's job.
"""
from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from torch.testing import FileCheck

from compiler.pytorch import toolchain_cache
from service.spare_templates import ForkedJob
from tests.conftest import make_app, needs_bwrap, seed_toolchain_cache, stage_text, wait_job, wait_spares_ready

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


EXPORT_MODEL = '''import torch


def model(x, y):
    return torch.softmax(x @ y, dim=-1)


example_inputs = (torch.randn(8, 16), torch.randn(16, 8))
'''


RECOMPILE_SOURCE = '''import torch


def model(x):
    return x * 2


example_inputs = (torch.randn(4),)
f = torch.compile(model, backend="eager", dynamic=False)
f(torch.randn(4))
f(torch.randn(5))
'''


BRANCHY = '''import torch


def model(x):
    y = torch.cos(x)
    print("y computed")
    if y.sum() > 0:
        return y * 2
    return y - 1


example_inputs = (torch.randn(16),)
'''


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

# The spare's job, compiled by the cold app too: two frames (a graph break), parameters, a
# backward compiled for both, and a data-dependent branch that random numbers decide.
SPARE_MODEL = '''import torch

torch.manual_seed(0)  # which branch runs depends on the random values: the same in both workers


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.eye(6) + 0.1 * torch.randn(6, 6))
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, b):
        y = torch.linalg.solve(self.a, b).relu()
        print("between the graphs")
        if y.sum() > 1:
            return torch.softmax(self.lin(y), dim=-1)
        return self.lin(y).tanh()


model = Net()
example_inputs = lambda: (torch.randn(6, 3),)
'''
SPARE_OPTIONS = {"training": True}

# The user's code, between the two graphs of its model, looks at the job's own result bundle
# (/job/out/manifest.json, what the runner reads while the job runs) until the first graph's
# output code is there, and prints what it saw: stages are written while the compile runs.
STREAMED = '''import json
import time

import torch


@torch.compiler.disable
def look():
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with open("/job/out/manifest.json") as f:
            manifest = json.load(f)
        keys = [s["key"] for s in manifest["stages"]]
        if any(k.startswith("inductor.output_code:0/0") for k in keys):
            break
        time.sleep(0.01)
    print("SEEN " + json.dumps({"keys": keys, "progress": manifest["progress"]}))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(self.lin(x))
        look()
        return torch.softmax(y * 2, dim=-1)


model = Net()
example_inputs = (torch.randn(4, 8),)
'''

VIRTUAL_SM90 = ("import torch\n\ndef model(x):\n    return torch.sin(x) * 2 + 1\n\n"
                "example_inputs = (torch.randn(1024),)\n")
SHAPE_ERROR = ("import torch\n\ndef model(x):\n    return x @ torch.ones(3, 3)\n\n"
               "example_inputs = (torch.ones(2, 2),)\n")

# Run by a job process a spare template forked (the fixture's server keeps templates): what the
# job can see and do of its siblings, the template and the sandbox it made for itself.
FORKED_PROBE = r"""
import ctypes, json, os, signal
import torch
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return 0 if result == 0 else ctypes.get_errno()
def link(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor, closed by now
        return ""
def status(field):
    return next(line.split()[1] for line in open("/proc/self/status") if line.startswith(field + ":"))
header_dir = torch._inductor.codecache._HEADER_DIR
header_mark = os.path.join(header_dir, "written-by-a-job")
header_mark_seen = os.path.exists(header_mark)
open(header_mark, "w").close()  # the directory is the job's own
carried = [os.path.join("/tmp", name) for name in os.listdir("/tmp") if name.startswith(".template-")]
try:
    open(os.path.join(carried[0], "written-by-a-job"), "w").close()
    carried_write = 0
except OSError as e:
    carried_write = e.errno
# OpenMP: the template's pool thread (torch starts one at import) is not in the fork; a parallel
# region must start a team of its own, not wait for it
tasks_before = len(os.listdir("/proc/self/task"))
product = (torch.ones(1500, 1500) @ torch.ones(1500, 1500))[0, 0].item()
omp = {"threads": torch.get_num_threads(), "tasks_before": tasks_before,
       "tasks_after": len(os.listdir("/proc/self/task")), "product": product}
marks = {name: os.path.exists(path) for name, path in (("tmp", "/tmp/mark"), ("shm", "/dev/shm/mark"))}
open("/tmp/mark", "w").close()
open("/dev/shm/mark", "w").close()
probe = {
    "slots": os.listdir("/slots"), "job": sorted(os.listdir("/job")), "pid": os.getpid(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "uid": os.getuid(), "cap_eff": status("CapEff"), "cap_bnd": status("CapBnd"), "seccomp": status("Seccomp"),
    "filters": int(status("Seccomp_filters")), "no_new_privs": status("NoNewPrivs"),
    "fds": sorted(link(fd) for fd in os.listdir("/proc/self/fd")),
    "unshare_user": errno_of(libc.unshare(0x10000000)),
    "mount": errno_of(libc.mount(b"none", b"/slots", b"tmpfs", 0, None)),
    "umount_slots": errno_of(libc.umount2(b"/slots", 2)), "umount_job": errno_of(libc.umount2(b"/job", 2)),
    "headers": sorted(os.listdir(header_dir)), "header_links": sorted(os.readlink(os.path.join(header_dir, n))
    for n in os.listdir(header_dir) if os.path.islink(os.path.join(header_dir, n))),
    "carried_write": carried_write, "marks_seen": dict(marks, header=header_mark_seen),
    "omp": omp,
}
print("PROBE " + json.dumps(probe))


def model(x):
    return torch.cos(x) + %s


example_inputs = (torch.randn(8),)
"""
# name -> (source, options). "spare" goes first, to the pre-started worker.
# A program as people write them: argparse and a main() guard, a decorated function, a module
# compiled and trained with an optimizer, a data-dependent branch (a graph break), a new shape (a
# recompile); no `model`, no `example_inputs`.
PROGRAM = """import argparse
import sys

import torch
import torch.nn as nn


class TinyNet(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if h.sum() > 0:
            h = h * 2
        return self.fc2(h)


@torch.compile
def scale_shift(x, k):
    return torch.sin(x) * k + 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    print("argv", sys.argv)
    torch.manual_seed(0)
    net = TinyNet()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    compiled = torch.compile(net)
    for step in range(args.steps):
        loss = compiled(torch.randn(8, 32)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}")
    for n in (4, 8):
        scale_shift(torch.randn(n), 2.0)
    print("done")


if __name__ == "__main__":
    main()
"""

# nn.Sequential of the user's own modules, the way model code is written (the sixth walk): Dynamo
# inlines Block.forward from Sequential's frame and reads its globals by importing its module by name
SEQUENTIAL_OF_OWN = '''import torch
import torch.nn as nn

SCALE = 0.5


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.up = nn.Linear(d, d)

    def forward(self, x):
        return x + SCALE * torch.nn.functional.gelu(self.up(x))


model = nn.Sequential(Block(), Block())
example_inputs = (torch.randn(8, 32),)
'''

JOBS = {
    "spare": (SPARE_MODEL, SPARE_OPTIONS),
    "sequential_of_own": (SEQUENTIAL_OF_OWN, {}),
    "forked_a": (FORKED_PROBE % "1", {}),
    "forked_b": (FORKED_PROBE % "2", {}),
    "streamed": (STREAMED, {}),
    "graph_break": (GRAPH_BREAK_MODEL, {}),
    "transformer": (TRANSFORMER, {}),
    "training": (SOLVE_MODEL, {"training": True}),
    "conv": (CONV_MODEL, {}),
    "export": (EXPORT_MODEL, {"export": True}),
    "branchy": (BRANCHY, {"backend": "aot_eager"}),
    "recompile": (RECOMPILE_SOURCE, {"backend": "eager"}),
    "virtual_sm90": (VIRTUAL_SM90, {"target": "cuda:sm_90"}),
    "virtual_sm90_training": ("import torch\n\nmodel = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())"
                              "\nexample_inputs = (torch.randn(4, 16),)\n", {"target": "cuda:sm_90", "training": True}),
    "syntax_error": ("import torch\nmodel = torch.nn.Linear(2, 2\nexample_inputs = ()\n", {}),
    "no_inputs": ("import torch\nmodel = torch.nn.Linear(2, 2)\n", {}),
    "shape_error": (SHAPE_ERROR, {}),
    "bad_config": ("model = len\nexample_inputs = ()\n", {"inductor_config": {"no_such_flag": True}}),
    "program": (PROGRAM, {}),
    "program_compiles_nothing": ("import torch\n\nif __name__ == '__main__':\n    print(torch.ones(2).sum())\n", {}),
}


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def _has_torch_loaded(pid: int) -> bool:
    """True when a process of the tree under `pid` has PyTorch's library mapped (torch imported)."""
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/maps") as f:
                if "libtorch_cpu.so" in f.read():
                    return True
        except OSError:
            continue
    return False


class Compiled:
    """The module's jobs, submitted at once; `job(name)` waits for one and returns its JSON."""

    def __init__(self, app, ids: dict[str, str], cold_app, cold_id: str, spare_before, cold_gpu_id: str = ""):
        self.app, self.client, self.ids = app, app.test_client(), ids
        self.cold_app, self.cold_client, self.cold_id = cold_app, cold_app.test_client(), cold_id
        self.cold_gpu_id = cold_gpu_id  # the cold app's job of VIRTUAL_SM90
        self.spare_before = spare_before
        self.svc = app.extensions["irscope"]

    def job(self, name: str) -> dict:
        return wait_job(self.client, self.ids[name], timeout=900)

    def text(self, name: str, key: str) -> str:
        return stage_text(self.client, self.ids[name], key)

    def stage(self, name: str, key: str) -> dict:
        return self.client.get(f"/api/jobs/{self.ids[name]}/stages/{quote(key, safe='')}?format=json").get_json()


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, pytorch_toolchain_cache):
    cold_app = make_app(tmp_path_factory.mktemp("cold"), workers=1)
    cold = cold_app.test_client().post("/api/compile", json={"language": "pytorch", "source": SPARE_MODEL,
                                                             "options": SPARE_OPTIONS})
    cold_gpu = cold_app.test_client().post("/api/compile", json={"language": "pytorch", "source": VIRTUAL_SM90,
                                                                 "options": {"target": "cuda:sm_90"}})
    data = tmp_path_factory.mktemp("warm") / "var"
    seed_toolchain_cache(pytorch_toolchain_cache, str(data))
    app = make_app(data.parent, workers=2, spare_workers=1, warm_toolchain_cache=True)
    spares = app.extensions["irscope"].runner.spares
    wait_spares_ready(spares, "pytorch", "pytorch@cuda:sm_90")
    spare = spares.waiting("pytorch")[0]
    assert isinstance(spare, ForkedJob), "a PyTorch spare with bubblewrap is a template's slot"
    assert spares.ready("pytorch") and _has_torch_loaded(spare.template.proc.proc.pid), \
        "the spare worker never got ready"
    assert spares.ready("pytorch@cuda:sm_90"), "the virtual H100's spare never got ready"
    client = app.test_client()
    ids = {}
    for name, (source, options) in JOBS.items():
        response = client.post("/api/compile", json={"language": "pytorch", "source": source, "options": options})
        assert response.status_code in (200, 202), (name, response.get_json())
        ids[name] = response.get_json()["job"]
    yield Compiled(app, ids, cold_app, cold.get_json()["job"], spare, cold_gpu.get_json()["job"])
    waiting = spares.waiting("pytorch")
    app.extensions["irscope"].runner.shutdown()
    cold_app.extensions["irscope"].runner.shutdown()
    assert not any(proc.alive() for proc in waiting), "shutdown left a spare worker running"
    spares.fill("pytorch")  # as a job ending after the shutdown would
    assert spares.closed, "a spare was started after the shutdown"


# Run outside the sandbox, in a process of its own: Inductor compiles a kernel with the toolchain
# cache's header linked in (as a job does), every C++ command it runs is recorded, and the ones
# that include the precompiled header are run again with g++'s -H, which prints the header files
# a compile reads: a precompiled header g++ accepts is marked "!", one it rejects "x".
_GXX_CHECK = r"""
import json, os, shlex, subprocess, sys
import torch
import torch._inductor.codecache as codecache
import torch._inductor.cpp_builder as cpp_builder
from compiler.pytorch import toolchain_cache

cache = sys.argv[1]
toolchain_cache.import_probes(cache, os.environ["TORCHINDUCTOR_CACHE_DIR"])
linked = toolchain_cache.link_headers(cache, codecache._HEADER_DIR)
commands = []
run = cpp_builder._run_compile_cmd
def recording(cmd_line, cwd):
    commands.append((cmd_line, cwd))
    return run(cmd_line, cwd)
cpp_builder._run_compile_cmd = recording
torch.compile(lambda x: torch.sin(x) * 2 + 1)(torch.randn(64))
checks = []
for cmd_line, cwd in commands:
    if "-include" in cmd_line:
        # (in the cache directory: Inductor removed the build directory it ran in)
        done = subprocess.run(shlex.split(cmd_line) + ["-H"], cwd=os.environ["TORCHINDUCTOR_CACHE_DIR"],
                              capture_output=True, text=True)
        checks.append(done.stderr.splitlines()[0] if done.stderr else "")
print(json.dumps({"linked": linked, "built": toolchain_cache.headers_built(codecache._HEADER_DIR),
                  "header_dir": codecache._HEADER_DIR, "checks": checks}))
"""


def test_gxx_takes_the_seeded_precompiled_header(compiled, pytorch_toolchain_cache, tmp_path):
    """g++ uses the warm-up's precompiled header as it is (it would silently parse the header
    instead if the .gch did not fit the compiler and flags), also at another path than the one
    it was built at, through the link a job gets."""
    env = dict(os.environ, TMPDIR=str(tmp_path), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env.pop("TORCH_TRACE", None)
    done = subprocess.run([sys.executable, "-c", _GXX_CHECK, pytorch_toolchain_cache], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["linked"] and result["built"] == []
    assert result["checks"], "Inductor compiled no kernel with the precompiled header"
    for first in result["checks"]:
        assert first.startswith("! " + result["header_dir"]) and first[2:].endswith(".h.gch"), first
        assert os.path.basename(first[2:]) in result["linked"]


def test_graph_break_model_all_core_stages(compiled):
    job = compiled.job("graph_break")
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    for required in ("source", "run.stdout", "dynamo.fx_graph:0/0_1", "dynamo.fx_graph:1/0",
                     "inductor.output_code:1/0", "dynamo.graph_breaks", "dynamo.guards:1/0", "aot.forward_graph:1/0",
                     "inductor.post_grad_graph:1/0"):
        assert required in keys, (required, keys)
    # the program's print, from inside the compiled forward
    assert "inside forward (4, 16)" in compiled.text("graph_break", "run.stdout")
    # the unqualified key finds the first graph
    assert "torch._C._nn.linear" in compiled.text("graph_break", "dynamo.fx_graph")
    # the index of its two compiles: irscope called the model, so no line of the user's called them
    FileCheck().check("# 2 compiles of 2 functions\n").check("## called from no line of yours") \
        .check("[0/0_1] forward, line ").check(f"graph break at line {PRINT_LINE}") \
        .check("[1/0] torch_dynamo_resume_in_forward_at_").run(compiled.text("graph_break", "dynamo.compiles"))
    breaks = compiled.text("graph_break", "dynamo.graph_breaks")
    FileCheck().check("## graph break 1").check(f"model.py:{PRINT_LINE}").check("print").run(breaks)
    # the user code traceback holds the user's frames; irscope's own (its job process and pipeline)
    # are cut, and counted
    user_traceback = breaks.split("User code traceback:", 1)[1].split("\n\n", 1)[0]
    assert "/compiler/" not in user_traceback and "<frozen runpy>" not in user_traceback, user_traceback
    assert re.match(r"\n  \[irscope: \d+ frames? of irscope's own code cut\]\n  File ", user_traceback), user_traceback
    assert re.search(rf'  File "[^"]*model\.py", line {PRINT_LINE}, in forward\n    print\(', user_traceback)
    code = compiled.stage("graph_break", "inductor.output_code:1/0")
    # the fused kernel names the fused ops: defined, then launched from call()
    FileCheck().check("cpp_fused__softmax_add_relu").check("def call(") \
        .check("cpp_fused__softmax_add_relu_threshold_backward_0(").run(code["text"])
    lines = code["text"].split("\n")
    to_softmax = [lines[a - 1] for a, b in code["source_map"] if b == SOFTMAX_LINE]
    # the kernel's definition line and its body (CPU vector code) both map to the softmax line
    assert any("cpp_fused__softmax" in line for line in to_softmax)
    assert any("at::vec::Vectorized<float>" in line for line in to_softmax), to_softmax
    graph = compiled.stage("graph_break", "dynamo.fx_graph:1/0")
    glines = graph["text"].split("\n")
    assert any("torch.softmax" in glines[a - 1] for a, b in graph["source_map"] if b == SOFTMAX_LINE)
    # the FX graph drawn by Graphviz in the worker, one box per node
    drawing = compiled.stage("graph_break", "dynamo.fx_graph_drawing:1/0")
    assert drawing["format"] == "svg" and drawing["text"].startswith("<svg")
    FileCheck().check("<title>softmax</title>").run(drawing["text"])
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
    profile = json.loads(compiled.text("graph_break", "run.kernels"))
    assert any("addmm" in row["name"] for row in profile["table"])  # the extern kernel, as the profiler saw it
    assert profile["events"] and all(e["dur_us"] >= 0 for e in profile["events"])
    # each compiled graph's call, which the profiler names by a hash, is named by its compile id and function
    graphs = {row["name"] for row in profile["table"] if row["name"].startswith("## Call CompiledFxGraph")}
    assert graphs and {profile["labels"][g].split(":")[0] for g in graphs} == \
        {"compiled graph [0/0_1]", "compiled graph [1/0]"}, profile["labels"]
    pane = compiled.client.get(f"/j/{job['id']}/stage/run.kernels").get_data(as_text=True)
    assert 'class="profile-timeline"' in pane and "addmm" in pane  # the profile viewer read the typed record
    # bytecode of every frame, original and modified, linked to the user's lines
    bytecode = compiled.stage("graph_break", "dynamo.bytecode:0/0_1")
    FileCheck().check("ORIGINAL BYTECODE forward").check("MODIFIED BYTECODE forward").run(bytecode["text"])
    assert PRINT_LINE in {b for a, b in bytecode["source_map"]}
    # fusion decisions and the scheduler IR, per graph, linked to the user's lines
    fusion = compiled.stage("graph_break", "inductor.fusion:1/0")
    assert "fusion complete" in fusion["text"] and SOFTMAX_LINE in {b for a, b in fusion["source_map"]}
    post = compiled.text("graph_break", "inductor.ir_post_fusion:1/0")
    assert post.startswith("AFTER FUSION") and "FusedSchedulerNode" in post
    kernel = compiled.stage("graph_break", "kernel:cpp_fused__softmax_add_relu_threshold_backward_0")
    assert kernel["format"] == "cpp" and 'extern "C"' in kernel["text"]
    assert {b for a, b in kernel["source_map"]} == {SOFTMAX_LINE}
    # the Kernels group's table: every kernel stage of the job, its lines, no GPU figure
    keys = [s["key"] for s in job["stages"]]
    table = json.loads(compiled.text("graph_break", "kernels.resources"))["kernels"]
    assert [r["stage"] for r in table] == [k for k in keys if k.startswith("kernel:")], table
    row = next(r for r in table if r["stage"] == "kernel:cpp_fused__softmax_add_relu_threshold_backward_0")
    assert row["target"] == "cpu" and row["lines"] == [SOFTMAX_LINE] and row["registers"] is None, row
    pane = compiled.client.get(f"/j/{job['id']}/stage/kernels.resources").get_data(as_text=True)
    kernels = f"{len(table)} kernel{'' if len(table) == 1 else 's'}"
    assert f"{kernels}, compiled for the host CPU" in pane and ">regs<" not in pane
    assert "Every kernel Inductor wrote for the host CPU" in pane  # its own explanation, not the GPU table's
    assert 'href="#stage=kernel%3Acpp_fused__softmax_add_relu_threshold_backward_0"' in pane
    assert f'<td class="lines" title="lines of your source this kernel\'s code came from">{SOFTMAX_LINE}</td>' in pane
    from service.glance import glance  # the summary's kernels open that table
    store = compiled.client.application.extensions["irscope"].store
    items = [(i.text, i.stage) for i in glance(store, store.get_job(job["id"]))]
    assert (kernels, "kernels.resources") in items, items
    # the page renders the output code with source colours
    pane = compiled.client.get(f"/j/{job['id']}/stage/inductor.output_code:1%2F0").get_data(as_text=True)
    assert f'data-src="{SOFTMAX_LINE}"' in pane


def test_training_builds_backward_graph(compiled):
    job = compiled.job("training")
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    assert "aot.backward_graph:0/0" in keys and "aot.joint_graph:0/0" in keys
    backward = compiled.text("training", "aot.backward_graph:0/0")
    # the gradient of solve reuses the forward's saved LU factors: an adjoint LU solve
    FileCheck().check("tangents_1").check("aten.linalg_lu_solve.default").check("adjoint = True").run(backward)
    assert any(k.startswith("inductor.output_code:0/0.backward") for k in keys), keys
    assert job["timings"]["run"]["what"] == "forward + backward"


def test_bad_sources_fail_with_their_line(compiled):
    job = compiled.job("syntax_error")
    assert job["error"]["kind"] == "SyntaxError" and job["error"]["line"] == 2
    job = compiled.job("no_inputs")
    assert job["error"]["kind"] == "InputError" and "example_inputs" in job["error"]["message"]
    job = compiled.job("shape_error")
    assert job["status"] == "failed" and job["error"]["line"] == 4, job["error"]
    job = compiled.job("bad_config")
    assert job["error"]["kind"] == "OptionError" and "no_such_flag" in job["error"]["message"]


def test_conv_net_in_eval_mode_is_an_inference_graph(compiled):
    job = compiled.job("conv")
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    # parameters still require grad (no hidden no_grad): AOTAutograd builds a joint graph; the
    # module's eval() is the user's and folds batch norm into inference arithmetic
    assert "aot.forward_graph:0/0" in keys
    graph = compiled.text("conv", "dynamo.fx_graph:0/0")
    FileCheck().check("torch.conv2d").check("torch.nn.functional.batch_norm").run(graph)
    # BatchNorm2d.eval() as the user left it: running statistics, training=False, momentum, eps
    assert "l_fn_modules_1_buffers_running_var_, l_fn_modules_1_parameters_weight_, " \
           "l_fn_modules_1_parameters_bias_, False, 0.1, 1e-05)" in graph
    code = compiled.text("conv", "inductor.output_code:0/0")
    FileCheck().check("def call(").check("extern_kernels.convolution(").run(code)


def test_export_path_builds_an_aoti_package(compiled):
    job = compiled.job("export")
    assert job["status"] == "done", job["error"]
    program = compiled.text("export", "export.program")
    assert program.startswith("ExportedProgram:") and "torch.ops.aten.softmax.int(matmul, -1)" in program
    package = compiled.text("export", "aoti.package")
    FileCheck().check(".wrapper.cpp").run(package)
    FileCheck().check(".wrapper.so").run(package)
    wrapper = compiled.text("export", "aoti.wrapper")
    assert "AOTInductorModel::run_impl" in wrapper
    keys = [s["key"] for s in job["stages"]]
    assert "inductor.post_grad_graph:export" in keys, keys
    assert job["timings"]["run"]["compiled_ms"] > 0


def test_recompiles_are_reported_with_the_failed_guard(compiled):
    job = compiled.job("recompile")
    assert job["status"] == "done", job["error"]
    text = compiled.text("recompile", "dynamo.recompiles")
    FileCheck().check("## recompile 1").check("tensor 'x' size mismatch at index 0. expected 4, actual 5").run(text)


def test_print_and_data_dependent_branch_each_break_the_graph_at_their_line(compiled):
    job = compiled.job("branchy")
    assert job["status"] == "done", job["error"]
    breaks = compiled.stage("branchy", "dynamo.graph_breaks")
    FileCheck().check("## graph break 1").check("model.py:6").check("print") \
        .check("## graph break 2").check("model.py:7").check_regex("[Dd]ata-dependent").run(breaks["text"])
    assert {6, 7} <= {b for a, b in breaks["source_map"]}
    assert job["stages"][0]["key"] == "source" and "y computed" in compiled.text("branchy", "run.stdout")
    # summarised first: each distinct break once, with its line, count, GB id, PyTorch's title and
    # explanation, each summary line linked to its source line
    distinct = breaks["meta"]["distinct"]
    assert [(d["line"], d["count"]) for d in distinct] == [(6, 1), (7, 1)], distinct
    assert all(re.fullmatch(r"GB\d{4}", d["gb"] or "") and d["title"] and d["explanation"] for d in distinct)
    assert not any(d["title"].startswith("Graph Break Reason") for d in distinct), distinct
    head = breaks["text"].split("## graph break 1", 1)[0].splitlines()
    assert head[0] == "# 2 graph breaks, 2 distinct"
    summary = {n: text for n, text in enumerate(head, start=1) if text.startswith("- line ")}
    assert [text.split(" ×")[0] for text in summary.values()] == ["- line 6", "- line 7"], head
    assert all([n, int(text.split()[2])] in breaks["source_map"] for n, text in summary.items())


def test_transformer_block_fuses_and_maps_back_to_softmax(compiled):
    job = compiled.job("transformer")
    assert job["status"] == "done", job["error"]
    kernels = [s["key"] for s in job["stages"] if s["key"].startswith("kernel:")]
    assert any("native_layer_norm" in k for k in kernels) and any("gelu" in k for k in kernels), kernels
    # Inductor's pattern matcher turns q@k^T / sqrt(d) -> softmax -> @v into one SDPA call on CPU.
    # PyTorch's provenance ties that call to the q/k/v views (line 20), not to the softmax line:
    # the rewrite drops the replaced nodes' origins, and the page shows what the compiler recorded.
    code = compiled.stage("transformer", "inductor.output_code:0/0")
    lines = code["text"].split("\n")
    to_qkv = [lines[a - 1] for a, b in code["source_map"] if b == TRANSFORMER_SOFTMAX_LINE - 2]
    assert any("_scaled_dot_product_flash_attention_for_cpu.default(" in line for line in to_qkv), to_qkv
    graph = compiled.stage("transformer", "dynamo.fx_graph:0/0")
    glines = graph["text"].split("\n")
    assert any("torch.softmax(" in glines[a - 1] for a, b in graph["source_map"] if b == TRANSFORMER_SOFTMAX_LINE)
    # and the reverse direction: the GELU kernel's body maps back to the MLP line
    gelu = next(k for k in kernels if "gelu" in k)
    assert TRANSFORMER_SOFTMAX_LINE + 3 in {b for a, b in compiled.stage("transformer", gelu)["source_map"]}
    assert "inductor.fusion:0/0" in [s["key"] for s in job["stages"]]


def _is_probe(directory: str) -> bool:
    """An ISA-probe cache entry: a built library, no Python, no Inductor kernel source."""
    names = os.listdir(directory)
    sources = [open(os.path.join(directory, n), errors="replace").read() for n in names if n.endswith(".cpp")]
    return (any(n.endswith(".so") for n in names) and not any(n.endswith(".py") for n in names)
            and not any("cpp_prefix.h" in text for text in sources))


def test_a_spare_whose_job_arrived_during_its_import_skips_its_warm_up_compile(tmp_path):
    """A warm-up compile pays for itself only before a job exists: a spare that finds its job waiting
    once torch is imported goes on with it as a cold worker would after its import, compiling
    nothing of its own (no counter moved, no trace written, no compile time recorded: its CPU
    probes, built here for want of a toolchain cache, are forgotten but what they found). A spare
    template finishes that warm-up after forking the job, with the same reset as any warm-up."""
    code = ("import json, os, sys; sys.path.insert(0, %r)\n"
            "from compiler.pytorch import spare_warmup\n"
            "spare_warmup.warm(%r, '', job_arrived=lambda: True)\n"
            "import torch._dynamo.output_graph as g, itertools, torch\n"
            "trace = os.environ['TORCH_TRACE']\n"
            "result = {'report': spare_warmup.report(), 'cut_short': spare_warmup.cut_short(),\n"
            "          'next_compile_id': next(g._compile_id_counter),\n"
            "          'trace_files': os.listdir(trace) if os.path.isdir(trace) else [],\n"
            "          'times': dict(torch._dynamo.utils.compilation_time_metrics)}\n"
            "spare_warmup.warm_up_compile(%r, '')\n"  # a template finishing it after forking its job
            "result.update(finished=spare_warmup.report(), still_cut_short=spare_warmup.cut_short(),\n"
            "              compile_id_after=next(g._compile_id_counter))\n"
            "print(json.dumps(result))\n"
            % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), str(tmp_path), str(tmp_path)))
    env = dict(os.environ, TORCH_TRACE=str(tmp_path / "trace"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    report = result["report"]
    assert report["warm_up_compile_s"] == 0.0 and report["import_s"] > 0 and report["counters_rewound"] == []
    assert "went on with the job at once instead of its warm-up compile" in report["what"]
    assert result["next_compile_id"] == 0 and result["cut_short"]  # nothing was compiled
    assert result["trace_files"] == [] and result["times"] == {}
    assert report["isa_probes"]["picked"] and report["isa_probes"]["seconds"] > 0
    # finished later (a spare template, after forking that job): compiled, then rewound as a spare's
    finished = result["finished"]
    assert finished["warm_up_compile_s"] > 0 and finished["counters_rewound"] and not result["still_cut_short"]
    assert finished["import_s"] == report["import_s"] and result["compile_id_after"] == 1  # rewound to where it stood
    assert not os.path.exists(tmp_path / "trace") or os.listdir(tmp_path / "trace") == []


def start_with_toolchain_cache(base: str, cache: str) -> dict:
    """A server offering pytorch and triton, one spare each, watched from its start until both
    spares are ready (run by conftest in a thread of its own as soon as the session's toolchain
    cache is built, beside the modules before this one: two spares warming up one after the other
    take minutes). Returns what the watch saw; the test asserts it."""
    seed_toolchain_cache(cache, os.path.join(base, "var"))
    app = make_app(Path(base), languages="pytorch,triton", spare_workers=1)
    spares = app.extensions["irscope"].runner.spares
    try:
        # a bound, not a speed: beside the session's first compiles on a slow 2-core host the two
        # warm-ups took over 600 s (55 s alone)
        deadline, first, most_warming = time.monotonic() + 1500, None, 0
        while time.monotonic() < deadline:
            report = spares.report()
            warming = [language for language, r in report.items() if r["starting"]]
            most_warming = max(most_warming, sum(r["starting"] for r in report.values()))
            first = first or (warming[0] if warming else None)
            if all(report.get(language, {}).get("ready") for language in ("pytorch", "triton")):
                break
            time.sleep(0.05)
        return {"first": first, "most_warming": most_warming, "report": spares.report(),
                "slots": app.extensions["irscope"].runner.config.spare_template_slots,
                "ready": {language: spares.ready(language) for language in ("pytorch", "triton")}}
    finally:
        app.extensions["irscope"].runner.shutdown()


@needs_bwrap
def test_spares_of_every_language_warm_up_one_at_a_time_the_first_language_first(after_toolchain_cache):
    """A server offering pytorch and triton, one spare each: on a small machine two warm-ups at
    once take the CPU a running job needs, so only one spare of any language is ever warming,
    and the server's first language gets its spare first. (The session's toolchain cache is
    seeded: building it again would add minutes and test nothing of the order.)"""
    seen = after_toolchain_cache  # what start_with_toolchain_cache saw
    # PyTorch's spare is a template (its slots are the jobs it can take), Triton's a process
    slots, ready = seen["slots"], seen["ready"]
    assert slots > 1 and ready["pytorch"] == slots and ready["triton"] == 1, seen["report"]
    assert seen["first"] == "pytorch" and seen["most_warming"] == 1, (seen["first"], seen["most_warming"])


def test_a_gpu_target_job_takes_the_virtual_device_the_warm_up_built(tmp_path, pytorch_toolchain_cache):
    """The virtual CUDA device's C++ half depends on irscope's source and the installed torch only:
    the trusted warm-up builds it into the toolchain cache, and a GPU-target job loads it from
    there instead of running g++ itself."""
    from compiler.targets import virtual_gpu
    built = virtual_gpu.library_path(os.path.join(pytorch_toolchain_cache, virtual_gpu.RUNTIME_CACHE_DIR))
    assert os.path.isfile(built), os.listdir(pytorch_toolchain_cache)
    seed_toolchain_cache(pytorch_toolchain_cache, str(tmp_path / "var"))
    app = make_app(tmp_path)
    try:
        source = ("import torch\n\n\ndef model(x):\n    return torch.sin(x) + 1\n\n\n"
                  "example_inputs = (torch.randn(64),)\n")
        response = app.test_client().post("/api/compile", json={"language": "pytorch", "source": source,
                                                                "options": {"target": "cuda:sm_90"}})
        job = wait_job(app.test_client(), response.get_json()["job"], timeout=600)
        assert job["status"] == "done", job.get("error")
        target = job["timings"]["target"]
        assert target["virtual_device_from_toolchain_cache"] is True and target["virtual_device_build_s"] < 1
        assert any(s["key"].startswith("triton.ptx:") for s in job["stages"])
    finally:
        app.extensions["irscope"].runner.shutdown()


def test_the_first_job_after_a_start_waits_for_the_warm_up_and_says_so(first_job_after_start):
    """Submitted the moment a server started on a fresh data directory, the job did not build the
    toolchain beside the warm-up: its page said it was warming up, it waited, then was forked from
    the spare template whose warm-up built the cache (so it probed nothing and built no header),
    and it did not export a cache itself (the template's task, not its jobs')."""
    cache, first = first_job_after_start
    job = first.job
    assert job["status"] == "done", job["error"]
    assert any(p.startswith("warming up: irscope's own compile is building the toolchain cache") for p in
               first.progress), first.progress
    assert job["timings"]["job"]["waited_for_toolchain_warm_up_s"] > 0
    assert job["timings"]["job"]["spare"]["forked_from_template"] and job["timings"]["job"]["worker_was_ready"]
    compile_t = job["timings"]["compile"]
    assert compile_t["isa_probes_built_in_job"] == [] and compile_t["precompiled_headers_built_in_job"] == []
    assert "isa_probes_in_parallel" not in compile_t
    exported = compile_t["worker_warm_up"]["toolchain_cache_exported"]
    assert exported == {"isa_probes": len(os.listdir(os.path.join(cache, "isa_probes"))),
                        "precompiled_headers": 1}, exported


def test_without_a_template_a_warm_up_job_builds_the_same_toolchain_cache(tmp_path, pytorch_toolchain_cache, caplog):
    """Where no spare template built the toolchain cache (none is used, or it died before it was
    ready: `in_template` returns None), a warm-up job of the pipeline's own warm-up source builds
    it: the same probe libraries and the same precompiled header (both named by hashes of what was
    built and how) as the session's cache, which a template's warm-up built, and the same virtual
    CUDA device library."""
    from service.toolchain import toolchain
    from service.toolchain_cache import warm_toolchain
    app = make_app(tmp_path, languages="pytorch", workers=1)  # nothing started in the background
    runner = app.extensions["irscope"].runner
    asked = []

    def template_died() -> None:
        asked.append("template")
        return None
    try:
        assert warm_toolchain(runner.config, "pytorch", toolchain("pytorch"), in_template=template_died)
    finally:
        runner.shutdown()
    assert asked == ["template"] and "did not build the toolchain cache: running the warm-up job" in caplog.text
    from service import job_process
    cache = job_process.toolchain_cache_dir(runner.config, "pytorch", toolchain("pytorch"))
    for name in ("isa_probes", "precompiled_headers", "virtual_cuda"):
        assert sorted(os.listdir(os.path.join(cache, name))) == \
            sorted(os.listdir(os.path.join(pytorch_toolchain_cache, name))), name
    assert toolchain_cache.probe_libraries(os.path.join(cache, "isa_probes")) == \
        toolchain_cache.probe_libraries(os.path.join(pytorch_toolchain_cache, "isa_probes")) != []


def test_toolchain_cache_seeds_probes_and_the_precompiled_header_without_changing_what_is_compiled(
        compiled, pytorch_toolchain_cache):
    """The warm-up built Inductor's ISA probes and the precompiled header of cpp_prefix.h once
    (the session fixture). The cold job (no cache) builds that same header itself, under the same
    name (a hash of the preprocessed header, the compiler and the flags: the warm-up built it at
    the job's paths with the job's flags); the spare's job, seeded, builds none, and its compile
    runs fewer C++ compiles; both compile the same code. How many probes there are depends on the
    host's ISA, so counts are compared with what the warm-up built, never with a number."""
    cold = wait_job(compiled.cold_client, compiled.cold_id, timeout=900)
    warm = compiled.job("spare")
    assert cold["status"] == warm["status"] == "done", (cold["error"], warm["error"])
    assert sorted(os.listdir(pytorch_toolchain_cache)) == ["isa_probes", "precompiled_headers", "virtual_cuda"]
    from compiler.targets import virtual_gpu  # the virtual device's library, built from irscope's source: nothing else
    library = virtual_gpu.library_path(os.path.join(pytorch_toolchain_cache, "virtual_cuda"))
    assert os.listdir(os.path.dirname(library)) == [os.path.basename(library)]
    probes = os.listdir(os.path.join(pytorch_toolchain_cache, "isa_probes"))
    assert probes and all(_is_probe(os.path.join(pytorch_toolchain_cache, "isa_probes", e)) for e in probes), probes
    headers = sorted(os.listdir(os.path.join(pytorch_toolchain_cache, "precompiled_headers")))
    gch = [h for h in headers if h.endswith(".h.gch")]
    assert gch and headers == sorted(gch + [h[:-4] for h in gch])  # each .gch beside its header, nothing else
    cold_c, warm_c = cold["timings"]["compile"], warm["timings"]["compile"]
    assert cold_c["isa_probes_from_toolchain_cache"] == 0 and cold_c["precompiled_headers_from_toolchain_cache"] == 0
    assert warm_c["isa_probes_from_toolchain_cache"] == len(probes)
    assert warm_c["precompiled_headers_from_toolchain_cache"] == len(gch)
    assert cold_c["precompiled_headers_built_in_job"] and set(cold_c["precompiled_headers_built_in_job"]) <= set(gch)
    assert warm_c["precompiled_headers_built_in_job"] == []  # the seeded header was not rebuilt
    # The warm-up ran Inductor's probes one thread per ISA (toolchain_cache.probe_isas), the cold job
    # one after another as Inductor does: the same probe libraries (named by a hash of the probe's
    # source, flags, compiler and torch), the same ISAs found. The template probed before its job.
    assert cold_c["isa_probes_built_in_job"] == toolchain_cache.probe_libraries(
        os.path.join(pytorch_toolchain_cache, "isa_probes")) != []
    assert warm_c["isa_probes_built_in_job"] == []
    assert cold_c["vector_isa"]["picked"] != "INVALID_VEC_ISA" and cold_c["vector_isa"] == warm_c["vector_isa"]
    template_probes = warm_c["worker_warm_up"]["isa_probes"]
    assert {key: template_probes[key] for key in ("picked", "valid")} == cold_c["vector_isa"]
    assert warm_c["event_counts"]["compile_file"] < cold_c["event_counts"]["compile_file"]
    assert compiled.text("spare", "inductor.output_code:0/0_1") == \
        stage_text(compiled.cold_client, compiled.cold_id, "inductor.output_code:0/0_1")


# What differs between two cold runs of the same source, and so between any two runs: object
# addresses (guards check `id()`s, the pre-grad graph prints its graph's id, a graph-break reason
# may name `<function f at 0x...>`), the uuid4 in the name of each compiled function Dynamo
# installs (bytecode), and the guards' own measured latency. Masked; nothing else is.
_VARIES = ((re.compile(r"(___check_(?:obj|type)_id\(.*?), \d+\)"), r"\1, <id>)"),
           (re.compile(r"# graph id: \d+"), "# graph id: <id>"),
           (re.compile(r" at 0x[0-9a-f]+>"), " at <address>>"),
           (re.compile(r"(__compiled_fn_\d+)_[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}"),
            r"\1_<uuid>"),
           (re.compile(r"Guard latency = [0-9.]+ us"), "Guard latency = <measured> us"),
           (re.compile(r'"latency_us": ?[0-9.]+'), '"latency_us": <measured>'))
# Not compile stages: a profile of one timed call, and the worker's own log (timestamps).
_RUN_RECORDS = {"run.kernels", "worker.log"}


def _varying_masked(text: str) -> str:
    for pattern, replacement in _VARIES:
        text = pattern.sub(replacement, text)
    return text


def test_warmed_spare_compiles_every_stage_as_a_cold_worker(compiled):
    """The spare imported torch and compiled irscope's own model before its job existed, then
    reset. Its job's stages are the cold job's, byte for byte (up to what two cold runs vary):
    the same keys in the same order, compile ids from 0/0, the trace holding the user's frames
    only, the same generated names and code."""
    cold = wait_job(compiled.cold_client, compiled.cold_id, timeout=900)
    warm = compiled.job("spare")
    assert cold["status"] == warm["status"] == "done", (cold["error"], warm["error"])
    report = warm["timings"]["compile"]["worker_warm_up"]
    assert report["warm_up_compile_s"] > 0 and report["counters_rewound"]  # the warm-up compiled and reset
    assert cold["timings"]["compile"]["worker_warm_up"] is None
    # the job's trace holds its own frames only: as many frame compiles as the cold job's
    frames = [job["timings"]["compile"]["event_counts"]["entire_frame_compile"] for job in (warm, cold)]
    assert frames[0] == frames[1] >= 3
    keys = [s["key"] for s in warm["stages"] if s["key"] not in _RUN_RECORDS]
    assert keys == [s["key"] for s in cold["stages"] if s["key"] not in _RUN_RECORDS]
    assert keys[:3] == ["source", "dynamo.fx_graph:0/0_1", "dynamo.fx_graph_drawing:0/0_1"]
    assert "inductor.output_code:0/0_1.backward" in keys
    differ = []
    for key in keys:
        a, b = compiled.text("spare", key), stage_text(compiled.cold_client, compiled.cold_id, key)
        if a != b:
            assert _varying_masked(a) == _varying_masked(b), key
            differ.append(key)
    assert set(differ) <= {k for k in keys if k.startswith(("dynamo.guards", "dynamo.bytecode", "dynamo.graph_breaks",
                                                              "inductor.pre_grad"))}
    assert any(k.startswith("aot.backward_graph:2/") for k in keys)  # the frame after the break has a backward too
    assert "between the graphs" in compiled.text("spare", "run.stdout")


def test_a_virtual_gpu_spare_compiles_every_stage_as_a_cold_worker(compiled):
    """The virtual-H100 spare installed the device and compiled irscope's own model on it (Triton
    kernels to PTX and SASS) before its job existed, then reset. Its job, the only one for
    cuda:sm_90, has a cold worker's stages: the same keys in the same order within each group and
    the same texts, up to what two cold runs vary (ptxas's own compile time in its log)."""
    cold = wait_job(compiled.cold_client, compiled.cold_gpu_id, timeout=900)
    warm = compiled.job("virtual_sm90")
    assert cold["status"] == warm["status"] == "done", (cold["error"], warm["error"])
    assert warm["timings"]["job"]["worker"] == "pre-started" and warm["timings"]["job"]["worker_was_ready"]
    report = warm["timings"]["compile"]["worker_warm_up"]
    assert report["virtual_device"] == "cuda:sm_90" and report["warm_up_compile_s"] > 0
    assert warm["timings"]["target"]["virtual_device_installed_by"] == "the spare worker, before its warm-up"
    assert cold["timings"]["target"]["virtual_device_installed_by"] == "this job"
    keys = [s["key"] for s in warm["stages"] if s["key"] not in _RUN_RECORDS]
    # the same stages, in the same order within each group: the kernels' stages are written by a
    # thread of their own while the trace's are (compiler/pytorch/gpu_codegen.py), so how the two
    # groups interleave in the manifest depends on timing
    def by_group(job: dict) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for stage in job["stages"]:
            if stage["key"] not in _RUN_RECORDS:
                groups.setdefault(stage["group"], []).append(stage["key"])
        return groups
    assert by_group(warm) == by_group(cold)
    assert sorted(keys) == sorted(s["key"] for s in cold["stages"] if s["key"] not in _RUN_RECORDS)
    assert any(k.startswith("triton.sass:triton_poi_fused_add_mul_sin_0.") for k in keys)
    ptxas_time = re.compile(r"Compile time = [0-9.]+ ms|\"compile_times_ms\": \{[^}]*\}|\"compile_total_ms\": [0-9.]+")
    differ = []
    for key in keys:
        a = compiled.text("virtual_sm90", key)
        b = stage_text(compiled.cold_client, compiled.cold_gpu_id, key)
        if a != b:
            assert ptxas_time.sub("<t>", _varying_masked(a)) == ptxas_time.sub("<t>", _varying_masked(b)), key
            differ.append(key)
    assert set(differ) <= {k for k in keys if k.startswith(("dynamo.guards", "dynamo.bytecode", "inductor.pre_grad",
                                                              "triton.metadata:"))}, differ


def test_a_forked_job_runs_in_a_sandbox_of_its_own(compiled):
    """Two jobs forked by one spare template (their timings say so): each saw its own job
    directory and none of the template's slots, a /proc of its own PID namespace (it is PID 1 and
    sees no sibling and no template to signal), no capability in any set, the jobs' seccomp filter
    stacked on the template's (namespaces and mounts refused, so nothing of it can be undone), no
    file of the template open, a fresh /tmp and /dev/shm (the other job's marks are not there), and
    the precompiled headers the template's warm-up built, read-only (linked from a header directory
    of its own, where the other job's mark is not)."""
    probes = []
    for name in ("forked_a", "forked_b"):
        job = compiled.job(name)
        assert job["status"] == "done", job["error"]
        assert job["timings"]["job"]["spare"]["forked_from_template"] is True
        probes.append(json.loads(compiled.text(name, "run.stdout").split("PROBE ", 1)[1].split("\n", 1)[0]))
    for probe in probes:
        assert probe["slots"] == [] and {"out", "request.json"} <= set(probe["job"]), probe
        assert "spare-ready" not in probe["job"] and "seccomp.bpf" not in probe["job"]  # not the template's
        assert probe["pid"] == 1 and probe["pids"][0] == 1 and len(probe["pids"]) <= 3, probe["pids"]
        assert probe["uid"] != 0 and int(probe["cap_eff"], 16) == 0 and int(probe["cap_bnd"], 16) == 0
        assert probe["seccomp"] == "2" and probe["filters"] >= 2 and probe["no_new_privs"] == "1"
        # 1 and 2: its own worker log in its slot, opened before the slot was bound at /job
        logs = [f for f in probe["fds"] if f.startswith("/slots/")]
        assert len(logs) == 2 and logs[0] == logs[1] and logs[0].endswith("/worker.log"), probe["fds"]
        assert not [f for f in probe["fds"] if "spare-" in f], probe["fds"]
        assert probe["unshare_user"] == probe["mount"] == probe["umount_slots"] == probe["umount_job"] == errno.EPERM
        # the template's headers, read-only, linked from a directory of the job's own
        assert any(h.endswith(".h.gch") for h in probe["headers"]) and probe["carried_write"] == errno.EROFS
        assert probe["header_links"] and all(t.startswith("/tmp/.template-0/") for t in probe["header_links"])
        assert probe["marks_seen"] == {"tmp": False, "shm": False, "header": False}
        omp = probe["omp"]
        assert omp["product"] == 1500.0 and omp["tasks_before"] == 1, omp
        assert omp["tasks_after"] == omp["threads"] if omp["threads"] > 1 else omp["tasks_after"] == 1, omp

def test_a_training_job_forked_from_the_virtual_gpus_template_runs_autograd(compiled):
    """Autograd refuses to run in a process forked after its device threads started; the virtual
    H100's template warms up without autograd, so a training job forked from it compiles its
    backward graph and its backward kernels."""
    job = compiled.job("virtual_sm90_training")
    assert job["status"] == "done", job["error"]
    assert job["timings"]["job"]["spare"]["forked_from_template"] is True
    keys = [s["key"] for s in job["stages"]]
    assert "aot.backward_graph:0/0" in keys and "inductor.output_code:0/0.backward" in keys, keys
    assert any(k.startswith("triton.ptx:") for k in keys)


def test_another_gpu_targets_first_job_starts_spares_for_the_next(compiled):
    """No spare is kept for the virtual A100 from the start; its first job runs in a worker of its
    own and starts the A100's template, so the user's next job on sm_80 is forked from a template
    that installed the virtual A100 (its PTX targets sm_80)."""
    spares = compiled.svc.runner.spares
    key = "pytorch@cuda:sm_80"
    assert not spares.waiting(key)

    def run(constant: str) -> dict:
        source = VIRTUAL_SM90.replace("example_inputs", f"SCALE = {constant}\nexample_inputs", 1)
        response = compiled.client.post("/api/compile", json={"language": "pytorch", "source": source,
                                                              "options": {"target": "cuda:sm_80"}})
        assert response.status_code in (200, 202), response.get_json()
        job = wait_job(compiled.client, response.get_json()["job"], timeout=900)
        assert job["status"] == "done", job["error"]
        return job

    first = run("1")
    assert first["timings"]["job"]["worker"] != "pre-started"
    deadline = time.monotonic() + 120  # the template starts once no other spare warms up; bounded
    while time.monotonic() < deadline and not spares.waiting(key):
        time.sleep(0.2)
    assert spares.waiting(key), "the sm_80 job started no spare for its target"
    second = run("2")
    job = second["timings"]["job"]
    assert job["worker"] == "pre-started" and job["spare"]["forked_from_template"] is True, job
    ptx = next(s["key"] for s in second["stages"] if s["key"].startswith("triton.ptx:"))
    assert re.search(r"^\.target sm_80\b", stage_text(compiled.client, second["id"], ptx), re.M)
    assert second["timings"]["target"]["virtual_device_installed_by"] == "the spare worker, before its warm-up"


def test_pre_started_worker_is_used_once_and_replaced(compiled):
    """The spare had torch loaded and its warm-up done before its job existed (the fixture waited
    for both), took the first job, and was replaced by a new spare: one job per process."""
    job = compiled.job("spare")
    assert job["status"] == "done", job["error"]
    assert job["timings"]["job"]["worker"] == "pre-started" and job["timings"]["job"]["worker_was_ready"]
    FileCheck().check_regex("linalg[._]solve").check("relu").run(compiled.text("spare", "dynamo.fx_graph"))
    assert not compiled.spare_before.alive()  # its one job done, the process is gone
    deadline = time.monotonic() + 120  # the replacement starts when the job ends; wait for it, bounded
    while time.monotonic() < deadline and not compiled.svc.runner.spares.waiting("pytorch"):
        time.sleep(0.1)
    replacement = compiled.svc.runner.spares.waiting("pytorch")[0]
    assert replacement is not compiled.spare_before and replacement.alive()


def test_stages_are_written_while_the_compile_runs(compiled):
    """Between its model's two graphs, the user's code saw the first graph's stages, down to its
    output code and kernels, already in the job's result bundle, and nothing of the second graph:
    each stage is written when the compiler has produced it, not when the job ends."""
    job = compiled.job("streamed")
    assert job["status"] == "done", job["error"]
    out = compiled.text("streamed", "run.stdout")
    seen = json.loads(out.split("SEEN ", 1)[1].split("\n", 1)[0])
    first = [k for k in seen["keys"] if k.endswith(("0/0", "0/0_1"))]
    assert any(k.startswith("dynamo.fx_graph:0/0") for k in first)
    assert any(k.startswith("aot.") for k in first) and any(k.startswith("inductor.output_code:0/0") for k in first)
    assert any(k.startswith("kernel:") for k in seen["keys"])
    assert not any(k.endswith(":1/0") for k in seen["keys"])  # the second frame was not compiled yet
    final = [s["key"] for s in job["stages"]]
    assert final[:len(seen["keys"])] == seen["keys"]  # stages are only ever appended
    assert "inductor.output_code:1/0" in final
    # the groups in the order the compiler produced them: Dynamo, AOTAutograd, Inductor, Kernels
    groups = list(dict.fromkeys(s["group"] for s in job["stages"]))
    assert groups[:5] == ["Source", "Dynamo", "AOTAutograd", "Inductor", "Kernels"]


def test_virtual_sm90_target_through_the_api(compiled):
    """No GPU here: target cuda:sm_90 makes Inductor write Triton kernels, compiled to PTX and SASS."""
    job = compiled.job("virtual_sm90")
    assert job["status"] == "done", job["error"]
    keys = [s["key"] for s in job["stages"]]
    code = compiled.text("virtual_sm90", "inductor.output_code")
    FileCheck().check("@triton.jit").check("def triton_poi_fused_add_mul_sin_0(").check("tl_math.sin").run(code)
    ptx = [k for k in keys if k.startswith("triton.ptx:triton_poi_fused_add_mul_sin_0")]
    assert ptx
    FileCheck().check(".target sm_90a").check(".entry triton_poi_fused_add_mul_sin_0").run(
        compiled.text("virtual_sm90", ptx[0]))
    sass = [k for k in keys if k.startswith("triton.sass:")]
    assert sass and "EXIT" in compiled.text("virtual_sm90", sass[0])
    assert job["timings"]["target"]["virtual"] is True
    assert "run" not in job["timings"]  # nothing ran: no invented timings


def test_a_program_that_calls_torch_compile_itself_runs_as_written_and_every_compile_is_captured(compiled):
    """Before: "the source must define `model` and `example_inputs`". Now the program runs as
    `python model.py` runs it, and each of its compiles has its stages: the decorated function's
    two compiles (the second a recompile for a new shape), the trained module's graphs on both
    sides of its data-dependent branch, forward and backward."""
    job = compiled.job("program")
    assert job["status"] == "done", job["error"]
    assert job["timings"]["run_mode"]["mode"] == "program"
    out = compiled.text("program", "run.stdout")
    argv = re.search(r"^argv \[(.*)\]$", out, re.M).group(1)  # the program's path only, as python gives it
    assert argv.endswith("model.py'") and "," not in argv, out
    assert "step 1 loss" in out and out.rstrip().endswith("done"), out
    keys = [s["key"] for s in job["stages"]]
    graphs = sorted(k.split(":", 1)[1] for k in keys if k.startswith("dynamo.fx_graph:"))
    assert len(graphs) >= 4, graphs
    # the branch on h.sum() is a graph break at its line
    branch = PROGRAM.splitlines().index("        if h.sum() > 0:") + 1
    breaks = compiled.stage("program", "dynamo.graph_breaks")
    assert breaks["meta"]["count"] >= 1 and branch in {line for _, line in breaks["source_map"]}, breaks["meta"]
    # scale_shift compiled again for the new shape: a compile id with a nonzero compile number,
    # whose guards say which guard failed
    recompiled = [g for g in graphs if g.split("/")[1].split("_")[0] != "0"]
    assert recompiled, graphs
    guards = compiled.stage("program", f"dynamo.guards_explained:{recompiled[0]}")
    assert guards["meta"]["recompile"] is True, guards["meta"]
    assert "torch.sin(" in compiled.text("program", f"dynamo.fx_graph:{recompiled[0]}")
    # the recompiles, summed up per frame: the function, how often it compiled, the failed guard
    frames = compiled.stage("program", "dynamo.recompiles")["meta"]["frames"]
    shifted = next(f for f in frames if f["function"].startswith("scale_shift at model.py:"))
    assert shifted["compiles"] == 2 and shifted["recompiles"][0]["compile_id"] == recompiled[0], frames
    assert "size mismatch" in shifted["recompiles"][0]["reason"], frames
    # the module was trained: AOTAutograd's backward graph and Inductor's backward kernels
    assert any(k.startswith("aot.backward_graph:") for k in keys)
    assert any(k.startswith("inductor.output_code:") and k.endswith(".backward") for k in keys), keys
    summary = compiled.client.get(f"/api/jobs/{job['id']}").get_json()["summary"]
    facts = " · ".join(f["text"] for f in summary)
    assert re.search(r"\d+ graphs · \d+ graph breaks? \(line", facts) and "recompile" in facts, facts
    # the index of the compiles, by the line of the program that called into compiled code (as
    # dynamo_start's stack records it): the module's two graphs around its break under the training
    # loop's call, scale_shift's two compiles together, the second a recompile with its failed guard
    lines = PROGRAM.splitlines()
    call = lines.index("        loss = compiled(torch.randn(8, 32)).pow(2).mean()") + 1
    # (a decorated function's code starts at its decorator)
    forward, shift = lines.index("    def forward(self, x):") + 1, lines.index("@torch.compile") + 1
    index = compiled.stage("program", "dynamo.compiles")
    assert index["meta"]["compiles"] == len(graphs) and index["meta"]["call_sites"][0] == call, index["meta"]
    assert len(index["meta"]["call_sites"]) == 2, index["meta"]
    text = compiled.text("program", "dynamo.compiles")
    FileCheck().check(f"# {len(graphs)} compiles of 3 functions, called from 2 lines of yours") \
        .check(f"## line {call}: loss = compiled(torch.randn(8, 32)).pow(2).mean()") \
        .check(f"] forward, line {forward}: a graph of").check(f"graph break at line {branch}") \
        .check("] torch_dynamo_resume_in_forward_at_").check("## line ") \
        .check(f"] scale_shift, line {shift}: a graph of") \
        .check(f"] scale_shift, line {shift}: recompiled: {recompiled[0].split('/')[0]}/0: tensor 'x' size mismatch") \
        .run(text)
    assert [call, forward] == [index["source_map"][0][1], index["source_map"][1][1]], index["source_map"]
    assert summary[0]["stage"] == "dynamo.compiles"  # "N graphs" leads to the index


def test_a_sequential_of_the_users_own_modules_compiles_and_its_reproducer_runs(compiled, tmp_path):
    """Before: "InternalTorchDynamoError: ModuleNotFoundError: No module named '__irscope_user__'"
    for any nn.Sequential holding a module the file defines (runpy took the file's module out of
    sys.modules once it had run, and Dynamo imports it by name to read Block.forward's globals).
    The job compiles both blocks, and its reproducer, run with plain Python outside irscope, runs
    the file the same way and compiles it too."""
    job = compiled.job("sequential_of_own")
    assert job["status"] == "done", job["error"]
    code = compiled.text("sequential_of_own", "inductor.output_code:0/0")
    assert "def call(" in code and "gelu" in code, code[:2000]
    script = compiled.client.get(f"/j/{compiled.ids['sequential_of_own']}/reproducer.py")
    assert script.status_code == 200
    path = tmp_path / "reproduce.py"
    path.write_bytes(script.get_data())
    done = subprocess.run([sys.executable, str(path), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=600, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    codes = [p.read_text() for p in (tmp_path / "out" / "output_code").iterdir() if p.suffix == ".py"]
    assert (tmp_path / "out" / "output_code" / "index.json").is_file() and codes, done.stdout[-2000:]
    assert any("def call(" in c and "gelu" in c for c in codes)


def test_a_program_that_compiles_nothing_says_so(compiled):
    job = compiled.job("program_compiles_nothing")
    assert job["error"]["kind"] == "InputError", job["error"]
    assert job["error"]["message"].startswith("the program ran to its end and compiled nothing")
    assert "tensor(2.)" in compiled.text("program_compiles_nothing", "run.stdout")

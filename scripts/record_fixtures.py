"""Re-record the parser fixtures of tests/fixtures/ from real compiler runs.

    .venv/bin/python scripts/record_fixtures.py [--out DIR] [torch] [triton] [xla] [tritonparse]

Run it after a toolchain upgrade (torch, triton, jaxlib): the parser tests compare the parsers
against these texts, so a changed output format shows up as a test failure to look at, not as a
silent drift. `--out` writes elsewhere (to compare with `diff -r` before replacing); without it the
files in tests/fixtures/ are overwritten. Each compiler runs as the pipelines run it, in a child
process, at the paths the tests expect the recorded locations to name:

- torch: tests/fixtures/torch/graph_break_print.py as /tmp/t1/m.py under torch.compile with
  TORCH_TRACE and Inductor's provenance tracking on -> graph_break_print.trace;
- triton: the vector add of tests/fixtures/triton/README.md as /tmp/tx/job/kernels.py through the
  triton pipeline for virtual cuda:sm_90 and hip:gfx942 -> the stage outputs and per-pass dumps;
- xla: the HLO and JAX examples of the XLA pipeline through compiler/xla/child.py on 8 virtual CPU
  devices (the JAX program as /tmp/rec/j/user_program.py) -> dumps, stats and trace events;
- tritonparse (not in the default set: it needs the `record` extra, `pip install -e .[record]`,
  tritonparse pinned there): the triton pipeline's example kernel under
  tritonparse.structured_logging for virtual cuda:sm_90 -> imports/softmax.tritonparse.ndjson.gz.
  The other import fixtures are logs of live jobs (tests/fixtures/imports/README.md).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

TORCH_DRIVER = '''import runpy
import torch
import torch._inductor.config as inductor_config
inductor_config.trace.provenance_tracking_level = 1
ns = runpy.run_path("/tmp/t1/m.py"); torch.compile(ns["model"])(*ns["example_inputs"])
'''

ADD_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


x = torch.randn(4096, device="cuda")
out = torch.empty_like(x)
add_kernel[(4,)](x, x, out, 4096, BLOCK=1024)
'''

# Runs in a child per target: the compile-only Triton driver it installs is process-wide.
TRITON_CHILD = '''import json, os, sys
sys.path.insert(0, {root!r})
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext
from compiler.triton.pipeline import TritonPipeline
target, workdir, out = sys.argv[1:4]
pipeline = TritonPipeline()
request = Request("triton", open(os.path.join(workdir, "kernels.py")).read(),
                  pipeline.normalise_options({{"target": target}}))
os.environ.update(pipeline.environment(request, workdir))
bundle = Bundle(out)
pipeline.run(request, JobContext(workdir=workdir, bundle=bundle))
'''


def _write(out: str, name: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        f.write(text)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def record_torch(out: str) -> None:
    shutil.rmtree("/tmp/t1", ignore_errors=True)
    os.makedirs("/tmp/t1")
    shutil.copy(os.path.join(FIXTURES, "torch", "graph_break_print.py"), "/tmp/t1/m.py")
    _write("/tmp/t1", "p.py", TORCH_DRIVER)
    env = dict(os.environ, TORCH_TRACE="/tmp/t1/trace", TORCHINDUCTOR_CACHE_DIR="/tmp/t1/inductor-cache",
               TORCHINDUCTOR_COMPILE_THREADS="1")
    subprocess.run([sys.executable, "/tmp/t1/p.py"], cwd="/tmp/t1", env=env, check=True)
    traces = sorted(os.listdir("/tmp/t1/trace"))
    assert len(traces) == 1, traces
    _write(out, "torch/graph_break_print.trace", _read(os.path.join("/tmp/t1/trace", traces[0])))


def _stages(bundle: str) -> dict[str, str]:
    manifest = json.loads(_read(os.path.join(bundle, "manifest.json")))
    return {s["key"]: _read(os.path.join(bundle, s["file"])) for s in manifest["stages"]}


def record_triton(out: str) -> None:
    for target, arch, outputs in (("cuda:sm_90", "sm_90", ("ttir", "ttgir", "llir", "ptx", "sass")),
                                  ("hip:gfx942", "gfx942", ("ttir", "ttgir", "llir", "amdgcn"))):
        workdir = "/tmp/tx/job"
        shutil.rmtree("/tmp/tx", ignore_errors=True)
        os.makedirs(workdir)
        _write(workdir, "kernels.py", ADD_KERNEL)
        bundle = os.path.join("/tmp/tx", "bundle")
        subprocess.run([sys.executable, "-c", TRITON_CHILD.format(root=ROOT), target, workdir, bundle], check=True,
                       cwd=workdir)
        stages = _stages(bundle)
        for ext in outputs:
            _write(out, f"triton/add_kernel.{arch}.{ext}", stages[f"triton.{ext}:add_kernel"])
        if arch == "sm_90":  # the per-pass dumps MLIR_ENABLE_DUMP printed, as KernelCapture kept them
            dumps = os.path.join(workdir, "mlir-passes")
            for ext in ("ttir", "ttgir"):
                (name,) = [n for n in os.listdir(dumps) if n.endswith(f".{ext}.passes.mlir")]
                _write(out, f"triton/add_kernel.sm_90.{ext}.passes.mlir", _read(os.path.join(dumps, name)))


TRITONPARSE_CHILD = '''import os, runpy, sys, warnings
sys.path.insert(0, {root!r})
import tritonparse.structured_logging as structured_logging
structured_logging.init(sys.argv[1])
from compiler.targets import get_target, virtual_gpu
virtual_gpu.install_compile_only_triton(get_target("cuda:sm_90"))
from torch._subclasses.fake_tensor import FakeTensorMode
warnings.filterwarnings("ignore")
with FakeTensorMode(allow_non_fake_inputs=True):
    try:
        runpy.run_path(sys.argv[2], run_name="__main__")
    except AttributeError:  # the launch, after the compile was logged: the virtual driver launches nothing
        pass
'''


def record_tritonparse(out: str) -> None:
    import gzip

    from compiler.triton.pipeline import EXAMPLE
    work = tempfile.mkdtemp(prefix="tritonparse-")
    _write(work, "kernels.py", EXAMPLE)
    traces = os.path.join(work, "trace")
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(work, "cache"))
    subprocess.run([sys.executable, "-c", TRITONPARSE_CHILD.format(root=ROOT), traces,
                    os.path.join(work, "kernels.py")], check=True, cwd=work, env=env)
    (name,) = [n for n in os.listdir(traces) if n.endswith(".ndjson")]
    os.makedirs(os.path.join(out, "imports"), exist_ok=True)
    with open(os.path.join(traces, name), "rb") as src, \
            gzip.open(os.path.join(out, "imports", "softmax.tritonparse.ndjson.gz"), "wb") as dst:
        dst.write(src.read())
    shutil.rmtree(work, ignore_errors=True)


def _xla_compile(language: str, source: str, work: str) -> tuple[dict, str]:
    """compiler/xla/child.py on one input, as the XLA pipeline runs it; (result, dump directory)."""
    from compiler.model import JobSettings
    os.makedirs(work, exist_ok=True)
    job = {"language": language, "source": source, "options": {"devices": 8, "xla_options": {}},
           "workdir": work, "dump_dir": os.path.join(work, "dump"), "run": False, "settings": JobSettings().to_json()}
    if language == "jax":
        job["user_file"] = os.path.join(work, "user_program.py")
        _write(work, "user_program.py", source)
    _write(work, "job.json", json.dumps(job))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-m", "compiler.xla.child", os.path.join(work, "job.json")], cwd=work,
                   env=env, check=True)
    result = json.loads(_read(os.path.join(work, "result.json")))
    assert "error" not in result, result["error"]
    return result, job["dump_dir"]


def record_xla(out: str) -> None:
    from compiler.xla import dump_index
    from compiler.xla.pipeline import HLO_EXAMPLE, JAX_EXAMPLE
    for prefix, language, source, work in (("mlp", "hlo", HLO_EXAMPLE, tempfile.mkdtemp(prefix="xla-rec-")),
                                           ("attention", "jax", JAX_EXAMPLE, "/tmp/rec/j")):
        shutil.rmtree(work, ignore_errors=True)
        result, dump = _xla_compile(language, source, work)
        index = dump_index.read_dump(dump)
        propagated = [s for s in index.snapshots if s.before == "spmd-partitioning"][-1]
        partitioned = [s for s in index.snapshots if s.after == "spmd-partitioning"][-1]
        stats = {"memory": result["memory"], "shardings": result["shardings"]}
        files = {"buffer_assignment.txt": _read(os.path.join(dump, index.buffer_assignment)),
                 "live_range.txt": _read(os.path.join(dump, index.live_range)),
                 "spmd.txt": _read(os.path.join(dump, partitioned.file))}
        if prefix == "mlp":
            stats["cost_total"] = result["cost_total"]
            files.update({"dump_names.txt": "\n".join(sorted(os.listdir(dump))) + "\n",
                          "propagated.txt": _read(os.path.join(dump, propagated.file)),
                          "optimized.txt": result["optimized"],
                          "trace_events.json": json.dumps(result["trace"])})
        else:
            files.update({"before_optimizations.txt": _read(os.path.join(dump, index.before_optimizations)),
                          "source.py": source, "stablehlo.mlir": result["stablehlo"]})
        files["xla_stats.json"] = json.dumps(stats, indent=1) + "\n"
        for name, text in files.items():
            _write(out, f"xla/{prefix}_{name}", text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compilers", nargs="*", help="torch, triton, xla (default: all three)")
    parser.add_argument("--out", default=FIXTURES, help="where to write (default: tests/fixtures)")
    args = parser.parse_args(argv)
    unknown = set(args.compilers) - {"torch", "triton", "xla", "tritonparse"}
    if unknown:
        parser.error(f"unknown compiler {sorted(unknown)[0]!r}: torch, triton, xla or tritonparse")
    for name in args.compilers or ("torch", "triton", "xla"):
        print(f"recording {name} fixtures into {args.out}", flush=True)
        {"torch": record_torch, "triton": record_triton, "xla": record_xla,
         "tritonparse": record_tritonparse}[name](args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

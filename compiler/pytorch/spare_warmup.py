"""Getting a spare PyTorch worker really ready before its job arrives.

Importing torch, Dynamo and Inductor is only part of what a process's first `torch.compile`
pays: the first compile also imports dozens of modules lazily, registers Inductor's pattern
matchers, builds decomposition tables, probes the CPU and loads the precompiled header. A spare
worker (one job per process, never reused) does all of that on irscope's own model below, then
undoes everything of that compile that could reach the job:

- Dynamo's caches and frame counters (`torch._dynamo.reset`), so compile ids start at 0/0;
- Inductor's in-memory caches (`torch._inductor.utils.clear_caches`: loaded kernels and modules),
  its provenance side tables (`reset_provenance_globals`) and metrics, Dynamo's counters;
- every module-level counter of torch that names generated things (`__compiled_fn_<n>`, AOT ids,
  graph ids), rewound to where it stood before the warm-up (or to its start in the module's
  source, for a module the warm-up imported);
- the structured trace: its file is closed and deleted and the interned-string table emptied, so
  the job's TORCH_TRACE holds the job's frames only, in a file of its own;
- the warm-up's Inductor and Triton caches live in a directory of their own, deleted afterwards;
- the random number generators (Python's, torch's, numpy's) are put back as they were, and
  Python forgets which warnings it showed;
- what it printed goes to a scratch file, not to the job's worker log (compiler/sandbox_entry.py).

What is kept depends only on the toolchain and the host: imported modules, registered patterns,
the ISA probe results, the precompiled header. tests/test_pytorch_pipeline.py compiles the same
model in a cold worker and a warmed one and compares every stage.

A spare for a GPU target (`gpu_target`, on a host without a CUDA device) installs the virtual
device first, as a job for that target does before anything is compiled, and compiles irscope's
model on it, compile-only on fake tensors as such a job does: Triton's compiler, its NVIDIA
backend and ptxas are loaded and run once. The device stays (it depends on the target only);
the Triton cache of the warm-up goes with the rest of its scratch directory. On a host with a
CUDA device the GPU spare imports only: the job uses the real device, which no warm-up touched.
"""
from __future__ import annotations

import gc
import inspect
import itertools
import os
import random
import re
import shutil
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from compiler.pytorch import artifact_logs, toolchain_cache

_report: dict[str, Any] | None = None
_cut_short = False  # a job arrived while torch was imported: the warm-up compile was skipped


def report() -> dict[str, Any] | None:
    """What this process's warm-up did (None: the worker was started for its job)."""
    return _report


def cut_short() -> bool:
    """True when `warm` skipped its warm-up compile for a job that had arrived (and
    `warm_up_compile` has not run since)."""
    return _cut_short


def warm(workdir: str, toolchain: str, gpu_target: str | None = None,
         job_arrived: Callable[[], bool] = lambda: False, export: str = "") -> None:
    """Import PyTorch's compiler and compile irscope's own model once (on the virtual `gpu_target`
    when given), then reset (module doc). A job that arrived while torch was imported is not kept
    waiting for the warm-up compile: the process is then as a cold worker is after its import.
    With `export` (the host template of a fresh install: no toolchain cache yet), this warm-up is
    the trusted toolchain warm-up: the jobs that arrive wait for it (the runner holds them), and
    it exports to `export` what the warm-up job would have (toolchain_cache.export_probes and
    export_headers, the virtual CUDA device's library)."""
    global _report, _cut_short
    started = time.perf_counter()
    runtime = None
    exporting = bool(export) and not gpu_target  # the host template of a fresh install
    if exporting:  # g++ builds the virtual device's C++ half beside the import
        from compiler.targets import virtual_gpu
        shim = virtual_gpu.RuntimeBuild(os.path.join(export, virtual_gpu.RUNTIME_CACHE_DIR))
    if gpu_target:  # the virtual device's C++ half: from the toolchain cache, or built beside the import
        from compiler.targets import virtual_gpu
        runtime = virtual_gpu.runtime_for_job(toolchain, workdir)
    import torch
    import torch._dynamo
    import torch._inductor.codecache
    import torch._inductor.compile_fx  # noqa: F401 - imported for the job
    import torch._inductor.config  # noqa: F401 - imported for the job
    imported = time.perf_counter()
    device, probes = None, None
    if gpu_target and not torch.cuda.is_available():
        from compiler.pytorch import gpu_codegen
        gpu_codegen.install_device(gpu_codegen.virtual_target(gpu_target, {}), runtime)
        device = gpu_target
    if gpu_target and device is None:  # a real CUDA device: the job's own, untouched
        _report = {"import_s": round(imported - started, 3), "warm_up_compile_s": 0.0, "counters_rewound": [],
                   "what": "a spare worker imported torch before this job arrived (no warm-up compile: the "
                           "job's GPU is real and no warm-up touched it)"}
        return
    if device is None:  # the host's C++ kernels: Inductor's CPU probes, before any job can arrive
        # While the probes' children run, this thread computes Triton's key (a hash of its files,
        # cached: Inductor's cache keys take it from the toolchain), as the warm-up compile would.
        # Not through CacheBase.get_system: its timed event would open the structured trace here.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="irscope-probes") as pool:
            probing = pool.submit(_probe_isas, workdir, toolchain, export if exporting else "")
            torch._inductor.codecache.triton_key()
            probes = probing.result()
        # Probes built here (no toolchain cache) were timed as compile_file events, which opened
        # the structured trace: forgotten, as the warm-up compile's are, before any job can fork.
        torch._dynamo.utils.compilation_time_metrics.clear()
        _restart_trace(torch)
    if not exporting and job_arrived():
        _report = {"import_s": round(imported - started, 3), "warm_up_compile_s": 0.0, "counters_rewound": [],
                   "what": "a spare worker was importing torch when this job arrived: it went on with the job "
                           "at once instead of its warm-up compile"
                           + (f" (the virtual {device} installed)" if device else "")}
        if device:
            _report["virtual_device"] = device
        if probes:
            _report["isa_probes"] = probes
        _cut_short = True
        return
    warm_up_compile(workdir, toolchain, imported - started, export=export if exporting else "")
    if _report is not None:
        if probes:
            _report["isa_probes"] = probes
        if exporting:
            shim.wait()
            _report["toolchain_cache_exported"] = toolchain_cache.exported(export)
            _report["what"] = ("a spare template imported torch and compiled irscope's own model as the trusted "
                               "toolchain warm-up of a fresh install (the job waited for it), exported the toolchain "
                               "cache, then reset Dynamo, Inductor's caches, counters and the trace")


def _probe_isas(workdir: str, toolchain: str, export: str = "") -> dict[str, Any]:
    """Inductor's CPU probes (toolchain_cache.probe_isas), loaded from the toolchain cache's copies
    in the warm-up's own scratch Inductor cache, as its warm-up compile would load them (with
    `export`: built there, and exported). What the probes found stays in Inductor's in-process
    caches; their files go with the scratch."""
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    scratch = os.path.join(workdir, "spare-warm-up")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor-cache")
    try:
        imported = toolchain_cache.import_probes(toolchain, os.environ["TORCHINDUCTOR_CACHE_DIR"])
        found = toolchain_cache.probe_isas(built=imported > 0)
        if export:
            toolchain_cache.export_probes(os.environ["TORCHINDUCTOR_CACHE_DIR"], export)
        return found
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
        shutil.rmtree(scratch, ignore_errors=True)


def warm_up_compile(workdir: str, toolchain: str, import_s: float | None = None, export: str = "") -> None:
    """The warm-up compile and the reset (module doc), in a process that imported torch (and
    installed its virtual device) already: the second half of `warm`, and what a spare template
    whose first job arrived during its import does after forking that job, so that the jobs it
    forks later find it warm. With `export`, the precompiled headers it built are exported."""
    global _report, _cut_short
    _cut_short = False
    if import_s is None:  # the import was the cut-short warm-up's
        import_s = (_report or {}).get("import_s", 0.0)
    import torch
    import torch._inductor.config as inductor_config

    from compiler.pytorch import gpu_codegen
    installed = gpu_codegen.installed()
    device = installed.name if installed is not None else None
    imported = time.perf_counter()
    job_env = {name: os.environ.get(name) for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    scratch = os.path.join(workdir, "spare-warm-up")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor-cache")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton-cache")
    toolchain_cache.import_probes(toolchain, os.environ["TORCHINDUCTOR_CACHE_DIR"])
    toolchain_cache.link_headers(toolchain, torch._inductor.codecache._HEADER_DIR)
    rng = _rng_states(torch)
    counters = _counters()
    try:
        # catch_warnings: on the way out Python forgets which warnings were shown, so the job
        # shows those a cold process would
        with warnings.catch_warnings(), torch._inductor.debug.reset_provenance_globals(), \
                inductor_config.patch({"trace.provenance_tracking_level": 1}):
            artifact_logs.install(torch)  # the job installs its own collector; this one is dropped
            _compile_once(torch, on_virtual_gpu=device is not None)
        if export:
            toolchain_cache.export_headers(torch._inductor.codecache._HEADER_DIR, export)
    finally:
        compiled = time.perf_counter()
        torch._dynamo.reset()
        torch._inductor.utils.clear_caches()
        torch._dynamo.utils.counters.clear()
        torch._dynamo.utils.compilation_time_metrics.clear()
        torch._inductor.metrics.reset()
        rewound = _rewind(counters)
        _restart_trace(torch)
        for name, value in job_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(scratch, ignore_errors=True)
        _restore_rng(torch, rng)
        gc.collect()
    _report = {"import_s": round(import_s, 3), "warm_up_compile_s": round(compiled - imported, 3),
               "reset_s": round(time.perf_counter() - compiled, 3), "counters_rewound": rewound,
               "what": "a spare worker imported torch and compiled irscope's own model"
                       + (f" on the virtual {device} it installed first" if device else "")
                       + ", then reset Dynamo, Inductor's caches, counters and the trace before this job arrived"}
    if device:
        _report["virtual_device"] = device


def _compile_once(torch: Any, on_virtual_gpu: bool = False) -> None:
    """irscope's own model (never user code): a block with parameters, so the warm-up goes through
    AOTAutograd's joint graph and partitioner, Inductor's pattern matchers, an extern matmul and one
    fused pointwise C++ kernel, as a typical model does. One kernel, not several: each more is one
    more g++ run (about a second) the spare pays and the job does not gain from (its kernels are
    its own; what the first compile loads and builds once is the same for one kernel as for
    three: measured by bench/compile_latency.py, the job's compile after either takes as long)."""
    try:  # tqdm (in the job environment with transformers) starts a monitor thread with the first
        import tqdm  # progress bar Inductor's compile makes; a spare template forks with no other thread
        tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass
    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x: Any) -> Any:
            return x + torch.nn.functional.gelu(self.fc(x))

    with torch.random.fork_rng(devices=[]):  # initialising the parameters draws random numbers
        block = Block()
    x = torch.arange(64, dtype=torch.float32).reshape(4, 16) / 64
    if not on_virtual_gpu:
        torch.compile(block)(x)
        return
    # as a job for the virtual GPU compiles: fake tensors on the device, Inductor's compile-only
    # backend. Without autograd: a joint graph on a CUDA device starts autograd's device thread,
    # and autograd then refuses to run in a process forked from this one (a spare template's job).
    from compiler.kernels import compile_only
    mode = compile_only.fake_mode()
    with mode:
        model, inputs = compile_only.to_device(block, (x,), "cuda")
    with mode, torch.no_grad():
        torch.compile(model, backend=compile_only.inductor_backend(None, None, None))(*inputs)


def _rng_states(torch: Any) -> dict[str, Any]:
    states = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if "numpy" in sys.modules:
        states["numpy"] = sys.modules["numpy"].random.get_state()
    return states


def _restore_rng(torch: Any, states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    torch.set_rng_state(states["torch"])
    if "numpy" in states:
        sys.modules["numpy"].random.set_state(states["numpy"])


_COUNT = re.compile(r"count\((-?\d+)(?:, (-?\d+))?\)")


def _torch_modules() -> list[tuple[str, Any]]:
    return [(name, module) for name, module in list(sys.modules.items())
            if module is not None and (name == "torch" or name.startswith("torch."))]


def _counters() -> dict[tuple[str, str], tuple[int, int]]:
    """Every module-level itertools.count of torch's loaded modules: (start, step) now."""
    found = {}
    for name, module in _torch_modules():
        for attr, value in list(vars(module).items()):
            if type(value) is itertools.count:  # type(), not isinstance: no __class__ lookups that warn
                match = _COUNT.fullmatch(repr(value))
                if match:
                    found[(name, attr)] = (int(match.group(1)), int(match.group(2) or 1))
    return found


def _source_start(module: Any, attr: str) -> tuple[int, int] | None:
    """Where `attr = itertools.count(...)` starts in the module's own source."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return None
    match = re.search(rf"^{re.escape(attr)}\s*(?::[^=\n]*)?=\s*itertools\.count\(\s*(-?\d*)\s*(?:,\s*(-?\d+)\s*)?\)",
                      source, re.MULTILINE)
    if match is None:
        return None
    return int(match.group(1) or 0), int(match.group(2) or 1)


def _rewind(before: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
    """Put back every counter the warm-up advanced; return their names."""
    rewound = []
    for (name, attr), now in _counters().items():
        start = before.get((name, attr)) or _source_start(sys.modules[name], attr)
        if start is not None and start != now:
            setattr(sys.modules[name], attr, itertools.count(*start))
            rewound.append(f"{name}.{attr}")
    return sorted(rewound)


def _restart_trace(torch: Any) -> None:
    """Close and delete the warm-up's structured trace: the job's first entry opens a new file
    (with the torch_version header a fresh process writes), and file names are interned anew."""
    handler = getattr(torch._logging._internal, "LOG_TRACE_HANDLER", None)
    if handler is not None:
        with handler.lock:
            path = getattr(handler, "_stream_path", None)
            if hasattr(handler, "_close_stream"):
                handler._close_stream()
            elif handler.stream is not None:  # an older LazyTraceHandler
                handler.stream.close()
                handler.stream = None
            if path and os.path.exists(path):
                os.remove(path)
    torch._logging.structured.INTERN_TABLE.clear()
    torch._logging.structured.DUMPED_FILES.clear()

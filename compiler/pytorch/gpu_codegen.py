"""A PyTorch model compiled by Inductor for a virtual GPU (a CUDA target this host does not have).

The pytorch pipeline uses this when its `target` option names a GPU and the worker has none. The
virtual device (compiler/targets/virtual_gpu.py) makes PyTorch and Triton believe a CUDA device of
the target's kind exists; the model and its inputs become fake tensors on it, and the job is a
compile-only run (compiler/kernels/compile_only.py): `torch.compile` runs as the source would run
it on that GPU, Dynamo, AOTAutograd (forward and backward) and Inductor produce their stages, and
Inductor's generated module, as it loads, has Triton compile every autotune config of every kernel
to PTX and SASS, each compilation captured like the triton language's kernels
(compiler/triton/). Nothing runs; no timing is produced.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from compiler.formats import kernel_key_name, kernel_of
from compiler.pipeline import Bundle, OptionError
from compiler.targets import GpuTarget, describe_target, get_target

SOURCE_MAP_NOTE = ("No line of this stage links to the editor. Inductor's kernels carry no line of the model's file: "
                   "their IR's locations name the generated source (triton.source), and the All kernels table gives "
                   "each kernel's lines of the model.")


def virtual_target(name: str, options: dict[str, Any]) -> GpuTarget:
    """The GPU target `name` ("cuda:sm_90"), checked against what a virtual device can do with
    these pytorch options; OptionError otherwise."""
    try:
        gpu = get_target(name)
    except KeyError as e:
        raise OptionError(str(e.args[0])) from None
    if not gpu.is_cuda:
        raise OptionError(f"{name}: Inductor can target a virtual CUDA GPU only (its HIP path needs a ROCm "
                          "build of PyTorch)")
    if str(options.get("mode", "default")).startswith("max-autotune"):
        raise OptionError("max-autotune benchmarks kernels and GEMM templates on the device; a virtual GPU "
                          "cannot run them (use mode=default: every autotune config is still compiled)")
    if options.get("mode") == "reduce-overhead":
        raise OptionError("reduce-overhead records CUDA graphs on the device; a virtual GPU cannot")
    return gpu


_installed: tuple[GpuTarget, Any, float] | None = None  # (target, its RuntimeBuild, install seconds)


def installed() -> GpuTarget | None:
    """The virtual device this process installed already (a spare worker installs one before its
    warm-up), or None."""
    return _installed[0] if _installed else None


def install_device(gpu: GpuTarget, runtime: Any) -> None:
    """Install the virtual device, once per process (irreversible: the worker runs one job)."""
    global _installed
    from compiler.targets import virtual_gpu
    started = time.perf_counter()
    virtual_gpu.install_virtual_cuda(gpu, runtime)
    _installed = (gpu, runtime, time.perf_counter() - started)


def install(gpu: GpuTarget, runtime: Any, bundle: Bundle) -> None:
    """Install the virtual device, unless this spare worker did before its warm-up, and say which
    in the `target` timing. `runtime` is the virtual_gpu.RuntimeBuild started before torch was
    imported (None when the device is installed already)."""
    from compiler.targets import virtual_gpu
    by_spare = _installed is not None
    if by_spare and _installed[0].name != gpu.name:  # the runner hands a spare jobs of its own target only
        raise RuntimeError(f"this worker installed a virtual {_installed[0].name}, not {gpu.name}")
    if not by_spare:
        bundle.progress(f"installing the virtual {gpu.name}")
        install_device(gpu, runtime)
    target, build, seconds = _installed
    info = describe_target(gpu, executed=False, real=None)
    info["notes"] = list(virtual_gpu.FIDELITY_NOTES)
    info.update(build.report())
    info["virtual_device_install_s"] = round(seconds, 3)
    info["virtual_device_installed_by"] = "the spare worker, before its warm-up" if by_spare else "this job"
    bundle.timing("target", info)


def config_order(bundle: Bundle) -> Any:
    """The order of Triton's compilations for this job (virtual_gpu.KernelConfigOrder), telling the
    job's status line which kernel and config compiles."""
    from compiler.targets import virtual_gpu
    return virtual_gpu.KernelConfigOrder(bundle.progress)


def job_processes(job_cpus: float) -> int:
    """How many processes (or tools) of the job may compute at once: its CPU quota, in whole CPUs
    this host has."""
    return max(1, min(int(job_cpus), len(os.sched_getaffinity(0))))


def compile_other_configs(order: Any, capture: Any, workdir: str, job_cpus: float) -> float:
    """Every kernel's other autotune configs (`order`'s rest), compiled once every graph compiled,
    in as many processes as the job's CPU quota and CPUs allow: this one and helpers forked from
    it (compiler/kernels/parallel.py), whole kernels per process (each kernel's configs stay in
    their order), shared out by their number of configs. Returns the seconds it took."""
    from compiler.kernels import parallel
    started = time.perf_counter()
    units = order.rest_units()
    processes = min(job_processes(job_cpus), max(1, len(units)))
    shares: list[list[tuple[int, Any]]] = [[] for _ in range(processes)]
    loads = [0] * processes
    for position, (configs, unit) in sorted(enumerate(units), key=lambda u: -u[1][0]):
        least = loads.index(min(loads))
        shares[least].append((position, unit))
        loads[least] += configs
    in_order = [[unit for _, unit in sorted(share, key=lambda u: u[0])] for share in shares]
    if processes == 1:
        for unit in in_order[0]:
            unit()
    else:
        order.progress(f"Triton: the other autotune configs of {len(units)} kernels, in {processes} processes")
        silence = lambda: setattr(order, "progress", lambda _text: None)  # noqa: E731 - a helper writes no bundle
        for unit in parallel.spread(in_order, capture, os.path.join(workdir, "helper-records"), in_helper=silence):
            unit()  # what a helper did not finish (its error is raised here)
    return time.perf_counter() - started


def fidelity_note() -> str:
    from compiler.targets import virtual_gpu
    return " ".join(virtual_gpu.FIDELITY_NOTES)


class KernelStages:
    """`triton.<stage>:<kernel>.<config>` for every Triton compilation Inductor's generated modules
    trigger as they load (every autotune config of every kernel, forward and backward). Each is
    handed over the moment its compilation ends (KernelCapture's `on_compiled`), its cubin given
    to nvdisasm at once, and written by one thread of its own, in compile order, while Triton
    compiles the next: the first kernel's PTX is on the page while the others still compile, and
    the stage work (nvdisasm, the per-pass dumps) overlaps the compile instead of adding to it.
    `finish` waits for the last and adds the job's resource table; a failure to write a kernel's
    stages does not reach Triton's compile: `finish` raises it."""

    def __init__(self, bundle: Bundle, workdir: str, gpu: GpuTarget, disassemblers: int = 1):
        self.bundle, self.workdir, self.gpu = bundle, workdir, gpu
        self.rows: list[Any] = []
        self._files: dict[str, str] = {}  # a row's kernel -> the file Triton compiled it from
        self._compiles: dict[str, int] = {}  # kernel name -> its compilations so far
        self._failure: BaseException | None = None
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="irscope-kernel-stages")
        # nvdisasm (about 0.3 s of CPU a cubin, whatever its size) starts as each compilation ends,
        # up to `disassemblers` at once; the writer takes each listing in compile order
        self._disassembler = ThreadPoolExecutor(max_workers=max(1, disassemblers),
                                                thread_name_prefix="irscope-nvdisasm")

    def write(self, record: Any) -> None:
        n = self._compiles.get(record.name, 0)
        self._compiles[record.name] = n + 1
        sass = self._disassembler.submit(self._disassemble, record)
        self._writer.submit(self._write, record, f"{kernel_key_name(record.name)}.{n}", sass)

    def _disassemble(self, record: Any) -> str | None:
        from compiler.kernels.nvidia_tools import disassemble_sass
        cubin = record.asm("cubin")
        return disassemble_sass(cubin, self.workdir) if isinstance(cubin, bytes) else None

    def _write(self, record: Any, qualifier: str, sass: Any) -> None:
        from compiler.kernels.stages import write_kernel_stages as write_stages
        if self._failure is not None:
            return
        try:
            source = _read(record.source_file)
            self._files[qualifier] = record.source_file or ""
            # the locations name lines of the generated file, none of the editor's: no stage maps
            # into the editor (the IR links between the kernel's stages still follow them)
            self.rows.append(write_stages(self.bundle, record, qualifier, self.workdir, record.source_file,
                                          python_source=(source, 1) if source else None,
                                          map_to_user=lambda line: None,
                                          extra_meta={"virtual": True, "executed": False, "device": self.gpu.product,
                                                      "note": SOURCE_MAP_NOTE},
                                          group="Kernels", disassembly=sass.result,
                                          file_names=_file_names(record, qualifier) if source else None))
        except Exception as e:  # noqa: BLE001 - kept for finish(): Triton's compile must not see it
            self._failure = e

    def finish(self, kernel_lines: dict[str, set[int]] | None = None,
               estimated_bytes: dict[str, int] | None = None) -> None:
        """Wait for the last kernel's stages, then write the resource table. `kernel_lines`: the
        user's lines of each kernel, by the file Triton compiled it from or by its name, as the
        output codes' source maps name them (trace_stages.TraceStages.kernel_lines): each row's
        `lines`, since a kernel's own stages map only into its generated file. `estimated_bytes`:
        Inductor's scheduler estimate of the bytes each kernel reads and writes, by the kernel's
        name (estimates.kernel_bytes): each of its configs' rows' `estimated_bytes`."""
        from compiler.kernels.resources import write_resource_table
        self.bundle.progress("writing the last kernels' stages")
        self._writer.shutdown(wait=True)
        self._disassembler.shutdown(wait=True)
        if self._failure is not None:
            raise self._failure
        # a row names its kernel as its stage keys do (kernel_key_name: a long name is cut)
        lines_by_name = {kernel_key_name(k): v for k, v in (kernel_lines or {}).items()}
        bytes_by_name = {kernel_key_name(k): v for k, v in (estimated_bytes or {}).items()}
        for row in self.rows:
            if not row.lines and kernel_lines:
                found = kernel_lines.get(self._files.get(row.kernel, "")) or lines_by_name.get(kernel_of(row.kernel))
                row.lines = sorted(found or ())
            if estimated_bytes:
                row.estimated_bytes = bytes_by_name.get(kernel_of(row.kernel))
        write_resource_table(self.bundle, self.rows, "Kernels",
                             note="every autotune config Inductor compiled is a row of its own")


def _file_names(record: Any, qualifier: str) -> list[dict[str, str]]:
    """Inductor writes each Triton kernel it generates to a file named by its hash: the file every
    `.loc` of the kernel's IR names. Its stages say which kernel that file is and which stage shows
    it (stage meta `file_names`, as compiler/helion/pipeline.py's; the compiler's text keeps the name)."""
    if not record.source_file:
        return []
    return [{"path": record.source_file, "file": os.path.basename(record.source_file),
             "name": f"the Triton code Inductor generated for kernel {record.name}",
             "about": "Inductor writes each kernel to a file named by its hash; the same code is in the Output "
                      "code of the graph that launches it",
             "stage": f"triton.source:{qualifier}", "stage_title": f"Kernel source {qualifier}"}]


def _read(path: str) -> str:
    if not path or not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()

"""A PyTorch model compiled by Inductor for a virtual GPU (a CUDA target this host does not have).

The pytorch pipeline uses this when its `target` option names a GPU and the worker has none. The
virtual device (compiler/targets/virtual_gpu.py) makes PyTorch and Triton believe a CUDA device of
the target's kind exists; the model and its inputs become fake tensors on it, and the job is a
compile-only run (compiler/pytorch/compile_only.py): `torch.compile` runs as the source would run
it on that GPU, Dynamo, AOTAutograd (forward and backward) and Inductor produce their stages, and
Inductor's generated module, as it loads, has Triton compile every autotune config of every kernel
to PTX and SASS, each compilation captured like the triton language's kernels
(compiler/triton/). Nothing runs; no timing is produced.
"""
from __future__ import annotations

import os
from typing import Any

from compiler.pipeline import Bundle, OptionError
from compiler.targets import GpuTarget, describe_target, get_target

SOURCE_MAP_NOTE = ("source maps point into the kernel's generated source (triton.source): Inductor's kernels "
                   "carry no line of the model's file")


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


def install(gpu: GpuTarget, runtime: Any, bundle: Bundle) -> None:
    """Install the virtual device (irreversible: the worker runs one job) and say so in the
    `target` timing. `runtime` is the virtual_gpu.RuntimeBuild started before torch was imported."""
    from compiler.targets import virtual_gpu
    bundle.progress(f"installing the virtual {gpu.name}")
    virtual_gpu.install_virtual_cuda(gpu, runtime)
    info = describe_target(gpu, executed=False, real=None)
    info["notes"] = list(virtual_gpu.FIDELITY_NOTES)
    info["virtual_device_build_s"] = runtime.seconds
    info["virtual_device_from_toolchain_cache"] = runtime.prebuilt
    bundle.timing("target", info)


def fidelity_note() -> str:
    from compiler.targets import virtual_gpu
    return " ".join(virtual_gpu.FIDELITY_NOTES)


def write_kernel_stages(bundle: Bundle, records: list[Any], workdir: str, gpu: GpuTarget) -> None:
    """`triton.<stage>:<kernel>.<config>` for every Triton compilation captured while Inductor
    loaded its generated modules (every autotune config of every kernel, forward and backward)."""
    from compiler.triton.capture import qualifiers
    from compiler.triton.kernel_stages import write_kernel_stages as write_stages
    from compiler.triton.kernel_stages import write_resource_table
    rows = []
    for record, qualifier in zip(records, qualifiers(records, always_number=True)):
        bundle.progress(f"writing stages of {qualifier}")
        source = _read(record.source_file)
        rows.append(write_stages(bundle, record, qualifier, workdir, record.source_file,
                                 python_source=(source, 1) if source else None,
                                 extra_meta={"virtual": True, "executed": False, "device": gpu.product,
                                             "source_map_into": f"triton.source:{qualifier}",
                                             "note": SOURCE_MAP_NOTE},
                                 group="Kernels"))
    write_resource_table(bundle, rows, "Kernels", note="every autotune config Inductor compiled is a row of its own")


def _read(path: str) -> str:
    if not path or not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()

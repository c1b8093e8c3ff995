"""A PyTorch model compiled by Inductor for a virtual GPU (a CUDA target this host does not have).

The pytorch pipeline calls `run_virtual_gpu` when its `target` option names a GPU and the worker has
no such device. The model is exported with fake CUDA tensors, Inductor generates its GPU wrapper
and Triton kernels for the target's device properties (compiler/targets/virtual_gpu.py), and every
autotuning config of every kernel is compiled by Triton down to PTX and SASS, captured like the
triton language's kernels (compiler/triton/). Nothing runs; no timing is produced.
"""
from __future__ import annotations

import copy
import os
import re
from typing import Any

from compiler.pipeline import JobContext, OptionError, UserError
from compiler.targets import describe_target, get_target

_KERNEL = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)', '''\n(.*?)''', device_str='(\w+)'\)", re.S | re.M)


def _check_options(options: dict[str, Any]) -> None:
    if options.get("training"):
        raise OptionError(
            "training is not available on a virtual GPU: AOTAutograd needs autograd metadata on the "
            "fake CUDA tensors, which needs a CUDA device guard this CPU-only build of PyTorch lacks. "
            "Compile the forward (training=false) for the virtual target, or use a worker with a GPU.")
    if options.get("backend", "inductor") != "inductor":
        raise OptionError(f"backend {options.get('backend')!r} generates no GPU code; a virtual GPU target "
                          "needs backend=inductor")
    if str(options.get("mode", "default")).startswith("max-autotune"):
        raise OptionError("max-autotune benchmarks kernels and GEMM templates on the device; a virtual GPU "
                          "cannot run them (use mode=default: every autotune config is still compiled)")
    if options.get("mode") == "reduce-overhead":
        raise OptionError("reduce-overhead records CUDA graphs on the device; a virtual GPU cannot")


def run_virtual_gpu(model: Any, example_inputs: Any, target: str, ctx: JobContext, options: dict[str, Any]) -> None:
    """Compile `model(*example_inputs)` with Inductor for the virtual GPU `target` ("cuda:sm_90")
    and write `inductor.output_code` plus `triton.<stage>:<kernel>.<config>` for every config.

    `model` is an nn.Module or a function; it is deep-copied, never modified. `options` are the
    pytorch pipeline's normalised options (`training`, `backend`, `mode`, `inductor_config` are
    read). Raises OptionError for what a virtual device cannot do, UserError for failures the
    model caused. Call it in a process that runs this one job: the shim it installs stays.
    """
    try:
        gpu = get_target(target)
    except KeyError as e:
        raise OptionError(str(e.args[0])) from None
    if not gpu.is_cuda:
        raise OptionError(f"{target}: Inductor can target a virtual CUDA GPU only (its HIP path needs a ROCm "
                          "build of PyTorch)")
    _check_options(options)

    import torch

    from compiler.targets import virtual_gpu
    from compiler.triton.capture import KernelCapture, qualifiers
    from compiler.triton.kernel_stages import write_kernel_stages

    workdir, bundle = ctx.workdir, ctx.bundle
    virtual_gpu.install_virtual_cuda(gpu)
    target_info = describe_target(gpu, executed=False, real=None)
    bundle.timing("target", target_info)
    bundle.progress(f"Inductor: generating code for {gpu.name} (virtual)")

    inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    wrapper = _generate_wrapper(model, inputs, options.get("inductor_config") or {})
    notes = list(virtual_gpu.FIDELITY_NOTES)
    bundle.add("inductor.output_code", "Inductor output code (GPU wrapper)", "Inductor", "python", wrapper,
               meta={"target": gpu.name, "virtual": True, "executed": False, "device": gpu.product,
                     "notes": notes, "note": " ".join(notes)})

    kernels = [(m.group(2), m.group(3)) for m in _KERNEL.finditer(wrapper)]
    kernel_dir = os.path.join(workdir, "inductor-kernels")
    os.makedirs(kernel_dir, exist_ok=True)
    capture = KernelCapture(os.path.join(workdir, "mlir-passes"))
    failures: dict[str, str] = {}
    kernel_files: dict[str, tuple[str, str]] = {}
    from torch._inductor.runtime.compile_tasks import _reload_python_module
    with capture.installed():
        for i, (name, source) in enumerate(kernels):
            bundle.progress(f"Triton: compiling kernel {i + 1}/{len(kernels)} {name} for {gpu.name}")
            path = os.path.join(kernel_dir, f"{name}.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
            kernel_files[name] = (path, source)
            before = len(capture.ordered())
            try:
                autotuner = getattr(_reload_python_module(name, path), name)
                autotuner.precompile()
            except Exception as e:  # noqa: BLE001
                # building the launcher needs a CUDA runtime; the compilations before it are kept
                if len(capture.ordered()) == before:
                    failures[name] = f"{type(e).__name__}: {e}"[:2000]
    records = capture.ordered()
    if kernels and not records:
        raise UserError("CompileError", "Triton compiled none of Inductor's kernels for "
                        f"{gpu.name}: " + "; ".join(f"{k}: {v}" for k, v in failures.items())[:4000], None)
    for record, qualifier in zip(records, qualifiers(records, always_number=True)):
        path, source = kernel_files.get(record.name, ("", ""))
        bundle.progress(f"writing stages of {qualifier}")
        write_kernel_stages(
            bundle, record, qualifier, workdir, path, python_source=(source, 1) if source else None,
            extra_meta={"virtual": True, "executed": False, "source_map_into": f"triton.source:{qualifier}",
                        "note": "source maps point into the kernel's generated source (triton.source): "
                                "Inductor's kernels carry no line of the model's file"},
            group="Kernels")
    if failures:
        bundle.add("triton.failures", "Kernels that did not compile", "Kernels", "json",
                   failures, meta={"target": gpu.name})
    del torch


def _generate_wrapper(model: Any, inputs: tuple, inductor_overrides: dict[str, Any]) -> str:
    """Export with fake CUDA tensors and run Inductor up to code generation; the wrapper's source."""
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    from compiler.targets import virtual_gpu

    if isinstance(model, torch.nn.Module):
        module = copy.deepcopy(model)
    else:
        module = torch.nn.Module()
        module.forward = model  # type: ignore[method-assign]
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with mode:
            fake_inputs = [virtual_gpu.fake_cuda_like(t) if isinstance(t, torch.Tensor) else t for t in inputs]
            module = module.to_empty(device="cuda").requires_grad_(False)
            with torch.no_grad():
                exported = torch.export.export(module, tuple(fake_inputs))
    except Exception as e:  # noqa: BLE001
        raise UserError("UserCodeError", f"exporting the model for the virtual GPU failed: {type(e).__name__}: "
                        f"{str(e)[:3000]}", None) from e
    captured, restore = virtual_gpu.capture_inductor_wrapper()
    try:
        with inductor_config.patch(inductor_overrides):
            compile_fx(exported.module(), fake_inputs)
    except virtual_gpu.StopAfterCodegen:
        pass
    except Exception as e:  # noqa: BLE001
        if "code" not in captured:  # Inductor wraps our stop in InductorError
            raise UserError("CompileError", f"Inductor failed for the virtual GPU: {type(e).__name__}: "
                            f"{str(e)[:3000]}", None) from e
    finally:
        restore()
    if "code" not in captured:
        raise UserError("CompileError", "Inductor produced no wrapper code", None)
    return captured["code"]

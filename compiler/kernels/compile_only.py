"""Compile-only runs: `torch.compile` on fake tensors, every stage as for real tensors of those
shapes, no kernel ever run.

The user's model and inputs are built under a FakeTensorMode (shape, stride, dtype and device,
no storage), so a model whose inputs need 100 GB compiles on a worker with 6. Dynamo, AOTAutograd
and Inductor run exactly as they do for real tensors: they fake the inputs themselves in any case,
and only ever look at metadata. Inductor generates, compiles and loads its kernels as usual. The
one change is what happens when Dynamo's transformed code then calls a compiled graph: the
graph's kernels need real memory, so each graph Inductor compiled is instead run as its FX graph
on the fake inputs (FakeTensor propagates shapes), which gives Dynamo, AOTAutograd and autograd
the outputs they expect: the code between graph breaks runs, and `loss.backward()` reaches the
backward graph, which AOTAutograd then compiles lazily exactly as in a real run.
"""
from __future__ import annotations

from typing import Any, Callable

from compiler.kernels.fake_modules import convert_by_assignment
from compiler.kernels.virtual_checks import VirtualChecks

NOTE = ("compile-only: the inputs and parameters are fake tensors (shape, stride, dtype, device; no values). "
        "Dynamo, AOTAutograd and Inductor compiled every graph exactly as for real tensors of these shapes; "
        "the compiled kernels were never run (each graph's outputs came from running its FX graph on the "
        "fake tensors), so there are no run times, only Inductor's own estimates. Dynamo's guards name the "
        "inputs' type as FakeTensor (with its Python dispatch keys) where a real run names torch.Tensor.")


def fake_mode() -> Any:
    """A FakeTensorMode for the user's inputs and parameters. Real tensors met inside it (a
    constant the model made at import time) are faked on use."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode(allow_non_fake_inputs=True)


def to_fake(value: Any, mode: Any) -> Any:
    """`value` with every tensor in it (an nn.Module's parameters and buffers too) replaced by a
    fake tensor of the same shape, strides, dtype and device; tensors already fake (a model built
    under the fake mode) stay as they are."""
    import torch
    import torch.utils._pytree as pytree

    if isinstance(value, torch.nn.Module):
        return convert_by_assignment(value, lambda t: _fake_tensor(t, mode))
    return pytree.tree_map(lambda t: _fake_tensor(t, mode) if isinstance(t, torch.Tensor) else t, value)


def to_device(model: Any, inputs: tuple, device: str) -> tuple[Any, tuple]:
    """Fake `model` and `inputs` moved to `device`, as `model.to(device)` and `t.to(device)` would
    move real ones."""
    import torch
    import torch.utils._pytree as pytree

    if isinstance(model, torch.nn.Module):
        model = convert_by_assignment(model, lambda t: t.to(device))
    inputs = pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, inputs)
    return model, inputs


def _fake_tensor(t: Any, mode: Any) -> Any:
    from torch._subclasses.fake_tensor import FakeTensor
    if isinstance(t, FakeTensor):
        return t
    return mode.from_tensor(t)


def inductor_backend(mode: str | None, options: dict[str, Any] | None, dynamic: bool | None) -> Any:
    """The `torch.compile(backend=...)` object for compile-only runs: PyTorch's own Inductor
    backend (torch.compile builds the same object for backend="inductor"), compiling through an
    inner compile that leaves each compiled graph able to take fake inputs (`_FakeAware`)."""
    import torch
    from torch._inductor import compile_fx

    class CompileOnlyInductor(torch._TorchCompileInductorWrapper):  # type: ignore[misc, name-defined]
        def __call__(self, model_: Any, inputs_: Any, *, config_patches: dict[str, Any] | None = None) -> Any:
            # torch._TorchCompileInductorWrapper.__call__, with the inner compile named
            return compile_fx.compile_fx(model_, inputs_, inner_compile=_inner_compile,
                                         config_patches={**self.config, **(config_patches or {})},
                                         compile_region_name=self.name)

    return CompileOnlyInductor(mode, options, dynamic)


NOT_AUTOTUNED = ("max-autotune benchmarks candidate kernels on real tensors, and a virtual GPU runs nothing: this "
                 "call compiled with Inductor's default kernel choices (mode=None), every stage otherwise as asked")


def compiling_only(torch: Any, checks: VirtualChecks, modules: list[Any] | None = None) -> Callable[..., Any]:
    """`torch.compile` for a program run as written on fake tensors (a PyTorch script on a virtual GPU
    or in a virtual world; a kernel program's torch.compile baselines): each Inductor compile it
    asks for goes through `inductor_backend`, from the call's own `mode`, `options` and `dynamic`,
    so its compiled graphs take the fake tensors; max-autotune, which times candidates, compiles
    with Inductor's defaults, a notice at its line (`checks`). Each nn.Module compiled is appended
    to `modules`."""
    original_compile = torch.compile

    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(mode=...): the decorator form
            return lambda fn: compile(fn, *args, **kwargs)
        if kwargs.get("backend", "inductor") == "inductor":  # torch.compile's arguments are keywords
            mode, options = kwargs.pop("mode", None), kwargs.pop("options", None)
            if mode is not None and str(mode).startswith("max-autotune"):
                checks.note(f"torch.compile(mode={mode!r})", NOT_AUTOTUNED)
                mode = None
            kwargs["backend"] = inductor_backend(mode, options, kwargs.get("dynamic"))
        owner = getattr(model, "__self__", model)  # module.compile() compiles its bound _call_impl
        if modules is not None and isinstance(owner, torch.nn.Module):
            modules.append(owner)
        return original_compile(model, *args, **kwargs)
    return compile


def _inner_compile(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """Inductor's compile_fx_inner, unchanged; its result's callable then runs `gm` on fake inputs."""
    from torch._inductor import compile_fx
    from torch._inductor.output_code import CompiledFxGraph

    compiled = compile_fx.compile_fx_inner(gm, example_inputs, **kwargs)
    if isinstance(compiled, CompiledFxGraph) and compiled.current_callable is not None:
        compiled.current_callable = _FakeAware(compiled.current_callable, gm)
    return compiled


class _FakeAware:
    """A compiled graph's callable (boxed: it takes the list of inputs and empties it) that, given
    fake inputs, runs the FX graph Inductor compiled instead of its kernels."""

    def __init__(self, compiled: Any, graph: Any):
        self.compiled = compiled
        self.graph = graph
        self._boxed_call = True

    def __call__(self, args: list[Any]) -> Any:
        from torch._subclasses.fake_tensor import FakeTensor
        if any(isinstance(a, FakeTensor) for a in args):
            inputs = list(args)
            args.clear()
            return self.graph(*inputs)
        return self.compiled(args)

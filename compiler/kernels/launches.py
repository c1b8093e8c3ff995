"""Launches of `@triton.jit` kernels in the user's program (`kernel[grid](...)`): recorded with
their grid, arguments and line; on a virtual target compiled, never run; on the worker's own GPU
run and timed."""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator


@dataclass
class Launch:
    kernel: str
    grid: list[int]
    compile_hash: str
    arguments: list[dict[str, Any]]
    line: int | None  # the user's line that launched it
    timing_ms: dict[str, float] | None = None
    note: str = ""


def _describe_arg(value: Any) -> dict[str, Any]:
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return {"kind": "tensor", "dtype": str(value.dtype).replace("torch.", ""), "shape": list(shape),
                "stride": list(value.stride()) if hasattr(value, "stride") else None,
                "device": str(getattr(value, "device", ""))}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return {"kind": type(value).__name__, "value": value}
    return {"kind": type(value).__name__, "value": str(value)[:200]}


def _launch_line(path: str) -> int | None:
    frame = sys._getframe(1)
    line = None
    while frame is not None:
        if frame.f_code.co_filename == path:
            line = frame.f_lineno
            break
        frame = frame.f_back
    return line


class LaunchRecorder:
    """Wraps `JITFunction.run` (what `kernel[grid](...)` calls). Compile-only: every launch becomes a
    warm-up (compile, no launch) and is recorded. Real device: the launch runs, then is timed with
    triton.testing.do_bench (median and 20th/80th percentiles, ms)."""

    def __init__(self, user_path: str, execute: bool):
        self.user_path = user_path
        self.execute = execute
        self.launches: list[Launch] = []
        self.seen: list[Any] = []  # every JITFunction run, launched or warmed up
        self._benchmarking = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator["LaunchRecorder"]:
        from triton.compiler.compiler import CompiledKernel
        from triton.runtime import autotuner
        from triton.runtime.jit import JITFunction
        original_run = JITFunction.run
        original_bench = autotuner.Autotuner._bench
        recorder = self

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if self not in recorder.seen:
                recorder.seen.append(self)
            if warmup or recorder._benchmarking:
                return original_run(self, *args, grid=grid, warmup=warmup or not recorder.execute, **kwargs)
            kernel = original_run(self, *args, grid=grid, warmup=not recorder.execute, **kwargs)
            recorder._record(self, kernel, args, kwargs, grid,
                             lambda: original_run(self, *args, grid=grid, warmup=False, **kwargs))
            return kernel

        def bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
            if recorder.execute:
                recorder._benchmarking += 1
                try:
                    return original_bench(self, *args, config=config, **meta)
                finally:
                    recorder._benchmarking -= 1
            # virtual target: compile the config as Autotuner._bench would run it (its hooks first:
            # a config's pre_hook sets the block shape of the program's tensor descriptors), measure
            # nothing; equal scores keep the first. A config that cannot compile scores inf, as there.
            from triton.compiler.errors import CompileTimeAssertionFailure
            from triton.runtime.errors import OutOfResources, PTXASError
            current = dict(meta, **config.all_kwargs())
            full_nargs = {**self.nargs, **current}
            try:
                if config.pre_hook:
                    config.pre_hook(full_nargs)
                self.pre_hook(full_nargs)
                self.fn.run(*args, **{**current, "warmup": True})
                self.post_hook(full_nargs, exception=None)
            except (OutOfResources, CompileTimeAssertionFailure, PTXASError):
                return [float("inf")] * 3
            return [0.0, 0.0, 0.0]

        def compiled_launch(self: Any, grid: Any) -> Callable[..., None]:
            # a kernel compiled by `kernel.warmup(...)` (or `triton.compile`), launched as
            # `compiled[grid](...)`: on a virtual target it loads (its registers, shared memory
            # checked) and the launch is recorded, not run
            self._init_handles()
            line = _launch_line(recorder.user_path)

            def runner(*args: Any, stream: Any = None) -> None:
                recorder._record_compiled(self, grid, args, line)
            return runner

        JITFunction.run = run
        autotuner.Autotuner._bench = bench
        original_getitem = CompiledKernel.__getitem__
        if not self.execute:
            CompiledKernel.__getitem__ = compiled_launch
        try:
            yield self
        finally:
            JITFunction.run = original_run
            autotuner.Autotuner._bench = original_bench
            CompiledKernel.__getitem__ = original_getitem

    def _record_compiled(self, kernel: Any, grid: Any, args: tuple, line: int | None) -> None:
        names = list(getattr(getattr(kernel.src, "fn", None), "arg_names", []) or [])
        arguments = [{"name": names[i] if i < len(names) else f"arg{i}", **_describe_arg(value)}
                     for i, value in enumerate(args)]
        resolved = [int(g) for g in (tuple(grid) + (1, 1, 1))[:3]]
        self.launches.append(Launch(kernel=kernel.name, grid=resolved, compile_hash=str(kernel.hash),
                                    arguments=arguments, line=line,
                                    note="virtual target: a compiled kernel launched directly; compiled, "
                                         "not executed"))

    def _record(self, fn: Any, kernel: Any, args: tuple, kwargs: dict, grid: Any, relaunch: Callable[[], Any]) -> None:
        params = list(fn.signature.parameters)
        bound = fn.signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
        bound.apply_defaults()
        meta = dict(bound.arguments)
        resolved = grid(meta) if callable(grid) else grid
        resolved = [int(g) for g in (tuple(resolved) + (1, 1, 1))[:3]]
        constexpr_names = {p.name for p in fn.params if p.is_constexpr}
        arguments = []
        for name in params:
            if name not in meta:
                continue
            entry = {"name": name, "constexpr": name in constexpr_names, **_describe_arg(meta[name])}
            arguments.append(entry)
        for name, value in kwargs.items():
            if name not in params and name not in ("debug", "instrumentation_mode", "fpsan_homomorphic_casts"):
                arguments.append({"name": name, "option": True, **_describe_arg(value)})
        launch = Launch(kernel=fn.__name__, grid=resolved, compile_hash=str(getattr(kernel, "hash", "")),
                        arguments=arguments, line=_launch_line(self.user_path))
        if self.execute:
            import triton.testing
            median, p20, p80 = triton.testing.do_bench(relaunch, quantiles=[0.5, 0.2, 0.8])
            launch.timing_ms = {"median": median, "p20": p20, "p80": p80}
            launch.note = "timed by re-running the launch with triton.testing.do_bench"
        else:
            launch.note = "virtual target: compiled, not executed"
        self.launches.append(launch)

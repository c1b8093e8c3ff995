"""The checks and benchmarks a published kernel program runs after its kernels, answered without
values on a virtual GPU, where nothing runs and tensors are fake (shapes, no values).

Programs written the way Triton's tutorials and Helion's and CuTe DSL's examples are compare each
kernel's output with PyTorch's (`torch.testing.assert_close`, `triton.testing.assert_close`,
`torch.allclose`, `torch.equal`, Helion's `run_example`) and time it (`triton.testing.do_bench`,
`do_bench_cudagraph`, Helion's `do_bench`, a `triton.testing.perf_report` benchmark's `.run(...)`,
CuTe DSL's `cutlass.cute.testing.benchmark`, `torch.cuda.Event` pairs). On fake tensors a
comparison raises PyTorch's "If you are a user and see this message please file an issue", and the
program's other kernels were never compiled.
While such a program runs on a virtual target:

- a comparison is not made; it returns as a passed one would, and says "not compared";
- a benchmark calls the function it times once (so every kernel it launches compiles) and returns
  NaN milliseconds (a list of NaN where quantiles were asked for), saying "not timed" (no invented
  time);
- a `perf_report` benchmark's `.run(...)` calls its function once per line (provider) at the
  first x value, each `do_bench` inside it answered as above; nothing is plotted or printed, and a
  `return_df=True` gets a table of NaN;
- CuTe DSL's `benchmark` calls the compiled function once on its arguments; NaN microseconds;
- CUTLASS's `tune` (`cutlass.testing`, `cutlass.cute.testing`) and `autotune_jit` make, compile and
  call each config once and keep the first that compiled (no time can choose);
- a vendor library's call (cuBLAS through Triton's `nvidia.cublas.CublasLt`, the tutorials'
  baseline) runs nothing and says so;
- a `torch.cuda.Event` records nothing; `elapsed_time` is NaN, saying "not timed"; its raw handle
  (`cuda_event`), made when it is first recorded, is a number no driver knows;
- a CUDA graph (`torch.cuda.CUDAGraph`, captured in `torch.cuda.graph(...)`) captures nothing: the
  calls made in the capture are compiled as any other; `replay()` runs nothing and says so;
- Triton's profiler (proton) starts no session, saying "not profiled": its scopes are plain calls,
  and a program that then imports its viewer to read the profile stops there (none was written);
- Helion's `run_example` calls each kernel and baseline once on its arguments (and their backward
  once, with `bwd=True`), compares and times nothing, and says so.

Each is a notice with the user's line (`notices`), shown as the `run.notices` stage.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import itertools
import math
import sys
from typing import Any, Callable, Iterator
from unittest import mock

from compiler.user_code import line_on_stack

NOT_COMPARED = "not compared: nothing ran on the virtual GPU (its tensors are fake: shapes and dtypes, no values)"
NOT_TIMED = "not timed: nothing ran on the virtual GPU; the function was called once, so its kernels compiled"
NOT_PROFILED = ("not profiled: nothing ran on the virtual GPU, so Triton's profiler records nothing and writes no "
                "profile; its scopes ran as plain calls")
PROFILE_NOT_WRITTEN = ("the program stopped here: it reads the profile Triton's profiler writes after a run, and "
                       "nothing ran on the virtual GPU, so none was written. What it compiled before this line is "
                       "kept; nothing after this line ran")
GRAPH_NOT_REPLAYED = ("not replayed: nothing ran on the virtual GPU; the calls made while capturing were compiled "
                      "as they were made")
EVENT_NOT_TIMED = "not timed: nothing ran on the virtual GPU, so no time passed between the events (NaN)"


def _is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(value, FakeTensor)


class VirtualChecks:
    def __init__(self, path: str):
        self.path = path
        self.notices: list[dict[str, Any]] = []

    def note(self, call: str, said: str, line: int | None = None) -> None:
        """A notice at `line`, or at the user's innermost line on the stack; a loop says it once."""
        line = line or line_on_stack(self.path)
        if not any(n["line"] == line and n["call"] == call for n in self.notices):
            self.notices.append({"line": line, "call": call, "said": said})

    def text(self) -> str:
        return "".join(f"line {n['line'] or '?'}: {n['call']}: {n['said']}\n" for n in self.notices)

    def add_stage(self, bundle: Any) -> None:
        """The notices as the job's `run.notices` stage (none: no stage), each linked to its line."""
        if not self.notices:
            return
        bundle.add("run.notices", f"Calls not run ({len(self.notices)})", "Run", "text", self.text(),
                   source_map=[[n, notice["line"]] for n, notice in enumerate(self.notices, start=1)
                               if notice["line"]],
                   meta={"count": len(self.notices), "note": "what the program asked of a virtual device that "
                                                             "needs values: nothing ran, so nothing was compared "
                                                             "or timed (compiler/kernels/virtual_checks.py)"})

    def stopped(self, exc: BaseException, path: str) -> bool:
        """True, with a notice at its line, when `exc` is the program reading a fake tensor's value
        (compiler/kernels/value_reads.py): the program's end on a virtual target, not an error."""
        from compiler import user_code
        from compiler.kernels.value_reads import STOPPED, ValueRead, is_value_read
        if not is_value_read(exc):
            return False
        if isinstance(exc, ValueRead):
            self.note(exc.what, exc.said, exc.line)
        else:
            self.note("a tensor's value read", STOPPED, user_code.user_line(exc, path))
        return True

    @contextlib.contextmanager
    def installed(self, libraries: tuple[str, ...] = ("triton",)) -> Iterator["VirtualChecks"]:
        """The checks and benchmarks of torch and of the `libraries` the language's programs use
        ("triton", "helion", "cutlass"), answered without values while the context is open."""
        import torch
        patches: list[tuple[Any, str, Any]] = [
            (torch.testing, "assert_close", self._comparison("torch.testing.assert_close")),
            (torch, "allclose", self._predicate("torch.allclose", torch.allclose)),
            (torch, "equal", self._predicate("torch.equal", torch.equal)),
            (torch.Tensor, "allclose", self._predicate("Tensor.allclose", torch.Tensor.allclose)),
            (torch.Tensor, "equal", self._predicate("Tensor.equal", torch.Tensor.equal)),
            (torch.cuda, "Event", self._event_class()),
            *zip((torch.cuda, torch.cuda), ("CUDAGraph", "graph"), self._graph_classes()),
        ]
        if "triton" in libraries:
            import triton.testing
            patches += [
                (triton.testing, "assert_close", self._comparison("triton.testing.assert_close")),
                (triton.testing, "do_bench", self._benchmark("triton.testing.do_bench")),
                (triton.testing, "do_bench_cudagraph", self._benchmark("triton.testing.do_bench_cudagraph")),
                (triton.testing.Mark, "run", self._perf_report_run()),
            ]
            try:  # cuBLAS through Triton's own binding, the tutorials' baseline
                from triton._C.libtriton import nvidia
                patches.append((nvidia.cublas, "CublasLt", self._library_class("cuBLAS", "CublasLt")))
            except ImportError:
                pass
            patches += self._profiler_patches()
        if "helion" in libraries:
            import helion._testing as helion_testing
            patches += [(helion_testing, "run_example", self._run_example),
                        (helion_testing, "do_bench", self._benchmark("helion._testing.do_bench"))]
        if "cutlass" in libraries:
            import cutlass.cute.testing as cute_testing
            patches += [(cute_testing, "benchmark", self._cute_benchmark("cutlass.cute.testing.benchmark")),
                        (cute_testing, "tune", self._cute_tune("cutlass.cute.testing.tune"))]
            try:  # CUTLASS's examples also import the benchmark and autotuner of `cutlass.testing`
                import cutlass.testing as cutlass_testing
            except ImportError:
                cutlass_testing = None
            if cutlass_testing is not None:
                patches += [(cutlass_testing, "benchmark", self._cute_benchmark("cutlass.testing.benchmark")),
                            (cutlass_testing, "tune", self._cute_tune("cutlass.testing.tune")),
                            # what cute.testing.autotune_jit times each config with
                            (cutlass_testing, "_benchmark_for_autotune", self._autotune_benchmark)]
        with contextlib.ExitStack() as stack:
            for owner, name, value in patches:
                if hasattr(owner, name):
                    stack.enter_context(mock.patch.object(owner, name, value))
            if "triton" in libraries:
                stack.enter_context(self._profile_reads_stop())
            yield self

    def _profiler_patches(self) -> list[tuple[Any, str, Any]]:
        """Triton's profiler (proton, `import triton.profiler as proton`): `start` (and `@proton.profile`)
        records nothing, saying "not profiled", so profiling stays off and its scopes are plain calls;
        `activate`, `deactivate` and `finalize` have no session to act on."""
        try:
            import triton.profiler as proton
        except ImportError:
            return []

        def start(name: Any = None, *args: Any, **kwargs: Any) -> int:
            self.note("triton.profiler.start", NOT_PROFILED)
            return 0

        def no_session(*args: Any, **kwargs: Any) -> None:
            return None

        # `proton.profile` calls its module's own `start`; the package holds the same names
        owners = [proton, sys.modules.get("triton.profiler.profile")]
        return [(owner, name, start if name == "start" else no_session)
                for owner in owners if owner is not None for name in ("start", "activate", "deactivate", "finalize")]

    @contextlib.contextmanager
    def _profile_reads_stop(self) -> Iterator[None]:
        """Importing Triton's profile viewer (`triton.profiler.viewer`, which reads the profile a
        run wrote) ends the program there: no profile was written (value_reads.ValueRead)."""
        from compiler.kernels.value_reads import ValueRead
        checks = self

        class ProfileReader(importlib.abc.MetaPathFinder):
            def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
                if name == "triton.profiler.viewer":
                    raise ValueRead("import triton.profiler.viewer", line_on_stack(checks.path), PROFILE_NOT_WRITTEN)
                return None

        reader = ProfileReader()
        sys.meta_path.insert(0, reader)
        try:
            yield
        finally:
            sys.meta_path.remove(reader)

    def _comparison(self, name: str) -> Callable[..., None]:
        def compare(*args: Any, **kwargs: Any) -> None:
            self.note(name, NOT_COMPARED)
        return compare

    def _predicate(self, name: str, original: Callable[..., bool]) -> Callable[..., bool]:
        """`torch.allclose`/`torch.equal`: True ("not compared") when a tensor is fake; on real
        tensors (made on the CPU) PyTorch's own answer."""
        def predicate(*args: Any, **kwargs: Any) -> bool:
            if not any(_is_fake(a) for a in (*args, *kwargs.values())):
                return original(*args, **kwargs)
            self.note(name, NOT_COMPARED)
            return True
        return predicate

    def _benchmark(self, name: str) -> Callable[..., Any]:
        def bench(fn: Callable[[], Any], *args: Any, quantiles: Any = None, return_mode: str = "mean",
                  **kwargs: Any) -> Any:
            fn()
            self.note(name, NOT_TIMED)
            if quantiles is not None:
                return [math.nan] * len(quantiles)
            return [math.nan] if return_mode == "all" else math.nan
        return bench

    def _cute_benchmark(self, name: str) -> Callable[..., float]:
        """CuTe's `benchmark` (`cutlass.cute.testing`'s and `cutlass.testing`'s): the compiled
        function called once on its arguments; microseconds NaN."""
        def bench(callable: Callable[..., Any], *, kernel_arguments: Any = None,
                  workspace_generator: Callable[[], Any] | None = None, **options: Any) -> float:
            arguments = kernel_arguments if kernel_arguments is not None else \
                workspace_generator() if workspace_generator is not None else None
            callable(*getattr(arguments, "args", ()), **getattr(arguments, "kwargs", {}))
            self.note(name, NOT_TIMED)
            return math.nan
        return bench

    def _cute_tune(self, name: str) -> Callable[..., dict[str, Any]]:
        def tune(func: Callable[..., Callable[[], Any]], params_dict: dict[str, list[Any]] | None = None,
                 kernel_arguments: Any = None, **options: Any) -> dict[str, Any]:
            """CUTLASS's `tune`: each config's function made and called once, in CUTLASS's order, so
            that every config compiles; a config that raises is skipped, as CUTLASS skips it. No time
            can pick one, so the first config that compiled is returned. When none compiled, the last
            config's own error is raised (CUTLASS says only "No best kernel found", which hides why)."""
            import itertools
            if params_dict is None:
                raise ValueError("params_dict must be provided")
            args, kwargs = getattr(kernel_arguments, "args", ()), getattr(kernel_arguments, "kwargs", {})
            configs = [dict(zip(params_dict, values)) for values in itertools.product(*params_dict.values())]
            compiled: list[dict[str, Any]] = []
            failure: Exception | None = None
            for config in configs:
                try:
                    func(*args, **{**kwargs, **config})()
                except Exception as e:  # noqa: BLE001 - CUTLASS's tune skips a config that raises (a value read is no Exception)
                    failure = e
                    continue
                compiled.append(config)
            self.note(name, f"not timed: nothing ran on the virtual GPU; each of the {len(configs)} configs was "
                            f"made and called once ({len(compiled)} compiled), and the first that compiled is "
                            f"returned: {compiled[0] if compiled else 'none'}")
            if not compiled:
                raise failure if failure is not None else ValueError("No best kernel found")
            return compiled[0]
        return tune

    def _autotune_benchmark(self, compiled: Callable[..., Any], *args: Any, **options: Any) -> float:
        """What CuTe's `autotune_jit` times each config with: the compiled function called once (so
        every config compiles and is recorded) and 0.0 returned, so that its search keeps the first
        config that compiled, as no time can choose (the notice says so; the 0.0 is shown nowhere)."""
        timing = {"warmup_iterations", "iterations", "use_cold_l2", "print_verbose", "current_stream"}
        compiled(*args, **{k: v for k, v in options.items() if k not in timing})
        self.note("cutlass.cute.testing.autotune_jit", "not timed: nothing ran on the virtual GPU; each config was "
                                                       "compiled and called once, and the first that compiled is "
                                                       "kept")
        return 0.0

    def _perf_report_run(self) -> Callable[..., Any]:
        checks = self

        def run(mark: Any, show_plots: bool = False, print_data: bool = False, save_path: str = "",
                return_df: bool = False, **kwargs: Any) -> Any:
            import triton.testing
            single = isinstance(mark.benchmarks, triton.testing.Benchmark)
            tables = []
            for bench in [mark.benchmarks] if single else mark.benchmarks:
                x_names = list(bench.x_names)
                first = bench.x_vals[0] if bench.x_vals else None
                x = list(first) if isinstance(first, (list, tuple)) else [first] * len(x_names)
                x_args = dict(zip(x_names, x))
                for y in bench.line_vals:
                    mark.fn(**x_args, **{bench.line_arg: y}, **bench.args, **kwargs)
                at = ", ".join(f"{k}={v}" for k, v in x_args.items())
                checks.note(f"triton.testing.perf_report {bench.plot_name or mark.fn.__name__}.run",
                            f"not timed: called once per line ({', '.join(map(str, bench.line_names))}) at the "
                            f"first x value ({at}), so their kernels compiled; the other {len(bench.x_vals) - 1} "
                            "x values were not run, and nothing was plotted or printed")
                if return_df:
                    import pandas as pd
                    labels = [f"{n} ({bench.ylabel})" for n in bench.line_names]
                    rows = [(list(v) if isinstance(v, (list, tuple)) else [v] * len(x_names))
                            + [math.nan] * len(labels) for v in bench.x_vals]
                    tables.append(pd.DataFrame(rows, columns=x_names + labels))
            if return_df:
                return tables[0] if single else tables
            return None
        return run

    def _library_class(self, library: str, name: str) -> type:
        """A vendor library's handle (cuBLAS's `CublasLt(workspace)`), made without the library: each
        call of it runs nothing, saying so; the output tensors it was given keep no values, as
        every tensor on the virtual GPU."""
        checks = self

        class NotRun:
            def __init__(self, *args: Any, **kwargs: Any):
                pass

            def __getattr__(self, method: str) -> Callable[..., None]:
                def call(*args: Any, **kwargs: Any) -> None:
                    checks.note(f"{library} {name}.{method}", f"not run: {library} runs on the GPU, and nothing ran on "
                                                             "the virtual GPU")
                return call

        NotRun.__name__ = name
        return NotRun

    def _event_class(self) -> type:
        checks = self
        handles = itertools.count(1)

        class VirtualEvent:
            """`torch.cuda.Event` on a virtual GPU: nothing ran between two of them. Its raw handle
            (`cuda_event`) is 0 until it is first recorded, as PyTorch makes the CUDA event then;
            after that, a number of its own that no driver knows (a launch that names it as an
            attribute, CuTe DSL's launch-completion event, is recorded, not run)."""

            def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                         **kwargs: Any):
                self.enable_timing = enable_timing
                self.cuda_event = 0

            def record(self, stream: Any = None) -> None:
                if not self.cuda_event:
                    self.cuda_event = next(handles)

            def wait(self, stream: Any = None) -> None:
                pass

            def synchronize(self) -> None:
                pass

            def query(self) -> bool:
                return True

            def elapsed_time(self, end_event: Any) -> float:
                checks.note("torch.cuda.Event.elapsed_time", EVENT_NOT_TIMED)
                return math.nan

        return VirtualEvent

    def _graph_classes(self) -> tuple[type, type]:
        """`torch.cuda.CUDAGraph` and its capture context `torch.cuda.graph(g, stream=...)` on a virtual
        GPU: the calls made while capturing are compiled and recorded as any other (nothing runs, so
        nothing is captured), and `replay()` runs nothing, saying so."""
        checks = self

        class VirtualCUDAGraph:
            def __init__(self, *args: Any, **kwargs: Any):
                pass

            def capture_begin(self, *args: Any, **kwargs: Any) -> None:
                pass

            def capture_end(self) -> None:
                pass

            def replay(self) -> None:
                checks.note("torch.cuda.CUDAGraph.replay", GRAPH_NOT_REPLAYED)

            def reset(self) -> None:
                pass

            def pool(self) -> tuple[int, int]:
                return (0, 0)

        class VirtualCapture:
            def __init__(self, cuda_graph: Any, pool: Any = None, stream: Any = None, *args: Any, **kwargs: Any):
                self.cuda_graph = cuda_graph

            def __enter__(self) -> None:
                self.cuda_graph.capture_begin()

            def __exit__(self, *exc: object) -> None:
                self.cuda_graph.capture_end()

        VirtualCUDAGraph.__name__, VirtualCapture.__name__ = "CUDAGraph", "graph"
        return VirtualCUDAGraph, VirtualCapture

    def _run_example(self, kernel_fn: Any, baseline_fn: Any, args: tuple, kernel_name: str = "helion",
                     baseline_name: str = "torch", **options: Any) -> dict[str, float]:
        kernels = kernel_fn if isinstance(kernel_fn, dict) else {kernel_name: kernel_fn}
        baselines = baseline_fn if isinstance(baseline_fn, dict) else {baseline_name: baseline_fn}
        for fn in (*kernels.values(), *baselines.values()):
            out = fn(*args)
            if options.get("bwd"):  # Helion's run_example then checks the gradients: each backward runs once
                import torch
                out.backward(torch.randn_like(out), retain_graph=True)
        what = "called once each" + (", forward and backward" if options.get("bwd") else "")
        self.note("helion._testing.run_example", f"{', '.join([*kernels, *baselines])} {what}; "
                                                 f"{NOT_COMPARED}; {NOT_TIMED.split(';')[0]}")
        return {name: math.nan for name in (*kernels, *baselines)}

"""The checks and benchmarks a published kernel program runs after its kernels, answered without
values on a virtual GPU, where nothing runs and tensors are fake (shapes, no values).

Programs written the way Triton's tutorials and Helion's examples are compare each kernel's output
with PyTorch's (`torch.testing.assert_close`, `triton.testing.assert_close`, Helion's
`run_example`) and time it (`triton.testing.do_bench`). On fake tensors a comparison raises
PyTorch's "If you are a user and see this message please file an issue", and the program's other
kernels were never compiled. While such a program runs on a virtual target:

- a comparison is not made; it returns as a passed one would, and says "not compared";
- a benchmark calls the function it times once (so every kernel it launches compiles) and returns
  NaN milliseconds, saying "not timed" (no invented time);
- Helion's `run_example` calls each kernel and baseline once on its arguments, compares and times
  nothing, and says so.

Each is a notice with the user's line (`notices`), shown as the `run.notices` stage.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator
from unittest import mock

from compiler.user_code import line_on_stack

NOT_COMPARED = "not compared: nothing ran on the virtual GPU (its tensors are fake: shapes and dtypes, no values)"
NOT_TIMED = "not timed: nothing ran on the virtual GPU; the function was called once, so its kernels compiled"


class VirtualChecks:
    def __init__(self, path: str):
        self.path = path
        self.notices: list[dict[str, Any]] = []

    def _note(self, call: str, said: str) -> None:
        self.notices.append({"line": line_on_stack(self.path), "call": call, "said": said})

    def text(self) -> str:
        return "".join(f"line {n['line'] or '?'}: {n['call']}: {n['said']}\n" for n in self.notices)

    @contextlib.contextmanager
    def installed(self) -> Iterator["VirtualChecks"]:
        import torch
        import triton.testing
        patches: list[tuple[Any, str, Any]] = [
            (torch.testing, "assert_close", self._comparison("torch.testing.assert_close")),
            (triton.testing, "assert_close", self._comparison("triton.testing.assert_close")),
            (triton.testing, "do_bench", self._benchmark("triton.testing.do_bench")),
            (triton.testing, "do_bench_cudagraph", self._benchmark("triton.testing.do_bench_cudagraph")),
        ]
        try:
            import helion._testing as helion_testing
            patches.append((helion_testing, "run_example", self._run_example))
        except ImportError:
            pass
        with contextlib.ExitStack() as stack:
            for owner, name, value in patches:
                if hasattr(owner, name):
                    stack.enter_context(mock.patch.object(owner, name, value))
            yield self

    def _comparison(self, name: str) -> Callable[..., None]:
        def compare(*args: Any, **kwargs: Any) -> None:
            self._note(name, NOT_COMPARED)
        return compare

    def _benchmark(self, name: str) -> Callable[..., float]:
        def bench(fn: Callable[[], Any], *args: Any, **kwargs: Any) -> float:
            fn()
            self._note(name, NOT_TIMED)
            return math.nan
        return bench

    def _run_example(self, kernel_fn: Any, baseline_fn: Any, args: tuple, kernel_name: str = "helion",
                     baseline_name: str = "torch", **options: Any) -> dict[str, float]:
        kernels = kernel_fn if isinstance(kernel_fn, dict) else {kernel_name: kernel_fn}
        baselines = baseline_fn if isinstance(baseline_fn, dict) else {baseline_name: baseline_fn}
        for fn in (*kernels.values(), *baselines.values()):
            fn(*args)
        self._note("helion._testing.run_example", f"{', '.join([*kernels, *baselines])} called once each; "
                                                  f"{NOT_COMPARED}; {NOT_TIMED.split(';')[0]}")
        return {name: math.nan for name in (*kernels, *baselines)}

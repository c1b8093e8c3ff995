"""A program that reads a value of a fake tensor on a virtual device: stopped at that line, as a notice.

Published kernel programs print a result (`print(f"{err.item():.3f}")`), branch on one
(`if torch.allclose(...)`, `if (a - b).abs().max() > tol`), or read one back (`.tolist()`,
`.numpy()`) after their kernels. On a virtual target nothing ran and tensors are fake (shapes and
dtypes, no values), so there is no value to read; the kernels launched before the line were
compiled all the same. While the program runs, reading a value of a fake tensor in the user's own
file (`.item()`, `.tolist()`, `.numpy()`, `bool()`, `float()`, `int()`, `complex()`, a format spec)
raises `ValueRead`, a BaseException (a `try: ... except Exception` in the program does not take it),
which the run turns into the end of the program: the job is done, with a notice naming the line.
A read inside a library the program called shows as PyTorch's DataDependentOutputException, which
`is_value_read` recognises too.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator
from unittest import mock

STOPPED = ("the program stopped here: it reads a value of a tensor, and on a virtual device tensors are fake "
           "(shapes and dtypes, no values; nothing ran). What it compiled before this line is kept; nothing after "
           "this line ran")


class ValueRead(BaseException):
    """The user's line read a value of a fake tensor (`what`: `.item()`, `bool()`, ...), or another
    value only a run on the device makes (`said`: why the program stopped there)."""

    def __init__(self, what: str, line: int | None, said: str = STOPPED):
        super().__init__(f"{what} at line {line}")
        self.what = what
        self.line = line
        self.said = said


def is_value_read(exc: BaseException) -> bool:
    """True for `ValueRead`, or in its chain PyTorch's own error for a fake tensor's value or a
    shape that depends on values (a compile-only run of any language needed a value)."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ValueRead, DataDependentOutputException, DynamicOutputShapeException)):
            return True
        current = current.__cause__ or current.__context__
    return False


@contextlib.contextmanager
def stopped_at_value_reads(path: str) -> Iterator[None]:
    """While the program in `path` runs: its own lines reading a fake tensor's value raise ValueRead."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    def guarded(name: str, original: Callable[..., Any], what: str,
                reads: Callable[..., bool] = lambda *a: True) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            if isinstance(self, FakeTensor) and caller.f_code.co_filename == path and reads(*args):
                raise ValueRead(what, caller.f_lineno)
            return original(self, *args, **kwargs)
        method.__name__ = name
        return method

    reads = {"item": ".item()", "tolist": ".tolist()", "numpy": ".numpy()", "__bool__": "bool()",
             "__float__": "float()", "__int__": "int()", "__complex__": "complex()"}
    with contextlib.ExitStack() as stack:
        for name, what in reads.items():
            stack.enter_context(mock.patch.object(torch.Tensor, name, guarded(name, getattr(torch.Tensor, name), what)))
        # f"{t}" prints the fake tensor's description; f"{t:.3f}" needs its value
        stack.enter_context(mock.patch.object(torch.Tensor, "__format__", guarded(
            "__format__", torch.Tensor.__format__, "a format spec", lambda spec="": bool(spec))))
        yield

"""A program that calls torch.compile itself, run on a virtual GPU or as rank 0 of a virtual world
(pytorch options `target: cuda:*` on a worker without that GPU, `devices: N`): compile-only.

Tutorials, training loops and torchrun scripts make their own tensors, their own models and their
own `torch.compile` calls. On a virtual device nothing can run, so the program runs as written
under the compile-only fake mode (compiler/pytorch/compile_only.py): every tensor it makes is fake
(shape, dtype, device; no values), and each Inductor compile it asks for goes through the same
Inductor backend with the inner compile that lets a compiled graph take fake inputs
(`compile_only.inductor_backend`, built from the call's own `mode`, `options` and `dynamic`).
Everything Dynamo, AOTAutograd and Inductor write is the compilers' own, captured from their trace.

What cannot happen without values is said, never invented, each a notice at the user's line
(the `run.notices` stage):
- CUDA events and `torch.cuda.synchronize()` time nothing: `elapsed_time` is NaN;
- comparisons (`torch.testing.assert_close`) are not made (compiler/kernels/virtual_checks.py);
- max-autotune's benchmarking of candidate kernels needs real tensors: such a call compiles with
  Inductor's default choices, said at its line;
- reading a tensor's value (`.item()`, `bool(t)`, `.tolist()`, a Python `if` on a tensor) ends
  the program there: every compile it made before is kept and the job is done, with a notice
  naming the line.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterator
from unittest import mock

from compiler.user_code import line_on_stack, user_line

NOT_TIMED = ("not timed: nothing runs on a virtual GPU (its tensors are fake: shapes and dtypes, no values); "
             "elapsed_time returns NaN")
NOT_AUTOTUNED = ("max-autotune benchmarks candidate kernels on real tensors, and a virtual GPU runs nothing: this "
                 "call compiled with Inductor's default kernel choices (mode=None), every stage otherwise as asked")
STOPPED = ("the program read a tensor's value here, and on a virtual device its tensors are fake (shapes, no "
           "values), so it ended at this line: every torch.compile it made before is captured, and nothing after "
           "this line ran")


@dataclass
class Notices:
    """What the program asked for that a virtual device cannot do, each at the user's line."""

    path: str
    items: list[dict[str, Any]] = field(default_factory=list)
    modules: list[Any] = field(default_factory=list)  # the nn.Modules the program compiled, in order

    def note(self, call: str, said: str, line: int | None = None) -> None:
        line = line if line is not None else line_on_stack(self.path)
        if not any(n["line"] == line and n["call"] == call for n in self.items):  # a loop says it once
            self.items.append({"line": line, "call": call, "said": said})

    def text(self) -> str:
        return "".join(f"line {n['line'] or '?'}: {n['call']}: {n['said']}\n" for n in self.items)

    def stopped_at(self, exc: BaseException) -> int | None:
        """Record where a program that read a fake tensor's value ended; its line."""
        line = user_line(exc, self.path)
        self.note("a tensor's value read", STOPPED, line)
        return line


@contextlib.contextmanager
def installed(notices: Notices, torch: Any, virtual_gpu: bool) -> Iterator[Notices]:
    """While the program runs: its Inductor compiles compile-only; on a virtual GPU, CUDA timing
    answered without a time and rank 0's set_device accepted; comparisons not made; each a notice."""
    from compiler.pytorch import compile_only

    original_compile = torch.compile

    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(mode=...): the decorator form
            return lambda fn: compile(fn, *args, **kwargs)
        if kwargs.get("backend", "inductor") == "inductor":  # torch.compile's arguments are keywords
            mode, options = kwargs.pop("mode", None), kwargs.pop("options", None)
            if mode is not None and str(mode).startswith("max-autotune"):
                notices.note(f"torch.compile(mode={mode!r})", NOT_AUTOTUNED)
                mode = None
            kwargs["backend"] = compile_only.inductor_backend(mode, options, kwargs.get("dynamic"))
        owner = getattr(model, "__self__", model)  # module.compile() compiles its bound _call_impl
        if isinstance(owner, torch.nn.Module):
            notices.modules.append(owner)
        return original_compile(model, *args, **kwargs)

    class Event:
        """torch.cuda.Event on a virtual GPU: records nothing, times nothing."""

        def __init__(self, *args: Any, **kwargs: Any):
            pass

        def record(self, stream: Any = None) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def wait(self, stream: Any = None) -> None:
            pass

        def query(self) -> bool:
            return True

        def elapsed_time(self, end: Any) -> float:
            notices.note("torch.cuda.Event.elapsed_time", NOT_TIMED)
            return math.nan

    def synchronize(device: Any = None) -> None:
        notices.note("torch.cuda.synchronize", "nothing to wait for: nothing runs on a virtual GPU")

    def set_device(device: Any) -> None:
        # rank 0's device (LOCAL_RANK 0) is the virtual GPU's one device, already current
        pass

    from compiler.kernels.virtual_checks import VirtualChecks
    checks = VirtualChecks(notices.path)
    patches = [(torch, "compile", compile)]
    if virtual_gpu:
        patches += [(torch.cuda, "Event", Event), (torch.cuda, "synchronize", synchronize),
                    (torch.cuda, "set_device", set_device)]
    with contextlib.ExitStack() as stack:
        for owner, name, value in patches:
            stack.enter_context(mock.patch.object(owner, name, value))
        stack.enter_context(checks.installed())
        try:
            yield notices
        finally:
            for item in checks.notices:
                notices.note(item["call"], item["said"], item["line"])

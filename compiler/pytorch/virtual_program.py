"""A program that calls torch.compile itself, run on a virtual GPU or as rank 0 of a virtual world
(pytorch options `target: cuda:*` on a worker without that GPU, `devices: N`): compile-only.

Tutorials, training loops and torchrun scripts make their own tensors, their own models and their
own `torch.compile` calls. On a virtual device nothing can run, so the program runs as written
under the compile-only fake mode (compiler/kernels/compile_only.py): every tensor it makes is fake
(shape, dtype, device; no values), and each Inductor compile it asks for goes through the same
Inductor backend with the inner compile that lets a compiled graph take fake inputs
(`compile_only.compiling_only`: `inductor_backend`, built from the call's own `mode`, `options` and
`dynamic`).
Everything Dynamo, AOTAutograd and Inductor write is the compilers' own, captured from their trace.

What cannot happen without values is said, never invented, each a notice at the user's line
(the `run.notices` stage):
- CUDA events and `torch.cuda.synchronize()` time nothing: `elapsed_time` is NaN, and comparisons
  (`torch.testing.assert_close`) are not made, as in a kernel program
  (compiler/kernels/virtual_checks.py, whose notices these are);
- max-autotune's benchmarking of candidate kernels needs real tensors: such a call compiles with
  Inductor's default choices, said at its line;
- reading a tensor's value (`.item()`, `bool(t)`, `.tolist()`, a Python `if` on a tensor) ends
  the program there (compiler/kernels/value_reads.py): every compile it made before is kept and
  the job is done, with a notice naming the line.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator
from unittest import mock

from compiler.kernels.virtual_checks import VirtualChecks


@contextlib.contextmanager
def installed(checks: VirtualChecks, modules: list[Any], torch: Any, virtual_gpu: bool) -> Iterator[None]:
    """While the program runs: its Inductor compiles compile-only, each nn.Module it compiles
    appended to `modules`; comparisons not made and CUDA events timing nothing (`checks`); on a
    virtual GPU, `synchronize` waiting for nothing and rank 0's set_device accepted; each a notice
    in `checks`."""
    from compiler.kernels import compile_only

    def synchronize(device: Any = None) -> None:
        checks.note("torch.cuda.synchronize", "nothing to wait for: nothing runs on a virtual GPU")

    def set_device(device: Any) -> None:
        # rank 0's device (LOCAL_RANK 0) is the virtual GPU's one device, already current
        pass

    patches = [(torch, "compile", compile_only.compiling_only(torch, checks, modules))]
    if virtual_gpu:
        from compiler.targets.virtual_gpu import STREAMS
        patches += [(torch.cuda, "synchronize", synchronize), (torch.cuda, "set_device", set_device)]
        patches += [(torch.cuda, name, value) for name, value in STREAMS.items()]  # FSDP2's streams
    with contextlib.ExitStack() as stack:
        for owner, name, value in patches:
            stack.enter_context(mock.patch.object(owner, name, value))
        stack.enter_context(checks.installed())
        yield

"""`nn.Module` conversions of a module whose parameters are fake, in a program run on a virtual GPU.

Published kernel programs build their baseline as a module and move it (`nn.Linear(...)
.to(DEVICE).to(torch.float16)`, `.cuda()`, `.half()`). Under the run's FakeTensorMode its
parameters are fake, and `Module._apply` swaps a fake parameter in place, which PyTorch refuses
("_apply(): Couldn't swap Linear.weight": a fake tensor has weak references). While
`convertible()` is open such a conversion assigns each converted parameter and buffer instead:
a Parameter stays a Parameter with its requires_grad, one shared by two modules stays shared, and
one the conversion leaves unchanged is kept; the module is returned, as `_apply` returns it.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator
from unittest import mock


def convert_by_assignment(module: Any, convert: Callable[[Any], Any]) -> Any:
    """`module` with every parameter and buffer of it and its submodules set to `convert(tensor)`."""
    import torch
    done: dict[int, tuple[Any, Any]] = {}  # id(old) -> (old, new): the old one kept alive, its id unique

    def converted(tensor: Any, parameter: bool) -> Any:
        if id(tensor) not in done:
            with torch.no_grad():
                result = convert(tensor)
            if parameter and result is not tensor:
                result = torch.nn.Parameter(result, requires_grad=tensor.requires_grad)
            done[id(tensor)] = (tensor, result)
        return done[id(tensor)][1]

    for sub in module.modules():
        for kind, parameter in ((sub._parameters, True), (sub._buffers, False)):
            for name, tensor in list(kind.items()):
                if tensor is not None:
                    kind[name] = converted(tensor, parameter)
    return module


@contextlib.contextmanager
def convertible() -> Iterator[None]:
    """While open: converting a module that holds a fake tensor assigns (`convert_by_assignment`)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    original = torch.nn.Module._apply

    def apply(module: Any, fn: Callable[[Any], Any], recurse: bool = True) -> Any:
        if recurse and any(isinstance(t, FakeTensor) for sub in module.modules()
                           for t in (*sub._parameters.values(), *sub._buffers.values())):
            return convert_by_assignment(module, fn)
        return original(module, fn, recurse)

    with mock.patch.object(torch.nn.Module, "_apply", apply):
        yield

"""Adapter: the jaxlib module holding XLA's HLO bindings (`hlo_module_from_text`, `HloSharding`,
`hlo_module_to_dot_graph`). jaxlib 0.10 moved them out of `jaxlib._jax` into their own extension,
`jaxlib._hlo`; jaxlib 0.9 (toolchain jax-0.9.2) has them in `jaxlib._jax`. Imported inside the
job's XLA child only (it imports jaxlib)."""
from __future__ import annotations

from types import ModuleType


def hlo_bindings() -> ModuleType:
    """`jaxlib._hlo` (jaxlib >= 0.10), else `jaxlib._jax` (jaxlib 0.9), which has the same names."""
    try:
        import jaxlib._hlo as hlo
    except ModuleNotFoundError as e:
        if e.name != "jaxlib._hlo":
            raise
        from jaxlib import _jax as hlo  # jaxlib < 0.10
    return hlo

"""The corpus of programs written the way each project publishes its own (tutorials, examples, bug
reports), in irscope's own words: one directory per family under tests/programs/, each file a
program as a user would paste it (a main() guard, checks, benchmarks, device lines, several kernels
per file), with nothing added for irscope. A family says which language compiles its programs and
with which options; tests/test_programs_*.py say what each program must produce, and
bench/published_programs.py runs every family (or any directory of programs) and prints the rates.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Family:
    name: str  # its directory under tests/programs/
    language: str
    options: dict = field(default_factory=dict)
    style: str = ""  # whose habits its programs follow

    def programs(self, directory: str = HERE) -> list[str]:
        """The family's program files, sorted."""
        folder = os.path.join(directory, self.name)
        if not os.path.isdir(folder):
            return []
        return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".py"))


FAMILIES = (
    Family("triton", "triton", {"target": "cuda:sm_90"}, "Triton's tutorials"),
    Family("helion", "helion", {"target": "cuda:sm_90"}, "Helion's examples"),
    Family("gluon", "gluon", {"target": "cuda:sm_90"}, "Gluon's tutorials"),
    Family("cute", "cute", {"target": "cuda:sm_90"}, "CuTe DSL's examples"),
    Family("pytorch", "pytorch", {}, "PyTorch's tutorials, training loops and torch.compile bug reports"),
    # torchrun --nproc-per-node 4 on H100s: rank 0 of a virtual world of 4 on a virtual GPU
    Family("distributed", "pytorch", {"target": "cuda:sm_90", "devices": 4},
           "PyTorch's distributed examples (torchrun-style)"),
    Family("kernelbench", "pytorch", {}, "KernelBench problems"),
    Family("jax", "jax", {}, "JAX's documentation and people's scripts"),
)


def family(name: str) -> Family:
    return next(f for f in FAMILIES if f.name == name)

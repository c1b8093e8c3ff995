"""A cache of Inductor's CPU feature probes, shared read-only by PyTorch jobs.

Before it compiles its first CPU kernel, Inductor builds about ten tiny C++ programs to learn which
vector ISAs the host supports (AVX2, AVX512, VNNI, BF16, AMX ...); cold, that is most of a small
model's compile time. The programs and their results depend only on the toolchain and the host,
never on the user's code, so irscope builds them once in a trusted warm-up job (irscope's own
source, in the same sandbox and paths as every job) and seeds each job's private Inductor cache
with them. Nothing else is shared: no FX-graph, AOTAutograd or kernel cache entry, so every stage
of a job is compiled and logged exactly as on a cold machine.
"""
from __future__ import annotations

import os
import shutil

WARMUP_SOURCE = '''import torch


def model(x):
    return torch.relu(x) + 1


example_inputs = (torch.randn(64),)
'''

# Inductor's own kernels start with this include; the ISA probes never do.
_KERNEL_MARK = "torch/csrc/inductor/cpp_prefix.h"
_PROBE_FILES = (".cpp", ".so", ".lock")


def _is_probe_dir(path: str) -> bool:
    names = os.listdir(path)
    if not names or not all(n.endswith(_PROBE_FILES) for n in names):
        return False
    for name in names:
        if name.endswith(".cpp"):
            with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                if _KERNEL_MARK in f.read(4096):
                    return False
    return any(n.endswith(".so") for n in names)


def export_probes(cache_dir: str, dest: str) -> int:
    """Copy the ISA-probe entries of an Inductor cache to `dest`; return how many."""
    os.makedirs(dest, exist_ok=True)
    count = 0
    for name in sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []:
        path = os.path.join(cache_dir, name)
        if os.path.isdir(path) and _is_probe_dir(path):
            shutil.copytree(path, os.path.join(dest, name), ignore=shutil.ignore_patterns("*.lock"))
            count += 1
    return count


def import_probes(src: str, cache_dir: str) -> int:
    """Seed a job's (empty) Inductor cache with the probes; only probe directories are taken."""
    if not os.path.isdir(src):
        return 0
    os.makedirs(cache_dir, exist_ok=True)
    count = 0
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if os.path.isdir(path) and _is_probe_dir(path):
            shutil.copytree(path, os.path.join(cache_dir, name), dirs_exist_ok=True)
            count += 1
    return count

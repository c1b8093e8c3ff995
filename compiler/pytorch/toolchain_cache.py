"""A cache of what Inductor builds from the toolchain alone, shared read-only by PyTorch jobs.

Two things Inductor builds on its first CPU compile depend only on the toolchain and the host,
never on the user's code:

- the CPU feature probes: about ten tiny C++ programs that tell which vector ISAs the host
  supports (AVX2, AVX512, VNNI, BF16, AMX ...), kept in the Inductor cache (TORCHINDUCTOR_CACHE_DIR);
- the precompiled header of `torch/csrc/inductor/cpp_prefix.h` that every CPU kernel includes: a
  ~150 MB `.gch` that g++ takes 6-10 s to build, kept in `torch._inductor.codecache._HEADER_DIR`
  (`<tempfile.gettempdir()>/torchinductor_<user>/precompiled_headers`), outside the Inductor cache.
  Its file name is a hash of the header's preprocessed text, the compiler's version and the full
  command line, so a job whose flags differ simply builds its own.

irscope builds both once in a trusted warm-up job (irscope's own source, in the same sandbox, at
the same paths and with the same flags as every job) and seeds each job with them: the probes are
copied into the job's empty Inductor cache, the headers are linked (read-only, from the toolchain
cache mount) into the job's header directory, where g++ finds `<header>.gch` next to the header
that `-include` names. Nothing else is shared: no FX-graph, AOTAutograd or kernel cache entry, so
every stage of a job is compiled and logged exactly as on a cold machine.

Layout of an exported cache: `isa_probes/<Inductor cache entry>/...` and
`precompiled_headers/<hash>.h`, `<hash>.h.gch`.
"""
from __future__ import annotations

import os
import shutil

WARMUP_SOURCE = '''import torch


def model(x):
    return torch.relu(x) + 1


example_inputs = (torch.randn(64),)
'''

PROBES = "isa_probes"
HEADERS = "precompiled_headers"

# Inductor's own kernels start with this include; the ISA probes never do.
_KERNEL_MARK = "torch/csrc/inductor/cpp_prefix.h"
_PROBE_FILES = (".cpp", ".so", ".lock")
_HEADER_FILES = (".h", ".h.gch")


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


def _header_files(directory: str) -> list[str]:
    """The header and precompiled-header files of a header directory (not its locks or temp files)."""
    if not os.path.isdir(directory):
        return []
    return sorted(n for n in os.listdir(directory)
                  if n.endswith(_HEADER_FILES) and not n.startswith(".") and os.path.isfile(os.path.join(directory, n)))


def export(cache_dir: str, header_dir: str, dest: str) -> dict[str, int]:
    """Copy the ISA-probe entries of an Inductor cache and every precompiled header to `dest`."""
    probes = os.path.join(dest, PROBES)
    os.makedirs(probes, exist_ok=True)
    count = 0
    for name in sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []:
        path = os.path.join(cache_dir, name)
        if os.path.isdir(path) and _is_probe_dir(path):
            shutil.copytree(path, os.path.join(probes, name), ignore=shutil.ignore_patterns("*.lock"))
            count += 1
    headers = os.path.join(dest, HEADERS)
    os.makedirs(headers, exist_ok=True)
    for name in _header_files(header_dir):
        shutil.copyfile(os.path.join(header_dir, name), os.path.join(headers, name))
    return {"isa_probes": count, "precompiled_headers": sum(n.endswith(".gch") for n in _header_files(headers))}


def import_probes(src: str, cache_dir: str) -> int:
    """Seed a job's (empty) Inductor cache with the probes; only probe directories are taken."""
    probes = os.path.join(src, PROBES)
    if not src or not os.path.isdir(probes):
        return 0
    os.makedirs(cache_dir, exist_ok=True)
    count = 0
    for name in sorted(os.listdir(probes)):
        path = os.path.join(probes, name)
        if os.path.isdir(path) and _is_probe_dir(path):
            shutil.copytree(path, os.path.join(cache_dir, name), dirs_exist_ok=True)
            count += 1
    return count


def link_headers(src: str, header_dir: str) -> list[str]:
    """Make the toolchain cache's precompiled headers visible in a job's header directory, as
    links to the read-only cache (a ~150 MB `.gch` is not copied); return the `.gch` names linked.
    The directory itself stays the job's own, so Inductor's `locks/` is writable there."""
    headers = os.path.join(src, HEADERS) if src else ""
    names = _header_files(headers)
    if not names:
        return []
    os.makedirs(header_dir, exist_ok=True)
    for name in names:
        target = os.path.join(header_dir, name)
        if not os.path.lexists(target):
            os.symlink(os.path.join(headers, name), target)
    return [n for n in names if n.endswith(".gch")]


def headers_built(header_dir: str) -> list[str]:
    """The precompiled headers the job built itself: every `.gch` in its header directory that is
    not a link into the toolchain cache (so none when the seeded ones were used as they are)."""
    return [n for n in _header_files(header_dir)
            if n.endswith(".gch") and not os.path.islink(os.path.join(header_dir, n))]

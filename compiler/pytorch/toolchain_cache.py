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

Inductor runs its probes one after another, the first time it needs the ISA: on an AVX-512 host
11 of them, each a g++ build (about 0.8 s) and a child Python that loads it. `probe_isas` runs the
same probes (Inductor's own `VecISA.__bool__` of each ISA this CPU claims) on a thread per ISA:
a worker whose probes are on disk loads them in about half the time (all at once: each is a small
child Python), and on a fresh host the warm-up builds them as many at once as there are CPUs (each
g++ holds about 230 MB, and a warm-up has one job's memory). The results stay in Inductor's own
caches, where its first compile finds them.
"""
from __future__ import annotations

import os
import platform
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

WARMUP_SOURCE = '''import torch


def model(x):
    return torch.relu(x) + 1


example_inputs = (torch.randn(64),)
'''

PROBES = "isa_probes"
HEADERS = "precompiled_headers"

# Inductor's own kernels start with this include; the ISA probes never do.
_KERNEL_MARK = "torch/csrc/inductor/cpp_prefix.h"
# torch 2.14 also writes `<probe>.so.load_ok` once a child Python loaded the probe (then it is not
# loaded again): the marker belongs to the probe and to this host, as the cache does.
_PROBE_FILES = (".cpp", ".so", ".lock", ".so.load_ok")
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
    export_probes(cache_dir, dest)
    export_headers(header_dir, dest)
    return exported(dest)


def export_probes(cache_dir: str, dest: str) -> None:
    """Copy the ISA-probe entries of an Inductor cache to `dest`."""
    probes = os.path.join(dest, PROBES)
    os.makedirs(probes, exist_ok=True)
    for name in probe_entries(cache_dir):
        shutil.copytree(os.path.join(cache_dir, name), os.path.join(probes, name),
                        ignore=shutil.ignore_patterns("*.lock"))


def export_headers(header_dir: str, dest: str) -> None:
    """Copy every precompiled header (and the header beside it) of a header directory to `dest`."""
    headers = os.path.join(dest, HEADERS)
    os.makedirs(headers, exist_ok=True)
    for name in _header_files(header_dir):
        shutil.copyfile(os.path.join(header_dir, name), os.path.join(headers, name))


def exported(dest: str) -> dict[str, int]:
    """What an exported cache holds: its probe entries and precompiled headers."""
    return {"isa_probes": len(probe_entries(os.path.join(dest, PROBES))),
            "precompiled_headers": sum(n.endswith(".gch") for n in _header_files(os.path.join(dest, HEADERS)))}


def probe_entries(cache_dir: str) -> list[str]:
    """The ISA-probe entries of an Inductor cache (its directories that hold probes only)."""
    if not os.path.isdir(cache_dir):
        return []
    return [name for name in sorted(os.listdir(cache_dir))
            if os.path.isdir(os.path.join(cache_dir, name)) and _is_probe_dir(os.path.join(cache_dir, name))]


def probe_libraries(cache_dir: str) -> list[str]:
    """The file names of the ISA probes' libraries in an Inductor cache: each a hash of the probe's
    source, its flags, the compiler and torch, so equal names mean the same probes were built."""
    return sorted(name for entry in probe_entries(cache_dir) for name in os.listdir(os.path.join(cache_dir, entry))
                  if name.endswith(".so"))


def import_probes(src: str, cache_dir: str) -> int:
    """Seed a job's (empty) Inductor cache with the probes; only probe directories are taken."""
    probes = os.path.join(src, PROBES)
    if not src or not os.path.isdir(probes):
        return 0
    os.makedirs(cache_dir, exist_ok=True)
    entries = probe_entries(probes)
    for name in entries:
        shutil.copytree(os.path.join(probes, name), os.path.join(cache_dir, name), dirs_exist_ok=True)
    return len(entries)


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


def probe_isas(built: bool) -> dict[str, object]:
    """Run Inductor's CPU feature probes now, a thread per vector ISA this CPU claims (module doc;
    `built`: their libraries are in the Inductor cache already, only loading them is left), and
    return what they found and how long it took. Only for irscope's own processes before any user
    code: the trusted warm-up and a spare before its job (whose warm-up compile would run the same
    probes one by one); a job whose source sets `cpp.vec_isa_ok` must meet the probes as Inductor
    does, at its first compile."""
    from torch._inductor import cpu_vec_isa
    started = time.perf_counter()
    if platform.machine() in ("x86_64", "AMD64"):
        claimed = cpu_vec_isa.x86_isa_checker()
        # the ISAs valid_vec_isa_list asks about: those whose every feature the CPU claims
        isas = [isa for isa in cpu_vec_isa.supported_vec_isa_list
                if all(feature in claimed for feature in str(isa).split())]
        if isas:
            # Each ISA's probes build on each other (AMX asks AVX-512 VNNI, which asks AVX-512)
            # and each ISA object is probed by one thread only; g++ and the loading child run
            # outside the GIL. The pool's threads end before this returns (a template forks later).
            threads = len(isas) if built else min(len(isas), len(os.sched_getaffinity(0)))
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="irscope-isa-probe") as pool:
                list(pool.map(bool, isas))
    cpu_vec_isa.pick_vec_isa()  # what Inductor's first compile asks, answered from the probes above
    return dict(isas_found() or {}, seconds=round(time.perf_counter() - started, 3))


def isas_found() -> dict[str, object] | None:
    """The vector ISAs Inductor's probes found valid in this process and the one its CPU code
    generation picks (None when nothing asked Inductor yet: a job that compiled no C++)."""
    from torch._inductor import cpu_vec_isa
    if not cpu_vec_isa.valid_vec_isa_list.cache_info().currsize:
        return None
    return {"picked": str(cpu_vec_isa.pick_vec_isa()), "valid": [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]}

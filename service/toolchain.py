"""The versions of what compiles a language in a toolchain, read from package metadata (no compiler
import): part of every cache key, shown on every result. And what a toolchain cache built on this
host depends on besides them (`host_fingerprint`)."""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import platform
import shutil
import subprocess
from typing import Any

from compiler import registry
from service.toolchain_envs import Toolchain


def toolchain(language: str, chain: Toolchain | None = None, options: dict[str, Any] | None = None) -> dict[str, str]:
    """irscope's version and those of `language`'s packages in `chain` (None: the default
    toolchain); another toolchain than the default is named too (`toolchain`), so its jobs are
    keyed apart even where the versions a language names agree. With a job's `options`, only the
    packages that compile that job (Pipeline.packages_used: no CUDA plugin for XLA:CPU)."""
    versions = {"irscope": _version("irscope")}
    if chain is not None and not chain.default:
        versions["toolchain"] = chain.name
    pipeline = registry.get(language)
    for package in pipeline.toolchain_packages if options is None else pipeline.packages_used(options):
        versions[package] = chain.version(package) if chain is not None and not chain.default else _version(package)
    return versions


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


@functools.cache
def host_fingerprint() -> dict[str, str]:
    """What the trusted toolchain cache (ISA probes, precompiled headers) is valid for besides
    the package versions: the machine, its CPU's feature flags (which vector ISAs the probes
    find), the C++ compiler the jobs call (a precompiled header is only good for the compiler
    that built it) and the C library whose headers it includes. Another host, or this one after
    a compiler or CPU change, gets a cache of its own."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags = " ".join(sorted(line.split(":", 1)[1].split()))
                    break
    except OSError:
        pass
    compiler = ""
    path = shutil.which("g++", path="/usr/local/bin:/usr/bin:/bin")
    if path:
        try:
            compiler = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            compiler = "unknown"
    return {"machine": platform.machine(), "cpu_flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
            "cxx": compiler.split("\n", 1)[0], "libc": " ".join(platform.libc_ver())}

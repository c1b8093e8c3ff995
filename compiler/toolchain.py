"""The versions of what compiles a language, read from package metadata (no compiler import):
part of every cache key, shown on every result."""
from __future__ import annotations

import importlib.metadata

from compiler import registry


def toolchain(language: str) -> dict[str, str]:
    versions = {"irscope": _version("irscope")}
    for package in registry.get(language).toolchain_packages:
        versions[package] = _version(package)
    return versions


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"

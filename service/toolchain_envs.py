"""The toolchains installed on this machine: named, pinned Python environments of a language's
compiler packages (torch with the Triton and Helion it pairs with, a standalone Triton, jax and
jaxlib), each beside the project's own environment, which is the default toolchain.

A toolchain `NAME` is a virtual environment in `<toolchains_dir>/NAME`, installed by
`irscope toolchains add NAME` from the lock file `toolchain_locks/NAME.txt` kept in the repository
(written by the first `add` of a name that has none: the registries' resolution of the name's
packages and the job-side packages irscope's code in the sandbox imports). Its manifest
(`irscope-toolchain.json`: every package's version, the size) is written last, after the
environment imported its compiler: a directory without one (an add interrupted, a full disk) is
never offered to jobs, and the next `add` of the name starts it again.

The web side and the service read toolchains from their manifests only; nothing here imports a
compiler."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from compiler.pipeline import DEFAULT_TOOLCHAIN as DEFAULT
from compiler.pipeline import canonical_package

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK_DIR = os.path.join(PROJECT_ROOT, "toolchain_locks")
DEFAULT_DIR = os.path.join(PROJECT_ROOT, "toolchains")
MANIFEST = "irscope-toolchain.json"
_NAME = re.compile(r"^(torch|triton|jax|helion)-(\d+(?:\.\d+){1,3})$")
# What irscope's code in the sandbox imports besides a compiler (compiler/: the bundle's formats,
# drawings, the peak-memory reading) and what pasted programs commonly import (einops in model code,
# tabulate in benchmark tables: Triton's tutorials print with it), pinned at the
# project's own versions (requirements.lock).
JOB_SIDE_PACKAGES = ("msgspec", "defusedxml", "psutil", "graphviz", "numpy", "einops", "tabulate", "protobuf")
# A family's packages besides its own (the project's torch for a standalone Triton: the Triton
# language runs the program's tensors on PyTorch's fake tensors).
_COMPANIONS = {"torch": ("helion",), "triton": ("torch=={torch}",), "jax": ("jaxlib=={version}",),
               "helion": ()}
_INSTALL_TIMEOUT_S = 1800


class ToolchainError(Exception):
    """A toolchain that cannot be added, found or removed; the message says why and what there is."""


@dataclass(frozen=True)
class Toolchain:
    """One installed toolchain, as its manifest describes it."""

    name: str
    prefix: str  # the environment's directory (its sys.prefix)
    versions: dict[str, str]  # every installed distribution (lower-case name) -> version
    size_bytes: int = 0
    installed: str = ""  # when (UTC, ISO 8601)
    install_s: float = 0.0  # how long the add took
    default: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def python(self) -> str:
        return sys.executable if self.default else os.path.join(self.prefix, "bin", "python")

    def version(self, package: str) -> str:
        return self.versions.get(canonical_package(package), "not installed")


def root(directory: str = "") -> str:
    return os.path.abspath(directory or DEFAULT_DIR)


def lock_path(name: str) -> str:
    return os.path.join(LOCK_DIR, f"{name}.txt")


def check_name(name: str) -> re.Match:
    found = _NAME.match(name)
    if found is None:
        raise ToolchainError(f"a toolchain is named after its compiler and version: torch-2.14.1, triton-3.8.0, "
                             f"jax-0.9.2, helion-1.4.0 (not {name!r})")
    return found


@functools.lru_cache(maxsize=1)
def _default_versions() -> dict[str, str]:
    import importlib.metadata
    return {canonical_package(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
            if d.metadata["Name"]}


def default() -> Toolchain:
    return Toolchain(name=DEFAULT, prefix=sys.prefix, versions=_default_versions(), default=True)


def installed(directory: str = "") -> list[Toolchain]:
    """The default toolchain, then every complete one under the toolchains directory, by name."""
    base = root(directory)
    return [default()] + [c for c in (_read(base, name) for name in sorted(_listdir(base))) if c is not None]


def find(name: str, directory: str = "") -> Toolchain | None:
    if name in ("", DEFAULT):
        return default()
    if _NAME.match(name) is None:
        return None
    return _read(root(directory), name)


def _read(base: str, name: str) -> Toolchain | None:
    if _NAME.match(name) is None:
        return None
    prefix = os.path.join(base, name)
    try:
        with open(os.path.join(prefix, MANIFEST), encoding="utf-8") as f:
            data = json.load(f)
        return Toolchain(name=name, prefix=prefix,
                         versions={canonical_package(k): str(v) for k, v in dict(data["versions"]).items()},
                         size_bytes=int(data.get("size_bytes", 0)), installed=str(data.get("installed", "")),
                         install_s=float(data.get("install_s", 0.0)),
                         extra={"lock_sha256": str(data.get("lock_sha256", ""))})
    except (OSError, ValueError, KeyError, TypeError):
        return None


# The packages a toolchain's listing names (GET /api/toolchains, `irscope toolchains list`)
LISTED_PACKAGES = ("torch", "triton", "helion", "jax", "jaxlib", "nvidia-cutlass-dsl")
# What a toolchain supports, each asked of the language that has it: (feature, language, options)
_FEATURES = (("virtual_gpu", "pytorch", {"target": "cuda:sm_90"}),
             ("triton_virtual_targets", "triton", {"target": "cuda:sm_90"}),
             ("helion", "helion", {"target": "cuda:sm_90"}),
             ("xla_gpu", "jax", {"target": "cuda:h100"}),
             ("aotinductor", "pytorch", {"export": True}))


def describe(chain: Toolchain, languages: tuple[str, ...] | list[str]) -> dict:
    """A toolchain as listed: its versions, size, which of `languages` it serves (a job with the
    language's default options would not be refused) and what it supports."""
    from compiler import registry
    from compiler.pipeline import OptionError

    def serves(language: str, options: dict) -> bool:
        if language not in registry.keys():
            return False
        pipeline = registry.get(language)
        if pipeline.made_by_upload and not chain.default:
            return False
        try:
            normalised = pipeline.normalise_options(options)
        except OptionError:
            return False
        return pipeline.toolchain_refusal(normalised, chain.versions) is None

    return {"name": chain.name, "default": chain.default,
            "languages": [language for language in languages if serves(language, {})],
            "versions": {p: chain.version(p) for p in LISTED_PACKAGES if chain.version(p) != "not installed"},
            "supports": {feature: serves(language, options) for feature, language, options in _FEATURES},
            "size_bytes": chain.size_bytes if not chain.default else _default_size(chain.prefix),
            "installed": chain.installed, "install_s": chain.install_s}


_LISTING_TTL_S = 30.0
_listing: dict[tuple, tuple[float, list[dict]]] = {}
_listing_lock = threading.Lock()


def listing(directory: str, languages: tuple[str, ...] | list[str]) -> list[dict]:
    """`describe` of every installed toolchain (the default first), as GET /api/toolchains and the
    page's picker show them; kept for a few seconds, so a page view reads no manifests and walks no
    disk (the default's size is walked once per process)."""
    key = (root(directory), tuple(languages))
    now = time.monotonic()
    with _listing_lock:
        cached = _listing.get(key)
        if cached is not None and now - cached[0] < _LISTING_TTL_S:
            return cached[1]
        rows = [describe(chain, languages) for chain in installed(directory)]
        _listing[key] = (now, rows)
        return rows


def main_versions(row: dict, language: str) -> str:
    """A listed toolchain's versions of what compiles `language` ("torch 2.14.1 · triton 3.8.0")."""
    from compiler import registry
    packages = [p for p in registry.get(language).toolchain_packages if p in LISTED_PACKAGES]
    return " · ".join(f"{p} {row['versions'][p]}" for p in packages if p in row["versions"])


def version_order(chains: list[Toolchain], package: str) -> list[Toolchain]:
    """`chains` in the order of `package`'s version (oldest first; "not installed" ones left out)."""
    def key(chain: Toolchain) -> tuple:
        return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.+]", chain.version(package))[:4])
    return sorted((c for c in chains if c.version(package) != "not installed"), key=key)


# --- adding and removing -------------------------------------------------------------------------

def _project_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    with open(os.path.join(PROJECT_ROOT, "requirements.lock"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                name, version = line.split("==", 1)
                pins[name.strip().lower()] = version.strip()
    return pins


def requirements(name: str) -> list[str]:
    """What pip resolves for a toolchain that has no lock file yet: the family's package at the
    name's version, its companions, and the job-side packages at the project's versions."""
    family, version = check_name(name).groups()
    pins = _project_pins()
    specs = [f"{family}=={version}"]
    specs += [c.format(version=version, torch=pins["torch"]) for c in _COMPANIONS[family]]
    named = {re.split(r"[=<>!~ ]", s, maxsplit=1)[0].lower() for s in specs}
    specs += [f"{p}=={pins[p]}" for p in JOB_SIDE_PACKAGES if p in pins and p not in named]
    return specs


def add(name: str, directory: str = "", progress: Callable[[str], None] = print) -> Toolchain:
    """Install toolchain `name` (from its lock file, or resolved and locked when it has none);
    return it. Already installed: returned as it is."""
    check_name(name)
    base = root(directory)
    existing = _read(base, name)
    if existing is not None and existing.extra.get("lock_sha256") == _lock_digest(name):
        progress(f"{name} is installed already ({existing.prefix})")
        return existing
    if existing is not None:
        progress(f"{os.path.relpath(lock_path(name), PROJECT_ROOT)} changed since {name} was installed: installing "
                 "it again")
        remove(name, directory)
    prefix = os.path.join(base, name)
    started = time.monotonic()
    if not os.path.exists(lock_path(name)):
        _check_available(name)
    if os.path.exists(prefix):
        progress(f"{prefix} has no manifest (an add that did not finish): starting it again")
        shutil.rmtree(prefix)
    os.makedirs(base, exist_ok=True)
    env_python = os.path.join(prefix, "bin", "python")
    try:
        _install(name, prefix, env_python, progress)
        versions = _versions_of(env_python, name)
    except BaseException:
        shutil.rmtree(prefix, ignore_errors=True)  # a failed install leaves nothing behind
        raise
    size = _size(prefix)
    manifest = {"name": name, "versions": versions, "size_bytes": size, "lock_sha256": _lock_digest(name),
                "installed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "install_s": round(time.monotonic() - started, 1)}
    tmp = os.path.join(prefix, MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(prefix, MANIFEST))
    chain = _read(base, name)
    assert chain is not None
    progress(f"{name}: installed in {manifest['install_s']:.0f} s, {size / 2**30:.2f} GiB")
    return chain


def remove(name: str, directory: str = "") -> None:
    """Delete toolchain `name`'s environment (its finished jobs' stages stay in the store)."""
    if name in ("", DEFAULT):
        raise ToolchainError("the default toolchain is the project's own environment; it cannot be removed")
    check_name(name)
    prefix = os.path.join(root(directory), name)
    if not os.path.isdir(prefix):
        raise ToolchainError(f"no toolchain {name!r} is installed; installed: {names(directory)}")
    # the manifest first: from this moment the toolchain is not offered to jobs
    try:
        os.unlink(os.path.join(prefix, MANIFEST))
    except FileNotFoundError:
        pass
    shutil.rmtree(prefix)


def names(directory: str = "") -> str:
    return ", ".join(c.name for c in installed(directory))


def all_names(directory: str = "") -> list[str]:
    """Every name the lock files and the toolchains directory know (installed or not)."""
    found = {f[:-4] for f in _listdir(LOCK_DIR) if f.endswith(".txt")} | set(_listdir(root(directory)))
    return sorted(n for n in found if _NAME.match(n))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _base_python() -> str:
    """The interpreter the project's environment was made from (a toolchain is its sibling, not a
    child of the project's venv)."""
    candidate = getattr(sys, "_base_executable", "") or sys.executable
    return candidate if os.path.exists(candidate) else sys.executable


def _install(name: str, prefix: str, env_python: str, progress: Callable[[str], None]) -> None:
    """A new environment at `prefix` with `name`'s packages: from its lock file, or resolved and
    locked when it has none."""
    _run([_base_python(), "-m", "venv", prefix], "create the environment")
    lock = lock_path(name)
    pip = [env_python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    if os.path.exists(lock):
        progress(f"installing {name} from {os.path.relpath(lock, PROJECT_ROOT)}")
        _run(pip + ["--no-deps", "-r", lock], f"install {name}")
        return
    specs = requirements(name)
    progress(f"resolving {name}: {' '.join(specs)}")
    _run(pip + specs, f"install {name}")
    _write_lock(name, env_python, specs)
    progress(f"wrote {os.path.relpath(lock, PROJECT_ROOT)} (commit it: the lock file is how every machine "
             "installs the same toolchain)")


def _run(argv: list[str], what: str) -> str:
    """Run one step of an install; a ToolchainError saying what could not be done (for pip, the
    package the registries lack and the versions they have)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"could not {what}: it took over {_INSTALL_TIMEOUT_S} s") from None
    if done.returncode == 0:
        return done.stdout
    text = done.stderr + done.stdout
    missing = re.search(r"Could not find a version that satisfies the requirement (\S+) \(from versions: ([^)]*)\)",
                        text)
    if missing:
        raise ToolchainError(f"the package registries have no {missing.group(1)}; they have: "
                             f"{missing.group(2).strip() or 'none'}")
    raise ToolchainError(f"could not {what}:\n{text.strip()[-3000:]}")


def _lock_digest(name: str) -> str:
    try:
        with open(lock_path(name), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""


def _check_available(name: str) -> None:
    """A ToolchainError naming the versions the registries have, when they lack `name`'s."""
    family, version = check_name(name).groups()
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", family, "--disable-pip-version-check"],
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return  # the install says what the registries lack
    listed = re.search(r"Available versions: ([^\n]*)", done.stdout)
    if listed is None:
        return
    versions = [v.strip() for v in listed.group(1).split(",") if v.strip()]
    if version not in versions:
        raise ToolchainError(f"the package registries have no {family} {version}; they have {family} "
                             f"{', '.join(versions)}")


def _write_lock(name: str, env_python: str, specs: list[str]) -> None:
    frozen = _run([env_python, "-m", "pip", "freeze", "--all", "--exclude", "pip", "--exclude", "setuptools",
                   "--exclude", "wheel"], "list what was installed")
    header = (f"# Toolchain {name}: irscope toolchains add {name} installs exactly this (pip install --no-deps -r).\n"
              f"# Resolved by the registries from: {' '.join(specs)}\n")
    os.makedirs(LOCK_DIR, exist_ok=True)
    with open(lock_path(name), "w", encoding="utf-8") as f:
        f.write(header + "".join(sorted(frozen.splitlines(keepends=True), key=str.lower)))


_VERSIONS = ("import importlib.metadata, json, re; print(json.dumps({re.sub(r'[-_.]+', '-', "
             "d.metadata['Name']).lower(): d.version for d in importlib.metadata.distributions() "
             "if d.metadata['Name']}))")


def _versions_of(env_python: str, name: str) -> dict[str, str]:
    """Every distribution of the new environment, after it imported its family's package (an
    environment whose compiler does not import is not a toolchain)."""
    family = check_name(name).group(1)
    _run([env_python, "-c", f"import {family}"], f"import {family} in the new {name} environment")
    return json.loads(_run([env_python, "-c", _VERSIONS], "read the installed versions"))


@functools.lru_cache(maxsize=1)
def _default_size(path: str) -> int:
    return _size(path)


def _size(path: str) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for file in files:
            try:
                total += os.lstat(os.path.join(folder, file)).st_size
            except OSError:
                pass
    return total

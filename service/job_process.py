"""One job process (compiler/sandbox_entry.py, in the sandbox) for one job directory: how this machine
runs them (`RunnerConfig`), what the process runs and sees, its environment (where it is, never
what the job may do: that is the job file's), and the job file that hands it its job.

Used by the runner for a job's own process, by the spares (a process started before its job) and
by the toolchain warm-up.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field

from compiler import registry
from compiler.model import JOB_FILE, SPARE_READY, JobFile, JobSettings, Request
from service import sandbox
from service.toolchain import host_fingerprint
from service.toolchain_envs import Toolchain

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where a job sees the trusted toolchain cache, read-only.
TOOLCHAIN_MOUNT = "/opt/irscope-toolchain"


@dataclass(frozen=True)
class RunnerConfig:
    """How jobs run on this machine (the embedded server's pool, or one `irscope worker`)."""

    data_dir: str
    workers: int  # jobs at once
    use_bwrap: bool
    job: JobSettings = field(default_factory=JobSettings)  # every job's settings and limits
    keep_job_dirs: bool = False
    spare_workers: int = 0  # job processes started ahead of demand, per language that can use them
    spare_memory_mb: int = 0  # what the spares may hold in memory together (0: no bound)
    spare_template_slots: int = 0  # jobs one spare template forks (0: a spare is one started process)
    user: sandbox.SandboxUser | None = None  # the host user jobs run as (with a root server)
    # what one client's jobs and uploads may keep in the store (setting client_store_mb; 0: no
    # quota): admission checks it before a job, the runner while the job's stages are stored
    client_store_bytes: int = 0
    toolchains_dir: str = ""  # the installed toolchains (service/toolchain_envs.py); "": the default place

    @property
    def job_disk_bytes(self) -> int:
        """The size of each job's /job tmpfs; 0: a plain directory (no cap, or no sandbox)."""
        return self.job.job_disk_mb << 20 if self.use_bwrap else 0


def environment(config: RunnerConfig, language: str, versions: dict[str, str], chain: Toolchain | None = None,
                **extra: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The job process's whole environment (the sandbox clears everything else) and its read-only
    binds: the interpreter's paths (`chain`'s, None: the default toolchain's) and, when one was
    built, the language's toolchain cache. `extra` are the process's own variables
    (IRSCOPE_SPARE_FOR, IRSCOPE_EXPORT_TOOLCHAIN_CACHE; an empty one is left out)."""
    venv_bin = os.path.dirname(chain.python if chain is not None else sys.executable)
    env = {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": PROJECT_ROOT, "PYTHONUNBUFFERED": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", "USER": "irscope",
           **{name: value for name, value in extra.items() if value}}
    cache = toolchain_cache_dir(config, language, versions)
    if not os.path.isdir(cache):
        return env, []
    env["IRSCOPE_TOOLCHAIN_CACHE"] = TOOLCHAIN_MOUNT if config.use_bwrap else cache
    return env, [(cache, TOOLCHAIN_MOUNT)]


def spec(config: RunnerConfig, job_dir: str, env: dict[str, str], binds: list[tuple[str, str]],
         chain: Toolchain | None = None) -> sandbox.SandboxSpec:
    """`python -m compiler.sandbox_entry` for one job directory, in `chain`'s interpreter (None: the
    default toolchain's), seeing the Python install, that environment and irscope's `compiler`
    package read-only (not the service: nothing of it runs in a job)."""
    other = chain is not None and not chain.default
    python = chain.python if other else sys.executable
    return sandbox.SandboxSpec(argv=[python, "-m", "compiler.sandbox_entry", sandbox.JOB_PLACEHOLDER],
                               job_dir=job_dir, env=env,
                               ro_paths=sandbox.python_paths() + [os.path.join(PROJECT_ROOT, "compiler")]
                               + ([chain.prefix] if other else []),
                               ro_binds=binds, use_bwrap=config.use_bwrap, user=config.user)


def write_job_file(job_dir: str, request: Request, toolchain_versions: dict[str, str], settings: JobSettings) -> None:
    """Atomically: a spare starts its job the moment the job file exists."""
    write_json(job_dir, JOB_FILE, JobFile(request, toolchain_versions, settings).to_json())


def write_json(job_dir: str, name: str, value: object) -> None:
    """`value` as JSON in `job_dir/name`, written aside and renamed into place: the job process
    reads it the moment it exists (the job file, a forked job's go-ahead)."""
    tmp = os.path.join(job_dir, "." + name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(tmp, os.path.join(job_dir, name))


def is_ready(job_dir: str) -> bool:
    """True once the spare in `job_dir` has said it is ready (model.SPARE_READY)."""
    return os.path.lexists(os.path.join(job_dir, SPARE_READY))


def toolchain_cache_dir(config: RunnerConfig, language: str, versions: dict[str, str]) -> str:
    """Where the trusted toolchain cache for this language, these versions and this host lives
    (one for the languages that share it: Pipeline.shared_toolchain_cache)."""
    shared = registry.get(language).shared_toolchain_cache if language in registry.keys() else None
    if shared is not None:
        language, packages = shared
        versions = {name: version for name, version in versions.items() if name in ("irscope", "toolchain", *packages)}
    key = hashlib.sha256(json.dumps({"versions": versions, "host": host_fingerprint()},
                                    sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(config.data_dir, "toolchain", f"{language}-{key}")

"""The shapes that cross process boundaries: requests, stages, errors, job results.

Everything here is a plain dataclass serialised as JSON; the web process, the runner and the
sandboxed worker agree on nothing else.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import ErrorKind

# A job directory, as the runner and the worker in the sandbox share it: the runner writes the job
# file (JOB_FILE: a JobFile) and the uploads (INPUTS_DIR), the worker writes its result bundle
# (OUT_DIR: manifest.json and one file per stage) and, while it is a spare waiting for its job,
# SPARE_READY once its compiler is imported and warmed up.
JOB_FILE = "request.json"
OUT_DIR = "out"
INPUTS_DIR = "inputs"
SPARE_READY = "spare-ready"
# A spare template (compiler/spare_template.py): in its own directory, the jobs' seccomp filter
# (the runner's) and, per slot, the PID of the process it forked and how that process ended; in
# each slot, the runner's go-ahead (once the process is in the job's cgroup; it carries the job's
# rlimits and /tmp sizes) and the job process's output.
TEMPLATE_SECCOMP = "seccomp.bpf"
SLOT_FORKS = "forks"
SLOT_EXITS = "exits"
SLOT_GO = ".go"
SLOT_LOG = "worker.log"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Request:
    """What the user asked for: a language, a source text and validated options."""

    language: str
    source: str
    options: dict[str, Any] = field(default_factory=dict)

    def canonical(self) -> dict[str, Any]:
        # Line endings are normalised so a paste from Windows hits the same cache entry.
        return {"language": self.language, "source": self.source.replace("\r\n", "\n"),
                "options": self.options}

    def digest(self) -> str:
        """Hash of the request alone: the permalink id is derived from it."""
        return hashlib.sha256(canonical_json(self.canonical()).encode()).hexdigest()

    def cache_key(self, toolchain: dict[str, str], placement: dict[str, Any] | None = None) -> str:
        """Hash of the request plus the toolchain versions (and, in the worker tier, whether the
        job runs on a real device or a virtual one): the result cache key."""
        keyed: dict[str, Any] = {"request": self.canonical(), "toolchain": toolchain}
        if placement:
            keyed["placement"] = placement
        blob = canonical_json(keyed)
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return self.canonical()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Request":
        return cls(language=data["language"], source=data["source"], options=dict(data.get("options") or {}))


@dataclass
class Stage:
    """One artifact a pipeline produced. `file` names its text inside the result bundle."""

    key: str
    title: str
    group: str
    format: str
    size: int = 0
    file: str = ""
    source_map: list[list[int]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Stage":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class JobError:
    """Why a job failed: its kind (compiler/errors.py; an unknown kind is a ValueError) and
    `line`, the 1-based line of the user's source, when one is to blame."""

    kind: ErrorKind
    message: str
    line: int | None = None

    def __post_init__(self) -> None:
        self.kind = ErrorKind(self.kind)

    def to_json(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "message": self.message, "line": self.line}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "JobError | None":
        if not data:
            return None
        return cls(kind=data["kind"], message=data["message"], line=data.get("line"))


@dataclass(frozen=True)
class JobSettings:
    """A job's settings and limits: one record, built once from the settings table
    (service/configure.py), written into the job file beside the request, read by the worker in
    the sandbox into its JobContext. The sandbox enforces the limits it can (rlimits, cgroup,
    wall clock, tmpfs sizes), the runner caps what it reads of the job's output, and the pipelines
    apply the rest. Each field is the setting of the same name, in its units; these defaults are
    the settings table's (service/settings.py takes them from here)."""

    # the sandbox's limits
    wall_time_limit_s: int = 300
    cpu_time_limit_s: int = 600
    memory_limit_mb: int = 6144
    job_memory_mb: int = 8192
    job_cpus: float = 2.0
    process_limit: int = 128
    file_size_limit_mb: int = 256
    tmp_size_mb: int = 2048
    shm_size_mb: int = 256
    job_disk_mb: int = 1024
    output_limit_kb: int = 1024
    # what the runner reads of the job's output at most
    max_stage_kb: int = 16384
    max_stages: int = 2000
    max_manifest_kb: int = 32768
    max_stage_meta_kb: int = 1024
    max_svg_kb: int = 4096
    # what the pipelines do within the limits
    measure_s: float = 0.5
    run_memory_percent: int = 50
    import_max_files: int = 2000
    import_max_unpacked_mb: int = 512
    pass_dump_mb: int = 192
    program_modules: int = 8

    @property
    def memory_bytes(self) -> int:
        return self.memory_limit_mb << 20

    @property
    def output_bytes(self) -> int:
        return self.output_limit_kb << 10

    @property
    def file_bytes(self) -> int:
        return self.file_size_limit_mb << 20

    @property
    def stage_bytes(self) -> int:
        return self.max_stage_kb << 10

    @property
    def pass_dump_bytes(self) -> int:
        return self.pass_dump_mb << 20

    @property
    def import_unpacked_bytes(self) -> int:
        return self.import_max_unpacked_mb << 20

    @property
    def tmp_bytes(self) -> int:
        return self.tmp_size_mb << 20

    @property
    def shm_bytes(self) -> int:
        return self.shm_size_mb << 20

    @property
    def job_memory_bytes(self) -> int:
        """What the job's processes may use together (0 in the setting: the address-space limit)."""
        return (self.job_memory_mb or self.memory_limit_mb) << 20

    @property
    def source_map_pairs_per_line(self) -> int:
        """A source map's pairs per line of its stage, at most (a line may come from several)."""
        return 64

    @property
    def manifest_bytes(self) -> int:
        return self.max_manifest_kb << 10

    @property
    def meta_bytes(self) -> int:
        return self.max_stage_meta_kb << 10

    @property
    def job_stage_bytes(self) -> int:
        """All stage texts of one job together: the job directory's size (no cap: 1 TiB)."""
        return (self.job_disk_mb or 1 << 20) << 20

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobSettings":
        """The record from its JSON (or from the settings table's values): every field by name,
        the default for one not given, other names ignored."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclass(frozen=True)
class JobFile:
    """The job file (JOB_FILE) the runner writes when it hands a worker its job: the request, the
    toolchain versions it was keyed with, and the job's settings."""

    request: Request
    toolchain: dict[str, str]
    settings: JobSettings

    def to_json(self) -> dict[str, Any]:
        return {"request": self.request.to_json(), "toolchain": self.toolchain, "settings": self.settings.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobFile":
        return cls(request=Request.from_json(data["request"]), toolchain=dict(data.get("toolchain") or {}),
                   settings=JobSettings.from_json(data.get("settings") or {}))


@dataclass
class Manifest:
    """What a worker writes next to the artifact files of one job."""

    status: str  # "running" while the worker is alive, then "done" or "failed"
    stages: list[Stage] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    toolchain: dict[str, str] = field(default_factory=dict)
    error: JobError | None = None
    progress: str = ""
    # Every stage is written and only measuring is left: a limit that stops the job now leaves it
    # done, with what was not measured said (Bundle.compiled).
    compiled: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**self.to_json_without_stages(), "stages": [s.to_json() for s in self.stages]}

    def to_json_without_stages(self) -> dict[str, Any]:
        return {"status": self.status, "timings": self.timings, "toolchain": self.toolchain,
                "error": self.error.to_json() if self.error else None, "progress": self.progress,
                "compiled": self.compiled}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Manifest":
        return cls(status=data["status"], stages=[Stage.from_json(s) for s in data.get("stages", [])],
                   timings=data.get("timings") or {}, toolchain=data.get("toolchain") or {},
                   error=JobError.from_json(data.get("error")), progress=data.get("progress", ""),
                   compiled=bool(data.get("compiled", False)))

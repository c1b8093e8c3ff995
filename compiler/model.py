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
    """Why a job failed. `kind` is a short class name (SyntaxError, WallTimeLimit, ...);
    `line` is the 1-based line of the user's source, when one is to blame."""

    kind: str
    message: str
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "JobError | None":
        if not data:
            return None
        return cls(kind=data["kind"], message=data["message"], line=data.get("line"))


# Error kinds that say something about the user's input; a job that failed with one of them is
# answered from the store like a successful one. Limits and infrastructure failures are retried.
DETERMINISTIC_ERROR_KINDS = frozenset({
    "SyntaxError", "InputError", "OptionError", "UserCodeError", "CompileError",
})


@dataclass
class Manifest:
    """What a worker writes next to the artifact files of one job."""

    status: str  # "running" while the worker is alive, then "done" or "failed"
    stages: list[Stage] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    toolchain: dict[str, str] = field(default_factory=dict)
    error: JobError | None = None
    progress: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**self.to_json_without_stages(), "stages": [s.to_json() for s in self.stages]}

    def to_json_without_stages(self) -> dict[str, Any]:
        return {"status": self.status, "timings": self.timings, "toolchain": self.toolchain,
                "error": self.error.to_json() if self.error else None, "progress": self.progress}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Manifest":
        return cls(status=data["status"], stages=[Stage.from_json(s) for s in data.get("stages", [])],
                   timings=data.get("timings") or {}, toolchain=data.get("toolchain") or {},
                   error=JobError.from_json(data.get("error")), progress=data.get("progress", ""))

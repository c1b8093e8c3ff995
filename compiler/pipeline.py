"""What every pipeline is: a key, an option schema, and `run(request, ctx)`; the job context it
runs in (`JobContext`: scratch directory, settings and limits, result bundle, toolchain cache),
built once by the worker; and the result bundle it writes its stages to.

Pipeline modules are imported by the web process too (for their option schemas), so they must not
import torch, triton or jax at module level: they import them inside `run`, which only ever
executes in the sandboxed worker.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from compiler import formats
from compiler.errors import ErrorKind
from compiler.model import JobError, JobSettings, Manifest, Request, Stage

# Every language's option: the installed toolchain (service/toolchain_envs.py) the job runs in. Left
# out of the normalised options when it names the default (the project's own environment), so that a
# default job's request, key and permalink are what they were before toolchains existed.
TOOLCHAIN_OPTION = "toolchain"
DEFAULT_TOOLCHAIN = "default"
_TOOLCHAIN_NAME = re.compile(r"^[a-z][a-z0-9]*-[0-9][0-9a-z.]{0,30}$")


def canonical_package(name: str) -> str:
    """A distribution's name as versions are keyed (PEP 503: lower case, runs of -_. as one -)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def chosen_toolchain(options: dict[str, Any]) -> str:
    """The toolchain a request's (normalised) options name."""
    return str(options.get(TOOLCHAIN_OPTION) or DEFAULT_TOOLCHAIN)


def lacks_release(versions: dict[str, str], package: str, releases: tuple[str, ...], feature: str) -> str | None:
    """toolchain_refusal's sentence when `package` is not one of `releases` (major.minor) in a
    toolchain: `feature` is what only those have."""
    found = versions.get(canonical_package(package), "")
    if any(found.startswith(r + ".") for r in releases):
        return None
    return (f"{feature} is built for {package} {' / '.join(releases)}, and this toolchain has {package} "
            f"{found or 'none'}")


class OptionError(ValueError):
    """An option the pipeline does not know, or a value it does not accept."""


@dataclass(frozen=True)
class Option:
    """One entry of a pipeline's option schema."""

    name: str
    kind: str  # "bool", "int", "str", "choice", "dict"
    default: Any
    help: str
    choices: tuple[Any, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    validate_value: Callable[[Any], Any] | None = None  # extra check for dicts (config keys, ...)

    def coerce(self, value: Any) -> Any:
        """The value as a request carries it (JSON: the API, MCP, lessons), checked strictly: a
        boolean is true or false, an integer a JSON number, a choice one of its values exactly, a
        dict an object. A string is never read as another type here (`devices: "8"` is refused);
        text from a form field or a command line goes through `from_text`."""
        name = self.name
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise OptionError(f"option {name!r} takes true or false, not {json.dumps(value)}")
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(f"option {name!r} takes an integer, not {json.dumps(value)}")
            if self.minimum is not None and value < self.minimum:
                raise OptionError(f"option {name!r} must be at least {self.minimum}, not {value}")
            if self.maximum is not None and value > self.maximum:
                raise OptionError(f"option {name!r} must be at most {self.maximum}, not {value}")
            return value
        if self.kind == "choice":
            for choice in self.choices:
                if type(value) is type(choice) and value == choice:
                    return choice
            allowed = ", ".join(json.dumps(c) for c in self.choices)
            raise OptionError(f"option {name!r} must be one of {allowed}, not {json.dumps(value)}")
        if self.kind == "str":
            if not isinstance(value, str):
                raise OptionError(f"option {name!r} takes a string, not {json.dumps(value)}")
            return value
        if self.kind == "dict":
            if not isinstance(value, dict):
                raise OptionError(f"option {name!r} takes an object, not {json.dumps(value)}")
            return self.validate_value(value) if self.validate_value else value
        raise AssertionError(f"unknown option kind {self.kind}")

    def from_text(self, text: str) -> Any:
        """The value of a form field or a command line's `key=value` (text), read by the option's
        kind, then checked as `coerce` checks a request's."""
        name, text = self.name, text.strip()
        if self.kind == "bool":
            if text.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise OptionError(f"option {name!r} takes true or false, not {text!r}")
            return text.lower() in ("true", "1", "yes", "on")
        if self.kind == "int":
            try:
                return self.coerce(int(text))
            except ValueError:
                raise OptionError(f"option {name!r} takes an integer, not {text!r}") from None
        if self.kind == "choice":
            for choice in self.choices:
                if text.lower() == json.dumps(choice).strip('"').lower():
                    return choice
            return self.coerce(text)
        if self.kind == "dict":
            try:
                return self.coerce(json.loads(text) if text else {})
            except json.JSONDecodeError as e:
                raise OptionError(f"option {name!r} takes a JSON object: {e}") from None
        return self.coerce(text)


class Pipeline:
    """A compiler pipeline. Subclasses set `key`, `title`, `accepts`, `options`, the facts of their
    input language (`editor_mode`, `lexer`, `extensions`, `source_markers`), `example` and implement
    `run`. `toolchain_packages` names the distributions whose versions key the cache."""

    key: str = ""
    title: str = ""
    # What a source of this language is, in a sentence (docs/languages.md's table of languages)
    accepts: str = ""
    options: tuple[Option, ...] = ()
    toolchain_packages: tuple[str, ...] = ()
    editor_mode: str = "python"  # the editor's CodeMirror mode for the source
    lexer: str = "python"  # the source's lexer (compiler/formats.py), for the gallery and the input stage
    # File extensions that are this language (`irscope compile FILE` guesses the language from them)
    extensions: tuple[str, ...] = ()
    # Text whose presence in a source says it is this language rather than plain PyTorch (a guess
    # for `irscope compile` and for imports; the more specific language is registered first)
    source_markers: tuple[str, ...] = ()
    example: str = ""
    # irscope's own source for a trusted warm-up job that fills the toolchain cache (see
    # service/runner.py: WarmUps); None where the pipeline has nothing worth sharing.
    warmup_source: str | None = None
    # Where languages share one toolchain cache (the kernel languages': the virtual CUDA device's
    # library): its name and the packages it is built from, so the first warm-up builds it for all
    # of them. None: the language's own cache, keyed by all its toolchain_packages.
    shared_toolchain_cache: tuple[str, tuple[str, ...]] | None = None
    # Modules a spare worker imports before it is handed a job (see service/spares.py). A
    # pipeline lists them only if its environment() does not depend on the request.
    prewarm_modules: tuple[str, ...] = ()
    # The kinds of spare worker kept ready from the server's start ("": the plain one; a pipeline
    # may warm others, e.g. one per GPU target, that prepare_spare makes and spare_kind hands jobs
    # to). spare_kind may name a kind not listed: its spares start when its first job arrives.
    spare_kinds: tuple[str, ...] = ("",)
    # The kinds of spare that may be templates forking each job's process (compiler/
    # spare_template.py): only where prepare_spare leaves nothing a fork breaks (no thread of
    # Python's running, no thread pool that refuses to work in a forked child).
    template_kinds: tuple[str, ...] = ()
    # The logs made elsewhere this language reads for the `import` language (LogReader).
    log_readers: tuple["LogReader", ...] = ()
    # A language whose jobs are made from an uploaded file (the `import` language), never from a
    # pasted source: POST /api/compile refuses it; the runner copies `inputs(request)` into the job.
    made_by_upload: bool = False

    def normalise_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Validated options with defaults filled in; unknown names are an OptionError. `toolchain`
        (every language's) is kept only when it names another toolchain than the default; whether
        that one is installed and serves the request is the service's to say (toolchain_refusal)."""
        options = dict(options)
        chosen = options.pop(TOOLCHAIN_OPTION, None)
        schema = {o.name: o for o in self.options}
        unknown = sorted(set(options) - set(schema))
        if unknown:
            known = ", ".join(sorted([*schema, TOOLCHAIN_OPTION]))
            raise OptionError(f"unknown option {unknown[0]!r} for {self.key}; known options: {known}")
        normalised = {name: (o.coerce(options[name]) if name in options else o.default) for name, o in schema.items()}
        if chosen not in (None, "", DEFAULT_TOOLCHAIN):
            if not isinstance(chosen, str) or not _TOOLCHAIN_NAME.match(chosen):
                raise OptionError(f"option 'toolchain' takes an installed toolchain's name (GET /api/toolchains), "
                                  f"such as torch-2.14.1; not {str(chosen)[:80]!r}")
            if self.made_by_upload:
                raise OptionError(f"{self.key} jobs read their logs with the default toolchain; option 'toolchain' "
                                  "is not theirs")
            normalised[TOOLCHAIN_OPTION] = chosen
        return normalised

    # The distributions a toolchain must have to run this language's jobs (toolchain_refusal);
    # empty: `toolchain_packages`.
    requires: tuple[str, ...] = ()

    def packages_used(self, options: dict[str, Any]) -> tuple[str, ...]:
        """Which of `toolchain_packages` compile a job with these normalised options: the versions
        the job records, shows and is cached by. All of them, unless an option leaves some unused
        (XLA's CPU target and the CUDA plugin)."""
        return self.toolchain_packages

    def toolchain_refusal(self, options: dict[str, Any], versions: dict[str, str]) -> str | None:
        """Why a toolchain with these distributions (canonical name -> version) cannot run a job
        with these normalised options, naming what it lacks; None when it can. A pipeline adds the
        features it keeps for some versions (a virtual GPU's shim, a target)."""
        missing = [p for p in (self.requires or self.toolchain_packages) if canonical_package(p) not in versions]
        return f"it has no {', '.join(missing)} installed" if missing else None


    def environment(self, request: Request, workdir: str) -> dict[str, str]:
        """Variables the worker sets before `run` (and so before the compiler is imported):
        TORCH_TRACE, TRITON_CACHE_DIR and the like (the XLA pipelines set theirs on their child
        process instead: compiler/xla/child_process.py). `workdir` is the job's private scratch
        directory."""
        return {}

    def spare_kind(self, request: Request) -> str | None:
        """Which kind of spare worker, made ready by prepare_spare before the job existed, may run
        `request` ("" is the plain one): one of `spare_kinds`, or a kind whose spares are started
        on demand, when a job of it finds none; None: every such job starts a worker of its own."""
        return ""

    def uses_toolchain_cache(self, request: Request) -> bool:
        """Whether a job of `request` is seeded from the toolchain cache the warm-up builds (a job
        arriving while the warm-up runs then waits for it rather than build the same beside it)."""
        return self.warmup_source is not None

    def prepare_spare(self, workdir: str, toolchain_cache: str, kind: str = "",
                      job_arrived: Callable[[], bool] = lambda: False, export_toolchain_cache: str = "") -> None:
        """A spare worker of `kind` (one `spare_kind` names), before any job exists (environment()
        already set): get the process ready. Here: import `prewarm_modules`. A pipeline may do more
        (a warm-up compile of its own code) provided nothing of it can reach the job the process
        is later handed, and should skip what is left of it once `job_arrived()` (the job is then
        waiting for it: a warm-up only pays for itself before one exists). With
        `export_toolchain_cache` (a template of a fresh install, `builds_toolchain_in_template`),
        the warm-up is the trusted toolchain warm-up: it is never cut short and exports there what
        the warm-up job would have."""
        for module in self.prewarm_modules:
            importlib.import_module(module)

    # A spare template of this pipeline's first kind can build the toolchain cache in its own
    # warm-up (prepare_spare's export_toolchain_cache) instead of a warm-up job before it.
    builds_toolchain_in_template = False

    def finish_spare(self, workdir: str, toolchain_cache: str) -> None:
        """For a spare template whose warm-up a job cut short (prepare_spare's `job_arrived`):
        finish it, after that job was forked, so that the jobs it forks later find it warm."""

    def template_carried_dirs(self) -> list[str]:
        """For a spare template, after prepare_spare: directories under /tmp that the warm-up
        filled from the toolchain alone, which each forked job sees read-only in its own new /tmp
        (compiler/spare_template.py)."""
        return []

    def inputs(self, request: Request) -> dict[str, str]:
        """Uploads the job reads: file name in the job's `inputs/` -> the upload's sha256. The
        runner writes them there before the worker starts (JobContext.inputs_dir)."""
        return {}

    # The module whose `script` writes this language's reproducer, where it is not the package's own
    # `reproducer` module (languages sharing one run share its reproducer).
    reproducer_module: str = ""

    def reproducer(self, request: Request, toolchain: dict[str, str], job_id: str = "") -> str | None:
        """A standalone script that re-runs `request`'s compile with the compiler alone, outside
        irscope (for a bug report upstream), or None where the language has none. By convention it
        is written by the `script(pipeline, request, toolchain, job_id)` of the pipeline's package's
        `reproducer` module (compiler/<package>/reproducer.py, text only: the web process builds
        it, so it imports no compiler), which a pipeline need not name. The request's options are
        checked again as the job checks them (a stored job made before a rule was added), and a job
        whose options are refused now has none either."""
        try:
            request = Request(request.language, request.source, self.normalise_options(request.options))
        except OptionError:
            return None
        name = self.reproducer_module or type(self).__module__.rpartition(".")[0] + ".reproducer"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            return None
        return module.script(self, request, toolchain, job_id)

    def run(self, request: Request, ctx: "JobContext") -> None:
        """Compile `request` (options already normalised) and write every stage into `ctx.bundle`.
        Raise UserError for failures the input caused."""
        raise NotImplementedError


class UserError(Exception):
    """A failure the user's input caused; carries the error kind and the user's line."""

    def __init__(self, kind: ErrorKind, message: str, line: int | None = None):
        super().__init__(message)
        self.error = JobError(kind=kind, message=message, line=line)
        self.output = ""  # what the program printed before it failed


@dataclass(frozen=True)
class LogReader:
    """A kind of compiler log made elsewhere that a language reads for the `import` language (an
    uploaded archive): `module` has `recognise(root, files) -> bool` (the files are this kind) and
    `read(ctx, root, files) -> dict` (writes its stages with the language's own stage writers and
    returns what the page says of where the log came from)."""

    kind: str  # the `import` language's option value: torch_trace, tritonparse, xla_dump, ...
    title: str  # what it is, for the option's help: "a TORCH_TRACE directory"
    module: str  # read at job time, in the sandbox


def first_line(path: str, limit: int = 1 << 20) -> str:
    """A file's first line (at most `limit` characters): what recognises a log's kind."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readline(limit)


@dataclass(frozen=True)
class JobContext:
    """Everything one job runs with, built once by the worker (compiler/sandbox_entry.py) and handed to
    `Pipeline.run`; pipelines read no environment variable of irscope's."""

    workdir: str  # the job's private scratch directory (the worker's working directory)
    bundle: "Bundle"  # where the stages go
    settings: JobSettings = JobSettings()  # the job's settings and limits
    toolchain_cache: str = ""  # the trusted toolchain cache to seed from, read-only ("" when none)
    export_toolchain_cache: str = ""  # the warm-up job only: where to export the toolchain cache
    inputs_dir: str = ""  # the uploads the runner put in the job (Pipeline.inputs), read-only ("" when none)
    # time.monotonic() when the job began in this process: with settings.wall_time_limit_s, when
    # the sandbox's wall clock will stop it
    started: float = field(default_factory=time.monotonic)


class Bundle:
    """The worker's side of a result bundle: a directory holding manifest.json and one file per
    stage. The manifest is rewritten (atomically) after every stage so the runner can show stages
    while the job is still running. A pipeline may write from more than one thread (the PyTorch
    pipeline writes trace stages from a thread that follows the compile): each call is atomic."""

    def __init__(self, directory: str, toolchain: dict[str, str] | None = None,
                 max_stage_bytes: int = JobSettings().stage_bytes):
        self.directory = directory
        # The settings table's max_stage_kb, passed by the worker; a stage larger than that is cut.
        self.max_stage_bytes = max_stage_bytes
        self.manifest = Manifest(status="running", toolchain=dict(toolchain or {}))
        self._keys: set[str] = set()
        self._lock = threading.RLock()
        # Each stage's manifest entry, encoded once: the manifest is rewritten after every stage, and
        # re-encoding every earlier stage's source map each time made big jobs quadratic.
        self._stage_json: list[str] = []
        os.makedirs(directory, exist_ok=True)
        self.flush()

    def add(self, key: str, title: str, group: str, fmt: str, value: Any,
            source_map: list[list[int]] | None = None, meta: dict[str, Any] | None = None) -> Stage:
        """Write one stage in format `fmt` (compiler/formats.py): text for code formats, a record or
        plain data for JSON formats, validated here. Keys are unique within a job; a repeated key,
        an undeclared format or a value that does not fit its format is a pipeline bug."""
        text = formats.get(fmt).encode(value)
        with self._lock:
            return self._add(key, title, group, fmt, text, source_map, meta)

    def _add(self, key: str, title: str, group: str, fmt: str, text: str, source_map: list[list[int]] | None,
             meta: dict[str, Any] | None) -> Stage:
        if key in self._keys:
            raise ValueError(f"stage {key!r} written twice")
        self._keys.add(key)
        meta = dict(meta or {})
        size = len(text.encode("utf-8"))
        if size > self.max_stage_bytes:
            # Keep whole lines up to the cap and say so; the source map keeps the lines that remain.
            kept = text.encode("utf-8")[: self.max_stage_bytes].decode("utf-8", "ignore").rsplit("\n", 1)[0]
            shown = kept.count("\n") + 1
            source_map = [p for p in (source_map or []) if p[0] <= shown]
            meta["truncated"] = {"bytes": size, "kept_bytes": len(kept.encode("utf-8")), "kept_lines": shown}
            meta["note"] = (meta.get("note", "") + f" Cut at {shown} lines: the artifact has {size:,} bytes, over "
                            f"the {self.max_stage_bytes:,}-byte stage limit (setting max_stage_kb).").strip()
            text = kept
        file = f"{len(self._keys):04d}.txt"
        with open(os.path.join(self.directory, file), "w", encoding="utf-8") as f:
            f.write(text)
        stage = Stage(key=key, title=title, group=group, format=fmt, size=len(text.encode("utf-8")), file=file,
                      source_map=[list(p) for p in (source_map or [])], meta=meta)
        self.manifest.stages.append(stage)
        self._stage_json.append(json.dumps(stage.to_json()))
        self.flush()
        return stage

    def has(self, key: str) -> bool:
        with self._lock:
            return key in self._keys

    def progress(self, text: str) -> None:
        with self._lock:
            self.manifest.progress = text
            self.flush()

    def timing(self, name: str, value: Any) -> None:
        """Record one of the timings compiler/formats.py declares (TIMINGS)."""
        formats.check_timing(name, value)
        with self._lock:
            self.manifest.timings[name] = value
            self.flush()

    def compiled(self) -> None:
        """Every stage is written; what is left only measures (timing, profiling, accuracy). A
        limit that stops the job from here on leaves it done, saying what was not measured."""
        with self._lock:
            self.manifest.compiled = True
            self.flush()

    def finish(self, error: JobError | None = None) -> None:
        with self._lock:
            self.manifest.status = "failed" if error else "done"
            self.manifest.error = error
            self.manifest.progress = ""
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self._write_manifest()

    def _write_manifest(self) -> None:
        # manifest.to_json(), with the stages' entries encoded once (see _stage_json)
        text = json.dumps(self.manifest.to_json_without_stages())[:-1] + ', "stages": [' + \
            ", ".join(self._stage_json) + "]}"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".manifest", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(self.directory, "manifest.json"))


def read_manifest(directory: str) -> Manifest | None:
    """The runner's side: the manifest as last flushed, or None if there is none (yet)."""
    try:
        with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
            return Manifest.from_json(json.load(f))
    except (FileNotFoundError, json.JSONDecodeError):
        return None

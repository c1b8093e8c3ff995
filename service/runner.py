"""The queue and the worker pool: each job gets a fresh sandboxed worker process.

`Runner` is the one interface the rest of irscope uses; `LocalRunner` is the embedded backend
(a thread per concurrent job, each thread babysitting one sandboxed process). A Celery backend
with per-target queues slots in behind the same `submit`/`shutdown`.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import re
import signal
import site
import sys
import sysconfig
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from sqlalchemy.exc import OperationalError

from compiler import formats, registry
from compiler.errors import ErrorKind
from compiler.model import INPUTS_DIR, JobError, Manifest, Stage
from compiler.pipeline import chosen_toolchain
from service import cgroups, job_process, sandbox, toolchain_envs
from service import job_dir as job_dirs
from service.bundle_reader import BundleReader, BundleRuleError
from service.job_process import PROJECT_ROOT, RunnerConfig
from service.spares import Spares, SparesClosed, spare_key
from service.store import Job, Store
from service.toolchain import toolchain
from service.toolchain_cache import warm_toolchain

log = logging.getLogger(__name__)

# Limit names as the sandbox reports them -> error kinds shown to the user.
_LIMIT_KINDS = {"wall_time": ErrorKind.WallTimeLimit, "cpu_time": ErrorKind.CpuTimeLimit,
                "file_size": ErrorKind.FileSizeLimit, "processes": ErrorKind.ProcessLimit,
                "memory": ErrorKind.MemoryLimit,
                # not a limit: the spare template that forked the job's process ended under it
                "worker_lost": ErrorKind.InternalError}


# What may stop a job after its compile (Manifest.compiled) without making it a failed one.
_AFTER_COMPILE = frozenset({*_LIMIT_KINDS.values(), ErrorKind.WorkerCrashed, ErrorKind.DiskLimit})


class Runner(Protocol):
    """Where jobs go: `LocalRunner` (the embedded pool) or `service.celery_runner.CeleryRunner`
    (the worker tier's queues). Both end in `run_job`, on this machine or on a worker's."""

    def submit(self, job: Job) -> None: ...

    def start_background(self, languages: list[str], warm: bool) -> None: ...

    def shutdown(self) -> None: ...


class LocalRunner:
    """Runs jobs on this machine, `config.workers` at a time."""

    def __init__(self, store: Store, config: RunnerConfig):
        self.store = store
        self.config = config
        self.pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="irscope-job")
        os.makedirs(os.path.join(config.data_dir, "jobs"), exist_ok=True)
        self.spares = Spares(config)
        self.warm_ups = WarmUps(config)
        self.background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="irscope-warm-up")

    def submit(self, job: Job) -> None:
        self.pool.submit(self._run_logged, job)

    def start_background(self, languages: list[str], warm: bool) -> None:
        """In the background, on a thread of its own (not one of the pool's job slots): build each
        language's toolchain cache (if `warm`), then start the spares, so that they see the cache.
        First, what a server process killed before its shutdown left: its job cgroups (and any
        sandbox still running in one) and its spares' directories."""
        stale = cgroups.release_stale()
        if stale:
            log.warning("removed %d job cgroups of server processes that are gone (and killed what ran in them)",
                        len(stale))
        if self.config.spare_workers > 0:
            self.spares.release_stale()
        if warm:
            self.warm_ups.announce(languages)

        def work() -> None:
            # every language's first kind of spare first (they warm up one at a time, in this order)
            for language in languages:
                if warm:
                    _logged(self.warm_ups.build, language, self.spares)
                for kind in registry.get(language).spare_kinds[:1]:
                    _logged(self.spares.fill, spare_key(language, kind))
            for language in languages:
                for kind in registry.get(language).spare_kinds[1:]:
                    _logged(self.spares.fill, spare_key(language, kind))
        # A thread that lives as long as the runner: bubblewrap's --die-with-parent kills a sandbox
        # when the thread that started it ends, and this one starts the first spares.
        self.background.submit(work)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.background.shutdown(wait=False, cancel_futures=True)
        self.spares.shutdown()

    def _run_logged(self, job: Job) -> None:
        try:
            run_job(self.store, self.config, job, self.spares, self.warm_ups)
        except Exception as e:  # noqa: BLE001 - a runner bug must still end the job
            log.exception("job %s failed in the runner", job.id)
            self.store.finish_job(job.id, JobError(ErrorKind.InternalError, f"irscope's runner failed: {e}"), {})


def _logged(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - a failed warm-up only means jobs start cold
        log.exception("%s failed", fn.__name__)


class WarmUps:
    """The toolchain warm-ups of this runner (service/toolchain_cache.py): which language's is
    running, since when, and how long the last one on this host took, so that a job arriving
    meanwhile waits for the cache instead of building the same beside it."""

    def __init__(self, config: RunnerConfig):
        self.config = config
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}  # language -> time.monotonic() it was announced
        self._done = threading.Condition(self._lock)
        self._others: dict[tuple[str, str], threading.Lock] = {}  # (language, toolchain) -> its warm-up's lock

    def announce(self, languages: list[str]) -> None:
        """The warm-ups about to run (before the thread that runs them starts)."""
        now = time.monotonic()
        with self._lock:
            for language in languages:
                if registry.get(language).warmup_source is not None and not os.path.isdir(
                        job_process.toolchain_cache_dir(self.config, language, toolchain(language))):
                    self._running[language] = now

    def build(self, language: str, spares: Spares | None = None) -> None:
        """Build `language`'s toolchain cache: in its first spare template's warm-up where the
        pipeline and `spares` allow (the jobs waiting for it then fork from that template, warm),
        else in a warm-up job."""
        started = time.monotonic()
        pipeline = registry.get(language)
        key = spare_key(language, pipeline.spare_kinds[0]) if pipeline.spare_kinds else None
        in_template = (lambda: spares.build_toolchain(key)) if spares is not None and key is not None and \
            pipeline.builds_toolchain_in_template and spares.uses_templates(key) else None
        try:
            if warm_toolchain(self.config, language, toolchain(language), in_template):
                _write_duration(self.config, language, time.monotonic() - started)
        except SparesClosed:  # the runner shut down while the template warmed up
            pass
        finally:
            with self._lock:
                self._running.pop(language, None)
                self._done.notify_all()

    def build_other(self, language: str, chain: toolchain_envs.Toolchain, progress: Any) -> float:
        """Another toolchain's cache, on its first job (the default's is built at start-up): the
        warm-up job in that toolchain, one at a time per language and toolchain (a job arriving
        meanwhile waits for it, then finds the cache). Seconds this call took."""
        started = time.monotonic()
        versions = toolchain(language, chain)
        if os.path.isdir(job_process.toolchain_cache_dir(self.config, language, versions)):
            return 0.0
        with self._lock:
            lock = self._others.setdefault((language, chain.name), threading.Lock())
        progress(f"warming up: the first {chain.name} job builds its toolchain cache (the CPU probes and the "
                 "precompiled header) with irscope's own compile; its later jobs reuse it")
        with lock:
            _logged(warm_toolchain, self.config, language, versions, None, chain)
        return time.monotonic() - started

    def wait(self, language: str, progress: Any) -> float:
        """Wait while `language`'s warm-up runs, saying so (`progress(sentence)`) with the time left
        when an earlier warm-up on this host says how long one takes. Seconds this call waited (not
        how long the warm-up has run: it may have started before the job arrived)."""
        expected = _read_duration(self.config, language)
        entered, waited = time.monotonic(), False
        with self._lock:
            while language in self._running:
                waited = True
                elapsed = time.monotonic() - self._running[language]
                left = f"about {max(expected - elapsed, 1):.0f} s left" if expected else f"{elapsed:.0f} s so far"
                progress(f"warming up: irscope's own compile is building the toolchain cache every job reuses "
                         f"(the CPU probes and the precompiled header), {left}")
                self._done.wait(timeout=1.0)
        return time.monotonic() - entered if waited else 0.0


def _duration_file(config: RunnerConfig, language: str) -> str:
    return os.path.join(config.data_dir, "toolchain", f"{language}.warm-up-seconds")


def _write_duration(config: RunnerConfig, language: str, seconds: float) -> None:
    with open(_duration_file(config, language), "w", encoding="utf-8") as f:
        f.write(f"{seconds:.1f}\n")


def _read_duration(config: RunnerConfig, language: str) -> float | None:
    try:
        with open(_duration_file(config, language), encoding="utf-8") as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return None


def run_job(store: Store, config: RunnerConfig, job: Job, spares: Spares | None = None,
            warm_ups: WarmUps | None = None) -> None:
    """Run one job to the end and store everything it produced that keeps the runner's rules."""
    pipeline = registry.get(job.request.language)
    chosen = chosen_toolchain(job.request.options)
    chain = toolchain_envs.find(chosen, config.toolchains_dir)
    if chain is None:
        store.finish_job(job.id, JobError(ErrorKind.RequestError, f"toolchain {chosen!r} is no longer installed "
                                          f"here; installed: {toolchain_envs.names(config.toolchains_dir)}"), {})
        return
    waited = 0.0
    if warm_ups is not None and pipeline.uses_toolchain_cache(job.request):
        say = lambda text: store.set_running(job.id, text)  # noqa: E731
        waited = warm_ups.wait(job.request.language, say) if chain.default else \
            warm_ups.build_other(job.request.language, chain, say)
    # spares are kept per toolchain: the default's from the start, another's after its first job
    kind = pipeline.spare_kind(job.request)
    key = spare_key(job.request.language, kind, chain.name) if kind is not None else None
    spare = spares.take(key) if spares and key is not None else None
    ready = spare is not None and spare.ready
    taken = spare.describe() if spare is not None else None
    if spare is not None:
        job_dir, proc = spare.job_dir, spare.proc

    else:
        job_dir = os.path.join(config.data_dir, "jobs", job.id)
        job_dirs.prepare(job_dir, config.user, config.job_disk_bytes)
    store.set_running(job.id, "handed to a pre-started worker" if spare else "starting the sandboxed worker")
    reader = BundleReader(job_dir, config.job)
    stored: set[str] = store.stage_keys(job.id)
    last_progress = [""]
    broken: list[str] = []  # the rule the job's output broke, if it broke one
    full: list[str] = []  # the store could not take a stage: its disk is full
    quota = ClientQuota(store, job.id, config.client_store_bytes)
    over_quota: list[str] = []  # the client's quota was reached while this job's stages were stored

    def collect(final: bool = False) -> Manifest | None:
        if broken or over_quota:
            return None
        try:
            manifest = reader.manifest(final)
            if manifest is None:
                return None
            for position, stage in enumerate(manifest.stages):
                if stage.key in stored:
                    continue
                text = reader.stage_text(stage)
                if text is None:
                    continue
                text = _prepared(stage, text, config)
                stage.size = len(text.encode("utf-8"))
                store.add_stage(job.id, position, stage, text)
                stored.add(stage.key)
                why = quota.over(stage.size)
                if why:
                    over_quota.append(why)
                    proc.stop()
                    return None
        except BundleRuleError as e:
            # A hostile or broken worker: stop it now and keep nothing more of what it wrote.
            broken.append(str(e))
            proc.stop()
            return None
        except OperationalError as e:
            if not _disk_full(e):
                raise
            # The store's disk is full: what is stored stays; the job stops with the reason.
            full.append(str(e.orig)[:300])
            proc.stop()
            return None
        if manifest.progress != last_progress[0] and manifest.status == "running":
            last_progress[0] = manifest.progress
            store.set_progress(job.id, manifest.progress, manifest.timings)
        return manifest

    if spare is None:
        env, binds = job_process.environment(config, job.request.language, job.toolchain, chain)
        missing = _write_inputs(store, job_dir, job)
        if missing:
            store.finish_job(job.id, JobError(ErrorKind.InputError, missing), {})
            if not config.keep_job_dirs:
                job_dirs.release(job_dir)
            reader.close()
            return
        job_process.write_job_file(job_dir, job.request, job.toolchain, config.job)
        proc = sandbox.Sandboxed(job_process.spec(config, job_dir, env, binds, chain), config.job)
    else:
        job_process.write_job_file(job_dir, job.request, job.toolchain, config.job)
        proc.start_clock()
    try:
        outcome = proc.wait(on_tick=collect)
        manifest = collect(final=True) or Manifest(status="running")
    finally:
        reader.close()
    if full:
        error = JobError(ErrorKind.StorageFull, f"the store's disk is full ({full[0]}): the stages stored so far "
                                                "are kept, the rest of this job's were not stored")
    elif over_quota:
        error = JobError(ErrorKind.StorageQuota, over_quota[0])
    elif broken:
        error = JobError(ErrorKind.ResultRuleError, f"the job's result bundle broke a rule of the runner: {broken[0]}. "
                                                    "The job was stopped and nothing of that file was stored.")
    else:
        error = _final_error(manifest, outcome)
        if error is not None and error.kind in (ErrorKind.WorkerCrashed, ErrorKind.InternalError) \
                and job_dirs.is_full(job_dir):
            error = JobError(ErrorKind.DiskLimit, f"the job filled its {config.job_disk_bytes // 2**20} MiB job "
                                                  "directory (setting job_disk_mb)")
    if outcome.output.strip():
        text = scrub_paths(outcome.output, config, job_dir)
        text += "\n[irscope: worker output cut at the output limit]\n" if outcome.output_truncated else ""
        store.add_stage(job.id, 10_000, Stage(key="worker.log", title="Worker log", group="Run", format="text",
                                              size=len(text.encode())), text)
    timings = dict(manifest.timings) if not broken else {}
    timings["job"] = {"wall_s": round(outcome.wall_s, 3), "sandbox": "bubblewrap" if outcome.sandboxed else "none",
                      "worker": "pre-started" if spare else "started for the job",
                      "worker_was_ready": ready if spare else False}
    if taken is not None:
        timings["job"]["spare"] = taken
    if waited:
        timings["job"]["waited_for_toolchain_warm_up_s"] = round(waited, 1)
    if error is not None:  # every error's words, as every stage's, without the host's paths
        error = JobError(error.kind, scrub_paths(error.message, config, job_dir), error.line)
    if error is not None and not broken and manifest.compiled and error.kind in _AFTER_COMPILE:
        # Every stage was written; a limit or a crash stopped only the measurement: the job is done.
        setting = re.search(r"\(setting (\w+)\)", error.message)
        timings["not_measured"] = {"phase": manifest.progress or "measuring", "kind": str(error.kind),
                                   "why": error.message, "line": None, "setting": setting.group(1) if setting else None}
        error = None
    store.finish_job(job.id, error, timings)
    if not config.keep_job_dirs:
        job_dirs.release(job_dir)
    if spares is not None and key is not None:
        _logged(spares.fill, key)


class ClientQuota:
    """The client's store quota (setting client_store_mb) held while a job's stages are stored.
    Admission checks it before a job exists; a client's running jobs could still pass it by what
    each one stores (up to job_disk_mb apiece), so the runner checks again as it stores: the client's
    bytes are read from the store again each time this job has stored another `every` bytes, and
    once they pass the quota the job is stopped, the stages stored so far kept."""

    def __init__(self, store: Store, job_id: str, quota_bytes: int, every: int = 1 << 20):
        self.store, self.quota, self.every = store, quota_bytes, every
        self.client = store.job_client(job_id) if quota_bytes else ""
        self._since = every  # read at the first stage

    def over(self, stage_bytes: int) -> str | None:
        """Why the job must stop after a stage of `stage_bytes` was stored, or None."""
        if not self.quota or not self.client:
            return None
        self._since += stage_bytes
        if self._since < self.every:
            return None
        self._since = 0
        held = self.store.client_bytes(self.client)
        if held <= self.quota:
            return None
        return (f"your jobs and uploads keep {held >> 20:,} MiB in the store, past the {self.quota >> 20:,} MiB one "
                "client may keep (setting client_store_mb): this job was stopped, the stages stored so far are kept. "
                "Your jobs nobody links to are deleted as they age (setting keep_jobs_days)")


def _prepared(stage: Stage, text: str, config: RunnerConfig) -> str:
    """A stage as it is stored: without the host's own paths (the job sees them; a reader of its
    stages need not), and a drawing sanitized once, here, so no page view sanitizes it again (the
    viewer trusts the runner's mark in `meta["runner"]`, a key no job may write)."""
    text = scrub_paths(text, config, "")
    if stage.meta:
        stage.meta = json.loads(scrub_paths(json.dumps(stage.meta), config, ""))
    if stage.format == "svg":
        if len(text.encode("utf-8")) > config.job.max_svg_kb << 10:
            stage.meta["runner"] = {"svg": f"not drawn: over {config.job.max_svg_kb} KiB (setting max_svg_kb)"}
        else:
            try:
                text = formats.sanitize_svg(text)
                stage.meta["runner"] = {"svg": "sanitized"}
            except formats.FormatError as e:
                stage.meta["runner"] = {"svg": f"not drawn: {e}"}
    return text


def _disk_full(e: Exception) -> bool:
    """Whether the store refused a write because its disk is full (SQLite's and PostgreSQL's words)."""
    return any(words in str(e).lower() for words in ("database or disk is full", "no space left on device",
                                                     "could not extend file"))


def _write_inputs(store: Store, job_dir: str, job: Job) -> str | None:
    """Copy the uploads the job's pipeline reads (Pipeline.inputs) into JOB/inputs/, owned by the
    runner and only readable by the job. Returns why not, when an upload is not in the store."""
    wanted = registry.get(job.request.language).inputs(job.request)
    if not wanted:
        return None
    folder = os.path.join(job_dir, INPUTS_DIR)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    for name, digest in wanted.items():
        data = store.upload(digest)
        if data is None:
            return f"the uploaded file {name!r} (sha256 {digest[:12]}...) is not in the store any more; upload it again"
        path = os.path.join(folder, os.path.basename(name))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return None


def scrub_paths(text: str, config: RunnerConfig, job_dir: str) -> str:
    """The job's output without the host's own paths (where irscope, its data, the Python install
    and the virtualenv live): the job sees them, but a reader of its stages and log need not."""
    names = dict(_host_paths(config.data_dir, config.toolchains_dir))
    if job_dir:
        names.update(_with_real_paths({job_dir: "<job>"}))
    for path in sorted(names, key=len, reverse=True):
        if len(path.rstrip("/")) > 4:  # never "/" or "/usr"
            text = text.replace(path, names[path])
    return text


@functools.lru_cache(maxsize=16)
def _host_paths(data_dir: str, toolchains_dir: str) -> dict[str, str]:
    """The host's paths scrub_paths replaces and the names it shows instead: worked out once per
    data and toolchains directory, not again for every stage a job stores."""
    names = {data_dir: "<data>", PROJECT_ROOT: "<irscope>", sys.prefix: "<venv>",
             sys.base_prefix: "<python>", sys.exec_prefix: "<venv>"}
    # an installed package's file by its import path ("torch/nn/modules/linear.py"), as tracebacks
    # of other tools print it, not by where this host installed it; in every toolchain's environment
    # too (those that exist now and those added later: their site-packages' shape is known)
    tools = toolchain_envs.root(toolchains_dir)
    names[tools] = "<toolchains>"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in toolchain_envs.all_names(toolchains_dir):
        names[os.path.join(tools, name, "lib", version, "site-packages") + "/"] = ""
    for packages in {*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        names[packages.rstrip("/") + "/"] = ""
    names = _with_real_paths(names)
    # and as a log line names it, relative to the worker's directory (the project's; PyTorch's
    # logging does): ".venv/lib/python3.11/site-packages/torch/..."
    for packages in [path for path, name in names.items() if name == "" and path.startswith("/")]:
        names.setdefault(os.path.relpath(packages, PROJECT_ROOT).rstrip("/") + "/", "")
    return names


def _with_real_paths(names: dict[str, str]) -> dict[str, str]:
    """`names` with each path's real path (links resolved) beside it, shown by the same name."""
    out = dict(names)
    for path, name in names.items():
        out.setdefault(os.path.realpath(path) + ("/" if path.endswith("/") else ""), name)
    return out


def _final_error(manifest: Manifest, outcome: sandbox.Outcome) -> JobError | None:
    """The job's error: a limit the sandbox saw beats what the worker managed to say."""
    if outcome.limit:
        return JobError(_LIMIT_KINDS[outcome.limit], outcome.message or outcome.limit)
    if manifest.status in ("done", "failed"):
        return manifest.error
    code = outcome.returncode
    signum = -code if code is not None and code < 0 else (code - 128 if code and code > 128 else None)
    how = f"was killed by {signal.Signals(signum).name}" if signum and signum in signal.valid_signals() \
        else f"exited with status {code}"
    tail = "\n".join(outcome.output.strip().splitlines()[-15:])
    return JobError(ErrorKind.WorkerCrashed, f"the worker process {how} before finishing the job"
                    + (f"; its last output:\n{tail}" if tail else ""))

"""The queue and the worker pool: each job gets a fresh sandboxed worker process.

`Runner` is the one interface the rest of irscope uses; `LocalRunner` is the embedded backend
(a thread per concurrent job, each thread babysitting one sandboxed process). A Celery backend
with per-target queues slots in behind the same `submit`/`shutdown`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from compiler import job_dir as job_dirs
from compiler import sandbox
from compiler.bundle_reader import BundleCaps, BundleReader, BundleRuleError
from compiler.model import JobError, Manifest, Stage
from compiler.store import Job, Store
from compiler.toolchain import host_fingerprint, toolchain

log = logging.getLogger(__name__)

_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Limit names as the sandbox reports them -> error kinds shown to the user.
_LIMIT_KINDS = {"wall_time": "WallTimeLimit", "cpu_time": "CpuTimeLimit", "file_size": "FileSizeLimit",
                "processes": "ProcessLimit", "memory": "MemoryLimit"}


class Runner(Protocol):
    """Where jobs go: `LocalRunner` (the embedded pool) or `compiler.celery_runner.CeleryRunner`
    (the worker tier's queues). Both end in `run_job`, on this machine or on a worker's."""

    def submit(self, job: Job) -> None: ...

    def start_background(self, languages: list[str], warm: bool) -> None: ...

    def shutdown(self) -> None: ...


@dataclass(frozen=True)
class RunnerConfig:
    data_dir: str
    workers: int
    limits: sandbox.Limits
    use_bwrap: bool
    keep_job_dirs: bool = False
    spare_workers: int = 0  # pre-started workers kept per language that can use them
    max_stage_bytes: int = 16 << 20
    user: sandbox.SandboxUser | None = None  # the host user jobs run as (with a root server)
    job_disk_bytes: int = 0  # size of each job's /job tmpfs; 0: a plain directory
    caps: BundleCaps = BundleCaps()  # what the runner reads of a job's out/ at most
    measure_s: float = 1.0  # time a pipeline spends timing each side of eager vs compiled
    import_max_files: int = 2000  # members an uploaded archive may have (setting import_max_files)
    import_max_unpacked_bytes: int = 512 << 20  # what it may unpack to (setting import_max_unpacked_mb)
    run_memory_percent: int = 25  # a PyTorch job runs its model if it fits this share of the memory limit


class LocalRunner:
    """Runs jobs on this machine, `config.workers` at a time."""

    def __init__(self, store: Store, config: RunnerConfig):
        self.store = store
        self.config = config
        self.pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="irscope-job")
        os.makedirs(os.path.join(config.data_dir, "jobs"), exist_ok=True)
        self.spares = Spares(config)

    def submit(self, job: Job) -> None:
        self.pool.submit(self._run_logged, job)

    def start_background(self, languages: list[str], warm: bool) -> None:
        """In the background: build each language's toolchain cache (if `warm`), then start the
        spare workers, so that the spares already see the cache."""
        if self.config.spare_workers > 0:
            self.spares.release_stale()

        def work() -> None:
            for language in languages:
                if warm:
                    _logged(warm_toolchain, self.config, language, toolchain(language))
                _logged(self.spares.fill, language)
        self.pool.submit(work)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.spares.shutdown()

    def _run_logged(self, job: Job) -> None:
        try:
            run_job(self.store, self.config, job, self.spares)
        except Exception as e:  # noqa: BLE001 - a runner bug must still end the job
            log.exception("job %s failed in the runner", job.id)
            self.store.finish_job(job.id, JobError("InternalError", f"irscope's runner failed: {e}"), {})


class Spares:
    """Workers started ahead of demand, each already inside its own sandbox with its compiler
    imported and warmed up (the pipeline's `prepare_spare`), waiting for exactly one job (its
    request.json). No two jobs ever share a process. A used spare is replaced when the job that
    took it ends, so the new one's warm-up does not take CPU time from that job."""

    def __init__(self, config: RunnerConfig):
        self.config = config
        self._lock = threading.Lock()
        self._spares: dict[str, list[tuple[str, sandbox.Sandboxed]]] = {}
        self._closed = False

    def fill(self, language: str) -> None:
        from compiler import registry
        if self.config.spare_workers <= 0 or not registry.get(language).prewarm_modules:
            return
        with self._lock:
            if self._closed:
                return
            ready = [(d, p) for d, p in self._spares.get(language, []) if p.alive()]
            while len(ready) < self.config.spare_workers:
                ready.append(self._start(language))
            self._spares[language] = ready

    def take(self, language: str) -> tuple[str, sandbox.Sandboxed] | None:
        """A live spare for `language` (a ready one first), or None. The caller refills (`fill`)
        when its job ends."""
        with self._lock:
            alive = []
            for job_dir, proc in self._spares.get(language, []):
                if proc.alive():
                    alive.append((job_dir, proc))
                else:
                    proc.wait()
                    job_dirs.release(job_dir)
            alive.sort(key=lambda spare: not is_ready(spare[0]))
            spare = alive.pop(0) if alive else None
            self._spares[language] = alive
        return spare

    def ready(self, language: str) -> int:
        """How many spares of `language` are ready for a job now."""
        with self._lock:
            return sum(1 for d, p in self._spares.get(language, []) if p.alive() and is_ready(d))

    def _start(self, language: str) -> tuple[str, sandbox.Sandboxed]:
        job_dir = os.path.join(self.config.data_dir, "jobs", "spare-" + uuid.uuid4().hex[:12])
        job_dirs.prepare(job_dir, self.config.user, self.config.job_disk_bytes)
        env, binds = _toolchain_binds(self.config, language, toolchain(language), worker_env(self.config))
        env["IRSCOPE_SPARE_FOR"] = language
        # The wall clock starts when the spare is handed a job, not while it waits for one.
        return job_dir, sandbox.Sandboxed(_worker_spec(self.config, job_dir, env, binds), self.config.limits,
                                          clock=False)

    def release_stale(self) -> None:
        """Unmount and remove spare directories a previous server process left behind (it was
        killed before its shutdown): each is a job tmpfs nobody will use again."""
        jobs = os.path.join(self.config.data_dir, "jobs")
        for name in os.listdir(jobs):
            if name.startswith("spare-"):
                job_dirs.release(os.path.join(jobs, name))

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            for spares in self._spares.values():
                for job_dir, proc in spares:
                    proc.kill()
                    job_dirs.release(job_dir)
            self._spares.clear()


def is_ready(job_dir: str) -> bool:
    """True once the spare worker in `job_dir` has said it is ready (job_dir.SPARE_READY)."""
    return os.path.lexists(os.path.join(job_dir, job_dirs.SPARE_READY))


def _logged(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - a failed warm-up only means jobs start cold
        log.exception("%s failed", fn.__name__)


TOOLCHAIN_MOUNT = "/opt/irscope-toolchain"


def toolchain_cache_dir(config: RunnerConfig, language: str, versions: dict[str, str]) -> str:
    """Where the trusted toolchain cache for this language, these versions and this host lives."""
    key = hashlib.sha256(json.dumps({"versions": versions, "host": host_fingerprint()},
                                    sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(config.data_dir, "toolchain", f"{language}-{key}")


def warm_toolchain(config: RunnerConfig, language: str, versions: dict[str, str]) -> bool:
    """Run the pipeline's own warm-up source (never user code) in the sandbox and keep what it
    exports as the toolchain cache that later jobs of this language are seeded with."""
    from compiler import registry
    from compiler.model import Request
    source = registry.get(language).warmup_source
    dest = toolchain_cache_dir(config, language, versions)
    if source is None or os.path.isdir(dest):
        return False
    job_dir = os.path.join(config.data_dir, "jobs", "warmup-" + language)
    job_dirs.prepare(job_dir, config.user, config.job_disk_bytes)
    _write_request(job_dir, Request(language, source, {}), versions)
    env = dict(worker_env(config), IRSCOPE_EXPORT_TOOLCHAIN_CACHE=("/job" if config.use_bwrap else job_dir) + "/toolchain")
    outcome = sandbox.run(_worker_spec(config, job_dir, env, []), config.limits)
    reader = BundleReader(job_dir, config.caps)
    try:
        manifest = reader.manifest()
    except BundleRuleError:
        manifest = None
    reader.close()
    built = os.path.join(job_dir, "toolchain")
    ok = outcome.limit is None and manifest is not None and manifest.status == "done" and os.path.isdir(built) \
        and not os.path.islink(built)
    if ok:
        # Copied, not moved: the job directory may be a tmpfs of its own. Links stay links.
        staging = dest + ".tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(built, staging, symlinks=True)
        os.replace(staging, dest)
    else:
        log.warning("toolchain warm-up for %s did not finish: %s", language, outcome.message or outcome.output[-500:])
    job_dirs.release(job_dir)
    return ok


def _worker_spec(config: RunnerConfig, job_dir: str, env: dict[str, str],
                 binds: list[tuple[str, str]]) -> sandbox.SandboxSpec:
    """`python -m compiler.worker` for one job directory, seeing the Python install, the venv and
    irscope's `compiler` package read-only."""
    return sandbox.SandboxSpec(argv=[sys.executable, "-m", "compiler.worker", sandbox.JOB_PLACEHOLDER],
                               job_dir=job_dir, env=env,
                               ro_paths=sandbox.python_paths() + [os.path.join(_PROJECT_ROOT, "compiler")],
                               ro_binds=binds, use_bwrap=config.use_bwrap, user=config.user)


def _write_request(job_dir: str, request, toolchain_versions: dict[str, str]) -> None:
    """Atomically: a spare worker starts the job the moment request.json exists."""
    tmp = os.path.join(job_dir, ".request.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"request": request.to_json(), "toolchain": toolchain_versions}, f)
    os.replace(tmp, os.path.join(job_dir, "request.json"))


def _toolchain_binds(config: RunnerConfig, language: str, versions: dict[str, str],
                     env: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    cache = toolchain_cache_dir(config, language, versions)
    if not os.path.isdir(cache):
        return env, []
    env = dict(env, IRSCOPE_TOOLCHAIN_CACHE=TOOLCHAIN_MOUNT if config.use_bwrap else cache)
    return env, [(cache, TOOLCHAIN_MOUNT)]


def worker_env(config: RunnerConfig) -> dict[str, str]:
    """The worker's whole environment (the sandbox clears everything else)."""
    venv_bin = os.path.dirname(sys.executable)
    return {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": _PROJECT_ROOT,
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        "USER": "irscope",
        "IRSCOPE_OUTPUT_LIMIT": str(config.limits.output_bytes),
        "IRSCOPE_MEMORY_LIMIT_MB": str(config.limits.memory_bytes // 2**20),
        "IRSCOPE_FILE_SIZE_LIMIT_MB": str(config.limits.file_bytes // 2**20),
        "IRSCOPE_MAX_STAGE_BYTES": str(config.max_stage_bytes),
        "IRSCOPE_MEASURE_S": str(config.measure_s),
        "IRSCOPE_IMPORT_MAX_FILES": str(config.import_max_files),
        "IRSCOPE_IMPORT_MAX_UNPACKED_BYTES": str(config.import_max_unpacked_bytes),
        "IRSCOPE_RUN_MEMORY_PERCENT": str(config.run_memory_percent),
    }


def run_job(store: Store, config: RunnerConfig, job: Job, spares: Spares | None = None) -> None:
    """Run one job to the end and store everything it produced that keeps the runner's rules."""
    from compiler import registry
    fits = registry.get(job.request.language).spare_fits(job.request)
    spare = spares.take(job.request.language) if spares and fits else None
    ready = spare is not None and is_ready(spare[0])
    if spare is not None:
        job_dir, proc = spare
    else:
        job_dir = os.path.join(config.data_dir, "jobs", job.id)
        job_dirs.prepare(job_dir, config.user, config.job_disk_bytes)
    store.set_running(job.id, "handed to a pre-started worker" if spare else "starting the sandboxed worker")
    reader = BundleReader(job_dir, config.caps)
    stored: set[str] = store.stage_keys(job.id)
    last_progress = [""]
    broken: list[str] = []  # the rule the job's output broke, if it broke one

    def collect() -> Manifest | None:
        if broken:
            return None
        try:
            manifest = reader.manifest()
            if manifest is None:
                return None
            for position, stage in enumerate(manifest.stages):
                if stage.key in stored:
                    continue
                text = reader.stage_text(stage)
                if text is None:
                    continue
                stage.size = len(text.encode("utf-8"))
                store.add_stage(job.id, position, stage, text)
                stored.add(stage.key)
        except BundleRuleError as e:
            # A hostile or broken worker: stop it now and keep nothing more of what it wrote.
            broken.append(str(e))
            proc.stop()
            return None
        if manifest.progress != last_progress[0] and manifest.status == "running":
            last_progress[0] = manifest.progress
            store.set_progress(job.id, manifest.progress, manifest.timings)
        return manifest

    if spare is None:
        env, binds = _toolchain_binds(config, job.request.language, job.toolchain, worker_env(config))
        missing = _write_inputs(store, job_dir, job)
        if missing:
            store.finish_job(job.id, JobError("InputError", missing), {})
            if not config.keep_job_dirs:
                job_dirs.release(job_dir)
            reader.close()
            return
        _write_request(job_dir, job.request, job.toolchain)
        proc = sandbox.Sandboxed(_worker_spec(config, job_dir, env, binds), config.limits)
    else:
        _write_request(job_dir, job.request, job.toolchain)
        proc.start_clock()
    try:
        outcome = proc.wait(on_tick=collect)
        manifest = collect() or Manifest(status="running")
    finally:
        reader.close()
    if broken:
        error = JobError("ResultRuleError", f"the job's result bundle broke a rule of the runner: {broken[0]}. "
                                            "The job was stopped and nothing of that file was stored.")
    else:
        error = _final_error(manifest, outcome)
        if error is not None and error.kind in ("WorkerCrashed", "InternalError") and job_dirs.is_full(job_dir):
            error = JobError("DiskLimit", f"the job filled its {config.job_disk_bytes // 2**20} MiB job directory "
                                          "(setting job_disk_mb)")
    if outcome.output.strip():
        text = scrub_paths(outcome.output, config, job_dir)
        text += "\n[irscope: worker output cut at the output limit]\n" if outcome.output_truncated else ""
        store.add_stage(job.id, 10_000, Stage(key="worker.log", title="Worker log", group="Run", format="text",
                                              size=len(text.encode())), text)
    timings = dict(manifest.timings) if not broken else {}
    timings["job"] = {"wall_s": round(outcome.wall_s, 3), "sandbox": "bubblewrap" if outcome.sandboxed else "none",
                      "worker": "pre-started" if spare else "started for the job",
                      "worker_was_ready": ready if spare else False}
    if error is not None and error.kind == "WorkerCrashed":
        error = JobError(error.kind, scrub_paths(error.message, config, job_dir), error.line)
    store.finish_job(job.id, error, timings)
    if not config.keep_job_dirs:
        job_dirs.release(job_dir)
    if spares is not None:
        _logged(spares.fill, job.request.language)


def _write_inputs(store: Store, job_dir: str, job: Job) -> str | None:
    """Copy the uploads the job's pipeline reads (Pipeline.inputs) into JOB/inputs/, owned by the
    runner and only readable by the job. Returns why not, when an upload is not in the store."""
    from compiler import registry
    wanted = registry.get(job.request.language).inputs(job.request)
    if not wanted:
        return None
    folder = os.path.join(job_dir, "inputs")
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
    """The worker's output without the host's own paths (where irscope, its data, the Python
    install and the virtualenv live): the job sees them, but a reader of worker.log need not."""
    names = {job_dir: "<job>", config.data_dir: "<data>", _PROJECT_ROOT: "<irscope>", sys.prefix: "<venv>",
             sys.base_prefix: "<python>", sys.exec_prefix: "<venv>"}
    for path in list(names):
        real = os.path.realpath(path)
        if real != path:
            names.setdefault(real, names[path])
    for path in sorted(names, key=len, reverse=True):
        if len(path) > 4:  # never "/" or "/usr"
            text = text.replace(path, names[path])
    return text


def _final_error(manifest: Manifest, outcome: sandbox.Outcome) -> JobError | None:
    """The job's error: a limit the sandbox saw beats what the worker managed to say."""
    if outcome.limit:
        return JobError(_LIMIT_KINDS.get(outcome.limit, "Limit"), outcome.message or outcome.limit)
    if manifest.status in ("done", "failed"):
        return manifest.error
    code = outcome.returncode
    signum = -code if code is not None and code < 0 else (code - 128 if code and code > 128 else None)
    how = f"was killed by {signal.Signals(signum).name}" if signum and signum in signal.valid_signals() \
        else f"exited with status {code}"
    tail = "\n".join(outcome.output.strip().splitlines()[-15:])
    return JobError("WorkerCrashed", f"the worker process {how} before finishing the job"
                    + (f"; its last output:\n{tail}" if tail else ""))

"""The settings table's values -> the running service: the job record every job carries
(`JobSettings`), how jobs run on this machine (`RunnerConfig`), the jobs' and the store's
configuration, the web side's (`WebSettings`) and a worker's (`WorkerSettings`), and whether this
host may run user code at all (`sandbox_refusal`). Each setting is read by name here and nowhere
else, and converted to its units once.

`start` builds the whole service the web app and `irscope compile` use (embedded: a local pool; or
the worker tier's queues); `irscope worker` builds its runner config here too. Nothing here knows
HTTP.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from compiler import registry
from compiler.model import JobSettings
from service import cgroups, job_dir, retention, sandbox, seccomp, toolchain_envs
from service.admission import Admission, CompileRateLimit
from service.job_process import RunnerConfig
from service.jobs import Jobs, JobsConfig
from service.retention import StoragePolicy
from service.runner import LocalRunner, Runner
from service.scans import Scans
from service.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class McpSettings:
    """The MCP endpoint's settings (`mcp`, `mcp_*`)."""

    enabled: bool
    compile_wait_s: float
    max_result_bytes: int
    max_waits: int
    max_waits_per_client: int


@dataclass(frozen=True)
class WebSettings:
    """What the web side reads of the settings table, each in its units: built once here
    (`web_settings`), the only reader of the table by name; the app, the HTTP server, the diffs
    and MCP read these fields."""

    poll_interval_ms: int
    stage_page_lines: int
    examples_dir: str  # "" for the lessons shipped in examples/
    imports: bool
    import_max_upload_mb: int
    import_max_unpacked_mb: int
    import_max_files: int
    max_request_bytes: int
    trusted_hosts: tuple[str, ...]
    trusted_proxies: int
    embed_frame_ancestors: str
    web_threads: int
    web_processes: int  # the setting; 0: one embedded, 2 per core (at most 8) with a broker
    diff_max_lines: int
    diff_max_bytes: int
    diff_timeout_s: float
    diff_processes: int
    mcp: McpSettings
    broker_url: str  # "" when jobs run in this process (the embedded pool)
    workers: int
    worker_lost_after_s: float

    @property
    def import_max_upload_bytes(self) -> int:
        return self.import_max_upload_mb << 20

    def processes(self) -> int:
        """gunicorn processes: the setting, or 1 embedded and 2 per core (at most 8) with a broker."""
        if self.web_processes > 0:
            return self.web_processes
        return min(8, 2 * (os.cpu_count() or 1)) if self.broker_url else 1


def web_settings(values: dict[str, Any]) -> WebSettings:
    return WebSettings(
        poll_interval_ms=int(values["poll_interval_ms"]), stage_page_lines=max(int(values["stage_page_lines"]), 1),
        examples_dir=str(values["examples_dir"]), imports=bool(values["imports"]),
        import_max_upload_mb=int(values["import_max_upload_mb"]),
        import_max_unpacked_mb=int(values["import_max_unpacked_mb"]), import_max_files=int(values["import_max_files"]),
        max_request_bytes=int(values["max_request_kb"]) << 10,
        trusted_hosts=tuple(h.strip() for h in str(values["trusted_hosts"]).split(",") if h.strip()),
        trusted_proxies=int(values["trusted_proxies"]), embed_frame_ancestors=str(values["embed_frame_ancestors"]),
        web_threads=int(values["web_threads"]), web_processes=int(values["web_processes"]),
        diff_max_lines=int(values["max_diff_lines"]), diff_max_bytes=int(values["max_diff_kb"]) << 10,
        diff_timeout_s=float(values["diff_timeout_s"]), diff_processes=int(values["diff_processes"]),
        mcp=McpSettings(enabled=bool(values["mcp"]), compile_wait_s=max(float(values["mcp_compile_wait_s"]), 0.0),
                        max_result_bytes=max(int(values["mcp_max_result_kb"]), 1) << 10,
                        max_waits=int(values["mcp_max_waits"]),
                        max_waits_per_client=int(values["mcp_max_waits_per_client"])),
        broker_url=str(values["broker_url"]), workers=int(values["workers"]),
        worker_lost_after_s=float(values["worker_lost_after_s"]))


@dataclass(frozen=True)
class WorkerSettings:
    """What `irscope worker` reads of the settings table (the worker tier: README, "Scale out")."""

    broker_url: str
    database_url: str
    data_dir: str
    name: str  # "" for the host's default name
    queues: tuple[str, ...]  # () for the queues of this host's devices
    concurrency: int
    warm: bool
    heartbeat_s: float
    lost_after_s: float
    attempts: int
    sandboxed: bool


def worker_settings(values: dict[str, Any]) -> WorkerSettings:
    return WorkerSettings(
        broker_url=str(values["broker_url"]), database_url=str(values["database_url"]),
        data_dir=str(values["data_dir"]), name=str(values["worker_name"]),
        queues=tuple(q.strip() for q in str(values["worker_queues"]).split(",") if q.strip()),
        concurrency=int(values["workers"]), warm=bool(values["warm_toolchain_cache"]),
        heartbeat_s=float(values["worker_heartbeat_s"]), lost_after_s=float(values["worker_lost_after_s"]),
        attempts=int(values["job_attempts"]), sandboxed=values["sandbox"] == "bwrap")


def storage_policy(values: dict[str, Any]) -> StoragePolicy:
    """The store's quotas and retention (service/retention.py)."""
    return StoragePolicy(client_bytes=int(values["client_store_mb"]) << 20,
                         store_bytes=int(values["store_max_mb"]) << 20, keep_days=float(values["keep_jobs_days"]),
                         min_free_disk_bytes=int(values["min_free_disk_mb"]) << 20, data_dir=str(values["data_dir"]))


def job_settings(values: dict[str, Any]) -> JobSettings:
    """The job record: each of its fields is the setting of the same name."""
    return JobSettings.from_json({f.name: values[f.name] for f in dataclasses.fields(JobSettings)})


def sandbox_refusal(values: dict[str, Any]) -> tuple[sandbox.SandboxUser | None, str | None]:
    """The host user jobs run as, and why this server must not run user code (None when it may):
    bubblewrap missing, no unprivileged sandbox user, or a limit it cannot enforce here."""
    if values["sandbox"] != "bwrap":
        return None, None
    user = None
    if os.geteuid() == 0:
        try:
            user = sandbox.sandbox_user(str(values["sandbox_user"]))
        except ValueError as e:
            return None, f"this server will not run user code: {e}."
    if not sandbox.bwrap_works(user):
        return user, ("this server will not run user code: bubblewrap (bwrap) is missing or cannot create its "
                      "namespaces here. Install it (apt-get install bubblewrap) or start the server with "
                      "`irscope serve --insecure-no-sandbox`.")
    missing = cgroups.missing_controllers(sandbox.cgroup_limits(job_settings(values)))
    unenforced = [f"{cgroups.LIMIT_OF[c]} (the cgroup {c} controller: {why})" for c, why in missing.items()]
    no_filter = seccomp.available()
    if no_filter:
        unenforced.append(f"the jobs' seccomp filter (libseccomp: {no_filter}; install Debian's libseccomp2)")
    if int(values["job_disk_mb"]) > 0:
        why = job_dir.can_mount_tmpfs(os.path.join(values["data_dir"], "jobs", ".mount-probe"))
        if why:
            unenforced.append(f"job_disk_mb (mounting a tmpfs for the job directory: {why}; set it to 0 to run "
                              "without a disk cap)")
    if unenforced:
        return user, ("this server will not run user code: it cannot enforce " + "; ".join(unenforced) +
                      ". Run it as root or in a cgroup delegated to it (systemd-run --scope -p Delegate=yes, "
                      "or a container with its own cgroup namespace), or start it with "
                      "`irscope serve --insecure-no-sandbox`.")
    return user, None


def runner_config(values: dict[str, Any], user: sandbox.SandboxUser | None, data_dir: str | None = None,
                  workers: int | None = None) -> RunnerConfig:
    """How jobs run on this machine (the embedded server's pool, or one `irscope worker`)."""
    return RunnerConfig(data_dir=data_dir or values["data_dir"],
                        workers=int(values["workers"]) if workers is None else workers,
                        use_bwrap=values["sandbox"] == "bwrap", job=job_settings(values),
                        keep_job_dirs=bool(values["keep_job_dirs"]), spare_workers=int(values["spare_workers"]),
                        spare_memory_mb=int(values["spare_memory_mb"]),
                        spare_template_slots=int(values["spare_template_slots"]) if values["sandbox"] == "bwrap" else 0,
                        user=user, client_store_bytes=int(values["client_store_mb"]) << 20,
                        toolchains_dir=toolchain_envs.root(str(values["toolchains_dir"])))


def jobs_config(values: dict[str, Any], languages: tuple[str, ...]) -> JobsConfig:
    return JobsConfig(languages=languages, max_source_bytes=int(values["max_source_kb"]) * 1024,
                      reuse_results=bool(values["reuse_results"]), max_queued_jobs=int(values["max_queued_jobs"]),
                      max_jobs_per_client=int(values["max_jobs_per_client"]), imports=bool(values["imports"]),
                      toolchains_dir=toolchain_envs.root(str(values["toolchains_dir"])))


def open_store(values: dict[str, Any]) -> Store:
    return Store(values["database_url"], chunk_bytes=int(values["stage_chunk_kb"]) * 1024)


def offered_languages(values: dict[str, Any]) -> tuple[str, ...]:
    offered = [lang.strip() for lang in values["languages"].split(",") if lang.strip()]
    missing = [lang for lang in offered if lang not in registry.keys()]
    if missing:
        log.warning("languages %s are not registered pipelines; not offering them", ", ".join(missing))
    languages = tuple(lang for lang in offered if lang in registry.keys())
    if not languages:
        raise ValueError(f"no known language in the languages setting {values['languages']!r}")
    return languages


@dataclass
class Service:
    """Everything that takes requests and runs jobs, built once per process from the settings."""

    settings: dict[str, Any]  # the table's values, for this module's builders (and tests); read `web`
    web: WebSettings
    store: Store
    jobs: Jobs
    runner: Runner
    admission: Admission
    sandboxed: bool
    refusal: str | None  # why compiling is refused (no sandbox available), or None
    storage: StoragePolicy
    scans: Scans  # version scans (service/scans.py)
    _stop: threading.Event = field(default_factory=threading.Event)

    def collect(self) -> retention.Collected:
        """One collection of old jobs and the uploads only they read (service/retention.py)."""
        def inputs_of(job_id: str) -> set[str]:
            job = self.store.get_job(job_id)
            return set(registry.get(job.request.language).inputs(job.request).values()) if job else set()
        return retention.collect(self.store, self.storage, inputs_of)

    def start_collecting(self, every_s: float) -> None:
        """Collect every `every_s` seconds, on a thread of its own, until shutdown."""
        def loop() -> None:
            while not self._stop.wait(every_s):
                try:
                    done = self.collect()
                    if done.jobs or done.uploads:
                        log.info("collected %d jobs and %d uploads (%d bytes)", done.jobs, done.uploads, done.bytes)
                except Exception:  # noqa: BLE001 - a failed collection is retried at the next interval
                    log.exception("the collection of old jobs failed")
        threading.Thread(target=loop, name="irscope-collect", daemon=True).start()

    def shutdown(self) -> None:
        self._stop.set()
        self.runner.shutdown()


def start(values: dict[str, Any], background: bool = True, resume: bool = True) -> Service:
    """The service for these settings: with a broker, the worker tier's queues (this process runs
    no job); else the embedded pool, which resumes the jobs a previous process left (with `resume`:
    not for `irscope gc`, which only reads and deletes) and, with `background`, starts the
    toolchain warm-up, the spares and the periodic collection of old jobs."""
    os.makedirs(values["data_dir"], exist_ok=True)
    languages = offered_languages(values)
    if values["sandbox"] not in ("bwrap", "none"):
        raise ValueError(f"sandbox must be 'bwrap' or 'none', not {values['sandbox']!r}")
    store = open_store(values)
    config = jobs_config(values, languages)
    runner: Runner
    if values["broker_url"]:
        # The worker tier: this process runs no job; `irscope worker` processes do, in their sandbox.
        from service.celery_runner import CeleryRunner
        runner = CeleryRunner(store, values["broker_url"], float(values["worker_lost_after_s"]))
        jobs = Jobs(store, runner, config, live_queues=runner.live_queues)
        refusal = None
    else:
        user, refusal = sandbox_refusal(values)
        runner = LocalRunner(store, runner_config(values, user))
        jobs = Jobs(store, runner, config)
        if refusal is None and resume:
            jobs.resume_unfinished()
            if background:
                runner.start_background(list(languages), warm=bool(values["warm_toolchain_cache"]))
    rate = CompileRateLimit(str(values["rate_limit"]), values["broker_url"])
    storage = storage_policy(values)
    admission = Admission(jobs, rate, refusal, storage)
    service = Service(settings=values, web=web_settings(values), store=store, jobs=jobs, runner=runner,
                      admission=admission, sandboxed=values["sandbox"] == "bwrap", refusal=refusal, storage=storage,
                      scans=Scans(store, admission))
    if background and float(values["gc_interval_s"]) > 0:
        service.start_collecting(float(values["gc_interval_s"]))
    if background:  # a version scan's jobs past the client's cap start as its earlier jobs end
        threading.Thread(target=service.scans.run_pump, args=(service._stop,), name="irscope-scans",
                         daemon=True).start()
    return service

"""`irscope worker`: one worker process of the worker tier, on any machine with the venv and
bubblewrap. It takes job ids from its Celery queues (`cpu`, `cuda:sm_90`, ...), claims each job in
the shared store, and runs it with the same function, sandbox, limits, spare workers and
toolchain cache as the embedded server (`service.runner.run_job`, through a `LocalRunner` whose
pool only does the warm-up). Stages reach the store as the job produces them, so any web process
shows them live.

Every `worker_heartbeat_s` it records itself in the store (queues, devices, running jobs), which
is how the web tier routes jobs (`service/routing.py`) and lists targets, and it looks for jobs
whose worker stopped sending heartbeats: each goes back to its queue, or fails with a sentence
once it has been tried `job_attempts` times (a job that kills every worker it touches).
"""
from __future__ import annotations

import datetime as dt
import fcntl
import logging
import os
import re
import socket
import threading
import uuid
from dataclasses import dataclass

from compiler.errors import ErrorKind
from compiler.model import JobError
from compiler.targets import host_devices
from service import job_dir as job_dirs
from service import runner as local
from service.celery_runner import TASK_NAME, celery_app, send
from service.job_process import RunnerConfig
from service.routing import CPU_QUEUE, is_gpu_queue
from service.store import Job, Store, Worker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TierConfig:
    broker_url: str
    queues: tuple[str, ...]
    concurrency: int
    name: str
    languages: tuple[str, ...]
    warm: bool
    heartbeat_s: float
    lost_after_s: float
    attempts: int


def default_queues(devices: dict) -> tuple[str, ...]:
    """`cpu`, and one queue per GPU target this machine has."""
    return (CPU_QUEUE, *sorted({g["target"] for g in devices.get("gpus", [])}))


def default_name() -> str:
    return f"irscope@{socket.gethostname()}"


def worker_dir(data_dir: str, name: str) -> str:
    """Where a worker of this name keeps its job directories and toolchain cache."""
    return os.path.join(data_dir, "workers", re.sub(r"[^\w.@-]+", "_", name))


def capabilities(devices: dict, queues: tuple[str, ...]) -> dict:
    """What the heartbeat advertises: the CPU, each GPU, and for each GPU queue whether this
    worker has that device (without it, jobs sent there compile for a virtual one)."""
    have = {g["target"] for g in devices.get("gpus", [])}
    return {"cpu": devices.get("cpu", {}), "gpus": devices.get("gpus", []), "gpu_error": devices.get("gpu_error"),
            "queues": {q: {"device": q in have} for q in queues if is_gpu_queue(q)}}


class WorkerTier:
    def __init__(self, store: Store, config: RunnerConfig, tier: TierConfig, devices: dict):
        self.store = store
        self.config = config
        self.tier = tier
        self.host = socket.gethostname()
        self.instance = uuid.uuid4().hex[:12]
        self.ref = f"{tier.name}/{self.instance}"  # what a claimed job records as its worker
        self.capabilities = capabilities(devices, tier.queues)
        self.started = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        self.app = celery_app(tier.broker_url, visibility_timeout_s=max(3600.0, 2 * config.job.wall_time_limit_s + 600))
        self.local = local.LocalRunner(store, config)
        self._running = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._lockfile = None

    # --- jobs ------------------------------------------------------------------------------
    def run(self, job_id: str) -> None:
        """The task: claim the job, run it to the end. A job someone else has (or that ended)
        is left alone: its message was a duplicate."""
        if not self.store.claim_job(job_id, self.ref):
            if self.store.get_job(job_id) is None:
                log.error("job %s is not in this worker's store: is IRSCOPE_DATABASE_URL the web server's?", job_id)
            else:
                log.info("job %s is not queued (taken elsewhere or finished); nothing to do", job_id)
            return
        job = self.store.get_job(job_id)
        with self._lock:
            self._running += 1
        try:
            local.run_job(self.store, self.config, job, self.local.spares, self.local.warm_ups)
        except Exception as e:  # noqa: BLE001 - a runner bug must still end the job
            log.exception("job %s failed in the runner", job_id)
            self.store.finish_job(job_id, JobError(ErrorKind.InternalError, f"irscope's runner failed: {e}"), {})
        finally:
            with self._lock:
                self._running -= 1

    # --- heartbeat and dead workers' jobs --------------------------------------------------
    def beat(self) -> None:
        with self._lock:
            running = self._running
        self.store.heartbeat(Worker(id=self.instance, name=self.tier.name, host=self.host,
                                    queues=list(self.tier.queues),
                                    capabilities=self.capabilities, concurrency=self.tier.concurrency,
                                    running=running, started=self.started, last_seen=self.started),
                             forget_after_s=max(3600.0, 20 * self.tier.lost_after_s))
        self.reap()

    def reap(self) -> None:
        """Send again (or fail) the running jobs of workers that stopped sending heartbeats."""
        live = {w.id for w in self.store.live_workers(self.tier.lost_after_s)}
        for job in self.store.lost_jobs(live):
            self._recover(job)

    def _recover(self, job: Job) -> None:
        who = job.worker_name
        if job.attempts < self.tier.attempts:
            progress = (f"the worker {who} stopped while running this job (killed, out of memory, or its machine "
                        f"went down); it waits for another worker (try {job.attempts + 1} of {self.tier.attempts})")
            if self.store.requeue_lost(job, progress):
                try:
                    send(self.app, job.id, job.queue)
                except Exception:
                    # No message, no run: leave it lost, so the next heartbeat tries again.
                    self.store.unrequeue(job)
                    raise
                log.warning("job %s: its worker %s is gone; sent again to %s", job.id, who, job.queue)
        else:
            tries = "once" if job.attempts == 1 else f"{job.attempts} times"
            error = JobError(ErrorKind.WorkerCrashed, f"the worker running this job ({who}) died before finishing it "
                                                      "(killed, out of memory, or its machine went down); the job was "
                                                      f"taken by a worker {tries} and every one of them died, so it is "
                                                      "not tried again (setting job_attempts)")
            if self.store.fail_lost(job, error):
                log.warning("job %s failed: %d workers died running it", job.id, job.attempts)

    def _heartbeats(self) -> None:
        while not self._stop.wait(self.tier.heartbeat_s):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - the store may be restarting; the next beat tries again
                log.exception("heartbeat failed")

    # --- life ----------------------------------------------------------------------------
    def take_name(self) -> None:
        """Hold this name on this host (a lock file), and declare dead the earlier processes of the
        same name here: their jobs are sent again at once instead of after worker_lost_after_s."""
        os.makedirs(self.config.data_dir, exist_ok=True)
        self._lockfile = open(os.path.join(self.config.data_dir, "worker.lock"), "w")
        try:
            fcntl.flock(self._lockfile, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"irscope: a worker named {self.tier.name!r} is already running on this host "
                             f"(it holds {self._lockfile.name}); give this one another --name") from None
        for other in self.store.live_workers(self.tier.lost_after_s):
            if other.name == self.tier.name and other.host == self.host:
                self.store.remove_worker(other.id)
        jobs = os.path.join(self.config.data_dir, "jobs")
        os.makedirs(jobs, exist_ok=True)
        for name in os.listdir(jobs):  # job tmpfs mounts a killed process of this name left
            job_dirs.release(os.path.join(jobs, name))

    def serve(self) -> int:
        """Run until stopped (SIGTERM: finish the running jobs first)."""
        quiet_root_warning()
        self.take_name()
        self.beat()
        beats = threading.Thread(target=self._heartbeats, name="irscope-heartbeat", daemon=True)
        beats.start()
        self.local.start_background(list(self.tier.languages), warm=self.tier.warm)

        @self.app.task(name=TASK_NAME, ignore_result=True)
        def run_job(job_id: str) -> None:
            self.run(job_id)

        worker = self.app.Worker(hostname=f"{self.tier.name}.{self.instance}", queues=list(self.tier.queues),
                                 concurrency=self.tier.concurrency, pool="threads", optimization="fair",
                                 without_heartbeat=True, without_mingle=True, without_gossip=True, loglevel="WARNING",
                                 quiet=True)
        try:
            worker.start()
        finally:
            self._stop.set()
            self.local.shutdown()
            self.store.remove_worker(self.instance)
        return worker.exitcode or 0


def detect_devices() -> dict:
    return host_devices.detect()


def quiet_root_warning() -> None:
    """Celery warns when its worker runs as root. irscope's worker must (it mounts each job's
    tmpfs, makes its cgroup, and starts bubblewrap, which drops to `sandbox_user` before any job
    code runs), and its messages are JSON job ids, never pickles."""
    import warnings

    from celery.exceptions import SecurityWarning
    warnings.filterwarnings("ignore", category=SecurityWarning)

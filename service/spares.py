"""Spares: job processes started ahead of demand, each already inside its own sandbox with its
compiler imported and warmed up (the pipeline's `prepare_spare`), waiting for exactly one job (its
job file). No two jobs ever share a process.

A taken spare is replaced at once (refilled eagerly), so a user pressing Compile again as soon as
a job ends, or the next student of a class, finds one ready: `spare_workers` of them are kept per
language and kind while their memory together stays under `spare_memory_mb` (each one's resident
memory is read from its cgroup, and reported with the job it serves).

Where the pipeline allows it (PyTorch) and jobs are sandboxed, a spare is one slot of a spare
template (service/spare_templates.py): one warmed-up process forks each job's process, so a taken
spare costs a fork, not a warm-up; the next template starts when fewer than `spare_workers` slots
are left. On a fresh install, the language's first template is the trusted toolchain warm-up
(`build_toolchain`, service/toolchain_cache.py): the jobs that waited for the cache fork from it.

Spares are filed by key: the language, or `<language>@<kind>` for a pipeline's other kinds of spare
(`pytorch@cuda:sm_90`: one that installed a virtual H100 before its warm-up; Pipeline.spare_kinds).
The pipeline's `spare_kinds` start with the server; another kind's first spare starts when a job
of that kind arrives and finds none (`pytorch@cuda:sm_100` after the first B200 job), so the
user's next job of it finds one.

A key whose spares die before they are ready three times in a row (a warm-up that cannot fit the
job's limits) gets no more: the report and the log say why.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from compiler import registry
from compiler.pipeline import DEFAULT_TOOLCHAIN
from compiler.targets import host_devices
from service import job_dir as job_dirs
from service import job_process, sandbox, toolchain_envs
from service.job_process import RunnerConfig
from service.spare_templates import JOB_CPU_WEIGHT, SPARE_CPU_WEIGHT, ForkedJob, Template
from service.toolchain import toolchain
from service.toolchain_cache import EXPORT_DIR
from service.toolchain_envs import Toolchain

log = logging.getLogger(__name__)


# Spares of one key that may die before they are ready, one after another, before no more of that
# key are started: a warm-up that cannot fit the job's limits dies the same way every time.
FAILED_WARM_UPS_BEFORE_GIVING_UP = 3


class SparesClosed(Exception):
    """The spares were shut down."""


def spare_key(language: str, kind: str, chain: str = DEFAULT_TOOLCHAIN) -> str:
    """The key spares of `language` and `kind` in toolchain `chain` are filed under (without the
    toolchain, also the IRSCOPE_SPARE_FOR they are started with): `language[@kind][~toolchain]`."""
    return (f"{language}@{kind}" if kind else language) + ("" if chain == DEFAULT_TOOLCHAIN else f"~{chain}")


def key_parts(key: str) -> tuple[str, str, str]:
    """(language, kind, toolchain) of a spare key."""
    spare_for, _, chain = key.partition("~")
    language, _, kind = spare_for.partition("@")
    return language, kind, chain or DEFAULT_TOOLCHAIN


def key_language(key: str) -> str:
    return key_parts(key)[0]


def spare_for(key: str) -> str:
    """What a spare of `key` is told it is for (IRSCOPE_SPARE_FOR): its language and kind."""
    return key.partition("~")[0]


def key_toolchain(config: RunnerConfig, key: str) -> Toolchain | None:
    """The installed toolchain spares of `key` run in (None: the default's, or one removed since)."""
    chain = key_parts(key)[2]
    return None if chain == DEFAULT_TOOLCHAIN else toolchain_envs.find(chain, config.toolchains_dir)


@dataclass
class Spare:
    """One spare: its job directory and process (or the process its template forks for it), and
    when it was started."""

    job_dir: str
    proc: sandbox.Sandboxed | ForkedJob
    started: float
    template: Template | None = None
    taken: bool = False  # a job took it

    @property
    def ready(self) -> bool:
        if self.template is not None:
            return self.proc.alive() and self.template.ready
        return self.proc.alive() and job_process.is_ready(self.job_dir)

    def describe(self) -> dict:
        """What the spare is when a job takes it (the job's timings say it)."""
        described = {"ready": self.ready, "waited_s": round(time.monotonic() - self.started, 1),
                     "memory_bytes": self.proc.resident_bytes()}
        if self.template is not None:
            described["forked_from_template"] = True  # memory_bytes: the template's, shared copy-on-write
        return described


def _holder(spare: Spare) -> sandbox.Sandboxed:
    """The sandboxed process that holds `spare`: its own, or its template's."""
    return spare.template.proc if spare.template is not None else spare.proc  # type: ignore[return-value]


class Spares:
    """The spares of every language and kind, filed by key (`spare_key`)."""

    def __init__(self, config: RunnerConfig):
        self.config = config
        self._lock = threading.Lock()
        self._spares: dict[str, list[Spare]] = {}
        self._templates: list[Template] = []
        self._closed = False
        self._memory_seen = 0  # the largest resident memory a ready spare was seen with
        self._order: list[str] = []  # the languages asked for, first asked first: the order spares start in
        self._failed: dict[str, int] = {}  # key -> its spares that died before they were ready, in a row
        self._given_up: dict[str, str] = {}  # key -> why no more spares of it are started
        # Every spare is started on this one thread, which lives as long as the spares: bubblewrap's
        # --die-with-parent kills a sandbox when the thread that started it ends.
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="irscope-spare-starter")

    def fill(self, key: str) -> None:
        """Start a spare of `key` (on the starter thread, see __init__) when fewer than
        `spare_workers` are alive, no spare of any key is warming up (one warm-up at a time:
        on a small machine two would take the CPU the running job needs; when one is ready, every
        key is filled again in the order they were first asked for, so the server's first
        key gets its spares first), and their memory together (the largest a ready spare was
        seen with, for each) stays within `spare_memory_mb`."""
        if self.config.spare_workers <= 0 or not registry.get(key_language(key)).prewarm_modules:
            return
        try:
            self._starter.submit(self._fill_now, key)
        except RuntimeError:  # the starter was shut down: no more spares
            pass

    def _fill_now(self, key: str) -> None:
        with self._lock:
            if self._closed:
                return
            if key not in self._order:
                self._order.append(key)
            alive = self._alive(key)
            for spare in alive:
                self._note_memory(spare)
            self._spares[key] = alive
            warming = any(not spare.ready for spares in self._spares.values() for spare in spares
                          if spare.proc.alive())
            self._reap_templates()
            started = None
            if len(alive) < self.config.spare_workers and not warming and self._room_for_one() \
                    and key not in self._given_up:
                new = self._start(key)
                alive.extend(new)
                started = new[0]
        if started is not None:
            threading.Thread(target=self._fill_when_ready, args=(key, started), daemon=True,
                             name=f"irscope-spare-ready-{key}").start()

    def _fill_when_ready(self, key: str, spare: Spare) -> None:
        """Wait for `spare` to be ready (or gone), then fill every key again, in order: the
        next spare starts then. A key whose spares die before they are ready
        FAILED_WARM_UPS_BEFORE_GIVING_UP times in a row gets no more (jobs then start their own
        worker, which meets the same limit with the job's own message), and the log says why."""
        while spare.proc.alive() and not spare.ready and not self._closed:
            time.sleep(0.2)
        with self._lock:
            if not self._closed:
                self._count_warm_up(key, spare)
            order = list(self._order)
        for name in order:
            self.fill(name)

    def _count_warm_up(self, key: str, spare: Spare) -> None:
        """(Under the lock.) A template that died before it was ready, or a spare that did before
        any job took it, is one more failed warm-up of `key`; a ready one ends the count."""
        if spare.ready:
            self._failed[key] = 0
            return
        if spare.template is None and spare.taken:
            return  # a job took it while it warmed up: how it ended is the job's
        self._failed[key] = self._failed.get(key, 0) + 1
        holder = _holder(spare)
        try:
            why = (f"it used more than job_memory_mb ({self.config.job.job_memory_mb} MiB)"
                   if holder.cgroup.memory_hit() else f"it exited with status {holder.proc.returncode}")
        except OSError:
            why = f"it exited with status {holder.proc.returncode}"
        log.warning("a spare of %s died before it was ready (%s), %d in a row", key, why, self._failed[key])
        if self._failed[key] >= FAILED_WARM_UPS_BEFORE_GIVING_UP:
            self._given_up[key] = f"{self._failed[key]} spares in a row died before they were ready: the last {why}"
            log.error("no more spares of %s are started: %s", key, self._given_up[key])

    def take(self, key: str) -> Spare | None:
        """A live spare for `key` (a ready one first), or None; a replacement starts now (and, for
        a key no spare was started for yet, a first one: the next job of that kind finds it)."""
        with self._lock:
            alive = self._alive(key)
            alive.sort(key=lambda spare: not spare.ready)
            spare = alive.pop(0) if alive else None
            self._spares[key] = alive
            if spare is not None and spare.template is not None:
                spare.template.taken.add(spare.proc.slot)  # under the lock the reaper takes too
        if spare is not None:
            spare.taken = True
            self._note_memory(spare)
            # now on a job's path: the CPU share of a job
            _holder(spare).cgroup.set_cpu_weight(JOB_CPU_WEIGHT)
        self.fill(key)
        return spare

    def waiting(self, key: str) -> list[sandbox.Sandboxed]:
        """The processes of the spares of `key` that wait for a job now (ready or not)."""
        with self._lock:
            return [spare.proc for spare in self._spares.get(key, [])]

    def ready(self, key: str) -> int:
        """How many spares of `key` are ready for a job now."""
        with self._lock:
            return sum(1 for spare in self._spares.get(key, []) if spare.ready)

    def report(self) -> dict[str, dict]:
        """Per key: the jobs its spares can take at once now (`ready`: a template counts its
        slots), the processes still warming up (`starting`: a template counts once), the
        memory each process holds now, and why no more are started (`given_up`), if so."""
        with self._lock:
            report = {}
            for key, spares in self._spares.items():
                holders = {id(s.template or s.proc): s for s in spares}.values()
                report[key] = {"ready": sum(1 for s in spares if s.ready),
                               "starting": sum(1 for s in holders if not s.ready),
                               "memory_bytes": [s.proc.resident_bytes() for s in holders]}
                if key in self._given_up:
                    report[key]["given_up"] = self._given_up[key]
            return report

    def _alive(self, key: str) -> list[Spare]:
        alive = []
        for spare in self._spares.get(key, []):
            if spare.proc.alive():
                alive.append(spare)
            elif spare.template is None:
                spare.proc.wait()
                job_dirs.release(spare.job_dir)
        return alive

    def _reap_templates(self) -> None:
        """A template that ended (every slot served, or it died): its directories go."""
        for template in [t for t in self._templates if not t.proc.alive()]:
            self._templates.remove(template)
            template.kill()

    def _note_memory(self, spare: Spare) -> None:
        held = spare.proc.resident_bytes() if spare.ready else None
        if held:
            self._memory_seen = max(self._memory_seen, held)

    def _room_for_one(self) -> bool:
        """Whether one more spare fits `spare_memory_mb` beside those alive (of every key)."""
        bound = self.config.spare_memory_mb << 20
        holders = {id(spare.template or spare.proc) for spares in self._spares.values() for spare in spares}
        return bound <= 0 or (len(holders) + 1) * self._memory_seen <= bound

    def _start(self, key: str) -> list[Spare]:
        """One spare, or the slots of one template (where the pipeline allows templates), at the
        spares' CPU weight."""
        spares = self._start_process(key)
        _holder(spares[0]).cgroup.set_cpu_weight(SPARE_CPU_WEIGHT)
        return spares

    def uses_templates(self, key: str) -> bool:
        """Whether spares of `key` are slots of spare templates. Not on a machine with a GPU device
        node: a GPU driver does not survive a fork once initialised, and a warm-up initialises it
        (Inductor's cache key asks the current CUDA device: CacheBase.get_system), so there each
        spare is a process of its own."""
        language, kind, _ = key_parts(key)
        pipeline = registry.get(language)
        return (self.config.spare_workers > 0 and self.config.spare_template_slots > 0 and self.config.use_bwrap
                and bool(pipeline.prewarm_modules) and kind in pipeline.template_kinds
                and not host_devices.has_gpu_nodes())

    def build_toolchain(self, key: str) -> str | None:
        """Start `key`'s first template as the trusted toolchain warm-up of a fresh install (its
        warm-up builds and exports the cache: Pipeline.builds_toolchain_in_template), at a job's CPU
        weight (jobs wait for it), and wait until it is ready. The directory it exported to, or None
        when it could not start or died first. Its slots are then this key's first spares.
        SparesClosed when the spares were shut down meanwhile (nothing is to be built then)."""
        try:
            template = self._starter.submit(self._start_builder, key).result()
        except RuntimeError:  # the starter was shut down
            raise SparesClosed() from None
        if template is None:
            raise SparesClosed()
        while template.proc.alive() and not template.ready and not self._closed:
            time.sleep(0.1)
        if self._closed:
            raise SparesClosed()
        return os.path.join(template.control_dir, EXPORT_DIR) if template.ready else None

    def _start_builder(self, key: str) -> Template | None:
        with self._lock:
            if self._closed:
                return None
            if key not in self._order:
                self._order.append(key)
            spares = self._start_process(key, export=EXPORT_DIR)
            self._spares[key] = self._alive(key) + spares
            return spares[0].template

    def _start_process(self, key: str, export: str = "") -> list[Spare]:
        language = key_language(key)
        if self.uses_templates(key):
            template = Template(self.config, spare_for(key), language, export, key_toolchain(self.config, key))
            self._templates.append(template)
            return [Spare(job.job_dir, job, template.started, template) for job in template.jobs()]
        job_dir = os.path.join(self.config.data_dir, "jobs", "spare-" + uuid.uuid4().hex[:12])
        job_dirs.prepare(job_dir, self.config.user, self.config.job_disk_bytes)
        chain = key_toolchain(self.config, key)
        env, binds = job_process.environment(self.config, language, toolchain(language, chain), chain,
                                             IRSCOPE_SPARE_FOR=spare_for(key))
        # The wall clock starts when the spare is handed a job, not while it waits for one.
        proc = sandbox.Sandboxed(job_process.spec(self.config, job_dir, env, binds, chain), self.config.job,
                                 clock=False)
        return [Spare(job_dir, proc, time.monotonic())]

    def release_stale(self) -> None:
        """Unmount and remove spare directories a previous server process left behind (it was
        killed before its shutdown): each is a job tmpfs nobody will use again."""
        jobs = os.path.join(self.config.data_dir, "jobs")
        for name in os.listdir(jobs):
            if name.startswith("spare-"):
                job_dirs.release(os.path.join(jobs, name))

    def shutdown(self) -> None:
        self._starter.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._closed = True
            for spares in self._spares.values():
                for spare in spares:
                    if spare.template is None:
                        spare.proc.kill()
                        job_dirs.release(spare.job_dir)
            for template in self._templates:
                template.kill()
            self._spares.clear()
            self._templates.clear()

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed and not self._spares

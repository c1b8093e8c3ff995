"""Spares: job processes started ahead of demand, each already inside its own sandbox with its
compiler imported and warmed up (the pipeline's `prepare_spare`), waiting for exactly one job (its
job file). No two jobs ever share a process."""
from __future__ import annotations

import os
import threading
import uuid

from compiler import registry
from service import job_dir as job_dirs
from service import job_process, sandbox
from service.job_process import RunnerConfig
from service.toolchain import toolchain


class Spares:
    """The spares of every language. A used spare is replaced when the job that took it ends, so
    the new one's warm-up does not take CPU time from that job."""

    def __init__(self, config: RunnerConfig):
        self.config = config
        self._lock = threading.Lock()
        self._spares: dict[str, list[tuple[str, sandbox.Sandboxed]]] = {}
        self._closed = False

    def fill(self, language: str) -> None:
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
            alive.sort(key=lambda spare: not job_process.is_ready(spare[0]))
            spare = alive.pop(0) if alive else None
            self._spares[language] = alive
        return spare

    def waiting(self, language: str) -> list[sandbox.Sandboxed]:
        """The processes of the spares of `language` that wait for a job now (ready or not)."""
        with self._lock:
            return [proc for _, proc in self._spares.get(language, [])]

    def ready(self, language: str) -> int:
        """How many spares of `language` are ready for a job now."""
        with self._lock:
            return sum(1 for d, p in self._spares.get(language, []) if p.alive() and job_process.is_ready(d))

    def _start(self, language: str) -> tuple[str, sandbox.Sandboxed]:
        job_dir = os.path.join(self.config.data_dir, "jobs", "spare-" + uuid.uuid4().hex[:12])
        job_dirs.prepare(job_dir, self.config.user, self.config.job_disk_bytes)
        env, binds = job_process.environment(self.config, language, toolchain(language), IRSCOPE_SPARE_FOR=language)
        # The wall clock starts when the spare is handed a job, not while it waits for one.
        return job_dir, sandbox.Sandboxed(job_process.spec(self.config, job_dir, env, binds), self.config.job,
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

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed and not self._spares

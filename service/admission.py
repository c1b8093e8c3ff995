"""Admission: the one way a request from outside becomes jobs, whatever route it came by (the API,
the IDE's form, a comparison, an import, a lesson, MCP).

In order: the sandbox refusal (this host may not run user code), then, for the requests the store
cannot answer already, the client's cap of jobs waiting or running and the queue's cap, the
storage quotas (service/retention.py: the client's, the store's, the disk's), and the client's
compile rate (counted per job created, so a comparison of two new jobs counts twice and a lesson
compiled before counts nothing); only then is anything stored or queued. Each refusal is a
`Refused` whose kind says how to answer it (compiler/errors.py).
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Sequence

from limits import parse
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from compiler.errors import ErrorKind, Refused
from compiler.model import Request
from service import retention
from service.jobs import Jobs, Planned
from service.retention import StoragePolicy
from service.store import Job

log = logging.getLogger(__name__)


class CompileRateLimit:
    """At most `rate` jobs created per client address (a moving window). The embedded server is
    one process and counts in memory; the web processes of the worker tier count together in the
    broker's Redis."""

    def __init__(self, rate: str, shared_storage_url: str = ""):
        self.item = parse(rate) if rate.strip() else None
        self.rate = rate.strip()
        storage = storage_from_string(shared_storage_url) if shared_storage_url else MemoryStorage()
        self._limiter = MovingWindowRateLimiter(storage)

    def hit(self, client: str, jobs: int = 1) -> None:
        """Count `jobs` new jobs for `client`, or raise Refused(RateLimited) without counting any."""
        if self.item is None or jobs <= 0:
            return
        try:
            if self._limiter.hit(self.item, "compile", client, cost=jobs):
                return
        except Exception:  # noqa: BLE001 - Redis is down: no job can be queued either, and says so
            log.warning("the rate limit's storage (the broker's Redis) cannot be reached; not counting")
            return
        reset = self._limiter.get_window_stats(self.item, "compile", client).reset_time
        wait = max(1, math.ceil(reset - time.time()))
        made = f"these {jobs} jobs" if jobs > 1 else "this job"
        raise Refused(ErrorKind.RateLimited, f"too many compiles from your address: the limit is {self.rate} "
                                             f"(setting rate_limit, counting the jobs made), and {made} would pass "
                                             f"it; try again in {wait} s", retry_after=wait)


class Admission:
    def __init__(self, jobs: Jobs, rate: CompileRateLimit, refusal: str | None, storage: StoragePolicy):
        self.jobs = jobs
        self.rate = rate
        self.refusal = refusal
        self.storage = storage

    def check_open(self) -> None:
        """Raise Refused(SandboxUnavailable) when this host may not run user code."""
        if self.refusal:
            raise Refused(ErrorKind.SandboxUnavailable, self.refusal)

    def submit(self, requests: Sequence[Request | Job], client: str) -> list[tuple[Job, bool]]:
        """The job answering each request (a stored Job passes as it is), and whether it was known
        already (answered from the store, or the same request in flight). `client` is who asks."""
        self.check_open()
        planned = [r if isinstance(r, Job) else self.jobs.plan(r) for r in requests]
        new = [p for p in planned if isinstance(p, Planned) and p.known is None]
        self._admit(client, len(new))
        return [(p, True) if isinstance(p, Job) else self.jobs.create(p, client) for p in planned]

    def submit_upload(self, language: str, name: str, data: bytes, options: dict[str, Any],
                      client: str) -> tuple[Job, bool]:
        """A job of a language made from an upload: the upload is stored only once it is admitted
        (a refused upload leaves nothing behind)."""
        self.check_open()
        planned = self.jobs.plan_upload(language, name, data, options)
        if planned.known is None:
            self._admit(client, 1, len(data))
            self.jobs.store.add_upload(planned.upload_digest, name, data, client)
        return self.jobs.create(planned, client)

    def _admit(self, client: str, new_jobs: int, new_bytes: int = 0) -> None:
        if new_jobs:
            self.jobs.check_capacity(client, new_jobs)
            retention.check(self.jobs.store, self.storage, client, new_bytes)
            self.rate.hit(client, new_jobs)

"""Storage that cannot grow forever: quotas checked before anything is stored, and the collection of
old jobs.

- Per client: the bytes a client's jobs and uploads keep in the store (stage texts compressed, as
  stored) may not pass `client_store_mb`; a client over it gets no new job until its old ones are
  collected.
- In all: the store is kept under `store_max_mb` by deleting the jobs nobody points at, the least
  recently viewed first (a job behind a permalink, a comparison, or still queued or running is
  never deleted); jobs nobody viewed for `keep_jobs_days` are deleted whatever the size. An upload
  no remaining job reads goes with them. Past the cap with nothing left to delete, new jobs are
  refused, as they are when the data directory's disk has less than `min_free_disk_mb` free.

`collect` runs from `irscope gc` and, every `gc_interval_s`, in the server; `/api/stats` says what
the store holds.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import ErrorKind, Refused
from service.store import Store


@dataclass(frozen=True)
class StoragePolicy:
    client_bytes: int  # setting client_store_mb (0: no per-client quota)
    store_bytes: int  # setting store_max_mb (0: no cap)
    keep_days: float  # setting keep_jobs_days (0: keep until the cap needs the room)
    min_free_disk_bytes: int  # setting min_free_disk_mb
    data_dir: str


@dataclass
class Collected:
    """What one collection did."""

    jobs: int = 0
    uploads: int = 0
    bytes: int = 0
    kept_referenced: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"jobs_deleted": self.jobs, "uploads_deleted": self.uploads, "bytes_freed": self.bytes,
                "reasons": self.reasons}


def check(store: Store, policy: StoragePolicy, client: str, new_bytes: int = 0) -> None:
    """Raise Refused when a new job (and `new_bytes` of upload) of `client` may not be stored: the
    client's quota, the store's cap, or the disk's free space."""
    free = shutil.disk_usage(policy.data_dir).free if os.path.isdir(policy.data_dir) else None
    if free is not None and free - new_bytes < policy.min_free_disk_bytes:
        raise Refused(ErrorKind.StorageFull,
                      f"the server's disk is nearly full: {free >> 20:,} MiB free, and it keeps at least "
                      f"{policy.min_free_disk_bytes >> 20:,} MiB (setting min_free_disk_mb); nothing was stored. "
                      "Try again later", retry_after=300)
    held = store.stored_bytes() if policy.store_bytes else 0
    if policy.store_bytes and held + new_bytes > policy.store_bytes:
        raise Refused(ErrorKind.StorageFull,
                      f"the store holds {held >> 20:,} MiB and its cap is {policy.store_bytes >> 20:,} MiB (setting "
                      "store_max_mb); nothing was stored. The jobs nobody links to are collected in the "
                      "background (setting gc_interval_s): try again later", retry_after=600)
    if client and policy.client_bytes:
        mine = store.client_bytes(client)
        if mine + new_bytes > policy.client_bytes:
            raise Refused(ErrorKind.StorageQuota,
                          f"your jobs and uploads keep {mine >> 20:,} MiB in the store"
                          + (f" and this upload adds {new_bytes >> 20:,} MiB" if new_bytes else "")
                          + f"; one client may keep {policy.client_bytes >> 20:,} MiB (setting client_store_mb). "
                          "Your jobs nobody links to are deleted as they age (setting keep_jobs_days)",
                          retry_after=3600)


def collect(store: Store, policy: StoragePolicy, inputs_of: Any) -> Collected:
    """Delete what the policy says may go: jobs not viewed for keep_days, then, while the store is
    over its cap, the least recently viewed jobs nobody points at; then the uploads no job reads.
    `inputs_of(job_id) -> set of upload digests` says what a remaining job reads."""
    done = Collected()
    candidates = store.collectable_jobs()  # (job id, stored bytes, idle seconds), least recently used first
    total = store.stored_bytes()
    for job_id, size, idle_s in candidates:
        reason = None
        if policy.keep_days and idle_s > policy.keep_days * 86400:
            reason = f"not viewed for {policy.keep_days:g} days"
        elif policy.store_bytes and total > policy.store_bytes:
            reason = "the store was over its cap"
        if reason is None:
            continue
        if store.delete_job(job_id):
            done.jobs += 1
            done.bytes += size
            total -= size
            done.reasons[reason] = done.reasons.get(reason, 0) + 1
    wanted = set()
    for job_id in store.jobs_with_uploads():
        wanted |= inputs_of(job_id)
    for digest, size in store.uploads():
        if digest not in wanted and store.delete_upload(digest):
            done.uploads += 1
            done.bytes += size
    return done


def stats(store: Store, policy: StoragePolicy) -> dict[str, Any]:
    """What the store holds, against its limits (GET /api/stats)."""
    usage = shutil.disk_usage(policy.data_dir) if os.path.isdir(policy.data_dir) else None
    counts = store.counts()
    return {"jobs": counts["jobs"], "referenced_jobs": counts["referenced"], "uploads": counts["uploads"],
            "stored_bytes": store.stored_bytes(), "store_max_bytes": policy.store_bytes,
            "client_max_bytes": policy.client_bytes, "keep_jobs_days": policy.keep_days,
            "disk_free_bytes": usage.free if usage else None,
            "min_free_disk_bytes": policy.min_free_disk_bytes}

"""Persistence for jobs, their artifacts, permalinks and the workers' heartbeats (SQLAlchemy;
SQLite by default, PostgreSQL for the worker tier). The schema is made and kept by the Alembic
migrations in service/migrations. Artifact texts are stored zlib-compressed in chunks cut at line
boundaries (service/stage_text.py), so one page of a large stage is read without the rest."""
from __future__ import annotations

import contextlib
import datetime as dt
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    LargeBinary,
    String,
    Text,
    and_,
    create_engine,
    delete,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from compiler.model import JobError, Request, Stage
from service import migrations, stage_text


class Base(DeclarativeBase):
    pass


class JobRow(Base):
    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    cache_key: Mapped[str] = mapped_column(String(64), index=True)
    language: Mapped[str] = mapped_column(String(32))
    request: Mapped[dict] = mapped_column(JSON)
    toolchain: Mapped[dict] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), index=True)
    progress: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    timings: Mapped[dict] = mapped_column(JSON, default=dict)
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    client: Mapped[str] = mapped_column(String(64), default="")  # who asked (the rate limit's address)
    queue: Mapped[str] = mapped_column(String(64), default="cpu")  # the worker queue it was sent to
    placement: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # where and how it compiles
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)  # "<name>/<instance>" running it
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # times a worker took it
    started: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    stored_bytes: Mapped[int] = mapped_column(BigInteger, default=0)  # its stage chunks, as stored
    viewed: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)  # last seen on a page


class StageRow(Base):
    __tablename__ = "stages"
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(300))
    group: Mapped[str] = mapped_column(String(64))
    format: Mapped[str] = mapped_column(String(32))
    size: Mapped[int] = mapped_column(Integer)
    source_map: Mapped[list] = mapped_column(JSON, default=list)
    meta: Mapped[dict] = mapped_column(JSON, default=dict)
    lines: Mapped[int] = mapped_column(Integer, default=0)


class StageChunkRow(Base):
    __tablename__ = "stage_chunks"
    __table_args__ = (ForeignKeyConstraint(["job_id", "key"], ["stages.job_id", "stages.key"]),)
    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    n: Mapped[int] = mapped_column(Integer, primary_key=True)
    first_line: Mapped[int] = mapped_column(Integer)
    line_count: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class UploadRow(Base):
    """A file uploaded for a job (an archive to import), by its sha256; zlib-compressed."""

    __tablename__ = "uploads"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    size: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())
    client: Mapped[str] = mapped_column(String(64), default="")  # who uploaded it (its quota)
    stored_bytes: Mapped[int] = mapped_column(BigInteger, default=0)


class ShortlinkRow(Base):
    __tablename__ = "shortlinks"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())


class ComparisonRow(Base):
    """Two jobs side by side (/c/<id>): immutable, like a short link."""
    __tablename__ = "comparisons"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    job_a: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    job_b: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())


class ScanRow(Base):
    """One source over the installed toolchains of its language (/scan/<id>): the stage compared,
    the jobs in version order (a job not started yet, waiting for the client's earlier ones: ""), the
    toolchains left out and why; only its jobs change, as the waiting ones start."""
    __tablename__ = "scans"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    language: Mapped[str] = mapped_column(String(32))
    stage: Mapped[dict] = mapped_column(JSON)  # the stage spec (service/scans.py)
    jobs: Mapped[list] = mapped_column(JSON)  # [{"toolchain": name, "job": id}], oldest version first
    left_out: Mapped[list] = mapped_column(JSON, default=list)  # [{"toolchain": name, "why": sentence}]
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())
    client: Mapped[str] = mapped_column(String(64), default="")


class WorkerRow(Base):
    """One worker process of the worker tier, as its last heartbeat left it."""

    __tablename__ = "workers"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    host: Mapped[str] = mapped_column(String(200))
    queues: Mapped[list] = mapped_column(JSON)
    capabilities: Mapped[dict] = mapped_column(JSON)
    concurrency: Mapped[int] = mapped_column(Integer)
    running: Mapped[int] = mapped_column(Integer, default=0)
    started: Mapped[dt.datetime] = mapped_column(DateTime)
    last_seen: Mapped[dt.datetime] = mapped_column(DateTime, index=True)


@dataclass
class Job:
    """A job as the rest of irscope sees it (stage texts are fetched separately)."""

    id: str
    cache_key: str
    request: Request
    status: str
    toolchain: dict[str, str] = field(default_factory=dict)
    error: JobError | None = None
    timings: dict[str, Any] = field(default_factory=dict)
    progress: str = ""
    stages: list[Stage] = field(default_factory=list)
    queue: str = "cpu"
    placement: dict[str, Any] = field(default_factory=dict)
    worker: str | None = None
    attempts: int = 0

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    @property
    def worker_name(self) -> str | None:
        """The worker's name without its process instance."""
        return self.worker.rsplit("/", 1)[0] if self.worker else None

    def to_json(self) -> dict[str, Any]:
        """The public JSON shape of GET /api/jobs/<id>."""
        return {"id": self.id, "status": self.status, "progress": self.progress,
                "error": self.error.to_json() if self.error else None,
                "stages": [{"key": s.key, "title": s.title, "group": s.group, "format": s.format, "size": s.size}
                           for s in self.stages],
                "timings": self.timings, "toolchain": self.toolchain, "request": self.request.to_json(),
                "queue": self.queue, "placement": self.placement, "worker": self.worker_name,
                "attempts": self.attempts}


@dataclass(frozen=True)
class Scan:
    """A stored version scan (ScanRow) as the service reads it."""

    id: str
    language: str
    stage: dict[str, Any]
    jobs: list[tuple[str, str]]  # (toolchain, job id), in version order
    left_out: list[dict[str, str]]
    created: dt.datetime | None
    client: str


@dataclass(frozen=True)
class Worker:
    """A worker process of the worker tier, from its heartbeat."""

    id: str
    name: str
    host: str
    queues: list[str]
    capabilities: dict[str, Any]
    concurrency: int
    running: int
    started: dt.datetime
    last_seen: dt.datetime


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


UNFINISHED = ("queued", "running")


class Store:
    def __init__(self, url: str, chunk_bytes: int = 256 * 1024):
        self.chunk_bytes = chunk_bytes
        self.postgres = url.startswith("postgresql")
        if url.startswith("sqlite"):
            self.engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

            @event.listens_for(self.engine, "connect")
            def _pragmas(conn, _record):  # WAL: readers (page polls) never wait for the writer
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()
        else:
            # A server that restarted (or a dropped connection) is noticed before a query fails.
            self.engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
        migrations.upgrade(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        # SQLite allows one writer: serialise ours instead of retrying. PostgreSQL needs no such lock.
        self._lock = threading.Lock() if not self.postgres else contextlib.nullcontext()

    def _now(self) -> Any:
        """The time to record, from one clock for every machine: the database's (UTC) on
        PostgreSQL, this process's on SQLite (which is only ever used on one machine)."""
        return func.timezone("UTC", func.clock_timestamp()) if self.postgres else _utc_now()

    def _ago(self, seconds: float) -> Any:
        return self._now() - dt.timedelta(seconds=seconds)

    # --- jobs -------------------------------------------------------------------------------
    def create_job(self, job_id: str, cache_key: str, request: Request, toolchain: dict[str, str],
                   client: str = "", queue: str = "cpu", placement: dict[str, Any] | None = None) -> Job:
        # `created` to the microsecond (the server default has whole seconds): it orders the queue.
        with self._lock, self._session.begin() as s:
            s.add(JobRow(id=job_id, cache_key=cache_key, language=request.language, request=request.to_json(),
                         toolchain=toolchain, status="queued", timings={}, created=self._now(), client=client[:64],
                         queue=queue, placement=placement or {}, attempts=0))
        return Job(id=job_id, cache_key=cache_key, request=request, status="queued", toolchain=toolchain,
                   queue=queue, placement=placement or {})

    def find_reusable(self, cache_key: str, reusable_errors: frozenset[str]) -> Job | None:
        """The newest job for this key that is done, still in flight, or failed for a reason the
        input itself causes (a syntax error fails the same way every time; a timeout may not)."""
        with self._session() as s:
            rows = s.scalars(select(JobRow).where(JobRow.cache_key == cache_key)
                             .order_by(JobRow.created.desc())).all()
            for row in rows:
                if row.status != "failed" or (row.error and row.error.get("kind") in reusable_errors):
                    return self._job(s, row)
        return None

    def get_job(self, job_id: str) -> Job | None:
        with self._session() as s:
            row = s.get(JobRow, job_id)
            return self._job(s, row) if row else None

    def _job(self, s: Session, row: JobRow) -> Job:
        # The stage list only: a stage's source map and meta (they can be large) are read with the
        # stage (stage_text, stage_page), never with every job lookup or poll.
        stages = s.execute(select(StageRow.key, StageRow.title, StageRow.group, StageRow.format, StageRow.size)
                           .where(StageRow.job_id == row.id).order_by(StageRow.position)).all()
        return Job(id=row.id, cache_key=row.cache_key, request=Request.from_json(row.request), status=row.status,
                   toolchain=row.toolchain or {}, error=JobError.from_json(row.error), timings=row.timings or {},
                   progress=row.progress or "",
                   stages=[Stage(key=k, title=t, group=g, format=f, size=z) for k, t, g, f, z in stages],
                   queue=row.queue or "cpu", placement=row.placement or {}, worker=row.worker,
                   attempts=row.attempts or 0)

    def claim_job(self, job_id: str, worker: str) -> bool:
        """Mark a queued job as taken by `worker` (one more attempt). False when it is not queued
        (another worker has it, or it ended): a duplicate delivery of its message then does nothing."""
        with self._lock, self._session.begin() as s:
            done = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == "queued")
                             .values(status="running", worker=worker, attempts=JobRow.attempts + 1,
                                     started=self._now(), progress="taken by worker " + worker.rsplit("/", 1)[0]))
            return done.rowcount == 1

    def set_running(self, job_id: str, progress: str = "") -> None:
        self._update(job_id, status="running", progress=progress)

    def set_progress(self, job_id: str, progress: str, timings: dict[str, Any] | None = None) -> None:
        values: dict[str, Any] = {"progress": progress}
        if timings is not None:
            values["timings"] = timings
        self._update(job_id, **values)

    def finish_job(self, job_id: str, error: JobError | None, timings: dict[str, Any]) -> None:
        self._update(job_id, status="failed" if error else "done", progress="",
                     error=error.to_json() if error else None, timings=timings,
                     finished=self._now())

    def _update(self, job_id: str, **values: Any) -> None:
        with self._lock, self._session.begin() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(**values))

    def queued_count(self) -> int:
        """Jobs waiting for a worker."""
        with self._session() as s:
            return s.scalar(select(func.count()).select_from(JobRow).where(JobRow.status == "queued")) or 0

    def client_jobs(self, client: str) -> int:
        """Jobs of this client that are waiting or running."""
        with self._session() as s:
            return s.scalar(select(func.count()).select_from(JobRow).where(
                JobRow.client == client[:64], JobRow.status.in_(UNFINISHED))) or 0

    def queue_position(self, job_id: str) -> int | None:
        """1 for the next queued job of its queue to start, 2 for the one after it, ...; None unless
        `job_id` is queued. Counted in the store, so every web process and worker machine sees the
        same queue."""
        with self._session() as s:
            row = s.get(JobRow, job_id)
            if row is None or row.status != "queued":
                return None
            ahead = s.scalar(select(func.count()).select_from(JobRow).where(
                JobRow.status == "queued", JobRow.queue == row.queue,
                or_(JobRow.created < row.created, and_(JobRow.created == row.created, JobRow.id < row.id))))
            return int(ahead or 0) + 1

    def unfinished_jobs(self) -> list[str]:
        with self._session() as s:
            return list(s.scalars(select(JobRow.id).where(JobRow.status.in_(UNFINISHED))))

    def lost_jobs(self, live_instances: set[str]) -> list[Job]:
        """Running jobs whose worker process is not among the live ones."""
        with self._session() as s:
            rows = s.scalars(select(JobRow).where(JobRow.status == "running", JobRow.worker.is_not(None))).all()
            return [self._job(s, r) for r in rows if r.worker.rsplit("/", 1)[-1] not in live_instances]

    def requeue_lost(self, job: Job, progress: str) -> bool:
        """Put a job whose worker died back in its queue, its stages cleared for the next try.
        False when it is no longer running on that worker (someone else handled it)."""
        with self._lock, self._session.begin() as s:
            done = s.execute(update(JobRow).where(JobRow.id == job.id, JobRow.status == "running",
                                                  JobRow.worker == job.worker)
                             .values(status="queued", worker=None, progress=progress, timings={}))
            if done.rowcount != 1:
                return False
            s.execute(delete(StageChunkRow).where(StageChunkRow.job_id == job.id))
            s.execute(delete(StageRow).where(StageRow.job_id == job.id))
            return True

    def unrequeue(self, job: Job) -> None:
        """Undo `requeue_lost` when its message could not be sent (the broker is down): the job is
        again running on its dead worker, so the next look for lost jobs finds it again."""
        with self._lock, self._session.begin() as s:
            s.execute(update(JobRow).where(JobRow.id == job.id, JobRow.status == "queued", JobRow.worker.is_(None))
                      .values(status="running", worker=job.worker))

    def fail_lost(self, job: Job, error: JobError) -> bool:
        with self._lock, self._session.begin() as s:
            done = s.execute(update(JobRow).where(JobRow.id == job.id, JobRow.status == "running",
                                                  JobRow.worker == job.worker)
                             .values(status="failed", progress="", error=error.to_json(), finished=self._now()))
            return done.rowcount == 1

    # --- stages ------------------------------------------------------------------------------
    def add_stage(self, job_id: str, position: int, stage: Stage, text: str) -> None:
        chunks = stage_text.split(text, self.chunk_bytes)
        row = StageRow(job_id=job_id, key=stage.key, position=position, title=stage.title, group=stage.group,
                       format=stage.format, size=stage.size, source_map=stage.source_map, meta=stage.meta,
                       lines=sum(c.line_count for c in chunks))
        stored = sum(len(c.data) for c in chunks)
        with self._lock, self._session.begin() as s:
            old = s.scalar(select(func.coalesce(func.sum(func.length(StageChunkRow.data)), 0)).where(
                StageChunkRow.job_id == job_id, StageChunkRow.key == stage.key)) or 0
            s.execute(delete(StageChunkRow).where(StageChunkRow.job_id == job_id, StageChunkRow.key == stage.key))
            s.merge(row)
            s.flush()
            s.add_all([StageChunkRow(job_id=job_id, key=stage.key, n=c.n, first_line=c.first_line,
                                     line_count=c.line_count, data=c.data) for c in chunks])
            s.execute(update(JobRow).where(JobRow.id == job_id)
                      .values(stored_bytes=JobRow.stored_bytes + stored - int(old)))

    def stage_keys(self, job_id: str) -> set[str]:
        with self._session() as s:
            return set(s.scalars(select(StageRow.key).where(StageRow.job_id == job_id)))

    def _stage_row(self, s: Session, job_id: str, key: str) -> StageRow | None:
        """A key without its `:qualifier` finds the first stage that has one (`dynamo.fx_graph` ->
        `dynamo.fx_graph:0/0`), so clients can ask for a stage by kind."""
        row = s.get(StageRow, (job_id, key))
        if row is None and ":" not in key:
            row = s.scalars(select(StageRow).where(StageRow.job_id == job_id, StageRow.key.startswith(key + ":"))
                            .order_by(StageRow.position).limit(1)).first()
        return row

    @staticmethod
    def _stage(row: StageRow) -> Stage:
        return Stage(key=row.key, title=row.title, group=row.group, format=row.format, size=row.size,
                     source_map=row.source_map or [], meta=row.meta or {})

    @staticmethod
    def _chunks(rows: Any) -> list[stage_text.Chunk]:
        return [stage_text.Chunk(r.n, r.first_line, r.line_count, r.data) for r in rows]

    def stage_text(self, job_id: str, key: str) -> tuple[Stage, str] | None:
        """A stage and its whole text."""
        with self._session() as s:
            row = self._stage_row(s, job_id, key)
            if row is None:
                return None
            chunks = s.execute(select(StageChunkRow).where(StageChunkRow.job_id == row.job_id,
                                                           StageChunkRow.key == row.key)).scalars().all()
            return self._stage(row), stage_text.join(self._chunks(chunks))

    def stage_page(self, job_id: str, key: str, first: int, count: int) -> tuple[Stage, int, str] | None:
        """A stage, its number of lines, and lines `first .. first + count - 1` (0-based) of its text,
        read from the chunks holding those lines only."""
        with self._session() as s:
            row = self._stage_row(s, job_id, key)
            if row is None:
                return None
            chunks = s.execute(select(StageChunkRow).where(
                StageChunkRow.job_id == row.job_id, StageChunkRow.key == row.key,
                StageChunkRow.first_line < first + count,
                StageChunkRow.first_line + StageChunkRow.line_count > first)).scalars().all()
            return self._stage(row), row.lines, stage_text.page(self._chunks(chunks), first, count)

    def stage_chunks(self, job_id: str, key: str) -> Any:
        """The stage's text chunk by chunk, each decompressed when it is reached (for streaming a
        large stage without holding it whole)."""
        with self._session() as s:
            row = self._stage_row(s, job_id, key)
            if row is None:
                return
            count = s.scalar(select(func.count()).select_from(StageChunkRow).where(
                StageChunkRow.job_id == row.job_id, StageChunkRow.key == row.key)) or 0
            job_id, key = row.job_id, row.key
        for n in range(count):
            with self._session() as s:
                chunk = s.get(StageChunkRow, (job_id, key, n))
            if chunk is not None:
                yield stage_text.Chunk(chunk.n, chunk.first_line, chunk.line_count, chunk.data).text()

    # --- storage: quotas and retention (service/retention.py) -------------------------------
    def stored_bytes(self) -> int:
        """What the store keeps of jobs and uploads, in bytes as stored (compressed)."""
        with self._session() as s:
            jobs = s.scalar(select(func.coalesce(func.sum(JobRow.stored_bytes), 0))) or 0
            uploads = s.scalar(select(func.coalesce(func.sum(UploadRow.stored_bytes), 0))) or 0
        return int(jobs) + int(uploads)

    def job_client(self, job_id: str) -> str:
        """Who asked for the job ("" when unknown)."""
        with self._session() as s:
            return s.scalar(select(JobRow.client).where(JobRow.id == job_id)) or ""

    def client_bytes(self, client: str) -> int:
        """What one client's jobs and uploads keep in the store."""
        with self._session() as s:
            jobs = s.scalar(select(func.coalesce(func.sum(JobRow.stored_bytes), 0)).where(JobRow.client == client))
            uploads = s.scalar(select(func.coalesce(func.sum(UploadRow.stored_bytes), 0))
                               .where(UploadRow.client == client))
        return int(jobs or 0) + int(uploads or 0)

    def counts(self) -> dict[str, int]:
        with self._session() as s:
            return {"jobs": s.scalar(select(func.count()).select_from(JobRow)) or 0,
                    "referenced": len(self._referenced(s)),
                    "uploads": s.scalar(select(func.count()).select_from(UploadRow)) or 0}

    @staticmethod
    def _referenced(s: Session) -> set[str]:
        ids = set(s.scalars(select(ShortlinkRow.job_id)))
        for a, b in s.execute(select(ComparisonRow.job_a, ComparisonRow.job_b)):
            ids |= {a, b}
        for jobs in s.scalars(select(ScanRow.jobs)):
            ids |= {entry["job"] for entry in jobs}
        return ids

    def collectable_jobs(self) -> list[tuple[str, int, float]]:
        """(job id, stored bytes, seconds since it was last viewed or finished) of every finished
        job nobody points at (no permalink, comparison or scan), least recently used first."""
        now = _utc_now()
        with self._session() as s:
            referenced = self._referenced(s)
            rows = s.execute(select(JobRow.id, JobRow.stored_bytes, JobRow.viewed, JobRow.finished, JobRow.created)
                             .where(JobRow.status.in_(("done", "failed")))).all()
        out = []
        for job_id, size, viewed, finished, created in rows:
            if job_id in referenced:
                continue
            last = max(t for t in (viewed, finished, created) if t is not None)
            out.append((job_id, int(size or 0), (now - last).total_seconds()))
        out.sort(key=lambda r: -r[2])
        return out

    def delete_job(self, job_id: str) -> bool:
        """Delete a finished job nobody points at, with its stages (False when it is referenced
        or unfinished by now)."""
        with self._lock, self._session.begin() as s:
            if job_id in self._referenced(s):
                return False
            row = s.get(JobRow, job_id)
            if row is None or row.status not in ("done", "failed"):
                return False
            s.execute(delete(StageChunkRow).where(StageChunkRow.job_id == job_id))
            s.execute(delete(StageRow).where(StageRow.job_id == job_id))
            s.delete(row)
            return True

    def touch(self, job_id: str, every_s: float = 3600) -> None:
        """Record that a job was viewed now (at most once every `every_s`: views are reads, this is
        one cheap conditional write)."""
        with self._lock, self._session.begin() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id,
                                           or_(JobRow.viewed.is_(None), JobRow.viewed < self._ago(every_s)))
                      .values(viewed=self._now()))

    def jobs_with_uploads(self) -> list[str]:
        """The jobs that read an upload (the languages made by upload: `import`)."""
        with self._session() as s:
            return list(s.scalars(select(JobRow.id).where(JobRow.language == "import")))

    def uploads(self) -> list[tuple[str, int]]:
        with self._session() as s:
            return [(d, int(n or 0)) for d, n in s.execute(select(UploadRow.digest, UploadRow.stored_bytes))]

    def delete_upload(self, digest: str) -> bool:
        with self._lock, self._session.begin() as s:
            return s.execute(delete(UploadRow).where(UploadRow.digest == digest)).rowcount == 1

    # --- uploads -----------------------------------------------------------------------------
    def add_upload(self, digest: str, name: str, data: bytes, client: str = "") -> None:
        """Keep an uploaded file under its sha256 (the first upload of the same bytes stays)."""
        packed = zlib.compress(data, 1)
        try:
            with self._lock, self._session.begin() as s:
                if s.get(UploadRow, digest) is None:
                    s.add(UploadRow(digest=digest, name=name[:300], size=len(data), data=packed, client=client[:64],
                                    stored_bytes=len(packed)))
        except IntegrityError:
            pass

    def upload(self, digest: str) -> bytes | None:
        with self._session() as s:
            row = s.get(UploadRow, digest)
            return zlib.decompress(row.data) if row else None

    # --- permalinks --------------------------------------------------------------------------
    def create_shortlink(self, link_id: str, job_id: str) -> str:
        """Store `link_id` -> job, unless the id exists already: links are immutable, so the first
        job a link was made for stays its answer while it exists. A link whose job is gone (an
        operator deleted it; retention never deletes a linked job) answers the job made for it now:
        a link id is derived from its request, so that job answers the same request."""
        try:
            with self._lock, self._session.begin() as s:
                row = s.get(ShortlinkRow, link_id)
                if row is None:
                    s.add(ShortlinkRow(id=link_id, job_id=job_id))
                elif s.get(JobRow, row.job_id) is None:
                    row.job_id = job_id
        except IntegrityError:
            pass
        return link_id

    def shortlink_job(self, link_id: str) -> str | None:
        with self._session() as s:
            row = s.get(ShortlinkRow, link_id)
            return row.job_id if row else None

    # --- comparisons -------------------------------------------------------------------------
    def create_comparison(self, comparison_id: str, job_a: str, job_b: str) -> str:
        """Store `comparison_id` -> (job A, job B) unless the id exists already: like short links,
        a comparison once made always shows the jobs it was made for."""
        try:
            with self._lock, self._session.begin() as s:
                if s.get(ComparisonRow, comparison_id) is None:
                    s.add(ComparisonRow(id=comparison_id, job_a=job_a, job_b=job_b))
        except IntegrityError:
            pass
        return comparison_id

    def comparison_jobs(self, comparison_id: str) -> tuple[str, str] | None:
        with self._session() as s:
            row = s.get(ComparisonRow, comparison_id)
            return (row.job_a, row.job_b) if row else None

    # --- version scans -----------------------------------------------------------------------
    def create_scan(self, scan: Scan) -> str:
        """Store `scan` unless its id exists already (an id is derived from its jobs and stage, so
        the same scan asked again is the same record)."""
        try:
            with self._lock, self._session.begin() as s:
                if s.get(ScanRow, scan.id) is None:
                    s.add(ScanRow(id=scan.id, language=scan.language, stage=scan.stage,
                                  jobs=[{"toolchain": t, "job": j} for t, j in scan.jobs], left_out=scan.left_out,
                                  client=scan.client[:64], created=self._now()))
        except IntegrityError:
            pass
        return scan.id

    def set_scan_jobs(self, scan_id: str, jobs: list[tuple[str, str]]) -> None:
        """A scan's (toolchain, job id) pairs once more of its jobs started (service/scans.py)."""
        with self._lock, self._session.begin() as s:
            row = s.get(ScanRow, scan_id)
            if row is not None:
                row.jobs = [{"toolchain": t, "job": j} for t, j in jobs]

    def scan(self, scan_id: str) -> Scan | None:
        with self._session() as s:
            row = s.get(ScanRow, scan_id)
            if row is None:
                return None
            return Scan(id=row.id, language=row.language, stage=dict(row.stage),
                        jobs=[(e["toolchain"], e["job"]) for e in row.jobs], left_out=list(row.left_out or []),
                        created=row.created, client=row.client)

    # --- workers -----------------------------------------------------------------------------
    def heartbeat(self, worker: Worker, forget_after_s: float) -> None:
        """Record that `worker` is alive now (and forget workers silent for `forget_after_s`)."""
        with self._lock, self._session.begin() as s:
            s.merge(WorkerRow(id=worker.id, name=worker.name, host=worker.host, queues=worker.queues,
                              capabilities=worker.capabilities, concurrency=worker.concurrency,
                              running=worker.running, started=worker.started, last_seen=self._now()))
            s.execute(delete(WorkerRow).where(WorkerRow.last_seen < self._ago(forget_after_s)))

    def remove_worker(self, worker_id: str) -> None:
        with self._lock, self._session.begin() as s:
            s.execute(delete(WorkerRow).where(WorkerRow.id == worker_id))

    def live_workers(self, lost_after_s: float) -> list[Worker]:
        """Workers whose last heartbeat is at most `lost_after_s` old."""
        with self._session() as s:
            rows = s.scalars(select(WorkerRow).where(WorkerRow.last_seen >= self._ago(lost_after_s))
                             .order_by(WorkerRow.name)).all()
            return [Worker(id=r.id, name=r.name, host=r.host, queues=list(r.queues), capabilities=r.capabilities,
                           concurrency=r.concurrency, running=r.running, started=r.started, last_seen=r.last_seen)
                    for r in rows]


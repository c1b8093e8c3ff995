"""Persistence for jobs, their artifacts and permalinks (SQLAlchemy; SQLite by default, any
SQLAlchemy URL such as PostgreSQL works the same). Artifact texts are stored zlib-compressed."""
from __future__ import annotations

import datetime as dt
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (JSON, DateTime, ForeignKey, Integer, LargeBinary, String, Text, and_, create_engine,
                        event, func, or_, select, update)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from compiler.model import JobError, Request, Stage


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
    data: Mapped[bytes] = mapped_column(LargeBinary)


class UploadRow(Base):
    """A file uploaded for a job (an archive to import), by its sha256; zlib-compressed."""

    __tablename__ = "uploads"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    size: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())


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

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    def to_json(self) -> dict[str, Any]:
        """The public JSON shape of GET /api/jobs/<id>."""
        return {"id": self.id, "status": self.status, "progress": self.progress,
                "error": self.error.to_json() if self.error else None,
                "stages": [{"key": s.key, "title": s.title, "group": s.group, "format": s.format, "size": s.size}
                           for s in self.stages],
                "timings": self.timings, "toolchain": self.toolchain, "request": self.request.to_json()}


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Store:
    def __init__(self, url: str):
        connect_args = {"check_same_thread": False, "timeout": 30} if url.startswith("sqlite") else {}
        self.engine = create_engine(url, connect_args=connect_args)
        if url.startswith("sqlite"):
            @event.listens_for(self.engine, "connect")
            def _pragmas(conn, _record):  # WAL: readers (page polls) never wait for the writer
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()
        Base.metadata.create_all(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._lock = threading.Lock()  # SQLite allows one writer; serialise ours instead of retrying

    # --- jobs -------------------------------------------------------------------------------
    def create_job(self, job_id: str, cache_key: str, request: Request, toolchain: dict[str, str]) -> Job:
        # `created` to the microsecond (the server default has whole seconds): it orders the queue.
        with self._lock, self._session.begin() as s:
            s.add(JobRow(id=job_id, cache_key=cache_key, language=request.language, request=request.to_json(),
                         toolchain=toolchain, status="queued", timings={}, created=_utc_now()))
        return Job(id=job_id, cache_key=cache_key, request=request, status="queued", toolchain=toolchain)

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
        stages = s.execute(select(StageRow.key, StageRow.title, StageRow.group, StageRow.format, StageRow.size,
                                  StageRow.source_map, StageRow.meta)
                           .where(StageRow.job_id == row.id).order_by(StageRow.position)).all()
        return Job(id=row.id, cache_key=row.cache_key, request=Request.from_json(row.request), status=row.status,
                   toolchain=row.toolchain or {}, error=JobError.from_json(row.error), timings=row.timings or {},
                   progress=row.progress or "",
                   stages=[Stage(key=k, title=t, group=g, format=f, size=z, source_map=m or [], meta=me or {})
                           for k, t, g, f, z, m, me in stages])

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
                     finished=_utc_now())

    def _update(self, job_id: str, **values: Any) -> None:
        with self._lock, self._session.begin() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(**values))

    def queued_count(self) -> int:
        """Jobs waiting for a worker."""
        with self._session() as s:
            return s.scalar(select(func.count()).select_from(JobRow).where(JobRow.status == "queued")) or 0

    def queue_position(self, job_id: str) -> int | None:
        """1 for the next queued job to start, 2 for the one after it, ...; None unless `job_id` is
        queued. Counted in the store, so every web process and worker machine sees the same queue."""
        with self._session() as s:
            row = s.get(JobRow, job_id)
            if row is None or row.status != "queued":
                return None
            ahead = s.scalar(select(func.count()).select_from(JobRow).where(
                JobRow.status == "queued",
                or_(JobRow.created < row.created, and_(JobRow.created == row.created, JobRow.id < row.id))))
            return int(ahead or 0) + 1

    def unfinished_jobs(self) -> list[str]:
        with self._session() as s:
            return list(s.scalars(select(JobRow.id).where(JobRow.status.in_(("queued", "running")))))

    # --- stages ------------------------------------------------------------------------------
    def add_stage(self, job_id: str, position: int, stage: Stage, text: str) -> None:
        row = StageRow(job_id=job_id, key=stage.key, position=position, title=stage.title, group=stage.group,
                       format=stage.format, size=stage.size, source_map=stage.source_map, meta=stage.meta,
                       data=zlib.compress(text.encode("utf-8"), 6))
        with self._lock, self._session.begin() as s:
            s.merge(row)

    def stage_keys(self, job_id: str) -> set[str]:
        with self._session() as s:
            return set(s.scalars(select(StageRow.key).where(StageRow.job_id == job_id)))

    def stage_text(self, job_id: str, key: str) -> tuple[Stage, str] | None:
        """A stage and its text. A key without its `:qualifier` finds the first stage that has one
        (`dynamo.fx_graph` -> `dynamo.fx_graph:0/0`), so clients can ask for a stage by kind."""
        with self._session() as s:
            row = s.get(StageRow, (job_id, key))
            if row is None and ":" not in key:
                row = s.scalars(select(StageRow).where(StageRow.job_id == job_id, StageRow.key.startswith(key + ":"))
                                .order_by(StageRow.position).limit(1)).first()
            if row is None:
                return None
            stage = Stage(key=row.key, title=row.title, group=row.group, format=row.format, size=row.size,
                          source_map=row.source_map or [], meta=row.meta or {})
            return stage, zlib.decompress(row.data).decode("utf-8")

    # --- uploads -----------------------------------------------------------------------------
    def add_upload(self, digest: str, name: str, data: bytes) -> None:
        """Keep an uploaded file under its sha256 (the first upload of the same bytes stays)."""
        try:
            with self._lock, self._session.begin() as s:
                if s.get(UploadRow, digest) is None:
                    s.add(UploadRow(digest=digest, name=name[:300], size=len(data), data=zlib.compress(data, 1)))
        except IntegrityError:
            pass

    def upload(self, digest: str) -> bytes | None:
        with self._session() as s:
            row = s.get(UploadRow, digest)
            return zlib.decompress(row.data) if row else None

    # --- permalinks --------------------------------------------------------------------------
    def create_shortlink(self, link_id: str, job_id: str) -> str:
        """Store `link_id` -> job, unless the id exists already: links are immutable, so the first
        job a link was made for stays its answer."""
        try:
            with self._lock, self._session.begin() as s:
                if s.get(ShortlinkRow, link_id) is None:
                    s.add(ShortlinkRow(id=link_id, job_id=job_id))
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

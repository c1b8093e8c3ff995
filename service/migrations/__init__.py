"""The store's schema, as Alembic migrations (`versions/`), run by every process that opens the
store: the web server, each worker, `irscope compile`. Works on SQLite and PostgreSQL.

A SQLite database made before migrations existed (its tables created directly by the store) is
recognised by its `jobs` table without an `alembic_version` table: it is stamped with the first
revision, which is exactly that schema, and migrated from there. Two processes starting at once
take turns: a PostgreSQL advisory lock, or a lock file beside the SQLite database.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from typing import Iterator

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, inspect, text

_HERE = os.path.dirname(os.path.abspath(__file__))
FIRST_REVISION = "0001"
_ADVISORY_LOCK = 0x1125C0DE  # any constant: every irscope process takes the same one


def _config(connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", _HERE)
    cfg.attributes["connection"] = connection
    return cfg


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _ADVISORY_LOCK})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _ADVISORY_LOCK})
                conn.commit()
    elif engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        with open(engine.url.database + ".migrate-lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    else:
        yield


# Alembic's command API keeps its context in module globals (alembic.context, alembic.op): two
# threads of one process migrating at once (two stores opened side by side) break each other's.
_THREAD_LOCK = threading.Lock()


def upgrade(engine: Engine) -> None:
    """Bring the database to the newest schema (a no-op when it is there already)."""
    with _THREAD_LOCK, _migration_lock(engine):
        tables = set(inspect(engine).get_table_names())
        with engine.begin() as conn:
            cfg = _config(conn)
            if "jobs" in tables and "alembic_version" not in tables:
                command.stamp(cfg, FIRST_REVISION)
            command.upgrade(cfg, "head")


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if "alembic_version" not in inspect(conn).get_table_names():
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()

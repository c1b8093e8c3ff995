"""Real Redis and PostgreSQL servers for the worker-tier tests and bench/load.py, each started in a
temporary directory on a free loopback port (PostgreSQL as the non-root `postgres` user when run
as root, as PostgreSQL requires), and stopped again. Nothing here fakes a server."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def redis_binary() -> str | None:
    return shutil.which("redis-server")


def postgres_bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


@dataclass
class Redis:
    """redis-server with append-only persistence (fsync on every write), so a restart keeps every
    queued message."""

    dir: str
    port: int
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "Redis":
        log = open(os.path.join(self.dir, "redis.log"), "a")
        self.proc = subprocess.Popen(
            [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "yes"],
            stdout=log, stderr=subprocess.STDOUT)
        wait_port(self.port, proc=self.proc)
        return self

    def stop(self, kill: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            self.proc.wait(timeout=30)
        self.proc = None


def start_redis() -> Redis:
    return Redis(tempfile.mkdtemp(prefix="irscope-redis-"), free_port()).start()


@dataclass
class Postgres:
    """A PostgreSQL cluster of its own (initdb), trusting local connections, run as `postgres`."""

    dir: str
    port: int
    bindir: str

    def _as_owner(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        if os.geteuid() == 0:
            argv = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *argv]
        return subprocess.run(argv, capture_output=True, text=True, cwd=self.dir, **kwargs)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> "Postgres":
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        data = os.path.join(self.dir, "data")
        done = self._as_owner([os.path.join(self.bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
                               "--encoding=UTF8", "--no-sync"])
        if done.returncode != 0:
            raise RuntimeError("initdb failed: " + done.stderr[-2000:])
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        done = self._as_owner([os.path.join(self.bindir, "pg_ctl"), "-D", data, "-l",
                               os.path.join(self.dir, "postgres.log"), "-o", options, "-w", "start"], timeout=120)
        if done.returncode != 0:
            raise RuntimeError("pg_ctl start failed: " + done.stderr[-2000:] + self.log()[-2000:])
        return self

    def log(self) -> str:
        try:
            return open(os.path.join(self.dir, "postgres.log")).read()
        except OSError:
            return ""

    def create_database(self, name: str) -> str:
        done = self._as_owner([os.path.join(self.bindir, "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                               "-U", "postgres", name])
        if done.returncode != 0:
            raise RuntimeError("createdb failed: " + done.stderr)
        return self.url(name)

    def stop(self) -> None:
        self._as_owner([os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.dir, "data"), "-m", "immediate",
                        "-w", "stop"], timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


def start_postgres() -> Postgres:
    bindir = postgres_bindir()
    assert bindir, "PostgreSQL is not installed"
    base = tempfile.mkdtemp(prefix="irscope-pg-")
    os.chmod(base, 0o755)
    return Postgres(base, free_port(), bindir).start()

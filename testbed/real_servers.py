"""Real servers for the tests and the benchmarks, each a process of its own on a free loopback port:
Redis and PostgreSQL for the worker tier (PostgreSQL as the non-root `postgres` user when run as
root, as PostgreSQL requires), `irscope serve` (`Serve`) and the worker tier (`Tier`); and the
HTTP client side every test and benchmark of a real server uses (`http`, `until`, `wait_job`).
Nothing here fakes a server."""
from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field


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


def http(base: str, path: str, body: dict | None = None, method: str | None = None, timeout: float = 30,
         headers: dict | None = None) -> tuple[int, dict | str]:
    """One request to a real server at `base` (http://host:port): its status and its body, parsed
    as JSON when it is JSON. A body given is sent as JSON (POST)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers=dict({"Content-Type": "application/json"} if data else {},
                                                  **(headers or {})))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            status, raw = r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read().decode("utf-8", "replace")
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def until(what, timeout: float = 90, every: float = 0.1, why: str = ""):
    """Poll `what()` until it returns something truthy; its value. Waits for a condition, with a
    bound, never for a fixed time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {timeout} s: {why}")


def wait_job(base: str, job_id: str, timeout: float = 300, why: str = "") -> dict:
    """The job's JSON once it is done or failed (GET /api/jobs/<id>)."""
    def ended():
        status, body = http(base, f"/api/jobs/{job_id}")
        assert status == 200, body
        return body if body["status"] in ("done", "failed") else None
    return until(ended, timeout, why=why or f"job {job_id} finished")


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


# --- irscope's own tiers, as real processes -------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IRSCOPE = os.path.join(ROOT, ".venv", "bin", "irscope")


def _answered(base: str, proc: subprocess.Popen, timeout: float, log: str) -> None:
    """Wait until the server answers a request (the master listens before its workers answer)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/api/languages", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"irscope serve did not start (exit status {proc.poll()}): "
                                     + log[-3000:]) from None
        time.sleep(0.05)


@dataclass
class Serve:
    """`irscope serve` on a free port, as a user starts it: settings as IRSCOPE_* variables (the
    caller's own IRSCOPE_* are not inherited), output in DATA_DIR/server.log."""

    data_dir: str
    settings: dict = field(default_factory=dict)
    args: tuple[str, ...] = ()
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IRSCOPE_")}
        env["IRSCOPE_DATA_DIR"] = self.data_dir
        env.update({"IRSCOPE_" + k.upper(): str(v).lower() if isinstance(v, bool) else str(v)
                    for k, v in self.settings.items()})
        return env

    def start(self, wait: bool = True, timeout: float = 60) -> "Serve":
        os.makedirs(self.data_dir, exist_ok=True)
        self.port = self.port or free_port()
        with open(os.path.join(self.data_dir, "server.log"), "ab") as log:
            self.proc = subprocess.Popen([IRSCOPE, "serve", "--port", str(self.port), *self.args], env=self.env(),
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
        if wait:
            _answered(self.base, self.proc, timeout, self.log())
        return self

    def stop(self, timeout: float = 30) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=30)
        self.proc = None

    def log(self) -> str:
        try:
            with open(os.path.join(self.data_dir, "server.log"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""


@dataclass
class Tier:
    """`irscope serve` and `irscope worker` processes sharing one broker and one store, as the
    README's "Scale out" starts them (each in a session of its own, so it can be killed alone)."""

    broker_url: str
    database_url: str
    data_dir: str
    settings: dict
    web: subprocess.Popen | None = None
    web_port: int = 0
    workers: dict = None  # name -> Popen

    def env(self, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IRSCOPE_")}
        env.update({"IRSCOPE_BROKER_URL": self.broker_url, "IRSCOPE_DATABASE_URL": self.database_url,
                    "IRSCOPE_DATA_DIR": self.data_dir})
        env.update({"IRSCOPE_" + k.upper(): str(v) for k, v in self.settings.items()})
        env.update(extra)
        return env

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def _log(self, name: str):
        return open(os.path.join(self.data_dir, name + ".log"), "ab")

    def start_web(self, port: int | None = None) -> None:
        self.web_port = port or self.web_port or free_port()
        self.web = subprocess.Popen([IRSCOPE, "serve", "--port", str(self.web_port)], env=self.env(),
                                    stdout=self._log("web"), stderr=subprocess.STDOUT, start_new_session=True)
        _answered(f"http://127.0.0.1:{self.web_port}", self.web, 60, self.log("web"))

    def stop_web(self, sig: int = 15) -> None:
        if self.web is not None and self.web.poll() is None:
            os.killpg(self.web.pid, sig)
            self.web.wait(timeout=60)
        self.web = None

    def start_worker(self, name: str, queues: str = "cpu", concurrency: int = 1) -> subprocess.Popen:
        if self.workers is None:
            self.workers = {}
        proc = subprocess.Popen([IRSCOPE, "worker", "--queues", queues, "--name", name,
                                 "--concurrency", str(concurrency)], env=self.env(),
                                stdout=self._log("worker-" + name), stderr=subprocess.STDOUT, start_new_session=True)
        self.workers[name] = proc
        return proc

    def kill_worker(self, name: str, sig: int = 9) -> None:
        """SIGKILL (by default) the worker's own process, as the OOM killer or a crash would; its
        sandboxed job dies with it (bubblewrap's --die-with-parent)."""
        proc = self.workers.pop(name)
        proc.send_signal(sig)
        proc.wait(timeout=120)

    def stop(self) -> None:
        """Stop everything; a worker that does not finish its jobs in 20 s is killed, and the job
        directories a killed worker left mounted are unmounted."""
        self.stop_web()
        for name in list(self.workers or {}):
            proc = self.workers.pop(name)
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=60)
        with open("/proc/self/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[1].startswith(self.data_dir.rstrip("/") + "/")]
        for mount in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)

    def log(self, name: str) -> str:
        try:
            with open(os.path.join(self.data_dir, name + ".log"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

"""Start one worker process inside a sandbox and watch it until it ends.

The sandbox is bubblewrap: new user, PID, network (no interfaces but loopback), IPC, UTS and
cgroup namespaces; a read-only view of /usr, the Python install, the virtualenv and irscope's own
`compiler` package; a private tmpfs /tmp; the job directory as the only writable bind; no view of
the data directory or of anything else; the environment cleared. On top of that: rlimits
(address space, CPU seconds, file size), a process limit from a pids cgroup, a wall-clock limit
and a cap on captured output. Each limit, when hit, is reported in words the user understands.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

# The /etc files a compiler toolchain needs (the dynamic loader's cache, the alternatives that
# /usr/bin/c++ points through, the user database for getpass). Not /etc itself: the sandbox's user
# maps to the owner of these files, so a whole-/etc bind would expose /etc/shadow.
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf",
              "passwd", "group", "hosts", "ssl", "ca-certificates", "mime.types")


@dataclass(frozen=True)
class Limits:
    wall_s: float
    cpu_s: int
    memory_bytes: int
    processes: int
    file_bytes: int
    output_bytes: int
    tmp_bytes: int


@dataclass
class Outcome:
    """How the worker process ended, and the limit that ended it, if one did."""

    returncode: int | None
    wall_s: float
    output: str
    output_truncated: bool
    limit: str | None = None  # short name of the limit hit: wall_time, cpu_time, file_size, processes
    message: str | None = None  # the user-facing sentence for it
    sandboxed: bool = True


JOB_PLACEHOLDER = "{job}"


@dataclass
class SandboxSpec:
    """What to run and what it may see. `ro_paths` are bound read-only at the same path.
    In `argv`, the token "{job}" stands for the job directory as the worker sees it."""

    argv: list[str]
    job_dir: str
    env: dict[str, str]
    ro_paths: list[str] = field(default_factory=list)
    ro_binds: list[tuple[str, str]] = field(default_factory=list)  # (outside, inside) read-only
    use_bwrap: bool = True


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def bwrap_works() -> bool:
    """True when bubblewrap is installed and can create its namespaces on this machine."""
    path = bwrap_path()
    if not path:
        return False
    probe = [path, "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
             "--dev", "/dev", "--", "/bin/true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _bind_root_dirs(args: list[str]) -> None:
    for top in ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]


def bwrap_argv(spec: SandboxSpec, limits: Limits) -> list[str]:
    """The bubblewrap command line for `spec` (the worker's argv follows `--`)."""
    args = [bwrap_path() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--uid", "65534", "--gid", "65534", "--hostname", "irscope-sandbox",
            # /tmp first: a later bind under /tmp (a checkout in /tmp) must stay visible on top of it
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            "--ro-bind", "/usr", "/usr"]
    _bind_root_dirs(args)
    for name in _ETC_FILES:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    seen: set[str] = set()
    for path in spec.ro_paths:
        real = os.path.realpath(path)
        for p in (path, real):
            if p not in seen and os.path.exists(p) and not p.startswith("/usr/"):
                seen.add(p)
                args += ["--ro-bind", p, p]
    for outside, inside in spec.ro_binds:
        args += ["--ro-bind", outside, inside]
    args += ["--proc", "/proc", "--dev", "/dev", "--bind", spec.job_dir, "/job", "--chdir", "/tmp"]
    env = dict(spec.env, IRSCOPE_WORKDIR="/tmp/work", HOME="/tmp", TMPDIR="/tmp")
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"] + [a.replace(JOB_PLACEHOLDER, "/job") for a in spec.argv]


class ProcessCgroup:
    """A pids cgroup (v1 or v2) holding every process of one job, so `processes` caps forks.

    RLIMIT_NPROC does not work here: it counts processes per real user, and the sandbox's user
    maps to the server's (often root, which it exempts). Where no cgroup can be made, the limit is
    not enforced and `available` is False (the settings page says so).
    """

    def __init__(self, limit: int):
        self.path: str | None = None
        for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
            if not os.path.exists(os.path.join(base, "cgroup.procs")):
                continue
            if base == "/sys/fs/cgroup" and not os.path.exists(os.path.join(base, "cgroup.subtree_control")):
                continue
            path = os.path.join(base, "irscope", uuid.uuid4().hex[:12])
            try:
                os.makedirs(path)
                with open(os.path.join(path, "pids.max"), "w") as f:
                    f.write(str(limit))
            except OSError:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
                continue
            self.path = path
            break

    @property
    def available(self) -> bool:
        return self.path is not None

    def enter(self) -> None:
        """Move the calling process into the cgroup (runs in the child before exec)."""
        if self.path:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    def hit(self) -> bool:
        """True when a fork was refused because of the limit."""
        if not self.path:
            return False
        try:
            with open(os.path.join(self.path, "pids.events")) as f:
                return any(line.split()[0] == "max" and int(line.split()[1]) > 0 for line in f if line.strip())
        except OSError:
            return False

    def kill_all(self) -> None:
        if not self.path:
            return
        for _ in range(20):
            try:
                with open(os.path.join(self.path, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self) -> None:
        if self.path:
            self.kill_all()
            for _ in range(50):
                try:
                    os.rmdir(self.path)
                    return
                except OSError:
                    time.sleep(0.05)


def _drain(stream, keep: int, sink: list[bytes], flag: list[bool]) -> None:
    """Read a pipe to its end, keeping the first `keep` bytes (the rest would fill the disk)."""
    kept = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        if kept < keep:
            sink.append(chunk[: keep - kept])
            kept += min(len(chunk), keep - kept)
        if len(chunk) and kept >= keep:
            flag[0] = True


class Sandboxed:
    """One worker process started inside the sandbox. `wait` watches it to its end; the wall clock
    runs from `start_clock` (a pre-started worker's clock starts when it is handed a job)."""

    def __init__(self, spec: SandboxSpec, limits: Limits):
        self.spec, self.limits = spec, limits
        self.cgroup = cgroup = ProcessCgroup(limits.processes)

        def before_exec() -> None:
            # Runs in the child between fork and exec: limits apply to bwrap and everything under it.
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if not cgroup.available:
                resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
            cgroup.enter()

        if spec.use_bwrap:
            argv = bwrap_argv(spec, limits)
            env = {"PATH": "/usr/bin:/bin"}
        else:
            # --insecure-no-sandbox: same worker, same rlimits, no namespaces; the environment is
            # still cleared down to what the worker needs.
            argv = [a.replace(JOB_PLACEHOLDER, spec.job_dir) for a in spec.argv]
            scratch = os.path.join(spec.job_dir, "scratch")
            env = dict(spec.env, IRSCOPE_WORKDIR=scratch, HOME=scratch, TMPDIR=scratch)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, preexec_fn=before_exec,
                                     start_new_session=True, cwd=spec.job_dir)
        self._kept: list[bytes] = []
        self._truncated = [False]
        self._reader = threading.Thread(target=_drain, args=(self.proc.stdout, limits.output_bytes, self._kept,
                                                             self._truncated), daemon=True)
        self._reader.start()

    def start_clock(self) -> None:
        self.started = time.monotonic()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        _kill(self.proc, self.cgroup)
        self.proc.wait()
        self.cgroup.remove()

    def wait(self, on_tick: Callable[[], None] | None = None, tick_s: float = 0.25) -> Outcome:
        """Watch the process to its end under the wall-clock limit, calling `on_tick` meanwhile."""
        proc, cgroup, limits = self.proc, self.cgroup, self.limits
        timed_out = False
        try:
            while True:
                try:
                    proc.wait(timeout=tick_s)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if on_tick:
                    on_tick()
                if time.monotonic() - self.started > limits.wall_s:
                    timed_out = True
                    _kill(proc, cgroup)
                    proc.wait()
                    break
        finally:
            if proc.poll() is None:
                _kill(proc, cgroup)
                proc.wait()
            cgroup.kill_all()
            self._reader.join(timeout=5)
            processes_hit = cgroup.hit()
            cgroup.remove()
        output = b"".join(self._kept).decode("utf-8", "replace")
        outcome = Outcome(returncode=proc.returncode, wall_s=time.monotonic() - self.started, output=output,
                          output_truncated=self._truncated[0], sandboxed=self.spec.use_bwrap)
        _explain(outcome, limits, timed_out, processes_hit)
        return outcome


def run(spec: SandboxSpec, limits: Limits, on_tick: Callable[[], None] | None = None,
        tick_s: float = 0.25) -> Outcome:
    """Run the worker to completion under `limits`, calling `on_tick` while it runs."""
    return Sandboxed(spec, limits).wait(on_tick, tick_s)


def _kill(proc: subprocess.Popen, cgroup: ProcessCgroup) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    cgroup.kill_all()


def _explain(outcome: Outcome, limits: Limits, timed_out: bool, processes_hit: bool) -> None:
    """Name the limit that ended the process, in the words shown to the user."""
    code = outcome.returncode
    signum = -code if code is not None and code < 0 else None
    # bwrap reports its child's death by signal as exit status 128+N.
    if signum is None and code is not None and code > 128 and outcome.sandboxed:
        signum = code - 128
    if timed_out:
        outcome.limit, outcome.message = "wall_time", (
            f"stopped after {limits.wall_s:g} s of wall time (setting wall_time_limit_s)")
    elif signum == signal.SIGXCPU or (signum == signal.SIGKILL and _cpu_exhausted(outcome, limits)):
        outcome.limit, outcome.message = "cpu_time", (
            f"stopped after {limits.cpu_s} s of CPU time (setting cpu_time_limit_s)")
    elif signum == signal.SIGXFSZ:
        outcome.limit, outcome.message = "file_size", (
            f"stopped: a file grew past the {limits.file_bytes // 2**20} MiB file-size limit "
            "(setting file_size_limit_mb)")
    elif processes_hit:
        outcome.limit, outcome.message = "processes", (
            f"the job tried to start more than {limits.processes} processes (setting process_limit)")


def _cpu_exhausted(outcome: Outcome, limits: Limits) -> bool:
    # SIGKILL follows SIGXCPU at the hard limit; the wall clock tells whether CPU time could be spent.
    return outcome.wall_s * max(os.cpu_count() or 1, 1) >= limits.cpu_s * 0.9


def python_paths() -> list[str]:
    """What the worker's interpreter needs to see: the Python install and the virtualenv."""
    paths = [sys.base_prefix, sys.prefix]
    return [p for p in dict.fromkeys(paths) if p]

"""Start one worker process inside a sandbox and watch it until it ends.

The sandbox is bubblewrap: new PID, network (no interfaces but loopback), IPC, UTS and cgroup
namespaces; a read-only view of /usr, the Python install, the virtualenv and irscope's own
`compiler` package; a private size-capped tmpfs /tmp; a read-only /dev with a size-capped
/dev/shm; the job directory (a size-capped tmpfs the runner mounts) as the only writable bind;
no view of the data directory or of anything else; the environment cleared.

Who the job is on the host: when the server runs as root, bubblewrap sets the sandbox up with
root's rights and `setpriv` then drops to the dedicated unprivileged `sandbox_user` (no
capabilities, empty bounding set, no_new_privs) before the worker starts, so a job owns nothing
on the host but its job directory. A server that is not root runs bubblewrap in a user
namespace, where the job is the server's own (unprivileged) user.

On top of that: rlimits (address space, CPU seconds, file size), a cgroup with the pids, memory
and cpu controllers (service/cgroups.py), a wall-clock limit kept by a timer of its own and a cap
on captured output. Each limit, when hit, is reported in words the user understands.
"""
from __future__ import annotations

import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from compiler.model import JobSettings
from service import seccomp
from service.cgroups import CgroupLimits, JobCgroup

# The /etc files a compiler toolchain needs (the dynamic loader's cache, the alternatives that
# /usr/bin/c++ points through, the user database for getpass, Graphviz's fonts). Not /etc itself
# (/etc/shadow), and of /etc/ssl only the public certificates (/etc/ssl/private holds TLS keys).
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf",
              "passwd", "group", "hosts", "ssl/certs", "ca-certificates", "mime.types", "fonts")


def cgroup_limits(limits: JobSettings) -> CgroupLimits:
    """The job's cgroup: its processes, their memory together, its CPU quota."""
    return CgroupLimits(processes=limits.process_limit, memory_bytes=limits.job_memory_bytes, cpus=limits.job_cpus)


@dataclass
class Outcome:
    """How the worker process ended, and the limit that ended it, if one did."""

    returncode: int | None
    wall_s: float
    output: str
    output_truncated: bool
    # short name of the limit hit: wall_time, cpu_time, file_size, processes, memory; or worker_lost
    # (a spare template ended under its forked job: service/spare_templates.py)
    limit: str | None = None
    message: str | None = None  # the user-facing sentence for it
    sandboxed: bool = True


@dataclass(frozen=True)
class SandboxUser:
    """The unprivileged host user every job runs as (setting sandbox_user)."""

    name: str
    uid: int
    gid: int


def sandbox_user(name: str) -> SandboxUser:
    """Look up the sandbox user by name (or `uid:gid`). Raises ValueError with a sentence that
    says how to make one when it does not exist or is privileged."""
    if ":" in name and name.replace(":", "").isdigit():
        uid, gid = (int(x) for x in name.split(":", 1))
        user = SandboxUser(name, uid, gid)
    else:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise ValueError(f"the sandbox user {name!r} does not exist (setting sandbox_user); create it with "
                             f"`useradd --system --user-group --no-create-home --shell /usr/sbin/nologin {name}` "
                             "(./run.sh does this when run as root)") from None
        user = SandboxUser(name, entry.pw_uid, entry.pw_gid)
    if user.uid == 0 or user.gid == 0:
        raise ValueError(f"the sandbox user {name!r} is root (setting sandbox_user); it must be an unprivileged user")
    return user


JOB_PLACEHOLDER = "{job}"
SLOTS_MOUNT = "/slots"  # where a spare template sees its slots (compiler/spare_template.py)


def rlimits(limits: JobSettings, with_pids_cgroup: bool) -> list[tuple[int, int, int]]:
    """The job's rlimits as (resource, soft, hard): set before bwrap runs, or by a forked job
    process on itself (compiler/spare_template.py) before its job."""
    caps = [(resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
            (resource.RLIMIT_CPU, limits.cpu_time_limit_s, limits.cpu_time_limit_s + 5),
            (resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
            (resource.RLIMIT_CORE, 0, 0)]
    if not with_pids_cgroup:
        caps.append((resource.RLIMIT_NPROC, limits.process_limit, limits.process_limit))
    return caps


@dataclass
class SandboxSpec:
    """What to run and what it may see. `ro_paths` are bound read-only at the same path.
    In `argv`, the token "{job}" stands for the job directory as the worker sees it. With `user`
    (and a root server) the job runs as that host user; without, as the caller in a user namespace."""

    argv: list[str]
    job_dir: str
    env: dict[str, str]
    ro_paths: list[str] = field(default_factory=list)
    ro_binds: list[tuple[str, str]] = field(default_factory=list)  # (outside, inside) read-only
    use_bwrap: bool = True
    user: SandboxUser | None = None
    seccomp: bool = True  # under bubblewrap, the job runs under service/seccomp.py's filter
    # A spare template (compiler/spare_template.py): these host directories are bound at
    # /slots/0, /slots/1, ..., one per job it will fork, and it runs under seccomp.TEMPLATE_FILTER.
    slots: list[str] = field(default_factory=list)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _drops_to(user: SandboxUser | None) -> bool:
    return user is not None and os.geteuid() == 0


def _namespace_args(user: SandboxUser | None) -> tuple[list[str], list[str]]:
    """bwrap's namespace options, and what runs before the worker inside the sandbox."""
    if _drops_to(user):
        # No user namespace: bwrap (root) builds the mounts, keeps only the capabilities setpriv
        # needs to become the sandbox user, and setpriv drops every capability on the way.
        return (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"],
                ["/usr/bin/setpriv", "--reuid", str(user.uid), "--regid", str(user.gid), "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"])
    return ["--unshare-all", "--uid", "65534", "--gid", "65534"], []


def bwrap_works(user: SandboxUser | None = None) -> bool:
    """True when bubblewrap is installed and can create its namespaces (and drop to `user`) here."""
    path = bwrap_path()
    if not path:
        return False
    namespaces, prefix = _namespace_args(user)
    probe = [path, *namespaces, "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
             "--dev", "/dev", "--", *prefix, "/bin/true"]
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


class _Parents:
    """Directories above each bind target, made world-readable (0755) before the bind: bwrap as
    root makes missing parents 0700, which the unprivileged sandbox user could not pass through."""

    def __init__(self, args: list[str]):
        self.args, self.made = args, {"/", "/tmp", "/usr"}

    def bind(self, option: str, outside: str, inside: str) -> None:
        parents = []
        parent = os.path.dirname(inside)
        while parent not in self.made and parent != os.path.dirname(parent):
            parents.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(parents):
            if d.startswith("/usr/"):
                continue
            self.args += ["--perms", "0755", "--dir", d]
            self.made.add(d)
        self.args += [option, outside, inside]
        self.made.add(inside)


def bwrap_argv(spec: SandboxSpec, limits: JobSettings, seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command line for `spec` (the worker's argv follows `--`); with `seccomp_fd`,
    bubblewrap loads the filter read from it (service/seccomp.py) before it runs the job."""
    namespaces, prefix = _namespace_args(spec.user)
    args = [bwrap_path() or "bwrap", *namespaces, "--die-with-parent", "--new-session", "--clearenv",
            "--hostname", "irscope-sandbox",
            *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
            # /tmp first: a later bind under /tmp (a checkout in /tmp) must stay visible on top of it
            "--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            "--ro-bind", "/usr", "/usr"]
    _bind_root_dirs(args)
    binds = _Parents(args)
    for name in _ETC_FILES:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            binds.bind("--ro-bind", path, path)
    seen: set[str] = set()
    for path in spec.ro_paths:
        real = os.path.realpath(path)
        for p in (path, real):
            if p not in seen and os.path.exists(p) and not p.startswith("/usr/"):
                seen.add(p)
                binds.bind("--ro-bind", p, p)
    for outside, inside in spec.ro_binds:
        binds.bind("--ro-bind", outside, inside)
    # A spare template's forks each mount a /proc of their own PID namespace (compiler/
    # spare_template.py), which the kernel allows only beside an uncovered proc mount: the
    # template (irscope's code only) sees the host's /proc instead of bwrap's covered one.
    args += ["--bind", "/proc", "/proc"] if spec.slots else ["--proc", "/proc"]
    args += [
             # /dev: bwrap's minimal device set, read-only, with a small private /dev/shm for
             # multiprocessing's semaphores
             "--dev", "/dev", "--perms", "1777", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm",
             "--remount-ro", "/dev",
             "--bind", spec.job_dir, "/job", "--chdir", "/tmp"]
    for i, slot in enumerate(spec.slots):
        binds.bind("--bind", slot, f"{SLOTS_MOUNT}/{i}")
    env = dict(spec.env, IRSCOPE_WORKDIR="/tmp/work", HOME="/tmp", TMPDIR="/tmp")
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"] + prefix + [a.replace(JOB_PLACEHOLDER, "/job") for a in spec.argv]


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
    """One worker process started inside the sandbox. `wait` watches it to its end. The wall clock
    is a timer of its own, so nothing `wait` does meanwhile can hold it up; it runs from
    construction, or, for a pre-started worker (`clock=False`), from `start_clock` (when it is
    handed a job)."""

    def __init__(self, spec: SandboxSpec, limits: JobSettings, clock: bool = True):
        self.spec, self.limits = spec, limits
        self.cgroup = cgroup = JobCgroup(cgroup_limits(limits))

        def before_exec() -> None:
            # Runs in the child between fork and exec: limits apply to bwrap and everything under it.
            for which, soft, hard in rlimits(limits, "pids" in cgroup.dirs):
                resource.setrlimit(which, (soft, hard))
            cgroup.enter()

        if spec.use_bwrap:
            chosen = seccomp.TEMPLATE_FILTER if spec.slots else seccomp.FILTER
            seccomp_fd = chosen.fd() if spec.seccomp else None
            argv = bwrap_argv(spec, limits, seccomp_fd)
            env = {"PATH": "/usr/bin:/bin"}
        else:
            # --insecure-no-sandbox: same worker, same rlimits, no namespaces; the environment is
            # still cleared down to what the worker needs.
            argv = [a.replace(JOB_PLACEHOLDER, spec.job_dir) for a in spec.argv]
            seccomp_fd = None
            scratch = os.path.join(spec.job_dir, "scratch")
            env = dict(spec.env, IRSCOPE_WORKDIR=scratch, HOME=scratch, TMPDIR=scratch)
        self.started = time.monotonic()
        self._timed_out = False
        self._timer: threading.Timer | None = None
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, env=env, preexec_fn=before_exec,
                                         start_new_session=True, cwd=spec.job_dir,
                                         pass_fds=(seccomp_fd,) if seccomp_fd is not None else ())
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)  # bubblewrap has its own copy
        self._kept: list[bytes] = []
        self._truncated = [False]
        self._reader = threading.Thread(target=_drain, args=(self.proc.stdout, limits.output_bytes, self._kept,
                                                             self._truncated), daemon=True)
        self._reader.start()
        if clock:
            self.start_clock()

    def start_clock(self) -> None:
        """Start (or restart) the wall clock: at `limits.wall_time_limit_s` the timer kills the job."""
        if self._timer is not None:
            self._timer.cancel()
        self.started = time.monotonic()
        self._timer = threading.Timer(float(self.limits.wall_time_limit_s), self._deadline)
        self._timer.daemon = True
        self._timer.start()

    def _deadline(self) -> None:
        if self.proc.poll() is None:
            self._timed_out = True
            _kill(self.proc, self.cgroup)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def resident_bytes(self) -> int | None:
        """What the sandboxed processes hold in memory now (their cgroup's VmRSS summed)."""
        return self.cgroup.resident_bytes()

    def stop(self) -> None:
        """Kill every process of the job now, without waiting (`wait` then returns)."""
        _kill(self.proc, self.cgroup)

    def kill(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        _kill(self.proc, self.cgroup)
        self.proc.wait()
        self.cgroup.remove()

    def wait(self, on_tick: Callable[[], None] | None = None, tick_s: float = 0.25) -> Outcome:
        """Watch the process to its end, calling `on_tick` meanwhile."""
        proc, cgroup, limits = self.proc, self.cgroup, self.limits
        try:
            while True:
                try:
                    proc.wait(timeout=tick_s)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if on_tick:
                    on_tick()
        finally:
            if self._timer is not None:
                self._timer.cancel()
            if proc.poll() is None:
                _kill(proc, cgroup)
                proc.wait()
            cgroup.kill_all()
            self._reader.join(timeout=5)
            processes_hit, memory_hit = cgroup.processes_hit(), cgroup.memory_hit()
            cgroup.remove()
        output = b"".join(self._kept).decode("utf-8", "replace")
        outcome = Outcome(returncode=proc.returncode, wall_s=time.monotonic() - self.started, output=output,
                          output_truncated=self._truncated[0], sandboxed=self.spec.use_bwrap)
        explain(outcome, limits, self._timed_out, processes_hit, memory_hit)
        return outcome


def run(spec: SandboxSpec, limits: JobSettings, on_tick: Callable[[], None] | None = None,
        tick_s: float = 0.25) -> Outcome:
    """Run the worker to completion under `limits`, calling `on_tick` while it runs."""
    return Sandboxed(spec, limits).wait(on_tick, tick_s)


def _kill(proc: subprocess.Popen, cgroup: JobCgroup) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    cgroup.kill_all()


def explain(outcome: Outcome, limits: JobSettings, timed_out: bool, processes_hit: bool,
             memory_hit: bool = False) -> None:
    """Name the limit that ended the process, in the words shown to the user."""
    code = outcome.returncode
    signum = -code if code is not None and code < 0 else None
    # bwrap reports its child's death by signal as exit status 128+N.
    if signum is None and code is not None and code > 128 and outcome.sandboxed:
        signum = code - 128
    if timed_out:
        outcome.limit, outcome.message = "wall_time", (
            f"stopped after {limits.wall_time_limit_s:g} s of wall time (setting wall_time_limit_s)")
    elif memory_hit:
        outcome.limit, outcome.message = "memory", (
            f"stopped: the job's processes together used more than {limits.job_memory_bytes // 2**20} MiB "
            "of memory (setting job_memory_mb)")
    elif signum == signal.SIGXCPU or (signum == signal.SIGKILL and _cpu_exhausted(outcome, limits)):
        outcome.limit, outcome.message = "cpu_time", (
            f"stopped after {limits.cpu_time_limit_s} s of CPU time (setting cpu_time_limit_s)")
    elif signum == signal.SIGXFSZ:
        outcome.limit, outcome.message = "file_size", (
            f"stopped: a file grew past the {limits.file_bytes // 2**20} MiB file-size limit "
            "(setting file_size_limit_mb)")
    elif processes_hit:
        outcome.limit, outcome.message = "processes", (
            f"the job tried to start more than {limits.process_limit} processes (setting process_limit)")


def _cpu_exhausted(outcome: Outcome, limits: JobSettings) -> bool:
    # SIGKILL follows SIGXCPU at the hard limit; the wall clock tells whether CPU time could be spent.
    return outcome.wall_s * max(os.cpu_count() or 1, 1) >= limits.cpu_time_limit_s * 0.9


def python_paths() -> list[str]:
    """What the worker's interpreter needs to see: the Python install and the virtualenv."""
    paths = [sys.base_prefix, sys.prefix]
    return [p for p in dict.fromkeys(paths) if p]

"""One cgroup per job with the pids, memory and cpu controllers, on cgroup v1 or v2.

Rlimits are per process (RLIMIT_AS: 128 processes x 6 GiB) or per user (RLIMIT_NPROC, which
does not bind a root-mapped user), so the limits that must hold for a whole job - how many
processes, how much memory, how much CPU at once - live in a cgroup that every process of the
job is born into.

Job cgroups are made under the server's own cgroup (`<own>/irscope/<server pid>-<id>`), so a job
is still counted in whatever limits the server itself runs under, and a server starting can tell
the cgroups a dead one left (`release_stale`): it was killed before it could remove them, and what
still runs in them (a sandbox that outlived it) is killed. On v1 each controller has its own
hierarchy; on v2 the controllers must be enabled in `cgroup.subtree_control` of every cgroup above
the job's, which the kernel refuses while the server's cgroup holds processes (the "no internal
processes" rule); the server then moves itself into a leaf `<own>/irscope-server` first.
`missing_controllers()` says which limits cannot be enforced here, so the server can refuse to
start instead of running jobs without them.
"""
from __future__ import annotations

import errno
import os
import signal
import time
import uuid
from dataclasses import dataclass

CONTROLLERS = ("pids", "memory", "cpu")
# The setting each controller enforces, for messages.
LIMIT_OF = {"pids": "process_limit", "memory": "job_memory_mb", "cpu": "job_cpus"}
_CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupLimits:
    processes: int
    memory_bytes: int
    cpus: float  # CPU time per wall second (1.0 = one core); 0 = no quota


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root inside the hierarchy, fs type, super options) of every cgroup mount."""
    out = []
    try:
        lines = _read("/proc/self/mountinfo").splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) >= 5 and len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
            out.append((fields[4], fields[3], rfields[0], rfields[2]))
    return out


def _own_paths() -> tuple[dict[str, str], str | None]:
    """The server's cgroup path per v1 controller, and its v2 path."""
    v1: dict[str, str] = {}
    v2 = None
    try:
        lines = _read("/proc/self/cgroup").splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
            if os.path.basename(v2) == "irscope-server":  # the leaf we moved ourselves into (below)
                v2 = os.path.dirname(v2)
        for controller in parts[1].split(","):
            v1[controller] = parts[2]
    return v1, v2


def _under(mount: str, root: str, path: str) -> str:
    # A container may mount only a subtree of the hierarchy (its `root`); /proc/self/cgroup paths
    # are then relative to the hierarchy's root, not to the mount.
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root):] or "/"
    return os.path.join(mount, path.lstrip("/"))


def own_dirs() -> dict[str, tuple[str, int]]:
    """controller -> (the server's cgroup directory for it, cgroup version)."""
    v1_paths, v2_path = _own_paths()
    found: dict[str, tuple[str, int]] = {}
    for mount, root, fstype, options in _mounts():
        if fstype == "cgroup":
            for controller in CONTROLLERS:
                if controller in options.split(",") and controller in v1_paths:
                    found.setdefault(controller, (_under(mount, root, v1_paths[controller]), 1))
    for mount, root, fstype, _ in _mounts():
        if fstype == "cgroup2" and v2_path is not None:
            own = _under(mount, root, v2_path)
            try:
                available = _read(os.path.join(own, "cgroup.controllers")).split()
            except OSError:
                continue
            for controller in CONTROLLERS:
                if controller in available:
                    found.setdefault(controller, (own, 2))
    return found


def _enable_v2(own: str, controllers: list[str]) -> None:
    """Enable `controllers` for <own>/irscope and its children. Raises OSError when the kernel
    refuses (controllers not delegated to us, or processes other than ours in `own`)."""
    wanted = " ".join("+" + c for c in controllers)
    try:
        _write(os.path.join(own, "cgroup.subtree_control"), wanted)
    except OSError as e:
        if e.errno != errno.EBUSY:
            raise
        # `own` holds processes: move this server into a leaf and try again. Other processes
        # there (a shell that started us) keep it busy, and then we cannot.
        leaf = os.path.join(own, "irscope-server")
        os.makedirs(leaf, exist_ok=True)
        _write(os.path.join(leaf, "cgroup.procs"), str(os.getpid()))
        _write(os.path.join(own, "cgroup.subtree_control"), wanted)
    parent = os.path.join(own, "irscope")
    os.makedirs(parent, exist_ok=True)
    _write(os.path.join(parent, "cgroup.subtree_control"), wanted)


class JobCgroup:
    """The cgroup(s) of one job. `dirs` maps each controller to its directory (one directory for
    all of them on v2); a controller missing from it is not enforced (see `missing`)."""

    def __init__(self, limits: CgroupLimits, controllers: tuple[str, ...] = CONTROLLERS):
        self.limits = limits
        self.dirs: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        owns = own_dirs()
        made: dict[str, str] = {}  # directory -> version, made once for all controllers in it
        for controller in controllers:
            if controller not in owns:
                self.errors[controller] = "no cgroup hierarchy offers it"
                continue
            own, version = owns[controller]
            path = os.path.join(own, "irscope", name)
            try:
                if path not in made:
                    if version == 2:
                        _enable_v2(own, [c for c in controllers if owns.get(c, ("", 0))[1] == 2])
                    os.makedirs(path)
                    made[path] = str(version)
                self._configure(controller, path, version)
                self.dirs[controller] = path
            except OSError as e:
                self.errors[controller] = f"{e.strerror or e} ({path})"
        for path in made:
            if path not in self.dirs.values():
                _rmdir(path)

    @property
    def missing(self) -> list[str]:
        return [c for c in CONTROLLERS if c not in self.dirs]

    def _configure(self, controller: str, path: str, version: int) -> None:
        lim = self.limits
        if controller == "pids":
            _write(os.path.join(path, "pids.max"), str(lim.processes))
        elif controller == "memory":
            if version == 2:
                _write(os.path.join(path, "memory.max"), str(lim.memory_bytes))
                if os.path.exists(os.path.join(path, "memory.swap.max")):
                    _write(os.path.join(path, "memory.swap.max"), "0")
            else:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(lim.memory_bytes))
                memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):  # swap accounting on: RAM + swap capped at the same
                    _write(memsw, str(lim.memory_bytes))
        elif controller == "cpu":
            quota = int(lim.cpus * _CPU_PERIOD_US) if lim.cpus > 0 else None
            if version == 2:
                _write(os.path.join(path, "cpu.max"), f"{quota or 'max'} {_CPU_PERIOD_US}")
            else:
                _write(os.path.join(path, "cpu.cfs_period_us"), str(_CPU_PERIOD_US))
                _write(os.path.join(path, "cpu.cfs_quota_us"), str(quota or -1))

    def enter(self) -> None:
        """Move the calling process into every directory (runs in the child before exec)."""
        self.add(os.getpid())

    def add(self, pid: int) -> None:
        """Move process `pid` into every directory (a spare template's fork: service/spare_templates.py)."""
        for path in dict.fromkeys(self.dirs.values()):
            _write(os.path.join(path, "cgroup.procs"), str(pid))

    def _events(self, path: str, name: str) -> dict[str, int]:
        try:
            return {k: int(v) for k, v in (line.split() for line in _read(os.path.join(path, name)).splitlines()
                                           if len(line.split()) == 2 and line.split()[1].isdigit())}
        except OSError:
            return {}

    def processes_hit(self) -> bool:
        """True when a fork was refused because of the process limit."""
        path = self.dirs.get("pids")
        return bool(path) and self._events(path, "pids.events").get("max", 0) > 0

    def memory_hit(self) -> bool:
        """True when the kernel killed a process of the job for going over the memory limit."""
        path = self.dirs.get("memory")
        if not path:
            return False
        name = "memory.events" if os.path.exists(os.path.join(path, "memory.events")) else "memory.oom_control"
        return self._events(path, name).get("oom_kill", 0) > 0

    def resident_bytes(self) -> int | None:
        """The resident memory of the job's processes together (VmRSS summed), or None when the
        job has no cgroup to list them."""
        if not self.dirs:
            return None
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                    total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
            except (OSError, ValueError, IndexError):
                continue
        return total

    def pids(self) -> list[int]:
        return _procs(list(dict.fromkeys(self.dirs.values())))

    def set_cpu_weight(self, weight: int) -> None:
        """This job's share of the CPU against the other jobs when they compete (cgroup v2
        cpu.weight, 1-10000, default 100; v1 cpu.shares, 1024 for 100). Its quota is unchanged."""
        path = self.dirs.get("cpu")
        if not path:
            return
        try:
            if os.path.exists(os.path.join(path, "cpu.weight")):
                _write(os.path.join(path, "cpu.weight"), str(weight))
            else:
                _write(os.path.join(path, "cpu.shares"), str(max(2, weight * 1024 // 100)))
        except OSError:
            pass  # a weight is a preference: without it the spare only competes as a job does

    def kill_all(self) -> None:
        _kill_all(list(dict.fromkeys(self.dirs.values())))

    def remove(self) -> None:
        self.kill_all()
        for path in dict.fromkeys(self.dirs.values()):
            _rmdir(path)


def _procs(paths: list[str]) -> list[int]:
    for path in paths:
        try:
            return [int(p) for p in _read(os.path.join(path, "cgroup.procs")).split()]
        except OSError:
            continue
    return []


def _kill_all(paths: list[str]) -> None:
    """Kill every process in the cgroup whose directories (one per hierarchy) are `paths`."""
    for path in paths:
        kill_file = os.path.join(path, "cgroup.kill")
        if os.path.exists(kill_file):
            try:
                _write(kill_file, "1")
            except OSError:
                pass
    for _ in range(40):
        pids = _procs(paths)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_stale() -> list[str]:
    """Kill what runs in, and remove, the job cgroups of server processes that are gone (named
    `<pid>-<id>`, see the module's doc); returns their names. Another live server's are kept."""
    stale: dict[str, list[str]] = {}
    for own, _ in own_dirs().values():
        parent = os.path.join(own, "irscope")
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid, _, rest = name.partition("-")
            if pid.isdigit() and rest and not _alive(int(pid)) and os.path.isdir(os.path.join(parent, name)):
                stale.setdefault(name, []).append(os.path.join(parent, name))
    for paths in stale.values():
        _kill_all(paths)
        for path in paths:
            _rmdir(path)
    return sorted(stale)


def _rmdir(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def missing_controllers(limits: CgroupLimits) -> dict[str, str]:
    """controller -> why it cannot be enforced on this machine (empty when all three work):
    makes one job cgroup with these limits and removes it."""
    probe = JobCgroup(limits)
    try:
        return {c: probe.errors.get(c, "unavailable") for c in probe.missing}
    finally:
        probe.remove()

"""A spare template: one warm process in the sandbox that forks a fresh job process per job.

A spare (service/spares.py) imports its compiler and warms it up before its job arrives, about
11 s of CPU for PyTorch on a 2-core host; a class pressing Compile at once, or one user pressing it
again and again, takes spares faster than that refills them. A template is prepared the same way
(sandbox_entry.prewarm), then never runs a job: for each of its slots, `serve` forks one child the
moment that slot's job file appears, and the child, a copy of a process that ran irscope's code
only, serves exactly that one job. So a job costs a fork (milliseconds) instead of a warm-up.

A child makes a sandbox of its own before its job runs (`_become_job`), because its siblings
(other users' jobs) live in the template's sandbox:

- its output goes to its slot's worker log, and it closes every file the template had open;
- it waits until the runner has moved it into the job's own cgroup (memory, processes, CPU) and
  said so (model.SLOT_GO, which carries the job's rlimits), and sets those rlimits;
- it starts a session of its own (setsid) before anything else, and the job process below starts
  another: a PID namespace does not scope a process group, so a job left in the template's group
  reached every sibling and the template with `kill(0, sig)` (tests/test_job_isolation.py);
- it makes a new user, mount, PID, IPC, UTS, network and cgroup namespace and forks once more: the
  job runs as PID 1 of its own PID namespace, so it can name (signal) no sibling and not the
  template;
- in its own mounts: its slot bound at /job, every slot (its siblings' job directories) covered
  by an empty read-only tmpfs, a fresh size-capped /tmp and /dev/shm, and a /proc of its own PID
  namespace; the directories the template's warm-up filled from the toolchain alone (the
  pipeline's `template_carried_dirs`: Inductor's precompiled headers) are bound read-only into the
  new /tmp (`/tmp/.template-N`) and linked, file by file, from directories of the job's own
  where they were;
- it is not dumpable (nor is the template), so no other process of the same user can read or
  write its memory, its files or its environment through /proc; it drops every capability, and its
  bounding set, sets no_new_privs and loads the jobs' whole seccomp filter, which denies mounts and
  namespaces from then on (so nothing above can be undone).

The template's sandbox binds the host's /proc, not bubblewrap's (whose covered subdirectories make
the kernel refuse any new proc mount in a user namespace below it); only irscope's code runs
before each job's own /proc covers it.

Forking is safe here because the template runs no Python thread but its main one when it forks
(`serve` refuses otherwise); its one other thread is the OpenMP pool's, which torch starts at
import and which waits idle: the child has none, and its first parallel region starts a team of
its own (tests/test_pytorch_pipeline.py counts the child's threads before and after one). The
virtual GPU's warm-up starts no autograd device thread (autograd refuses to run in a child forked
after one: spare_warmup). And the template forks at the point where a spare would take its job:
every reset the warm-up does (spare_warmup) holds for each child as it held for one spare.
"""
from __future__ import annotations

import ctypes
import json
import os
import random
import resource
import sys
import threading
import time
import traceback
from typing import Callable

from compiler import file_wait
from compiler.model import JOB_FILE, SLOT_EXITS, SLOT_FORKS, SLOT_GO, SLOT_LOG, TEMPLATE_SECCOMP

SLOTS = "/slots"  # where the sandbox binds the template's slots (service/sandbox.SLOTS_MOUNT)
JOB_DIR = "/job"

_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNS, _CLONE_NEWCGROUP, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 4, 24, 38, 22
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SECCOMP_MODE_FILTER = 2
_CAP_VERSION_3 = 0x20080522


def slots() -> list[int]:
    """The template's slot numbers."""
    return sorted(int(name) for name in os.listdir(SLOTS) if name.isdigit())


def job_waiting() -> bool:
    """True when some slot already has its job (a warm-up then stops short, as a spare's does)."""
    return any(os.path.exists(os.path.join(SLOTS, str(i), JOB_FILE)) for i in slots())


def serve(control_dir: str, carried: list[str], after_first_fork: Callable[[], None] = lambda: None,
          poll_s: float = 0.01) -> bool:
    """Fork one job process per slot as each slot's job file appears. Returns True in a forked
    job process, whose job directory is then /job; returns False in the template once every
    slot was served and every child has ended (the template then exits). The template writes
    each child's PID (SLOT_FORKS) and exit status (SLOT_EXITS) to `control_dir`, which no child
    sees. `carried`: directories under the template's /tmp that its warm-up filled from the
    toolchain alone (Inductor's precompiled headers), which each job sees read-only in its own /tmp,
    linked from a directory of its own where they were. `after_first_fork` runs in the template
    once its first jobs are forked (the pipeline's finish_spare: a warm-up those jobs cut short
    is finished then)."""
    pending = slots()
    with open(os.path.join(control_dir, TEMPLATE_SECCOMP), "rb") as f:
        filter_bpf = f.read()
    for name in (SLOT_FORKS, SLOT_EXITS):
        os.makedirs(os.path.join(control_dir, name), exist_ok=True)
    _prctl(_PR_SET_DUMPABLE, 0)  # no child may read or write the template's memory through /proc
    children: dict[int, int] = {}
    # woken when a slot's job file is renamed into place (compiler/file_wait.py), not by a poll:
    # an idle template then costs no CPU
    arrivals = file_wait.Arrivals(os.path.join(SLOTS, str(slot)) for slot in pending)
    look = True
    while pending or children:
        for slot in list(pending) if look else ():
            if not os.path.exists(os.path.join(SLOTS, str(slot), JOB_FILE)):
                continue
            pending.remove(slot)
            if threading.active_count() != 1:
                raise RuntimeError(f"a spare template must not fork with threads running: {threading.enumerate()}")
            pid = os.fork()
            if pid == 0:
                try:
                    # A session and process group of its own before anything else: a PID namespace
                    # does not scope a process group, so in the template's group `kill(0, sig)`
                    # from one job reached every sibling job and the template.
                    os.setsid()
                    _become_job(slot, filter_bpf, [d for d in carried if os.path.isdir(d)])
                except BaseException:  # noqa: BLE001 - the job process cannot start: say why, end it
                    traceback.print_exc()
                    os._exit(70)
                return True
            children[pid] = slot
            _publish(os.path.join(control_dir, SLOT_FORKS, str(slot)), str(pid))
        if children and after_first_fork is not None:
            after_first_fork()
            after_first_fork = None
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            slot = children.pop(pid, None)
            if slot is not None:
                _publish(os.path.join(control_dir, SLOT_EXITS, str(slot)), str(_exit_code(status)))
        # while jobs run, reap each as it ends (every poll_s); idle, sleep until a job file arrives
        # (and look again every RECHECK_S all the same)
        look = arrivals.wait(poll_s if children else file_wait.RECHECK_S) or not children
    arrivals.close()
    return False


def _become_job(slot: int, filter_bpf: bytes, carried: list[str]) -> None:
    """In the forked child: make the job's own sandbox (module docstring), in this order."""
    slot_dir = os.path.join(SLOTS, str(slot))
    log = os.open(os.path.join(slot_dir, SLOT_LOG), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    go = os.path.join(slot_dir, SLOT_GO)
    while not os.path.exists(go):  # the runner moves this process into the job's cgroup first
        time.sleep(0.002)
    with open(go, encoding="utf-8") as f:
        told = json.load(f)
    for which, soft, hard in told["rlimits"]:
        resource.setrlimit(which, (soft, hard))
    uid, gid = os.getuid(), os.getgid()
    _prctl(_PR_SET_DUMPABLE, 1)  # its own /proc files (the maps below) are its own again
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWUTS
                         | _CLONE_NEWNET | _CLONE_NEWCGROUP), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    pid = os.fork()  # the job: PID 1 of the new PID namespace; this process waits and passes its end on
    if pid != 0:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        os._exit(_exit_code(status))
    # The job's own session and group, apart from this process's waiting parent too: what the job
    # signals through its group (kill(0), killpg, setpriority(PRIO_PGRP)) is its own processes.
    os.setsid()
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount(slot_dir, JOB_DIR, None, _MS_BIND | _MS_REC)
    # The slots covered; the carried directories wait there while /tmp is replaced.
    _mount("tmpfs", SLOTS, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=4k,mode=0700")
    aside = [os.path.join(SLOTS, str(i)) for i in range(len(carried))]
    for source, place in zip(carried, aside):
        os.mkdir(place)
        _mount(source, place, None, _MS_BIND | _MS_REC)
    _mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={told['tmp_bytes']},mode=1777")
    for i, (target, place) in enumerate(zip(carried, aside)):
        # read-only where the job cannot change what its siblings see; the directory itself is
        # the job's own (a job may build another header beside them), holding links to those
        kept = os.path.join("/tmp", f".template-{i}")
        os.mkdir(kept)
        _mount(place, kept, None, _MS_BIND | _MS_REC)
        _mount(None, kept, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        _check(_libc.umount2(place.encode(), 0), f"umount {place}")
        os.rmdir(place)
        for folder, _, files in os.walk(kept):  # its folders the job's own too (Inductor's locks/)
            mirror = os.path.join(target, os.path.relpath(folder, kept))
            os.makedirs(mirror, exist_ok=True)
            for name in files:
                os.symlink(os.path.join(folder, name), os.path.join(mirror, name))
    _mount(None, SLOTS, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_RDONLY)
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={told['shm_bytes']},mode=1777")
    _prctl(_PR_SET_DUMPABLE, 0)
    _drop_capabilities()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _load_filter(filter_bpf)
    # A fresh process seeds Python's and numpy's generators from the OS; a fork would repeat the
    # template's.
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


def _drop_capabilities() -> None:
    """No capability left in any set (the new user namespace gave this process all of them)."""
    cap = 0
    while _libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) == 0:
        cap += 1
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    _check(_libc.capset(ctypes.byref(Header(_CAP_VERSION_3, 0)), data), "capset")


def _load_filter(bpf: bytes) -> None:
    """Load the jobs' seccomp filter (service/seccomp.py's BPF, 8 bytes per instruction)."""
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = ctypes.create_string_buffer(bpf, len(bpf))
    program = Program(len(bpf) // 8, ctypes.cast(code, ctypes.c_void_p))
    _check(_libc.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(program), 0, 0),
           "loading the seccomp filter")


def _exit_code(status: int) -> int:
    """A wait status as a shell (and bubblewrap) reports it: the exit code, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                       ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def _prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl {option}")


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _publish(path: str, text: str) -> None:
    """Write a file the runner reads whole (written aside, then renamed into place)."""
    _write(path + ".tmp", text)
    os.replace(path + ".tmp", path)


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)

"""A job's directory on the host: what the sandbox binds at /job.

With a root server and a `job_disk_mb` cap, the directory is a tmpfs of that size mounted for
this job alone (so a job cannot fill the server's disk, and what it writes goes when the job
goes), owned by the sandbox user with mode 0700. Its `out/` is where the worker writes its result
bundle; the runner reads it as hostile input (service/bundle_reader.py).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil

from service.sandbox import SandboxUser

_MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _mount_tmpfs(path: str, size_bytes: int, user: SandboxUser | None) -> None:
    owner = f",uid={user.uid},gid={user.gid}" if user else ""
    options = f"size={size_bytes},mode=0700,nr_inodes=200000{owner}".encode()
    if _libc.mount(b"irscope-job", path.encode(), b"tmpfs", ctypes.c_ulong(0x2 | 0x4), options) != 0:  # nosuid, nodev
        err = ctypes.get_errno()
        raise OSError(err, f"cannot mount the job's tmpfs at {path}: {os.strerror(err)}")


def _unmount(path: str) -> None:
    if os.path.ismount(path):
        _libc.umount2(path.encode(), _MNT_DETACH)


def can_mount_tmpfs(probe_dir: str) -> str | None:
    """None when this process can mount a job tmpfs, else why not."""
    os.makedirs(probe_dir, exist_ok=True)
    try:
        _mount_tmpfs(probe_dir, 1 << 20, None)
    except OSError as e:
        return str(e.strerror or e)
    finally:
        _unmount(probe_dir)
        shutil.rmtree(probe_dir, ignore_errors=True)
    return None


def prepare(job_dir: str, user: SandboxUser | None, disk_bytes: int) -> None:
    """An empty job directory with `out/` and `scratch/`, writable by the sandbox's user only."""
    release(job_dir)
    os.makedirs(job_dir)
    if disk_bytes > 0:
        _mount_tmpfs(job_dir, disk_bytes, user)
    for d in (job_dir, os.path.join(job_dir, "out"), os.path.join(job_dir, "scratch")):
        os.makedirs(d, exist_ok=True)
        if user is not None and os.geteuid() == 0:
            os.chown(d, user.uid, user.gid)
            os.chmod(d, 0o700)
        else:
            # The sandbox's user maps to the server's own user: that user owns it already.
            os.chmod(d, 0o700)


def is_full(job_dir: str) -> bool:
    """True when the job filled its own tmpfs (so a worker that died writing has an explanation)."""
    if not os.path.ismount(job_dir):
        return False
    st = os.statvfs(job_dir)
    return st.f_bavail * st.f_frsize < (256 << 10) or st.f_favail == 0


def release(job_dir: str) -> None:
    """Empty, unmount (if mounted) and remove a job directory. Never follows a link the job made.
    Emptied first: a spare template's bind of a slot keeps that tmpfs, and what is in it, alive
    until the template ends."""
    shutil.rmtree(job_dir, ignore_errors=True)
    _unmount(job_dir)
    shutil.rmtree(job_dir, ignore_errors=True)

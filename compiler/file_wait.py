"""Waiting for a file to appear without spinning: a spare waits so for its job file, and a spare
template for its slots' job files (compiler/sandbox_entry.py, compiler/spare_template.py), for as long
as the server is idle.

Checking every 10 ms cost an idle PyTorch template (32 slots) about 3.4 s of CPU a minute and each
other spare about 1.7 s: a server idle with its default spares used 8.46 CPU-s a minute, 14 % of one
core; waiting on inotify, 0.18 (bench/idle_server.py, a 2-core host). Linux's inotify wakes the
waiter when the runner renames a file into a watched directory (service/job_process.write_json
writes aside, then renames). Where inotify cannot be had, the wait is a sleep, and the caller looks
again as it did before.
"""
from __future__ import annotations

import ctypes
import errno
import os
import select
import time
from typing import Iterable

_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
# With no event, look again after this long all the same: a file that arrived unseen (a filesystem
# that does not report it) waits at most this.
RECHECK_S = 1.0
POLL_S = 0.01  # without inotify: how often to look, as before


class Arrivals:
    """Entries made or renamed into `directories`; `wait` blocks until one is, or `timeout_s`. Watch
    first, then look for the file, then wait: nothing that arrives in between is missed."""

    def __init__(self, directories: Iterable[str]):
        self.fd = -1
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return
            for directory in directories:
                if libc.inotify_add_watch(fd, os.fsencode(directory), _IN_MOVED_TO | _IN_CREATE) < 0:
                    os.close(fd)
                    return
            self.fd = fd
        except (OSError, AttributeError):  # no libc symbol (not Linux): poll
            self.fd = -1

    def wait(self, timeout_s: float) -> bool:
        """Block until something arrived (True) or `timeout_s` passed (False). Without inotify, sleep
        at most POLL_S and say True: the caller looks again, as a poll does."""
        if self.fd < 0:
            time.sleep(min(timeout_s, POLL_S))
            return True
        ready, _, _ = select.select([self.fd], [], [], timeout_s)  # (a signal does not cut it short: PEP 475)
        if not ready:
            return False
        while True:  # drain: the caller looks at the directories itself
            try:
                if not os.read(self.fd, 1 << 16):
                    break
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                raise
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Arrivals":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for_file(path: str) -> None:
    """Return once `path` exists."""
    with Arrivals([os.path.dirname(path) or "."]) as arrivals:
        while not os.path.exists(path):
            arrivals.wait(RECHECK_S)

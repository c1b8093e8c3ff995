"""Triton compilations of one job spread over helper processes forked from it, each compilation
captured there (compiler/kernels/capture.py) and its CompiledRecord handed back to the job.

The capture cannot run two compilations at once in one process: Triton prints its per-pass dumps
to file descriptor 2, which the capture points at one file per stage. A forked helper has a file
descriptor 2 of its own, the same Triton, Inductor and capture hooks already loaded, and the job's
cgroup, rlimits, seccomp filter and CPU quota (it is a process of the job). `spread` runs the
first share of the work in this process and each other share in a helper; the helper writes the
records of each compilation it finished into `directory` (written aside, renamed into place),
which this process takes between its own compilations and after, handing each to the capture's
`on_compiled`. A unit a helper did not finish (it failed, the helper died, or it stood still and
was killed) is returned, and the caller compiles it itself: its error is then raised where it
would have been without helpers. If one of this process's own compilations fails, its helpers
are killed and reaped before the error is raised. A helper never writes the bundle: it reports
nothing but these files.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from typing import Any, Callable

import psutil

from compiler.kernels.capture import CompiledRecord, KernelCapture

Unit = Callable[[], None]  # one compilation (or a few), run where it is given
STALLED_S = 15.0  # a helper whose CPU time stood still this long is stuck, and killed


def spread(shares: list[list[Unit]], capture: KernelCapture, directory: str,
           in_helper: Callable[[], None] = lambda: None, stalled_s: float = STALLED_S) -> list[Unit]:
    """Run shares[0] here and each other share in a forked helper; returns the units the helpers
    did not finish. `in_helper` runs first in each helper (silence what would write the bundle)."""
    os.makedirs(directory, exist_ok=True)
    helpers: list[tuple[int, list[Unit], int]] = []  # (pid, share, first unit's number)
    number = len(shares[0])
    for share in shares[1:]:
        if not share:
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the helper: compile its share, write each unit's records, never return
            _helper(share, number, capture, directory, in_helper)
        helpers.append((pid, share, number))
        number += len(share)
    taken: set[int] = set()
    try:
        for unit in shares[0]:
            unit()
            _take(directory, capture, taken)
    except BaseException:  # the job's own compilation failed: the job ends with its error, no helper outlives it
        for pid, _, _ in helpers:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    for pid, _, _ in helpers:
        _wait(pid, lambda: _take(directory, capture, taken), stalled_s)
    _take(directory, capture, taken)
    return [unit for _, share, first in helpers for i, unit in enumerate(share) if first + i not in taken]


def _wait(pid: int, meanwhile: Callable[[], None], stalled_s: float) -> None:
    """Wait for helper `pid` to end, calling `meanwhile` as it runs. A compilation uses CPU all
    along: a helper whose CPU time has not moved for `stalled_s` is stuck (a lock another thread
    of the job held at the fork) and is killed; what it did not finish is left to the caller."""
    cpu, since = _cpu_seconds(pid), time.monotonic()
    while not os.waitpid(pid, os.WNOHANG)[0]:
        meanwhile()
        time.sleep(0.02)
        now_cpu = _cpu_seconds(pid)
        if now_cpu != cpu:
            cpu, since = now_cpu, time.monotonic()
        elif time.monotonic() - since > stalled_s:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return


def _cpu_seconds(pid: int) -> float:
    """The user and system CPU time of a process so far; -1 once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return -1.0
    return times.user + times.system


def _helper(share: list[Unit], first: int, capture: KernelCapture, directory: str,
            in_helper: Callable[[], None]) -> None:
    status = 0
    try:
        in_helper()
        for i, unit in enumerate(share):
            records: list[CompiledRecord] = []
            capture.on_compiled = records.append
            unit()
            path = os.path.join(directory, f"{first + i}.records")
            with open(path + ".part", "wb") as f:
                pickle.dump(records, f)
            os.rename(path + ".part", path)
    except BaseException:  # noqa: BLE001 - the job compiles what is left itself, and raises there
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _take(directory: str, capture: KernelCapture, taken: set[int]) -> None:
    """Hand over the records of every unit a helper finished since the last look, in unit order."""
    finished = sorted(int(name.split(".")[0]) for name in os.listdir(directory) if name.endswith(".records"))
    for number in finished:
        if number in taken:
            continue
        with open(os.path.join(directory, f"{number}.records"), "rb") as f:
            records: list[Any] = pickle.load(f)
        taken.add(number)
        for record in records:
            capture.adopt(record)

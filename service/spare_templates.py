"""Spare templates, the runner's side: one sandboxed template process (compiler/spare_template.py)
warmed up like a spare, with `spare_template_slots` job directories (slots) bound into its sandbox,
and for each slot the job process it forks when that slot is handed a job.

The runner treats a slot like any spare (service/spares.py): it writes the job file into the
slot's directory and waits on a `ForkedJob`, which does for the forked process what
sandbox.Sandboxed does for a started one: the job's own cgroup (the process is moved into it
before it may go on), its rlimits (sent with the go-ahead: the process sets them on itself), the
wall clock, the output (the slot's worker log, read as hostile input), and how it ended (the
template reports the exit status in its own directory, which no job sees).
"""
from __future__ import annotations

import os
import signal
import stat
import threading
import time
import uuid
from typing import Callable

from compiler.model import SLOT_EXITS, SLOT_FORKS, SLOT_GO, SLOT_LOG, SPARE_READY, TEMPLATE_SECCOMP
from service import job_dir as job_dirs
from service import job_process, sandbox, seccomp
from service.cgroups import JobCgroup
from service.job_process import RunnerConfig
from service.toolchain import toolchain
from service.toolchain_envs import Toolchain

# A spare warms up with what CPU the jobs leave: its cgroup's weight against a job's (cgroup v2's
# default, 100) until a job takes it (service/spares.py sets them; a template's forks are in
# cgroups of their own). A template taken while it warmed up keeps a job's weight: measured, its
# first job took 9.5-10.2 s after a restart when the template went back to the spare's weight
# once the job was forked (to finish its warm-up), 8.0 s when it did not.
SPARE_CPU_WEIGHT = 1
JOB_CPU_WEIGHT = 100


class Template:
    """One template process and its slots (each used for one job at most)."""

    def __init__(self, config: RunnerConfig, spare_for: str, language: str, export: str = "",
                 chain: Toolchain | None = None):
        """`spare_for`: the language and kind its warm-up is for (IRSCOPE_SPARE_FOR); `export`: the
        directory, inside the control directory, where this template's warm-up exports the
        toolchain cache it builds (service/toolchain_cache.py), "" for none; `chain`: the installed
        toolchain it runs in (None: the default)."""
        self.config = config
        name = uuid.uuid4().hex[:12]
        jobs = os.path.join(config.data_dir, "jobs")
        self.control_dir = os.path.join(jobs, f"spare-template-{name}")
        job_dirs.prepare(self.control_dir, config.user, config.job_disk_bytes)
        with open(os.path.join(self.control_dir, TEMPLATE_SECCOMP), "wb") as f:
            f.write(seccomp.FILTER.bpf())
        self.slot_dirs = []
        for i in range(config.spare_template_slots):
            slot = os.path.join(jobs, f"spare-slot-{name}-{i}")
            job_dirs.prepare(slot, config.user, config.job_disk_bytes)
            self.slot_dirs.append(slot)
        env, binds = job_process.environment(config, language, toolchain(language, chain), chain,
                                             IRSCOPE_SPARE_FOR=spare_for, IRSCOPE_SPARE_TEMPLATE="1",
                                             IRSCOPE_EXPORT_TOOLCHAIN_CACHE="/job/" + export if export else "")
        spec = job_process.spec(config, self.control_dir, env, binds, chain)
        spec.slots = list(self.slot_dirs)
        self.proc = sandbox.Sandboxed(spec, config.job, clock=False)  # no wall clock: it waits for jobs
        self.started = time.monotonic()
        # Slots a job was handed (Spares.take marks them): their directories are the runner's to
        # release once it has read what the job left, even when the template ends first.
        self.taken: set[int] = set()

    @property
    def ready(self) -> bool:
        return self.proc.alive() and os.path.lexists(os.path.join(self.control_dir, SPARE_READY))

    def jobs(self) -> list[ForkedJob]:
        return [ForkedJob(self, i) for i in range(len(self.slot_dirs))]

    def _report(self, kind: str, slot: int) -> str | None:
        """What the template wrote for `slot` (its control directory is not the jobs')."""
        try:
            with open(os.path.join(self.control_dir, kind, str(slot)), encoding="ascii") as f:
                return f.read(32).strip()
        except OSError:
            return None

    def host_pid(self, slot: int) -> int | None:
        """The host PID of the process forked for `slot` (the template reports its PID in its
        own PID namespace; /proc's NSpid maps it), or None before the fork."""
        inner = self._report(SLOT_FORKS, slot)
        if not inner or not inner.isdigit():
            return None
        for pid in self.proc.cgroup.pids():
            try:
                with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                    nspid = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
            except OSError:
                continue
            if len(nspid) >= 2 and nspid[-1] == inner:
                return pid
        return None

    def exit_code(self, slot: int) -> int | None:
        code = self._report(SLOT_EXITS, slot)
        return int(code) if code and code.isdigit() else None

    def kill(self) -> None:
        self.proc.kill()
        for path in (self.control_dir, *(d for i, d in enumerate(self.slot_dirs) if i not in self.taken)):
            job_dirs.release(path)


class ForkedJob:
    """The runner's handle on the job process a template forks for one slot (module doc); the
    same methods as sandbox.Sandboxed."""

    def __init__(self, template: Template, slot: int):
        self.template, self.slot = template, slot
        self.job_dir = template.slot_dirs[slot]
        self.limits = template.config.job
        self.cgroup: JobCgroup | None = None
        self.started = time.monotonic()
        self._timer: threading.Timer | None = None
        self._timed_out = False
        self._ended = False

    def alive(self) -> bool:
        return self.template.proc.alive() and not self._ended

    def resident_bytes(self) -> int | None:
        """Before its job: the template's (the process does not exist yet); then the job's own."""
        return self.cgroup.resident_bytes() if self.cgroup is not None else self.template.proc.resident_bytes()

    def start_clock(self) -> None:
        if self.cgroup is None:
            self.cgroup = JobCgroup(sandbox.cgroup_limits(self.limits))
        self.started = time.monotonic()
        self._timer = threading.Timer(float(self.limits.wall_time_limit_s), self._deadline)
        self._timer.daemon = True
        self._timer.start()

    def _deadline(self) -> None:
        self._timed_out = True
        self.stop()

    def stop(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()
        pid = self.template.host_pid(self.slot)  # not moved into the cgroup yet
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        """A slot that never got its job: its template goes with the spares (Spares.shutdown)."""
        if self.cgroup is not None:
            self.stop()
            self.cgroup.remove()

    def _go(self, pid: int) -> None:
        """Move the forked process into the job's cgroup, then let it go on (with its rlimits)."""
        assert self.cgroup is not None
        self.cgroup.add(pid)
        job_process.write_json(self.job_dir, SLOT_GO, {
            "rlimits": sandbox.rlimits(self.limits, "pids" in self.cgroup.dirs),
            "tmp_bytes": self.limits.tmp_bytes, "shm_bytes": self.limits.shm_bytes})

    def wait(self, on_tick: Callable[[], None] | None = None, tick_s: float = 0.25) -> sandbox.Outcome:
        """Watch the forked job process to its end (and let it go on once it is in its cgroup)."""
        if self.cgroup is None:
            self.start_clock()
        assert self.cgroup is not None
        moved, code, last_tick = False, None, 0.0
        try:
            while True:
                if not moved:
                    pid = self.template.host_pid(self.slot)
                    if pid is not None:
                        self._go(pid)
                        moved = True
                code = self.template.exit_code(self.slot)
                if code is not None or not self.template.proc.alive() or (self._timed_out and not moved):
                    break
                time.sleep(0.005 if not moved else 0.02)
                if on_tick and time.monotonic() - last_tick >= tick_s:
                    last_tick = time.monotonic()
                    on_tick()
        finally:
            self._ended = True
            if self._timer is not None:
                self._timer.cancel()
            self.cgroup.kill_all()
            processes_hit, memory_hit = self.cgroup.processes_hit(), self.cgroup.memory_hit()
            self.cgroup.remove()
        output, truncated = _read_log(os.path.join(self.job_dir, SLOT_LOG), self.limits.output_bytes)
        outcome = sandbox.Outcome(returncode=code, wall_s=time.monotonic() - self.started, output=output,
                                  output_truncated=truncated, sandboxed=True)
        sandbox.explain(outcome, self.limits, self._timed_out, processes_hit, memory_hit)
        if code is None and outcome.limit is None:
            # The template ended under its job (no job can signal it: each is in a session and PID
            # namespace of its own): irscope's failure, or the host's, never the job's.
            outcome.limit, outcome.message = "worker_lost", (
                f"the spare template that forked this job's process ended (status {self.template.proc.proc.returncode})"
                " while the job ran: irscope's failure, not your program's; compile again")
        return outcome


def _read_log(path: str, keep: int) -> tuple[str, bool]:
    """The first `keep` bytes of the job's worker log, a file the job could have replaced: opened
    without following a link, read only when it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "", False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", False
        data = os.read(fd, keep + 1)
    finally:
        os.close(fd)
    return data[:keep].decode("utf-8", "replace"), len(data) > keep

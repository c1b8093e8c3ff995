"""The XLA child process (compiler/xla/child.py), from the pipeline's side: started for its job, or
started ahead by a spare worker, before any job exists, and then handed the one job that spare
serves.

A child started ahead has imported jax, jaxlib's bindings and the child's own modules (about 2.5 s
of a JAX job on a 2-core host, as long as the import in a plain `python script.py`) and waits on
its standard input for one line: its job file, the job's environment and its working directory.
It then runs exactly as a child started for the job does. What it imported depends only on the
toolchain, never on a job. XLA reads XLA_FLAGS (the device count, the dump) when its first client
starts, which is after the job's environment is set; JAX reads JAX_PLATFORMS at import, so the child
sets it again (jax.config) before any backend starts. Any other JAX_* variable is read only at
import: a job whose environment differs from the waiting child's in one gets a child started for
it instead. (What the program itself sets before its `import jax` reaches JAX in either child:
compiler/xla/jax_variables.py.)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

READY = "irscope-xla-child-ready"  # the line a child started ahead prints once it has imported jax
WAIT_FLAG = "--wait"
AHEAD = "started ahead by the spare worker (jax imported before the job)"
FOR_THE_JOB = "started for this job"


@dataclass
class Ended:
    returncode: int
    stderr: str
    started: str  # AHEAD or FOR_THE_JOB


class ChildTimeout(Exception):
    pass


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "compiler.xla.child", *args]


class WaitingChild:
    """A child started ahead (by a spare's prepare_spare), for one job at most."""

    def __init__(self, cwd: str, env: dict[str, str]):
        self.env = env
        self.proc = subprocess.Popen(_command(WAIT_FLAG), cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Ready once it has imported what it imports ahead (or has died: then it serves no job).
        line = self.proc.stdout.readline()
        self.ready = line.strip() == READY

    def serves(self, env: dict[str, str]) -> bool:
        """Whether this child can run a job with environment `env` as a child started for it would."""
        if not self.ready or self.proc.poll() is not None:
            return False
        jax_vars = {k for k in (*env, *self.env) if k.startswith("JAX_") and k != "JAX_PLATFORMS"}
        return all(env.get(k) == self.env.get(k) for k in jax_vars)

    def run(self, job_path: str, env: dict[str, str], cwd: str, timeout_s: float) -> Ended:
        order = json.dumps({"job": job_path, "env": env, "cwd": cwd}) + "\n"
        try:
            _, stderr = self.proc.communicate(order, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise ChildTimeout from None
        return Ended(self.proc.returncode, stderr, AHEAD)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def run_fresh(job_path: str, env: dict[str, str], cwd: str, timeout_s: float) -> Ended:
    try:
        proc = subprocess.run(_command(job_path), cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ChildTimeout from None
    return Ended(proc.returncode, proc.stderr, FOR_THE_JOB)


def wait_for_job() -> str:
    """In the child started ahead, after its imports: say so, then take the job's line, set the job's
    environment and directory, and return the job file's path ("" when the spare ended first)."""
    print(READY, flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return ""
    order = json.loads(line)
    os.environ.clear()
    os.environ.update(order["env"])
    os.chdir(order["cwd"])
    import jax
    jax.config.update("jax_platforms", order["env"].get("JAX_PLATFORMS") or None)
    return order["job"]

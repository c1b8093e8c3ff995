"""Jobs cannot reach each other's processes (issue 37, part 1).

Before: a spare template forked every job into the template's own process group, and every job
runs as the same uid, so `kill(0, sig)` from one job reached every sibling job and the template
(a new PID namespace does not scope a process group): a victim job received another user's
SIGCONT, and a SIGKILL killed it, its error blaming the victim.

Here a victim job and two attacker jobs run at once, each from the same kind of worker (a fork
of one spare template; plain pre-started spares), with the fake pipeline (its source runs as
Python in the sandbox). The victim records every signal it is sent and its own scheduling and I/O
priorities; attacker A tries every signal path the issue names (kill of 0, of -1 and of every
PID, killpg of every group, tgkill, rt_sigqueueinfo, pidfd_send_signal, a SIGIO owner set with
F_SETOWN and F_SETOWN_EX) plus setpriority and ioprio_set on its group and its user; attacker B
sends SIGKILL to its group and to -1. The victim ends done with nothing received and its
priorities untouched, and the template forks another job afterwards.
"""
from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from tests.conftest import make_app, needs_bwrap, stage_text, wait_job

pytestmark = [needs_bwrap, pytest.mark.skipif(os.uname().machine != "x86_64",
                                              reason="the attacker's syscall numbers are x86-64's")]

LISTEN_S = 12  # how long the victim listens: the attackers run within it

VICTIM = f"""
import ctypes, json, os, signal, time
received = []
def note(signum, frame):
    received.append(signal.Signals(signum).name)
for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT, signal.SIGTERM, signal.SIGHUP, signal.SIGINT,
            signal.SIGIO, signal.SIGWINCH, signal.SIGALRM):
    signal.signal(sig, note)
libc = ctypes.CDLL(None, use_errno=True)
end = time.monotonic() + {LISTEN_S}
while time.monotonic() < end:
    time.sleep(0.05)
print(json.dumps({{"received": received, "nice": os.getpriority(os.PRIO_PROCESS, 0),
                  "ioprio": libc.syscall(252, 1, 0), "pgid": os.getpgrp(), "sid": os.getsid(0)}}))
"""

# Every signal path from inside a job. Each call's result is counted by the errno it returned; the
# attacker ignores the signals it sends, so what reaches itself (its own group) does not stop it.
ATTACKER = """
import ctypes, errno, fcntl, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
for sig in (signal.SIGUSR1, signal.SIGCONT, signal.SIGTERM, signal.SIGIO):
    signal.signal(sig, signal.SIG_IGN)
me = os.getpid()
tally = {}
def count(what, r):
    name = 'ok' if r == 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    tally.setdefault(what, {}).setdefault(name, 0)
    tally[what][name] += 1
def sys(nr, *args):
    ctypes.set_errno(0)
    return libc.syscall(nr, *[ctypes.c_long(a) for a in args])
for sig in (signal.SIGUSR1, signal.SIGCONT, signal.SIGTERM):
    count('kill(0)', sys(62, 0, sig))
    count('kill(-1)', sys(62, -1, sig))
info = (ctypes.c_int * 32)(signal.SIGUSR1, 0, -1)  # a siginfo_t: si_signo, si_errno, si_code SI_QUEUE
top = 1 << 16
own = {int(p) for p in os.listdir('/proc') if p.isdigit()}  # its own namespace's processes
for pid in range(1, top):
    if pid in own:
        continue
    count('kill(pid)', sys(62, pid, signal.SIGUSR1))
    count('killpg', sys(62, -pid, signal.SIGUSR1))
    count('tgkill', sys(234, pid, pid, signal.SIGUSR1))
    count('rt_sigqueueinfo', sys(129, pid, signal.SIGUSR1, ctypes.addressof(info)))
    fd = sys(434, pid, 0)
    if fd >= 0:
        count('pidfd_send_signal', sys(424, fd, signal.SIGUSR1, 0, 0))
        os.close(fd)
    else:
        count('pidfd_open', -1)
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
for owner in (0, -os.getpgrp(), -1, 1, 2):
    count('F_SETOWN', 0 if sys(72, r, 8, owner) == 0 else -1)
    os.write(w, b'x')
for kind in (0, 1, 2):  # F_OWNER_TID, F_OWNER_PID, F_OWNER_PGRP, pid 0 (the caller's)
    owner = (ctypes.c_int * 2)(kind, 0)
    count('F_SETOWN_EX', 0 if libc.fcntl(r, 15, owner) == 0 else -1)
    os.write(w, b'x')
count('setpriority(PRIO_PGRP)', 0 if libc.setpriority(1, 0, 19) == 0 else -1)
count('setpriority(PRIO_USER)', 0 if libc.setpriority(2, os.getuid(), 19) == 0 else -1)
count('ioprio_set(PGRP)', sys(251, 2, 0, (3 << 13) | 7))
count('ioprio_set(USER)', sys(251, 3, os.getuid(), (3 << 13) | 7))
print(json.dumps({'tally': tally, 'pid': me, 'pgid': os.getpgrp(), 'sid': os.getsid(0)}))
"""

KILLER = """
import os, signal
print('killing', flush=True)
for target in (0, -1):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError as e:
        print(target, e)
"""


def _wait_running(client, job_id: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/api/jobs/{job_id}").get_json()
        if body["status"] == "running" and "running the source" in (body.get("progress") or ""):
            return
        assert body["status"] in ("queued", "running"), body
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never started running its source")


def _submit(client, source: str, spare: str) -> str:
    response = client.post("/api/compile", json={"language": "fake", "source": source,
                                                 "options": {"spare": spare}})
    assert response.status_code == 202, response.get_json()
    return response.get_json()["job"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("isolation"), languages="fake", workers=4, spare_workers=3,
                   spare_template_slots=6, wall_time_limit_s=90)
    yield app
    app.extensions["irscope"].runner.shutdown()


def _ready(app, client, spare: str, count: int) -> None:
    """The first job of a kind starts its spares (it runs in a worker of its own); wait for them."""
    warm = wait_job(client, _submit(client, f"print('warm {uuid.uuid4().hex}')\n", spare), timeout=120)
    assert warm["status"] == "done", warm["error"]
    spares = app.extensions["irscope"].runner.spares
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and spares.ready(f"fake@{spare}") < count:
        time.sleep(0.1)
    assert spares.ready(f"fake@{spare}") >= count, spares.report()


@pytest.mark.parametrize("spare", ["template", "plain"])
def test_no_signal_path_reaches_a_concurrent_job_or_the_template(app, spare):
    client = app.test_client()
    _ready(app, client, spare, 3)
    victim = _submit(client, VICTIM, spare)
    _wait_running(client, victim)
    attacker, killer = _submit(client, ATTACKER, spare), _submit(client, KILLER, spare)
    attacked = wait_job(client, attacker, timeout=LISTEN_S + 60)
    killed = wait_job(client, killer, timeout=LISTEN_S + 60)
    ended = wait_job(client, victim, timeout=LISTEN_S + 60)
    for job in (ended, attacked, killed):
        taken = job["timings"]["job"]["spare"]
        assert taken.get("forked_from_template", False) is (spare == "template") and taken["ready"] is True, taken

    assert attacked["status"] == "done", attacked["error"]
    seen = json.loads(stage_text(client, attacker, "run.stdout"))
    tally = seen["tally"]
    # its session and group are led by a process of its own PID namespace (0: a leader outside it,
    # as the template was before): what it signals through them is its own
    assert seen["pgid"] > 0 and seen["sid"] > 0, seen
    # In its own PID namespace, every PID and group but its own namespace's processes is unknown to
    # it; only its own group (kill(0)) and its own namespace (kill(-1)) answer.
    for what in ("kill(pid)", "killpg", "tgkill", "rt_sigqueueinfo"):
        assert set(tally[what]) == {"ESRCH"}, (what, tally[what])
    assert set(tally["pidfd_open"]) == {"ESRCH"} and "pidfd_send_signal" not in tally, tally
    assert tally["kill(0)"] == {"ok": 3}, tally["kill(0)"]

    # the killer's SIGKILL reached only its own group: as PID 1 of its namespace (a fork of the
    # template) it is immune to it, else it died and is told it was a signal, not a broken rule
    assert killed["status"] == "done" or (killed["error"]["kind"] == "WorkerCrashed"
                                          and "killed by SIGKILL" in killed["error"]["message"]), killed["error"]

    assert ended["status"] == "done", ended["error"]
    heard = json.loads(stage_text(client, victim, "run.stdout"))
    assert (heard["received"], heard["nice"]) == ([], 0), heard
    assert heard["pgid"] > 0 and heard["sid"] > 0, heard
    assert heard["ioprio"] in (0, 4), heard  # IOPRIO_CLASS_NONE (or BE/4 where the kernel says so): not IDLE

    after = wait_job(client, _submit(client, f"print('after')  # {uuid.uuid4().hex}\n", spare), timeout=120)
    assert after["status"] == "done", after["error"]
    assert stage_text(client, after["id"], "run.stdout").strip() == "after"
    if spare == "template":  # the template lived through both attacks and forked this one
        assert after["timings"]["job"]["spare"]["forked_from_template"] is True, after["timings"]


def test_a_template_that_ends_under_its_job_is_irscopes_failure_not_the_jobs(app):
    """Before: the spares' reaper released a dead template's slot directories while the runner
    still read its jobs' results, and the job was blamed ("ResultRuleError ... the job replaced its
    out/ directory"); a template's death is irscope's failure (or the host's), said as such."""
    client = app.test_client()
    _ready(app, client, "template", 1)
    spares = app.extensions["irscope"].runner.spares
    job_id = _submit(client, "import time\nprint('started', flush=True)\ntime.sleep(30)\n", "template")
    _wait_running(client, job_id)
    taken = [t for t in spares._templates if t.taken]
    assert taken, spares.report()
    for template in taken:
        template.proc.stop()  # as the host's OOM killer would
    job = wait_job(client, job_id, timeout=60)
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "InternalError", job["error"]
    assert "spare template that forked this job's process ended" in job["error"]["message"], job["error"]
    assert "not your program's" in job["error"]["message"]
    after = wait_job(client, _submit(client, f"print('after')  # {uuid.uuid4().hex}\n", "template"), timeout=120)
    assert after["status"] == "done", after["error"]

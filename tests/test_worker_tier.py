"""The worker tier end to end, on real servers: Debian's redis-server as the Celery broker,
PostgreSQL as the shared store (both started by the tests, testbed/real_servers.py), `irscope serve`
with several gunicorn processes and `irscope worker` processes, all real processes talking over
loopback. Jobs are `fake` jobs (Python in the real sandbox, no compiler), so each takes a second.

Faults: a worker SIGKILLed mid-job (the job runs again on the other worker), a poison job that
kills every worker it touches (failed after job_attempts tries), the web server restarted while
jobs run, the broker restarted with jobs queued. GPU routing is shown with a "GPU" queue name
served by a CPU-only worker (no GPU machine is needed: the worker says it has no such device and
the job compiles for a virtual one, which its placement says).
"""
from __future__ import annotations

import json
import shutil

import pytest

from testbed import real_servers
from tests.conftest import needs_bwrap

pytestmark = needs_bwrap

# Fast heartbeats so a dead worker is noticed in seconds (the defaults are 5 s and 30 s).
TIER_SETTINGS = {"languages": "fake", "warm_toolchain_cache": "false", "spare_workers": "0",
                 "worker_heartbeat_s": "0.5", "worker_lost_after_s": "3", "web_processes": "2", "rate_limit": "",
                 "max_jobs_per_client": "0", "wall_time_limit_s": "120"}


_redis_dbs = iter(range(1, 16))


@pytest.fixture
def tier(redis_server, postgres_url, tmp_path_factory):
    data = str(tmp_path_factory.mktemp("tier"))
    db = next(_redis_dbs, None)
    if db is None:
        pytest.fail("more tier tests than Redis databases: give the newest its own redis_server")
    t = real_servers.Tier(broker_url=f"redis://127.0.0.1:{redis_server.port}/{db}", database_url=postgres_url,
                          data_dir=data, settings=dict(TIER_SETTINGS))
    yield t
    t.stop()
    shutil.rmtree(data, ignore_errors=True)


def submit(t: real_servers.Tier, source: str, **options) -> dict:
    status, body = real_servers.http(t.base, "/api/compile", {"language": "fake", "source": source, "options": options})
    assert status in (200, 202), body
    return body


def job(t: real_servers.Tier, job_id: str) -> dict:
    status, body = real_servers.http(t.base, f"/api/jobs/{job_id}")
    assert status == 200, body
    return body


def finished(t: real_servers.Tier, job_id: str, timeout: float = 120) -> dict:
    return real_servers.wait_job(t.base, job_id, timeout, why=f"job {job_id} finished\n" + t.log("web")[-2000:])


def live_workers(t: real_servers.Tier) -> dict[str, list[str]]:
    """queue -> names of its live workers, as GET /api/targets lists them."""
    _, body = real_servers.http(t.base, "/api/targets")
    return {target["name"]: sorted(w["name"] for w in target["workers"]) for target in body["targets"]}


def stage(t: real_servers.Tier, job_id: str, key: str) -> str:
    status, body = real_servers.http(t.base, f"/api/jobs/{job_id}/stages/{key}")
    assert status == 200, body
    return body if isinstance(body, str) else json.dumps(body)


def test_two_workers_compile_jobs_end_to_end_and_pages_show_queue_positions(tier):
    """Three jobs queued before any worker exists: each page shows its place in the queue; two
    `irscope worker --queues cpu` processes then run them all, stages stored in PostgreSQL."""
    tier.start_web()
    ids = [submit(tier, f"x = {n}\nprint('job', x * 7)", stage_delay_s=1)["job"] for n in range(3)]
    pages = [real_servers.http(tier.base, f"/j/{i}")[1] for i in ids]
    for position, page in enumerate(pages, start=1):
        assert f"position {position} in the queue" in page
    tier.start_worker("cpu-a")
    tier.start_worker("cpu-b")
    results = [finished(tier, i) for i in ids]
    for n, result in enumerate(results):
        assert result["status"] == "done", result
        assert result["queue"] == "cpu" and result["attempts"] == 1
        assert f"job {n * 7}" in stage(tier, result["id"], "run.stdout")
        assert [s["key"] for s in result["stages"]][:3] == ["source", "run.stdout", "fake.lines"]
    assert {r["worker"] for r in results} == {"cpu-a", "cpu-b"}  # both took jobs (one at a time each)
    assert live_workers(tier) == {"cpu": ["cpu-a", "cpu-b"]}


def test_gpu_targets_route_to_the_gpu_queue_and_say_virtual_without_its_worker(tier):
    """A worker serving the queue `cuda:sm_90` (a CPU machine here: a fake "GPU" queue name) takes
    the sm_90 jobs; `target: auto` resolves to its target at enqueue (the same cache key as asking
    for it); sm_80, which no worker serves, compiles on a cpu worker and says so; with the sm_90
    worker gone, sm_90 jobs do the same."""
    tier.start_web()
    tier.start_worker("cpu-a")
    tier.start_worker("gpu-a", queues="cuda:sm_90")
    real_servers.until(lambda: live_workers(tier) == {"cpu": ["cpu-a"], "cuda:sm_90": ["gpu-a"]},
                       why="both workers listed")
    _, targets = real_servers.http(tier.base, "/api/targets")
    sm90 = next(t for t in targets["targets"] if t["name"] == "cuda:sm_90")
    assert sm90["workers"][0]["device"] is False  # the worker said it has no sm_90 device
    assert "cuda:sm_90" not in targets["virtual"] and "cuda:sm_80" in targets["virtual"]

    explicit = finished(tier, submit(tier, "y = 2", target="cuda:sm_90")["job"])
    assert (explicit["queue"], explicit["worker"]) == ("cuda:sm_90", "gpu-a")
    assert explicit["placement"]["note"] == "virtual: the sm_90 workers online have no sm_90 device"
    assert stage(tier, explicit["id"], "fake.target") == "cuda:sm_90"

    auto = submit(tier, "y = 2", target="auto")
    assert (auto["job"], auto["cached"]) == (explicit["id"], True)  # resolved at enqueue, same key
    resolved = finished(tier, submit(tier, "z = 3", target="auto")["job"])
    assert resolved["request"]["options"]["target"] == "cuda:sm_90" and resolved["worker"] == "gpu-a"

    other = finished(tier, submit(tier, "y = 2", target="cuda:sm_80")["job"])
    assert (other["queue"], other["worker"]) == ("cpu", "cpu-a")
    assert other["placement"] == {"queue": "cpu", "target": "cuda:sm_80", "virtual": True,
                                  "note": "virtual: no sm_80 worker online"}
    assert "virtual: no sm_80 worker online" in real_servers.http(tier.base, f"/j/{other['id']}")[1]
    host = finished(tier, submit(tier, "y = 2")["job"])
    assert (host["queue"], host["worker"], host["placement"]["target"]) == ("cpu", "cpu-a", None)

    tier.kill_worker("gpu-a", 15)  # stopped: its heartbeat row goes with it
    real_servers.until(lambda: live_workers(tier) == {"cpu": ["cpu-a"]}, why="the sm_90 worker is no longer listed")
    alone = finished(tier, submit(tier, "w = 4", target="cuda:sm_90")["job"])
    assert (alone["queue"], alone["worker"]) == ("cpu", "cpu-a")
    assert alone["placement"]["note"] == "virtual: no sm_90 worker online"


SLOW_JOB = "import time\ntime.sleep({s})\nprint('slept {s}')\n"


def test_a_worker_killed_mid_job_loses_nothing(tier):
    """SIGKILL the worker running a job: the other worker runs it again from the start (its first
    try's stages cleared) and it ends done; the other worker's own job is untouched."""
    tier.start_web()
    tier.start_worker("cpu-a")
    tier.start_worker("cpu-b")
    real_servers.until(lambda: live_workers(tier) == {"cpu": ["cpu-a", "cpu-b"]}, why="two workers")
    first = submit(tier, SLOW_JOB.format(s=4))["job"]
    running = real_servers.until(lambda: (lambda j: j if j["status"] == "running" and j["worker"] else None)(
        job(tier, first)), why="the job runs")
    victim = running["worker"]
    second = submit(tier, SLOW_JOB.format(s=1))["job"]  # goes to the other worker
    tier.kill_worker(victim)
    result = finished(tier, first)
    assert result["status"] == "done", result
    assert result["attempts"] == 2 and result["worker"] != victim
    assert stage(tier, first, "run.stdout").strip() == "slept 4"
    assert [s["key"] for s in result["stages"]].count("worker.log") <= 1
    other = finished(tier, second)
    assert other["status"] == "done" and other["attempts"] == 1 and other["worker"] != victim


def test_a_poison_job_is_failed_after_job_attempts_tries(tier):
    """A job that kills every worker that takes it (here: each is SIGKILLed while running it) is
    tried job_attempts (2) times, then failed with a sentence saying its workers died; the
    worker still alive takes nothing more of it."""
    tier.start_web()
    tier.start_worker("w1")
    poison = submit(tier, SLOW_JOB.format(s=60))["job"]
    killed = []
    for replacement in ("w2", "w3"):
        running = real_servers.until(
            lambda: (lambda j: j if j["status"] == "running" and j["worker"] and j["worker"] not in killed
                     else None)(job(tier, poison)), why="a worker takes the job")
        tier.start_worker(replacement)  # the next worker, which finds the job (or its failure)
        killed.append(running["worker"])
        tier.kill_worker(running["worker"])
    result = finished(tier, poison)
    assert result["status"] == "failed" and result["attempts"] == 2
    assert result["error"]["kind"] == "WorkerCrashed"
    assert "died" in result["error"]["message"] and "(setting job_attempts)" in result["error"]["message"]
    assert killed == ["w1", "w2"]


def test_jobs_finish_while_the_web_server_restarts(tier):
    tier.start_web()
    tier.start_worker("cpu-a", concurrency=2)
    ids = [submit(tier, SLOW_JOB.format(s=2) + f"# {n}")["job"] for n in range(2)]
    real_servers.until(lambda: all(job(tier, i)["status"] == "running" for i in ids), why="both jobs run")
    port = tier.web_port
    tier.stop_web(9)  # the whole web server, killed
    tier.start_web(port)
    for i in ids:
        result = finished(tier, i)
        assert result["status"] == "done" and result["attempts"] == 1
        assert stage(tier, i, "run.stdout").strip() == "slept 2"


def test_queued_jobs_survive_a_broker_restart(postgres_url, tmp_path_factory):
    """Jobs queued while no worker runs stay in Redis across a restart of the broker (append-only
    file, fsync always); a worker started afterwards runs them, and a worker that was running
    through another restart reconnects and takes new jobs."""
    if real_servers.redis_binary() is None:
        pytest.skip("redis-server is not installed (Debian package redis-server; ./run.sh installs it as root)")
    broker = real_servers.start_redis()
    t = real_servers.Tier(broker_url=broker.url, database_url=postgres_url,
                          data_dir=str(tmp_path_factory.mktemp("tier")), settings=dict(TIER_SETTINGS))
    try:
        t.start_web()
        ids = [submit(t, f"print({n})")["job"] for n in range(2)]
        broker.stop(kill=True)
        broker.start()
        t.start_worker("cpu-a")
        for n, i in enumerate(ids):
            result = finished(t, i)
            assert result["status"] == "done" and stage(t, i, "run.stdout").strip() == str(n)
        broker.stop(kill=True)
        broker.start()
        later = finished(t, submit(t, "print('after')")["job"])
        assert later["status"] == "done" and later["worker"] == "cpu-a"
    finally:
        t.stop()
        broker.stop()
        shutil.rmtree(broker.dir, ignore_errors=True)
        shutil.rmtree(t.data_dir, ignore_errors=True)


TRITON_ADD = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)


x = torch.randn(4096, device="cuda")
y = torch.randn(4096, device="cuda")
out = torch.empty_like(x)
add_kernel[(4,)](x, y, out, 4096, BLOCK=1024)
print(float((out - (x + y)).abs().max()))
'''


@pytest.mark.gpu
def test_a_gpu_worker_runs_jobs_for_its_target_on_its_device(tier):
    """On a CUDA machine (bench/gpu_check.py): a worker started without --queues serves `cpu` and
    its GPU's queue; `target: auto` resolves to that GPU at enqueue, and the job runs on the device
    (launches timed), not virtually."""
    from compiler.targets import host_devices
    gpu = host_devices.detect()["gpus"][0]
    tier.settings["languages"] = "fake,triton"
    tier.start_web()
    proc = tier.start_worker("gpu-real", queues=f"cpu,{gpu['target']}")
    real_servers.until(lambda: gpu["target"] in live_workers(tier), why="the GPU worker is listed")
    _, targets = real_servers.http(tier.base, "/api/targets")
    entry = next(t for t in targets["targets"] if t["name"] == gpu["target"])
    assert entry["workers"][0]["device"] is True and entry["workers"][0]["gpus"][0]["name"] == gpu["name"]
    status, body = real_servers.http(tier.base, "/api/compile", {"language": "triton", "source": TRITON_ADD,
                                                          "options": {"target": "auto"}})
    assert status == 202, body
    result = finished(tier, body["job"], timeout=600)
    assert result["status"] == "done", (result["error"], tier.log("worker-gpu-real")[-3000:])
    assert result["request"]["options"]["target"] == gpu["target"] and result["queue"] == gpu["target"]
    assert result["placement"]["virtual"] is False and result["worker"] == "gpu-real"
    assert result["timings"]["target"]["executed"] is True
    assert proc.poll() is None


def test_a_job_the_broker_cannot_take_fails_with_a_sentence(tmp_path):
    """No broker listening: the job is failed at once (BrokerUnavailable), never left queued with
    no message that would ever run it. (No server needed: SQLite, and a closed port.)"""
    from tests.conftest import make_app
    app = make_app(tmp_path, languages="fake", broker_url=f"redis://127.0.0.1:{real_servers.free_port()}/0")
    try:
        answer = app.test_client().post("/api/compile", json={"language": "fake", "source": "x = 1"})
        body = app.test_client().get(f"/api/jobs/{answer.get_json()['job']}").get_json()
        assert body["status"] == "failed" and body["error"]["kind"] == "BrokerUnavailable"
        assert "could not be reached" in body["error"]["message"]
        again = app.test_client().post("/api/compile", json={"language": "fake", "source": "x = 1"})
        assert again.get_json()["job"] != answer.get_json()["job"]  # not answered from the store
    finally:
        app.extensions["irscope"].runner.shutdown()

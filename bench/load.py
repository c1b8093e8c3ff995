#!/usr/bin/env python3
"""A teacher's class on the worker tier: N clients submit N different PyTorch models at once to
2 workers on this machine, and each then behaves like its open job page.

    .venv/bin/python bench/load.py [--clients 30] [--workers 2] [--language pytorch]

Starts real servers in temporary directories (redis-server, PostgreSQL as `postgres`), `irscope
serve` (gunicorn, several processes) and `irscope worker --queues cpu --concurrency 1` processes,
waits for the workers' toolchain warm-up, then runs the class: each client has its own loopback
address (127.0.0.<10+i>, so the per-client limits see 30 clients), POSTs its model to
/api/compile, loads its page /j/<id>, and polls /j/<id>/updates every poll_interval_ms, as the
page's htmx poller does, until the job has finished. Every page and poll request is timed.

Prints: jobs done / failed / lost, the queue positions the pages showed, the wall time of the
whole class, each job's wait and run time (medians), and the page latency (p50, p95, p99, max)
during the run; exits 1 if a job was lost or failed, or page p99 is over 100 ms.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time

from testbed import real_servers

ACTIVATIONS = ("relu", "tanh", "sigmoid", "gelu", "silu")


def model_source(i: int) -> str:
    """Model i of the class: an MLP whose widths, depth and activation differ per student."""
    width, hidden, depth, act = 16 + 8 * (i % 6), 32 + 16 * (i % 5), 1 + i % 3, ACTIVATIONS[i % len(ACTIVATIONS)]
    layers = "\n".join(f"        self.h{n} = torch.nn.Linear({hidden}, {hidden})" for n in range(depth))
    calls = "\n".join(f"        x = torch.nn.functional.{act}(self.h{n}(x))" for n in range(depth))
    return f'''import torch


class Student{i}(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear({width}, {hidden})
{layers}
        self.out = torch.nn.Linear({hidden}, {4 + i % 7})

    def forward(self, x):
        x = self.inp(x)
{calls}
        return self.out(x).softmax(-1)


model = Student{i}()
example_inputs = (torch.randn({2 + i % 4}, {width}),)
'''


class Client(threading.Thread):
    def __init__(self, index: int, port: int, poll_s: float, source: str, latencies: list, lock: threading.Lock):
        super().__init__(name=f"client-{index}", daemon=True)
        self.index, self.port, self.poll_s, self.source = index, port, poll_s, source
        self.address = f"127.0.0.{10 + index}"
        self.latencies, self.lock = latencies, lock
        self.job_id: str | None = None
        self.positions: list[int] = []
        self.status = "not submitted"
        self.error = ""

    def request(self, method: str, path: str, body: bytes | None = None, timed: bool = True) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60, source_address=(self.address, 0))
        started = time.perf_counter()
        try:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        if timed:
            with self.lock:
                self.latencies.append(time.perf_counter() - started)
        return response.status, text

    def run(self) -> None:
        try:
            status, text = self.request("POST", "/api/compile", json.dumps(
                {"language": "pytorch", "source": self.source, "options": {}}).encode(), timed=False)
            if status != 202:
                self.status, self.error = "refused", f"{status}: {text[:300]}"
                return
            self.job_id = json.loads(text)["job"]
            status, page = self.request("GET", f"/j/{self.job_id}")
            self.see(page)
            poll = re.search(r'hx-get="(/j/[^"]+/updates[^"]*)"', page)
            while poll is not None:
                time.sleep(self.poll_s)
                status, answer = self.request("GET", poll.group(1).replace("&amp;", "&"))
                if status == 204:
                    continue
                self.see(answer)
                if 'data-finished="true"' in answer:
                    break
                poll = re.search(r'hx-get="(/j/[^"]+/updates[^"]*)"', answer) or poll
            status, text = self.request("GET", f"/api/jobs/{self.job_id}", timed=False)
            self.status = json.loads(text)["status"]
        except Exception as e:  # noqa: BLE001 - a broken client is reported, not raised
            self.status, self.error = "client error", f"{type(e).__name__}: {e}"

    def see(self, html: str) -> None:
        self.positions += [int(p) for p in re.findall(r"position (\d+) in the queue", html)]


def warmed(worker_dir: str) -> bool:
    """The worker's toolchain warm-up has stored its cache."""
    toolchain = os.path.join(worker_dir, "toolchain")
    return os.path.isdir(toolchain) and any(n.startswith("pytorch-") and not n.endswith(".tmp")
                                            for n in os.listdir(toolchain))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--wall-limit", type=int, default=1200, help="wall_time_limit_s of each job")
    args = parser.parse_args()

    redis = real_servers.start_redis()
    postgres = real_servers.start_postgres()
    data = tempfile.mkdtemp(prefix="irscope-load-")
    # A class needs room in the queue (max_queued_jobs); a shared, busy host makes each compile
    # slower than the default wall-clock limit allows, and this measures the tiers, not that limit.
    settings = {"languages": "pytorch", "max_queued_jobs": str(2 * args.clients), "max_jobs_per_client": "4",
                "worker_heartbeat_s": "2", "worker_lost_after_s": "15", "wall_time_limit_s": str(args.wall_limit)}
    tier = real_servers.Tier(broker_url=redis.url, database_url=postgres.create_database("irscope"), data_dir=data,
                             settings=settings)
    try:
        tier.start_web()
        for n in range(args.workers):
            tier.start_worker(f"cpu{n + 1}")
        print(f"servers up: web on :{tier.web_port}, {args.workers} workers; waiting for their warm-up", flush=True)
        started = time.monotonic()
        while not all(warmed(os.path.join(data, "workers", f"cpu{n + 1}")) for n in range(args.workers)):
            if time.monotonic() - started > 600:
                raise SystemExit("the workers' toolchain warm-up did not finish in 10 minutes")
            time.sleep(0.5)
        time.sleep(5)  # the spare workers start right after the warm-up
        print(f"warm-up done in {time.monotonic() - started:.0f} s; {args.clients} clients submit at once", flush=True)

        latencies: list[float] = []
        lock = threading.Lock()
        clients = [Client(i, tier.web_port, 0.7, model_source(i), latencies, lock) for i in range(args.clients)]
        begun = time.monotonic()
        for c in clients:
            c.start()
        for c in clients:
            c.join(timeout=3600)
        wall = time.monotonic() - begun

        jobs = []
        for c in clients:
            if c.job_id:
                conn = http.client.HTTPConnection("127.0.0.1", tier.web_port, timeout=30)
                conn.request("GET", f"/api/jobs/{c.job_id}")
                jobs.append(json.loads(conn.getresponse().read()))
                conn.close()
        done = [j for j in jobs if j["status"] == "done"]
        failed = [j for j in jobs if j["status"] == "failed"]
        lost = [c for c in clients if c.status not in ("done", "failed")]
        runs = [j["timings"]["job"]["wall_s"] for j in done if "job" in j["timings"]]
        workers = {j["worker"] for j in done}
        positions = [max(c.positions) for c in clients if c.positions]
        print(f"\nclass of {args.clients}: {len(done)} done, {len(failed)} failed, {len(lost)} lost or refused; "
              f"all finished in {wall:.0f} s on workers {', '.join(sorted(workers))}")
        for c in lost:
            print(f"  client {c.index} ({c.address}): {c.status} {c.error}")
        for j in failed:
            print(f"  job {j['id']} failed: {j['error']}")
        print(f"queue positions shown on pages: {len(positions)} of {args.clients} pages showed one; "
              f"highest {max(positions, default=0)}, first seen per page (sorted): "
              f"{sorted(c.positions[0] for c in clients if c.positions)}")
        if runs:
            print(f"job run time (sandbox wall): median {statistics.median(runs):.1f} s, max {max(runs):.1f} s")
        p50, p95, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.95, 0.99))
        print(f"page latency over {len(latencies)} page loads and polls: p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
              f"p99 {p99:.1f} ms, max {max(latencies) * 1000:.1f} ms (target p99 <= 100 ms)")
        ok = not lost and not failed and p99 <= 100
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        tier.stop()
        redis.stop()
        postgres.stop()
        shutil.rmtree(redis.dir, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What an idle server costs: the CPU that `irscope serve` and its spares use while no job comes.

    .venv/bin/python bench/idle_server.py [--seconds 60] [--repeats 3]

Starts `irscope serve` with its defaults on a fresh data directory (seeded with ./var/toolchain when
`./run.sh serve` built it there, so the warm-up does not run again), waits until every spare is
ready (GET /api/targets) and the CPU has settled, then reads the CPU time (user + system, from
/proc/<pid>/stat) of the server and every process under it at the start and end of each window of
`--seconds`. Prints each window's CPU seconds per minute by process (the server; each spare by its
language; a spare template), the median and spread over the windows, and the share of one core.
Before compiler/file_wait.py a spare looked for its job file every 10 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    except OSError:
        return "?"
    if any(a.endswith(b"irscope") for a in argv[:2]):
        return "server"
    if b"compiler.sandbox_entry" in argv:
        spare = env.get(b"IRSCOPE_SPARE_FOR", b"").decode()
        return f"spare template {spare}" if env.get(b"IRSCOPE_SPARE_TEMPLATE") == b"1" else f"spare {spare}"
    return os.path.basename(argv[0].decode(errors="replace")) or "?"


def _cpu(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / TICKS
        except (OSError, ValueError, IndexError):
            pass
    return out


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="irscope-idle-")
    seeded = os.path.join(ROOT, "var", "toolchain")
    if os.path.isdir(seeded):
        shutil.copytree(seeded, os.path.join(data, "toolchain"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRSCOPE_")}
    server = subprocess.Popen([os.path.join(ROOT, ".venv", "bin", "irscope"), "serve", "--data-dir", data,
                               "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            try:
                spares = _get(base + "/api/targets")["targets"][0]["workers"][0]["spares"]
                # (a language without spares says 0 ready, 0 starting)
                if any(s["ready"] for s in spares.values()) and not any(s["starting"] for s in spares.values()):
                    break
            except (OSError, KeyError, IndexError, ValueError):
                pass
            time.sleep(1)
        else:
            print("the spares were not ready in 900 s", file=sys.stderr)
            return 1
        print(f"spares ready: {json.dumps({k: v['ready'] for k, v in spares.items() if v['ready']})}")
        time.sleep(30)  # the last warm-up's tail
        windows: list[dict[str, float]] = []
        for i in range(args.repeats):
            pids = _tree(server.pid)
            kinds = {pid: _kind(pid) for pid in pids}
            before = _cpu(pids)
            time.sleep(args.seconds)
            after = _cpu(pids)
            per_kind: dict[str, float] = {}
            for pid, t in after.items():
                if pid in before:
                    per_kind[kinds[pid]] = per_kind.get(kinds[pid], 0.0) + (t - before[pid]) * 60 / args.seconds
            windows.append(per_kind)
            shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(per_kind.items()) if v > 0)
            print(f"window {i + 1}: {sum(per_kind.values()):.2f} CPU-s per minute ({shown or 'nothing'})")
        totals = [sum(w.values()) for w in windows]
        print(f"idle server, {len(totals)} windows of {args.seconds:.0f} s on {os.cpu_count()} cores: median "
              f"{statistics.median(totals):.2f} CPU-s per minute (spread {min(totals):.2f}-{max(totals):.2f}), "
              f"{statistics.median(totals) / 60 * 100:.1f} % of one core")
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

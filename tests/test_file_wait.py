"""compiler/file_wait.py: a spare's wait for its job file wakes when the runner renames the file into
place (as service/job_process.write_json does), and sleeps otherwise (bench/idle_server.py measures
what an idle server costs)."""
from __future__ import annotations

import os
import threading
import time

from compiler import file_wait
from service.job_process import write_json


def test_a_file_renamed_into_a_watched_directory_wakes_the_waiter_at_once(tmp_path):
    with file_wait.Arrivals([str(tmp_path)]) as arrivals:
        assert arrivals.fd >= 0, "inotify is not available on this Linux host"
        started = time.monotonic()
        assert arrivals.wait(0.2) is False  # nothing arrived: the whole timeout, asleep
        assert time.monotonic() - started >= 0.19
        threading.Timer(0.3, write_json, args=(str(tmp_path), "request.json", {"job": 1})).start()
        started = time.monotonic()
        while not os.path.exists(tmp_path / "request.json"):  # (the file written aside wakes it too)
            assert arrivals.wait(30) is True
        assert time.monotonic() - started < 10  # woken by the rename, not by the 30 s timeout


def test_wait_for_file_returns_once_the_file_exists(tmp_path):
    path = str(tmp_path / "request.json")
    threading.Timer(0.2, write_json, args=(str(tmp_path), "request.json", {"job": 2})).start()
    started = time.monotonic()
    file_wait.wait_for_file(path)
    assert os.path.exists(path) and time.monotonic() - started < 10
    file_wait.wait_for_file(path)  # already there: returns at once


def test_without_inotify_it_polls_as_before(tmp_path, monkeypatch):
    arrivals = file_wait.Arrivals([str(tmp_path / "not-a-directory")])  # the watch fails: no inotify
    assert arrivals.fd == -1
    started = time.monotonic()
    assert arrivals.wait(5) is True  # look again after one poll, not after the timeout
    assert time.monotonic() - started < 1

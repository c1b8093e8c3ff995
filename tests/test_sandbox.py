"""The sandbox: every job runs in bubblewrap with limits, and each limit gives a clear message.
Uses the fake pipeline, whose source is run as Python inside the worker."""
from __future__ import annotations

import os

import pytest

from tests.conftest import compile_and_wait, make_app, needs_bwrap, stage_text

pytestmark = needs_bwrap


@pytest.fixture
def limited(tmp_path):
    app = make_app(tmp_path, wall_time_limit_s=4, cpu_time_limit_s=30, memory_limit_mb=2048,
                   process_limit=40, file_size_limit_mb=8, output_limit_kb=16)
    yield app.test_client(), app.extensions["irscope"].settings["data_dir"]
    app.extensions["irscope"].runner.shutdown()


def test_data_directory_is_invisible(limited):
    client, data_dir = limited
    source = f"import os\nprint(os.path.exists({data_dir!r}))\nopen({os.path.join(data_dir, 'irscope.db')!r})\n"
    job = compile_and_wait(client, "fake", source)
    assert stage_text(client, job["id"], "run.stdout") == "False\n"
    assert job["error"]["kind"] == "UserCodeError" and "FileNotFoundError" in job["error"]["message"]
    assert job["error"]["line"] == 3


def test_no_network(limited):
    client, _ = limited
    source = ("import socket\n"
              "s = socket.socket()\n"
              "s.settimeout(3)\n"
              "s.connect(('1.1.1.1', 80))\n")
    job = compile_and_wait(client, "fake", source)
    assert job["status"] == "failed"
    assert job["error"]["line"] == 4
    assert "OSError: [Errno 101] Network is unreachable" in job["error"]["message"]


def test_environment_is_cleared(limited, monkeypatch):
    """A secret in the server's own environment, set before the job starts, is not in the job's."""
    client, _ = limited
    monkeypatch.setenv("IRSCOPE_TEST_SECRET", "hunter2-in-the-server-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter3-in-the-server-env")
    source = ("import os\n"
              "print(sorted(k for k in os.environ if 'SECRET' in k or k == 'HOME'))\n"
              "print(any('hunter' in v for v in os.environ.values()), os.environ['HOME'])\n")
    job = compile_and_wait(client, "fake", source)
    assert stage_text(client, job["id"], "run.stdout") == "['HOME']\nFalse /tmp\n"


def test_spinning_forever_is_stopped_by_wall_time(limited):
    client, _ = limited
    job = compile_and_wait(client, "fake", "while True:\n    pass\n", timeout=60)
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "WallTimeLimit"
    assert job["error"]["message"] == "stopped after 4 s of wall time (setting wall_time_limit_s)"


def test_a_limit_met_after_the_compile_leaves_the_job_done_saying_what_was_not_measured(limited):
    """Once every stage is written (Bundle.compiled), a limit that stops the job - the wall clock
    here, killing the process - only stops the measurement: the job is done, with every stage and
    a notice naming the phase, the limit and the setting; before that point the same limit fails
    the job (test_spinning_forever_is_stopped_by_wall_time)."""
    client, _ = limited
    job = compile_and_wait(client, "fake", "def measure():\n    while True:\n        pass\n", timeout=60)
    assert job["status"] == "done" and job["error"] is None, job
    assert {"source", "run.stdout", "fake.lines", "fake.names"} <= {s["key"] for s in job["stages"]}
    notice = job["timings"]["not_measured"]
    assert notice == {"phase": "measuring", "kind": "WallTimeLimit", "line": None, "setting": "wall_time_limit_s",
                      "why": "stopped after 4 s of wall time (setting wall_time_limit_s)"}
    page = client.get(f"/j/{job['id']}").get_data(as_text=True)
    assert "compiled; not measured" in page and 'class="error-box"' not in page
    timings = client.get(f"/j/{job['id']}/timings").get_data(as_text=True)
    assert "<b>Not measured</b>: measuring" in timings


def test_allocating_64_gib_is_denied(limited):
    client, _ = limited
    job = compile_and_wait(client, "fake", "x = 1\nblock = bytearray(64 * 2**30)\n")
    assert job["error"]["kind"] == "MemoryLimit"
    assert job["error"]["line"] == 2
    assert "address-space limit is 2048 MiB (setting memory_limit_mb)" in job["error"]["message"]


def test_fork_bomb_hits_the_process_limit(limited):
    client, _ = limited
    source = ("import os, time\n"
              "for i in range(200):\n"
              "    if os.fork() == 0:\n"
              "        time.sleep(30)\n"
              "        os._exit(0)\n")
    job = compile_and_wait(client, "fake", source, timeout=60)
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "ProcessLimit", job["error"]
    assert job["error"]["message"] == "the job tried to start more than 40 processes (setting process_limit)"


def test_huge_file_is_stopped(limited):
    client, _ = limited
    job = compile_and_wait(client, "fake", "f = open('/tmp/big', 'wb')\nf.write(b'x' * (16 * 2**20))\n")
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "FileSizeLimit", job["error"]
    assert job["error"]["line"] == 2
    assert "past the 8 MiB file-size limit (setting file_size_limit_mb)" in job["error"]["message"]


def test_output_is_capped(limited):
    client, _ = limited
    job = compile_and_wait(client, "fake", "for i in range(100000):\n    print('spam', i)\n")
    out = stage_text(client, job["id"], "run.stdout")
    assert job["status"] == "done"
    assert len(out) < 17 * 1024
    assert "[irscope: output cut at 16384 characters" in out


def test_refuses_without_bubblewrap(tmp_path, monkeypatch):
    from service import sandbox
    monkeypatch.setattr(sandbox, "bwrap_works", lambda *user: False)
    app = make_app(tmp_path)
    r = app.test_client().post("/api/compile", json={"language": "fake", "source": "x = 1"})
    assert r.status_code == 503
    assert "--insecure-no-sandbox" in r.get_json()["error"]["message"]
    unsafe = make_app(tmp_path / "b", sandbox="none").test_client()
    job = compile_and_wait(unsafe, "fake", "print('unsandboxed')\n")
    assert job["timings"]["job"]["sandbox"] == "none"
    assert stage_text(unsafe, job["id"], "run.stdout") == "unsandboxed\n"


def test_a_compilers_files_filling_the_disk_is_the_disk_limit_not_irscopes_failure():
    """Triton's fused-attention tutorial once ended "InternalError: irscope's triton pipeline failed:
    OSError: [Errno 28] No space left on device": the compiler's own files had filled the job's
    /tmp. A full disk met in irscope's or a compiler's code (however wrapped) is the limit, named
    with its setting by where the write went (compiler/sandbox_entry.py)."""
    import errno
    import tempfile

    from compiler.errors import ErrorKind
    from compiler.model import JobSettings
    from compiler.user_code import disk_limit_error, out_of_disk

    full = OSError(errno.ENOSPC, "No space left on device", os.path.join(tempfile.gettempdir(), "work", "a.mlir"))
    try:
        try:
            raise full
        except OSError as e:
            raise RuntimeError("Triton's compile failed") from e
    except RuntimeError as wrapped:
        assert out_of_disk(wrapped) is full
    assert out_of_disk(OSError(errno.EACCES, "Permission denied")) is None
    assert out_of_disk(ValueError("no")) is None
    settings = JobSettings(tmp_size_mb=2048, job_disk_mb=1024)
    error = disk_limit_error(full, settings, "while the triton pipeline wrote its files")
    assert error.kind is ErrorKind.DiskLimit
    assert "its /tmp holds 2048 MiB (setting tmp_size_mb)" in error.message and "a.mlir" in error.message
    in_job = disk_limit_error(OSError(errno.ENOSPC, "No space left on device", "/job/out/stage.txt"), settings, "then")
    assert "its job directory holds 1024 MiB (setting job_disk_mb)" in in_job.message

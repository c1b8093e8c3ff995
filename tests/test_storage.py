"""Storage that cannot grow forever (service/retention.py) and work per request that is bounded
(app/stage_diffs.py), through the app with the real store and runner: each test reproduces a finding of
the attack review and checks it now does no harm."""
from __future__ import annotations

import dataclasses
import datetime as dt
import io
import time

from sqlalchemy import update

from service import retention
from service.store import JobRow
from tests.conftest import compile_and_wait, make_app, needs_bwrap, wait_job


def _upload(client, data: bytes, **headers):
    return client.post("/api/imports", data={"archive": (io.BytesIO(data), "trace.tar.gz")},
                       content_type="multipart/form-data", headers=headers)


def test_a_refused_upload_stores_nothing(tmp_path):
    """Before: a 60 MB upload refused with 429 still added its 60 MB row (and was refused as
    RateLimited with the queue-full message). Now the caps are checked first, and each refusal
    names its own reason."""
    app = make_app(tmp_path, languages="fake", max_queued_jobs=1)
    try:
        from compiler.model import Request
        svc = app.extensions["irscope"]
        svc.store.create_job("waiting0001", "k", Request("fake", "x = 1", {}), {})  # the queue is full
        r = _upload(app.test_client(), b"\x1f\x8b" + b"x" * (4 << 20))
        assert r.status_code == 429 and r.get_json()["error"]["kind"] == "QueueFull", r.get_json()
        assert svc.store.uploads() == [] and svc.store.stored_bytes() == 0
    finally:
        app.extensions["irscope"].runner.shutdown()


@needs_bwrap
def test_a_client_over_its_quota_gets_no_new_job_until_its_old_ones_go(tmp_path):
    """Admission checks the quota before a job; the runner checks it again while the job's stages
    are stored. Before: a job admitted under the quota stored all it made, so a client's running
    jobs passed the quota by up to max_jobs_per_client x job_disk_mb."""
    app = make_app(tmp_path, languages="fake", client_store_mb=1)
    try:
        client = app.test_client()
        svc = app.extensions["irscope"]
        # each keeps about 0.6 MB: random bytes in hex, cut at output_limit_kb
        first, second = (compile_and_wait(client, "fake", f"import os\nprint(os.urandom(600 * 1024).hex())  # {n}\n")
                         for n in range(2))
        assert first["status"] == "done", first["error"]
        # admitted at 0.6 MB, the second passed the quota as its output was stored: stopped there
        assert second["status"] == "failed" and second["error"]["kind"] == "StorageQuota", second["error"]
        assert "this job was stopped, the stages stored so far are kept" in second["error"]["message"]
        assert "run.stdout" in [s["key"] for s in second["stages"]]
        held = svc.store.client_bytes("127.0.0.1")
        assert 1 << 20 < held < (1 << 20) + 2 * 600 * 1024  # past it by one stage at most
        r = client.post("/api/compile", json={"language": "fake", "source": "x = 1"})
        assert r.status_code == 429 and r.get_json()["error"]["kind"] == "StorageQuota"
        assert "(setting client_store_mb)" in r.get_json()["error"]["message"]
        other = client.post("/api/compile", json={"language": "fake", "source": "x = 1"},
                            environ_base={"REMOTE_ADDR": "10.1.2.3"})
        assert other.status_code == 202  # the quota is per client
    finally:
        app.extensions["irscope"].runner.shutdown()


@needs_bwrap
def test_the_collection_deletes_old_and_least_recently_viewed_jobs_nobody_points_at(tmp_path):
    """Before: nothing was ever deleted. Now a job nobody links to and nobody viewed for
    keep_jobs_days goes, the store is kept under store_max_mb by the least recently viewed of
    the others, and a job behind a permalink or a comparison stays whatever its age."""
    app = make_app(tmp_path, languages="fake", keep_jobs_days=7, store_max_mb=0)
    try:
        client = app.test_client()
        svc = app.extensions["irscope"]
        jobs = {name: compile_and_wait(client, "fake", f"name = {name!r}\n")["id"]
                for name in ("old", "linked", "compared", "recent")}
        client.post("/api/shortlinks", json={"job": jobs["linked"]})
        client.post("/api/comparisons", json={"a": {"job": jobs["compared"]}, "b": {"job": jobs["recent"]}})
        month_ago = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=30)
        with svc.store._session.begin() as s:  # age them as a month of use would
            s.execute(update(JobRow).where(JobRow.id.in_([jobs["old"], jobs["linked"], jobs["compared"]]))
                      .values(created=month_ago, finished=month_ago, viewed=month_ago))
        stats_before = client.get("/api/stats").get_json()
        done = svc.collect()
        assert done.jobs == 1 and done.reasons == {"not viewed for 7 days": 1}
        assert svc.store.get_job(jobs["old"]) is None
        assert all(svc.store.get_job(jobs[n]) for n in ("linked", "compared", "recent"))
        stats = client.get("/api/stats").get_json()
        assert stats["jobs"] == stats_before["jobs"] - 1 and stats["stored_bytes"] < stats_before["stored_bytes"]
        assert stats["referenced_jobs"] == 3
    finally:
        app.extensions["irscope"].runner.shutdown()


@needs_bwrap
def test_over_the_cap_the_least_recently_viewed_go_first_and_a_viewed_page_is_kept(tmp_path):
    app = make_app(tmp_path, languages="fake", store_max_mb=0, keep_jobs_days=0)
    try:
        client = app.test_client()
        svc = app.extensions["irscope"]
        ids = [compile_and_wait(client, "fake", f"import os\nprint(os.urandom(300 * 1024).hex())  # {n}\n")["id"]
               for n in range(4)]
        assert svc.store.stored_bytes() > 1 << 20
        time.sleep(1.1)
        client.get(f"/j/{ids[0]}")  # the oldest, viewed now: the most recently used
        svc.storage = dataclasses.replace(svc.storage, store_bytes=1 << 20)  # the cap an operator lowered
        done = svc.collect()
        assert done.reasons == {"the store was over its cap": done.jobs} and done.jobs >= 1
        assert svc.store.get_job(ids[0]) is not None and svc.store.get_job(ids[1]) is None
        assert svc.store.stored_bytes() <= 1 << 20
    finally:
        app.extensions["irscope"].runner.shutdown()


def test_a_nearly_full_disk_refuses_new_jobs_and_says_so(tmp_path):
    app = make_app(tmp_path, languages="fake", min_free_disk_mb=1 << 40)
    try:
        r = app.test_client().post("/api/compile", json={"language": "fake", "source": "x = 1"})
        assert r.status_code == 507 and r.get_json()["error"]["kind"] == "StorageFull"
        assert "(setting min_free_disk_mb)" in r.get_json()["error"]["message"]
        assert app.extensions["irscope"].store.counts()["jobs"] == 0
    finally:
        app.extensions["irscope"].runner.shutdown()


# --- bounded work per request ---------------------------------------------------------------------

def test_diffs_of_long_texts_are_refused_at_once_and_slow_ones_stopped(tmp_path):
    """Before: two stages of 60k lines took 11.6 s of the web process's CPU per GET. Now a diff
    past max_diff_lines is refused in no time with a sentence, one past diff_timeout_s is stopped
    (in its own process), and a diff done once is not done again."""
    from app.stage_diffs import DiffLimits, Diffs
    diffs = Diffs(DiffLimits(max_lines=20_000, max_bytes=2 << 20, timeout_s=2.0, processes=1))
    try:
        a = "\n".join(f"line {n} a" for n in range(60_000))
        b = "\n".join(f"line {n} b" for n in range(60_000))
        started = time.perf_counter()
        refused = diffs.render(("t", 1), a, b, "A", "B")
        assert time.perf_counter() - started < 0.5
        assert "too long to diff here: A has 60,000 lines, the limit is 20,000 (setting max_diff_lines)" in refused
        # the square of the differing lines: 19,000 lines that all differ take difflib over a second
        slow_a = "\n".join(f"{n} x{n * 7919 % 10007}" for n in range(19_000))
        slow_b = "\n".join(f"{n} y{n * 104729 % 10009}" for n in range(19_000))
        hurried = Diffs(DiffLimits(max_lines=20_000, max_bytes=2 << 20, timeout_s=0.1, processes=1))
        try:
            started = time.perf_counter()
            stopped = hurried.render(("t", 2), slow_a, slow_b, "A", "B")
            assert "took longer than 0.1 s to compute and was stopped (setting diff_timeout_s)" in stopped
            assert time.perf_counter() - started < 10
        finally:
            hurried.close()
        small = diffs.render(("t", 3), "a\nb\nc\n", "a\nB\nc\n", "A", "B")
        assert 'class="gd"' in small or "gd" in small
        started = time.perf_counter()
        assert diffs.render(("t", 3), "a\nb\nc\n", "a\nB\nc\n", "A", "B") == small  # kept, not recomputed
        assert time.perf_counter() - started < 0.05
    finally:
        diffs.close()


@needs_bwrap
def test_a_comparisons_status_poll_does_not_diff_its_sources(tmp_path, monkeypatch):
    """Before: /c/<id>/status (polled every 700 ms) diffed the two sources on every poll."""
    from app import stage_diffs as diffs_module
    app = make_app(tmp_path, languages="fake")
    try:
        client = app.test_client()
        body = client.post("/api/comparisons", json={"a": {"language": "fake", "source": "x = 1\n"},
                                                     "b": {"language": "fake", "source": "x = 2\n"}}).get_json()
        calls = []
        real = diffs_module.Diffs.render
        monkeypatch.setattr(diffs_module.Diffs, "render", lambda self, *a: calls.append(a[0]) or real(self, *a))
        for _ in range(3):
            assert client.get(f"/c/{body['id']}/status").status_code == 200
        assert calls == []
        from tests.conftest import wait_job
        wait_job(client, body["a"])
        wait_job(client, body["b"])
        for _ in range(3):
            assert client.get(f"/c/{body['id']}/status").status_code == 200
        assert calls == []
        assert "the two sources, diffed" in client.get(f"/c/{body['id']}").get_data(as_text=True)
        assert calls == [("sources", body["a"], body["b"])]
    finally:
        app.extensions["irscope"].runner.shutdown()


@needs_bwrap
def test_a_full_disk_while_a_job_stores_its_stages_keeps_what_was_stored_and_says_so(tmp_path, monkeypatch):
    from sqlalchemy.exc import OperationalError
    app = make_app(tmp_path, languages="fake")
    try:
        store = app.extensions["irscope"].store
        real = store.add_stage

        def add_stage(job_id, position, stage, text):
            if stage.key == "fake.lines":  # the disk fills up after the first stages
                raise OperationalError("INSERT INTO stage_chunks", {}, Exception("database or disk is full"))
            return real(job_id, position, stage, text)
        monkeypatch.setattr(store, "add_stage", add_stage)
        job = compile_and_wait(app.test_client(), "fake", "print('hello')\n")
        assert job["status"] == "failed" and job["error"]["kind"] == "StorageFull", job["error"]
        assert "the stages stored so far are kept" in job["error"]["message"]
        assert {"source", "run.stdout"} <= {s["key"] for s in job["stages"]}
        assert store.stage_text(job["id"], "run.stdout")[1] == "hello\n"
    finally:
        app.extensions["irscope"].runner.shutdown()


@needs_bwrap
def test_a_lessons_job_is_kept_by_the_collection_and_recompiled_when_gone(tmp_path):
    """A lesson opens at the permalink of its request, so the collection keeps its job as it keeps
    any linked job (even past keep_jobs_days, the store over its cap). Should the job be gone all
    the same (an operator deleted it), the lesson's next visit compiles it again behind the same
    permalink, where before the link kept answering the deleted job: 404."""
    lessons = tmp_path / "lessons" / "hello"
    lessons.mkdir(parents=True)
    (lessons / "source.py").write_text("print('a lesson')\n")
    (lessons / "lesson.toml").write_text('title = "Hello"\ntopic = "Tests"\norder = 1\nlanguage = "fake"\n'
                                         'source = "source.py"\nfirst_stage = "run.stdout"\n'
                                         'explanation = "It prints."\n')
    app = make_app(tmp_path, languages="fake", examples_dir=str(tmp_path / "lessons"))
    try:
        client = app.test_client()
        svc = app.extensions["irscope"]
        opened = client.get("/examples/hello")
        assert opened.status_code == 303, opened.get_data(as_text=True)
        link = opened.headers["Location"].split("#")[0].rsplit("/", 1)[-1]
        job_id = svc.store.shortlink_job(link)
        deadline = time.monotonic() + 60
        while not svc.store.get_job(job_id).finished and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # older than the collection's keep_days below (0.09 s)
        retention.collect(svc.store, dataclasses.replace(svc.storage, keep_days=1e-6), lambda _: set())
        assert svc.store.get_job(job_id) is not None  # linked: kept

        with svc.store._session.begin() as s:  # an operator's delete, bypassing the collection's rules
            s.execute(JobRow.__table__.delete().where(JobRow.id == job_id))
        assert client.get(f"/z/{link}").status_code == 404
        again = client.get("/examples/hello")
        assert again.status_code == 303 and again.headers["Location"].split("#")[0].endswith(f"/z/{link}")
        new_id = svc.store.shortlink_job(link)
        assert new_id != job_id
        job = wait_job(client, new_id, timeout=120)
        assert job["status"] == "done" and job["request"]["source"] == "print('a lesson')\n", job
        assert client.get(f"/z/{link}").status_code == 200
    finally:
        app.extensions["irscope"].runner.shutdown()


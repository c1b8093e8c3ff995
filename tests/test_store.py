"""The store: Alembic migrations on SQLite (a database made before migrations existed included)
and on a real PostgreSQL; stage text in chunks, one page read without the rest; the job claims
and recoveries the worker tier relies on; the per-client cap and routing decisions."""
from __future__ import annotations

import os
import sqlite3
import zlib

import pytest
from sqlalchemy import inspect, text, update

from compiler.model import JobError, Request, Stage
from service import migrations, routing, stage_text
from service.store import StageChunkRow, Store

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "store", "pre_migration.sql")


def _stage(key: str, text_: str, fmt: str = "python") -> Stage:
    return Stage(key=key, title=key, group="G", format=fmt, size=len(text_.encode()))


def test_chunks_cut_at_line_boundaries_and_join_back():
    text_ = "".join(f"line {n} {'x' * (n % 50)}\n" for n in range(5000)) + "last line without newline"
    chunks = stage_text.split(text_, 4096)
    assert len(chunks) > 20
    assert stage_text.join(chunks) == text_
    assert [c.first_line for c in chunks] == [sum(c.line_count for c in chunks[:i]) for i in range(len(chunks))]
    assert sum(c.line_count for c in chunks) == stage_text.line_count(text_) == 5001
    for c in chunks[:-1]:
        assert c.text().endswith("\n") and len(c.text().encode()) <= 4096
    assert stage_text.split("", 10)[0].line_count == 1 and stage_text.join(stage_text.split("", 10)) == ""
    one_long_line = "y" * 10_000 + "\nz"
    assert [c.line_count for c in stage_text.split(one_long_line, 100)] == [1, 1]


def test_a_page_of_a_20_mb_stage_reads_only_its_chunks(tmp_path):
    """20 MB of output code in 256 KiB chunks: page 1 comes back although a chunk far from it is
    corrupted (so it was never read); the page that needs that chunk fails."""
    store = Store(f"sqlite:///{tmp_path}/s.db", chunk_bytes=256 * 1024)
    store.create_job("j1", "k", Request("fake", "x = 1", {}), {})
    line = "    buf{n} = empty_strided_cpu((64, 128), (128, 1), torch.float32)  # padding to 100 bytes....\n"
    big = "".join(line.format(n=n) for n in range(210_000))
    assert len(big) > 20_000_000
    store.add_stage("j1", 0, _stage("inductor.output_code", big), big)
    stage, lines, page = store.stage_page("j1", "inductor.output_code", 5000, 3)
    assert lines == 210_001 and page.split("\n") == [line.format(n=n).rstrip("\n") for n in range(5000, 5003)]
    with store._session.begin() as s:  # break a chunk in the middle of the stage
        s.execute(update(StageChunkRow).where(StageChunkRow.job_id == "j1", StageChunkRow.n == 40)
                  .values(data=b"not zlib"))
    assert store.stage_page("j1", "inductor.output_code", 0, 5000)[2].startswith("    buf0 = ")
    with pytest.raises(zlib.error):
        store.stage_page("j1", "inductor.output_code", 40 * 2600, 5000)
    with pytest.raises(zlib.error):
        store.stage_text("j1", "inductor.output_code")


def test_a_sqlite_database_from_before_migrations_is_migrated(tmp_path):
    path = tmp_path / "irscope.db"
    db = sqlite3.connect(path)
    db.executescript(open(FIXTURE).read())
    db.execute("INSERT INTO jobs VALUES ('old1', 'key1', 'fake', ?, '{}', 'done', '', NULL, '{}', "
               "'2026-01-01 00:00:00', NULL)", ('{"language": "fake", "source": "x = 1", "options": {}}',))
    db.execute("INSERT INTO stages VALUES ('old1', 'fake.lines', 0, 'Lines', 'Fake', 'text', 9, '[[1, 1]]', '{}', ?)",
               (zlib.compress(b"   1  x = 1\nsecond"),))
    db.execute("INSERT INTO shortlinks VALUES ('abcdefgh', 'old1', '2026-01-01 00:00:00')")
    db.commit()
    db.close()
    store = Store(f"sqlite:///{path}")
    assert migrations.current_revision(store.engine) == "0005"
    old = store.get_job("old1")
    assert (old.status, old.request.source, old.queue, old.attempts) == ("done", "x = 1", "cpu", 0)
    assert store.stage_text("old1", "fake.lines")[1] == "   1  x = 1\nsecond"
    assert store.stage_page("old1", "fake.lines", 1, 1)[1:] == (2, "second")
    assert store.shortlink_job("abcdefgh") == "old1"
    assert "data" not in {c["name"] for c in inspect(store.engine).get_columns("stages")}
    Store(f"sqlite:///{path}")  # opening it again changes nothing
    assert store.stage_text("old1", "fake.lines")[1] == "   1  x = 1\nsecond"


def test_migrations_run_on_postgres_and_claims_are_atomic(postgres_url):
    from alembic import command
    store = Store(postgres_url, chunk_bytes=64)
    assert migrations.current_revision(store.engine) == "0005"
    tables = set(inspect(store.engine).get_table_names())
    assert {"jobs", "stages", "stage_chunks", "shortlinks", "workers", "uploads", "comparisons", "scans"} <= tables
    store.create_job("p1", "k", Request("fake", "x = 1", {}), {"irscope": "t"}, client="10.0.0.7")
    body = "\n".join(f"row {n}" for n in range(100))
    store.add_stage("p1", 0, _stage("fake.lines", body, "text"), body)
    assert store.stage_page("p1", "fake.lines", 50, 2)[1:] == (100, "row 50\nrow 51")
    assert store.client_jobs("10.0.0.7") == 1
    assert store.claim_job("p1", "w1/aaa") is True
    assert store.claim_job("p1", "w2/bbb") is False  # a duplicate message finds it taken
    lost, = store.lost_jobs(live_instances={"bbb"})
    assert lost.worker == "w1/aaa" and lost.attempts == 1
    assert store.requeue_lost(lost, "again") is True and store.requeue_lost(lost, "again") is False
    assert store.get_job("p1").stages == [] and store.queue_position("p1") == 1  # cleared for the next try
    assert store.claim_job("p1", "w2/bbb") is True
    assert store.fail_lost(store.get_job("p1"), JobError("WorkerCrashed", "gone")) is True
    failed = store.get_job("p1")
    assert (failed.status, failed.attempts, failed.error.kind) == ("failed", 2, "WorkerCrashed")
    # the migrations go down and up again on PostgreSQL too, the stage text with them
    store.add_stage("p1", 0, _stage("fake.lines", body, "text"), body)
    with store.engine.begin() as conn:
        cfg = migrations._config(conn)
        command.downgrade(cfg, "0001")
        assert "data" in {c["name"] for c in inspect(conn).get_columns("stages")}
        assert conn.execute(text("SELECT count(*) FROM stages")).scalar() == 1
        command.upgrade(cfg, "head")
    assert store.stage_text("p1", "fake.lines")[1] == body
    store.engine.dispose()


def test_routing_places_gpu_targets_and_resolves_auto():
    req = Request("triton", "src", {"target": "auto"})
    choices = ("auto", "cuda:sm_80", "cuda:sm_90")
    resolved, where = routing.place(req, {"cpu": True}, choices)
    assert resolved.options["target"] == "cuda:sm_90" and where.note == "virtual: no sm_90 worker online"
    assert where.queue == "cpu" and where.virtual
    resolved, where = routing.place(req, {"cpu": True, "cuda:sm_80": True, "cuda:sm_90": False}, choices)
    assert resolved.options["target"] == "cuda:sm_80" and (where.queue, where.virtual) == ("cuda:sm_80", False)
    assert resolved.cache_key({}) != routing.place(req, {"cpu": True}, choices)[0].cache_key({})
    _, where = routing.place(Request("pytorch", "src", {"target": "host"}), {"cpu": True, "cuda:sm_90": True})
    assert (where.queue, where.target) == ("cpu", None)
    _, where = routing.place(Request("pytorch", "src", {"target": "cuda:sm_90"}), {"cpu": True, "cuda:sm_90": True})
    assert (where.queue, where.virtual, where.note) == ("cuda:sm_90", False, "on a sm_90 worker")
    _, where = routing.place(Request("triton", "src", {"target": "hip:gfx942"}), {"cpu": True})
    assert where.note == "virtual: no gfx942 worker online"


def test_one_client_cannot_queue_more_than_its_share(tmp_path):
    """max_jobs_per_client=2: a third job from the same address is a 429 naming the setting; a
    job from another address is accepted."""
    from tests.conftest import make_app, wait_job
    app = make_app(tmp_path, languages="fake", max_jobs_per_client=2, rate_limit="")
    try:
        a = app.test_client()
        a.environ_base["REMOTE_ADDR"] = "10.1.1.1"
        b = app.test_client()
        b.environ_base["REMOTE_ADDR"] = "10.2.2.2"
        slow = "import time\ntime.sleep(3)\n# {}"
        accepted = [a.post("/api/compile", json={"language": "fake", "source": slow.format(n)}) for n in range(2)]
        assert [r.status_code for r in accepted] == [202, 202]
        refused = a.post("/api/compile", json={"language": "fake", "source": slow.format(2)})
        assert refused.status_code == 429 and refused.headers["Retry-After"]
        error = refused.get_json()["error"]
        assert error["kind"] == "ClientQueueFull" and "(setting max_jobs_per_client)" in error["message"]
        assert "you have 2 jobs waiting or running" in error["message"]
        other = b.post("/api/compile", json={"language": "fake", "source": "print('mine')"})
        assert other.status_code == 202
        assert wait_job(b, other.get_json()["job"])["status"] == "done"
        for r in accepted:
            wait_job(a, r.get_json()["job"])
        again = a.post("/api/compile", json={"language": "fake", "source": slow.format(2)})
        assert again.status_code == 202  # its jobs ended: the client may submit again
        wait_job(a, again.get_json()["job"])
    finally:
        app.extensions["irscope"].runner.shutdown()


def test_the_stage_viewer_renders_one_page_of_a_long_stage(tmp_path):
    from tests.conftest import make_app
    app = make_app(tmp_path, languages="fake", stage_page_lines=1000, stage_chunk_kb=16)
    try:
        store = app.extensions["irscope"].store
        store.create_job("pg1", "k", Request("fake", "x = 1", {}), {})
        body = "\n".join(f"value_{n} = {n}" for n in range(2500))
        store.add_stage("pg1", 0, _stage("fake.big", body), body)
        page = app.test_client().get("/j/pg1/stage/fake.big?page=2").get_data(as_text=True)
        assert "lines 1001–2000 of 2500 · page 2 of 3" in page
        assert 'data-line="1001"' in page and 'data-line="2000"' in page
        assert 'data-line="1000"' not in page and 'data-line="2001"' not in page
        assert "value_1000" in page and "value_999 " not in page and "value_2000" not in page
        assert "?page=1" in page and "?page=3" in page
        assert app.test_client().get("/j/pg1/stage/fake.big?page=4").status_code == 404
        raw = app.test_client().get("/api/jobs/pg1/stages/fake.big")
        assert raw.get_data(as_text=True) == body  # streamed chunk by chunk, whole
    finally:
        app.extensions["irscope"].runner.shutdown()

"""The job page's live updates (/j/<id>/updates) and the queue position, driven through the store
directly: each test sets up exactly the job state it asks about, so nothing depends on how fast a
worker runs. tests/test_browser.py watches the same updates arrive in a real browser."""
from __future__ import annotations

import re

from compiler.model import JobError, Request, Stage


def _queued(store, job_id: str, source: str = "x = 1\n"):
    return store.create_job(job_id, "key-" + job_id, Request("fake", source, {}), {"irscope": "test"})


def _stage(store, job_id: str, position: int, key: str, group: str) -> None:
    text = f"text of {key}\n"
    store.add_stage(job_id, position, Stage(key=key, title=key.upper(), group=group, format="text",
                                            size=len(text)), text)


def _updates(client, job_id: str, since: int, version: str | None = None):
    url = f"/j/{job_id}/updates?since={since}" + (f"&v={version}" if version else "")
    return client.get(url)


def _next_poll(html: str) -> tuple[int, str]:
    """The since and v of the poller an answer carries."""
    m = re.search(r'hx-get="/j/\w+/updates\?since=(\d+)&amp;v=(\w+)"', html)
    assert m, html[:500]
    return int(m.group(1)), m.group(2)


def test_queue_position_counts_queued_jobs_in_order(app):
    store = app.extensions["irscope"].store
    for job_id in ("a1", "b2", "c3"):
        _queued(store, job_id)
    assert [store.queue_position(j) for j in ("a1", "b2", "c3")] == [1, 2, 3]
    store.set_running("a1")
    assert [store.queue_position(j) for j in ("a1", "b2", "c3")] == [None, 1, 2]
    store.finish_job("b2", None, {})
    assert store.queue_position("c3") == 1 and store.queue_position("nope") is None


def test_waiting_job_page_shows_its_place_in_the_queue(app, client):
    store = app.extensions["irscope"].store
    for job_id in ("q1", "q2", "q3"):
        _queued(store, job_id)
    page = client.get("/j/q3").get_data(as_text=True)
    assert "position 3 in the queue (2 ahead)" in page
    store.set_running("q1", "importing torch")
    store.set_running("q2", "importing torch")
    body = _updates(client, "q3", 0).get_data(as_text=True)
    assert "position 1 in the queue (next to start)" in body
    running = _updates(client, "q1", 0).get_data(as_text=True)
    assert "importing torch" in running and "in the queue" not in running


def test_updates_send_only_new_tabs_and_grow_the_bar_in_place(app, client):
    store = app.extensions["irscope"].store
    _queued(store, "j1")
    store.set_running("j1", "running your source")
    _stage(store, "j1", 0, "source", "Source")

    page = client.get("/j/j1").get_data(as_text=True)
    assert 'data-status="running" data-open-stage=""' in page  # nothing opens by itself while it runs
    # the poller names its own target: inherited from the form it would replace #results (issue 8)
    poller = re.search(r'<div id="poll-j1"[^>]*>', page).group(0)
    assert 'hx-target="this"' in poller and 'hx-swap="outerHTML"' in poller and "every" in poller
    since, version = _next_poll(page)
    assert since == 1
    # nothing changed: no content at all
    assert _updates(client, "j1", since, version).status_code == 204

    _stage(store, "j1", 1, "dynamo.fx_graph:0/0", "Dynamo")
    store.set_progress("j1", "compiling (Dynamo, AOTAutograd, Inductor)")
    body = _updates(client, "j1", since, version).get_data(as_text=True)
    assert "compiling (Dynamo, AOTAutograd, Inductor)" in body and "2 stages so far" in body
    # a new group is appended to the tab bar, holding exactly the new stages' tabs
    assert 'hx-swap-oob="beforeend:#tabs-j1"' in body
    assert re.findall(r'data-key="([^"]+)"', body) == ["dynamo.fx_graph:0/0"]
    assert 'data-key="source"' not in body  # the page has that tab already
    since, version = _next_poll(body)
    assert since == 2

    _stage(store, "j1", 2, "dynamo.guards:0/0", "Dynamo")
    body = _updates(client, "j1", since, version).get_data(as_text=True)
    # a stage of a group the page has goes into that group, after its tabs
    assert 'hx-swap-oob="beforeend:#grp-j1-dynamo-tabs"' in body
    assert re.findall(r'data-key="([^"]+)"', body) == ["dynamo.guards:0/0"]
    since, version = _next_poll(body)

    _stage(store, "j1", 3, "dynamo.bytecode:0/0", "Dynamo")
    body = _updates(client, "j1", since, version).get_data(as_text=True)
    # past MAX_TABS_PER_GROUP stages the group is drawn again, as one list of all three
    assert '<div class="group" id="grp-j1-dynamo" role="presentation" hx-swap-oob="outerHTML">' in body
    assert 'id="grp-j1-dynamo-list"' in body
    assert re.findall(r'<option value="([^"]+)"', body) == ["dynamo.fx_graph:0/0", "dynamo.guards:0/0",
                                                             "dynamo.bytecode:0/0"]
    since, version = _next_poll(body)

    # 13 kernels: more than a group shows as tabs, so the group is drawn again as one list
    for n in range(13):
        _stage(store, "j1", 4 + n, f"kernel.k{n}", "Kernels")
    body = _updates(client, "j1", since, version).get_data(as_text=True)
    assert 'hx-swap-oob="beforeend:#tabs-j1"' in body and 'id="grp-j1-kernels-list"' in body
    since, version = _next_poll(body)
    _stage(store, "j1", 17, "kernel.k13", "Kernels")
    _stage(store, "j1", 18, "kernel.k14", "Kernels")
    body = _updates(client, "j1", since, version).get_data(as_text=True)
    assert 'hx-swap-oob="beforeend:#grp-j1-kernels-list"' in body
    assert re.findall(r'<option value="([^"]+)"', body) == ["kernel.k13", "kernel.k14"]
    assert '<span id="grp-j1-kernels-count" hx-swap-oob="outerHTML" class="count">15</span>' in body
    since, version = _next_poll(body)

    store.finish_job("j1", JobError("UserCodeError", "boom", line=1), {"job": {"wall_s": 1.5, "sandbox": "none"}})
    body = _updates(client, "j1", since, version).get_data(as_text=True)
    # the stage the page opens by itself is decided once the job ended (nothing while it ran), the
    # same in the last update and in the whole page a reload or a repeat from the store draws
    opens = '<b class="state state-failed" data-status="failed" data-open-stage="kernel.k14">failed</b>'
    assert opens in body and opens in client.get("/j/j1").get_data(as_text=True)
    assert 'data-error-line="1"' in body and "boom" in body
    assert 'data-key="timings"' in body  # the summary tab arrives with the timings
    # the finished job's poller asks no more
    assert 'id="poll-j1"' in body and "hx-trigger" not in body.split('id="poll-j1"')[1].split(">")[0]


def test_updates_for_unknown_job_or_bad_since(app, client):
    assert client.get("/j/nope/updates?since=0").status_code == 404
    _queued(app.extensions["irscope"].store, "b1")
    assert client.get("/j/b1/updates?since=zero").status_code == 400
    # a since beyond what the job has is taken as "everything"
    assert _next_poll(client.get("/j/b1/updates?since=99").get_data(as_text=True))[0] == 0


def _empty_output(store, job_id: str, position: int) -> None:
    store.add_stage(job_id, position, Stage(key="run.stdout", title="Program output", group="Run", format="text",
                                            size=0), "")


def test_an_empty_stage_is_no_tab_unless_it_is_all_a_failed_job_has(app, client):
    """A program that printed nothing: its empty output is offered by no tab (no empty controls),
    while the job runs and once it is done; its address still draws it, saying nothing was printed.
    A failed job with nothing to read beside its error (no stage with text) offers its empty output:
    that nothing was printed is all there is to read; one with its source offers that instead, and
    opens nothing (the source is never opened beside an error)."""
    store = app.extensions["irscope"].store
    _queued(store, "e1")
    store.set_running("e1", "running your source")
    _stage(store, "e1", 0, "source", "Source")
    _empty_output(store, "e1", 1)
    page = client.get("/j/e1").get_data(as_text=True)
    since, version = _next_poll(page)
    assert since == 2 and re.findall(r'data-key="([^"]+)"', page) == ["source"]
    _stage(store, "e1", 2, "fake.lines", "Fake")
    body = _updates(client, "e1", since, version).get_data(as_text=True)
    assert re.findall(r'data-key="([^"]+)"', body) == ["fake.lines"]
    store.finish_job("e1", None, {})
    page = client.get("/j/e1").get_data(as_text=True)
    assert "run.stdout" not in page and "Program output" not in page
    assert "The program printed nothing." in client.get("/j/e1/stage/run.stdout").get_data(as_text=True)

    _queued(store, "e2")
    store.set_running("e2", "running your source")
    _empty_output(store, "e2", 0)
    since, version = _next_poll(client.get("/j/e2").get_data(as_text=True))
    store.finish_job("e2", JobError("UserCodeError", "boom", line=1), {})
    body = _updates(client, "e2", since, version).get_data(as_text=True)
    assert re.findall(r'data-key="([^"]+)"', body) == ["run.stdout"]  # the tab the page lacked
    assert 'data-key="run.stdout"' in client.get("/j/e2").get_data(as_text=True)

    _queued(store, "e3")
    store.set_running("e3", "running your source")
    _stage(store, "e3", 0, "source", "Source")
    _empty_output(store, "e3", 1)
    store.finish_job("e3", JobError("UserCodeError", "boom", line=1), {})
    page = client.get("/j/e3").get_data(as_text=True)
    # the source is offered, never opened beside the error (the editor's text again): nothing opens
    assert re.findall(r'data-key="([^"]+)"', page) == ["source"] and 'data-open-stage="source"' not in page
    assert page.count('data-open-stage=""') == 2  # the status line's and the error box's


def test_an_unchanged_job_is_answered_204_before_its_summary_is_read(app, client, monkeypatch):
    """A poll from a page that has every stage and the current version gets 204 without the bar's
    context being built: the summary line (which reads stage heads and the kernels table) is not
    read on every poll of an ended job."""
    from app import ide
    store = app.extensions["irscope"].store
    _queued(store, "d1")
    _stage(store, "d1", 0, "source", "Source")
    store.finish_job("d1", None, {})
    calls = []
    monkeypatch.setattr(ide, "glance", lambda *a: calls.append(a) or [])
    version = ide._version(store.get_job("d1"), None)
    assert _updates(client, "d1", 1, version).status_code == 204 and calls == []
    assert _updates(client, "d1", 0, version).status_code == 200 and len(calls) == 1

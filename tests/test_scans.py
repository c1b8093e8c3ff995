"""Version scans (service/scans.py, app/scans.py): one Triton kernel compiled for a virtual sm_90 on
every installed toolchain that serves Triton (default 3.9.0, triton-3.8.0, triton-3.7.0 and
torch-2.14.1, whose Triton is 3.8.0), in Triton's version order, and what changed between
consecutive ones, checked against the jobs' own stages. One real `irscope serve` for the module;
its four jobs are compiled once, by the first scan, and every other scan here reuses them."""
from __future__ import annotations

import difflib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from urllib.parse import quote

import pytest
from mcp.client.session import ClientSession

from compiler import registry
from compiler.model import JobError, Request
from service.scans import Entry, changes_between
from service.store import Job
from testbed.real_servers import Serve, http, until
from tests.browser import BROWSER_MARKS
from tests.conftest import make_app, needs_bwrap, seed_kernel_toolchain_cache
from tests.test_mcp import _result, over_http

pytestmark = needs_bwrap

# The example kernel; it also prints where its Python environment is, a path that differs on
# every toolchain and must not count as a change.
SOURCE = registry.get("triton").example + "import sys\nprint(sys.prefix)\n"
OPTIONS = {"target": "cuda:sm_90"}
PTX = "triton.ptx:softmax_kernel"
REGEX = r"\.reg \.b32\s+%r<(\d+)>"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("scans"))
    seed_kernel_toolchain_cache(data)  # the default toolchain's Triton jobs start warm
    served = Serve(data, {
        "languages": "triton", "workers": 2, "spare_workers": 0, "warm_toolchain_cache": False, "rate_limit": "",
        "max_jobs_per_client": 0, "poll_interval_ms": 250, "max_source_kb": 4, "mcp_compile_wait_s": 5}).start()
    yield served.base
    served.stop()


def start(base: str, stage=None, source: str = SOURCE, language: str = "triton") -> tuple[int, dict]:
    return http(base, "/api/scan", {"language": language, "source": source, "options": OPTIONS, "stage": stage})


def finished(base: str, scan_id: str) -> dict:
    def ended():
        status, body = http(base, f"/api/scans/{scan_id}")
        assert status == 200, body
        return body if body["status"] == "done" else None
    return until(ended, 300, every=0.25, why=f"scan {scan_id} finished")


def text(base: str, job_id: str, key: str) -> str:
    status, body = http(base, f"/api/jobs/{job_id}/stages/{quote(key, safe='')}")
    assert status == 200, (key, body)
    return body if isinstance(body, str) else json.dumps(body)


def expected_changes(jobs: list[dict], values: list) -> list[tuple[str, str]]:
    return [(a["toolchain"], b["toolchain"]) for a, b, va, vb in zip(jobs, jobs[1:], values, values[1:]) if va != vb]


@pytest.fixture(scope="module")
def scans(server) -> dict:
    """The default scan (PTX) and, started while its jobs compile, the register and regex scans of
    the same jobs; each once every job ended."""
    started = {}
    for name, stage in (("ptx", None), ("registers", {"registers": "softmax_kernel"}), ("regex", {"regex": REGEX}),
                        ("stdout", "run.stdout")):
        status, body = start(server, stage)
        assert status in (200, 202), body
        started[name] = body
    return {name: finished(server, body["scan"]) for name, body in started.items()}


def test_a_scan_runs_every_triton_toolchain_in_version_order_and_names_the_first_whose_ptx_changed(server, scans):
    scan = scans["ptx"]
    jobs = scan["jobs"]
    names = [j["toolchain"] for j in jobs]
    assert {"default", "triton-3.7.0", "triton-3.8.0", "torch-2.14.1"} <= set(names)
    versions = [tuple(int(p) for p in j["version"].split(".")[:3]) for j in jobs]
    assert versions == sorted(versions) and versions[0] == (3, 7, 0) and jobs[-1]["toolchain"] == "default"
    # the same Triton under two torch releases: both kept, next to each other
    assert abs(names.index("triton-3.8.0") - names.index("torch-2.14.1")) == 1
    assert {"toolchain": "jax-0.9.2", "why": "it has no triton, torch installed"} in scan["left_out"]
    assert all(j["status"] == "done" for j in jobs), [(j["toolchain"], j.get("error")) for j in jobs]
    assert scan["compared"] == "triton.ptx (the default)" and scan["stage"] == {}

    # what changed is what the jobs' own PTX says
    ptx = [text(server, j["job"], PTX) for j in jobs]
    assert len({p for p in ptx}) > 1
    assert [(c["from"], c["to"]) for c in scan["changes"]] == expected_changes(jobs, ptx)
    first = next(i for i in range(1, len(ptx)) if ptx[i] != ptx[i - 1])
    assert scan["changes"][0]["to"] == names[first] and scan["changes"][0]["stage"] == PTX

    # each change opens the comparison of its two jobs on the PTX of both
    change = scan["changes"][0]
    comparison, pair = change["diff_url"].split("#")
    status, body = http(server, comparison + ".json")
    assert status == 200 and (body["a"]["id"], body["b"]["id"]) == (jobs[first - 1]["job"], jobs[first]["job"])
    assert pair == f"a={quote(PTX, safe='')}&b={quote(PTX, safe='')}&view=diff"


def test_a_path_that_names_the_toolchain_is_no_change(server, scans):
    stdout = scans["stdout"]
    raw = [text(server, j["job"], "run.stdout") for j in stdout["jobs"]]
    assert len(set(raw)) == len(raw), raw  # each toolchain's own environment, a path of its own
    assert "<toolchains>/triton-3.7.0" in raw[0] and "<venv>" in raw[-1]
    assert stdout["changes"] == [] and stdout["status"] == "done"


def test_a_register_count_and_a_regex_are_compared_as_the_jobs_show_them(server, scans):
    jobs = scans["ptx"]["jobs"]
    registers = scans["registers"]
    assert [j["job"] for j in registers["jobs"]] == [j["job"] for j in jobs]  # the same jobs, compiled once
    counts = [[row["registers"] for row in json.loads(text(server, j["job"], "kernels.resources"))["kernels"]
               if row["kernel"] == "softmax_kernel"] for j in jobs]
    assert all(counts)
    assert [(c["from"], c["to"]) for c in registers["changes"]] == expected_changes(jobs, counts)
    assert all(c["stage"] == "kernels.resources" for c in registers["changes"])

    matches = [re.findall(REGEX, text(server, j["job"], PTX)) for j in jobs]
    assert all(matches)
    assert [(c["from"], c["to"]) for c in scans["regex"]["changes"]] == expected_changes(jobs, matches)
    assert scans["regex"]["compared"] == f"the matches of /{REGEX}/ in triton.ptx (the default)"


def test_the_same_scan_again_is_answered_from_the_cache(server, scans):
    _, before = http(server, "/api/stats")
    status, body = start(server)
    assert status == 200 and body["cached"] == body["jobs"] == len(scans["ptx"]["jobs"])
    assert body["scan"] == scans["ptx"]["scan"]  # the same jobs and stage: the same scan
    _, after = http(server, "/api/stats")
    assert after["jobs"] == before["jobs"]


@pytest.mark.parametrize("payload, says", [
    ({"language": "cobol", "source": "x", "stage": None}, "unknown language 'cobol'"),
    ({"language": "triton", "source": SOURCE, "stage": {"regex": "(unclosed"}}, "is not a regular expression"),
    ({"language": "triton", "source": SOURCE, "stage": {"ptx": "k", "registers": "k"}}, "cannot be asked together"),
    ({"language": "triton", "source": SOURCE, "stage": {"kernel": "k"}}, "unknown field 'kernel'"),
    ({"language": "triton", "source": SOURCE, "stage": 3}, "stage must be a stage key"),
    ({"language": "triton", "source": SOURCE + "#" * 5000, "stage": None}, "the limit is 4096 (setting max_source_kb)"),
])
def test_a_bad_scan_is_refused_with_a_sentence_and_makes_no_job(server, scans, payload, says):
    _, before = http(server, "/api/stats")
    status, body = http(server, "/api/scan", dict(payload, options=OPTIONS))
    assert status == 400 and body["error"]["kind"] == "RequestError" and says in body["error"]["message"], body
    assert http(server, "/api/stats")[1]["jobs"] == before["jobs"]


def test_a_failed_job_is_a_change_never_no_change():
    """A toolchain where the job fails between two where it compiles the same: two changes, not none."""
    def entry(name: str, status: str, kind: str = "") -> Entry:
        return Entry(name, name, Job(id=name, cache_key="", request=Request("triton", "x", {}), status=status,
                                     error=JobError(kind, "no") if kind else None))
    same = [("triton.ptx:k", "digest")]
    a, b, c = entry("a", "done"), entry("b", "failed", "CompileError"), entry("c", "done")
    failure = [("", "failed: CompileError")]
    found = changes_between(a, b, same, failure) + changes_between(b, c, failure, same)
    assert [(x.before.toolchain, x.after.toolchain, x.what) for x in found] == [("a", "b", "fails"),
                                                                               ("b", "c", "compiles")]
    assert changes_between(a, c, same, same) == []
    other = entry("d", "failed", "InternalError")
    assert [x.what for x in changes_between(b, other, failure, [("", "failed: InternalError")])] == ["fails"]


def test_a_scan_past_the_clients_cap_starts_what_fits_and_the_rest_as_its_jobs_end(tmp_path):
    """One job per client at once (max_jobs_per_client=1), an HLO module scanned over the two
    toolchains with jaxlib: the first job starts, the second waits (status "waiting"), and starts
    once the first ended, so the client never has two running; a second scan that no job of which
    fits now is refused with the cap's sentence and makes no job."""
    app = make_app(tmp_path, languages="hlo", max_jobs_per_client=1, rate_limit="")
    svc = app.extensions["irscope"]
    client = app.test_client()
    source = registry.get("hlo").example
    try:
        response = client.post("/api/scan", json={"language": "hlo", "source": source, "options": {}})
        body = response.get_json()
        assert response.status_code == 202 and body["jobs"] == 2 and body["waiting"] == 1, body
        report = client.get(f"/api/scans/{body['scan']}").get_json()
        first, second = report["jobs"]
        assert first["job"] and first["status"] in ("queued", "running", "done"), report
        if first["status"] != "done":  # (it may have ended already on a quiet machine)
            assert second == dict(second, job=None, status="waiting"), report
            page = client.get(f"/scan/{body['scan']}/status").get_data(as_text=True)
            assert "starts when one of your earlier jobs ends" in page and "not started" in page
        other = client.post("/api/scan", json={"language": "hlo", "source": source + "\n// another\n",
                                               "options": {}})
        if first["status"] != "done":
            error = other.get_json()["error"]
            assert other.status_code == 429 and error["kind"] == "ClientQueueFull", error
            assert "starts those that fit your jobs' cap, the rest as yours end; none fits now" in error["message"]
        running = []

        def ended():
            running.append(svc.store.client_jobs("127.0.0.1"))
            got = client.get(f"/api/scans/{body['scan']}").get_json()
            return got if got["status"] == "done" else None
        done = until(ended, 600, every=0.25, why="the scan's waiting job started and ended")
        assert max(running) <= 1, running
        assert [j["status"] for j in done["jobs"]] == ["done", "done"], done
        assert [j["toolchain"] for j in done["jobs"]] == ["jax-0.9.2", "default"], done
        jobs = [svc.store.get_job(j["job"]) for j in done["jobs"]]
        assert jobs[0].toolchain["jaxlib"] != jobs[1].toolchain["jaxlib"]
        assert svc.store.counts()["jobs"] == 2 + (other.status_code == 202)
        again = client.post("/api/scan", json={"language": "hlo", "source": source, "options": {}}).get_json()
        assert again["scan"] == body["scan"] and again["cached"] == 2 and again["waiting"] == 0, again
    finally:
        svc.runner.shutdown()


def test_the_scan_pages_picker_compares_another_stage_of_the_same_jobs(server, scans):
    """The form of /scan/<id>: the same requests with another stage spec, answered by the same jobs
    (known to the store: nothing compiles again); the register scan it makes is the fixture's own."""
    scan = scans["ptx"]
    status, page = http(server, f"/scan/{scan['scan']}")
    assert status == 200 and '<form class="scan-stage" id="scan-stage" method="post"' in page
    for kind in ("triton.ptx", "triton.sass", "kernels.resources"):
        assert f'<option value="{kind}">{kind}</option>' in page, kind
    assert '<option value="softmax_kernel">softmax_kernel</option>' in page  # a kernel, for its registers
    request = urllib.request.Request(f"{server}/scan/{scan['scan']}/stage", method="POST",
                                     data=urllib.parse.urlencode({"stage": "", "regex": "",
                                                                  "registers": "softmax_kernel"}).encode())
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(request, timeout=30)
        raise AssertionError("the picker answers with a redirect to the new scan")
    except urllib.error.HTTPError as e:
        assert e.code == 303, e.code
        location = e.headers["Location"]
    assert location == f"/scan/{scans['registers']['scan']}"  # the same jobs, the same spec: the same scan
    status, again = http(server, f"/api/scans/{scans['registers']['scan']}")
    assert [j["job"] for j in again["jobs"]] == [j["job"] for j in scan["jobs"]]
    assert again["compared"] == "the registers per thread of kernel softmax_kernel (kernels.resources)"
    status, body = http(server, "/scan/nosuchscan/stage", {"stage": "triton.ptx"})
    assert status == 404


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_the_scan_tool_over_mcp_answers_the_same_changes(server, scans):
    async def work(session: ClientSession):
        return _result(await session.call_tool("scan", {"language": "triton", "source": SOURCE, "options": OPTIONS,
                                                        "stage": {"registers": "softmax_kernel"}}))
    found = over_http(server, work)
    assert found["scan"] == scans["registers"]["scan"] and found["status"] == "done"
    assert found["url"] == f"{server}/scan/{found['scan']}"
    assert [(c["from"], c["to"]) for c in found["changes"]] == \
        [(c["from"], c["to"]) for c in scans["registers"]["changes"]]


def test_the_scan_page_shows_the_changes_opens_a_diff_and_a_job_page_starts_the_scan(server, scans, watched):
    page = watched.page
    scan = scans["ptx"]
    page.goto(f"/scan/{scan['scan']}")
    rows = page.locator(".scan-row")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.toolchain)") == [j["toolchain"] for j in scan["jobs"]]
    assert page.locator(".scan-row.differs").evaluate_all("rs => rs.map(r => r.dataset.toolchain)") == \
        [c["to"] for c in scan["changes"]]
    first = scan["changes"][0]
    link = page.locator(".scan-change").first
    assert (link.get_attribute("data-from"), link.get_attribute("data-to")) == (first["from"], first["to"])

    # the diff it links to: the PTX of both jobs, what differs between them
    before, after = (text(server, next(j["job"] for j in scan["jobs"] if j["toolchain"] == name), PTX)
                     for name in (first["from"], first["to"]))
    removed = next(line[1:].strip() for line in difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                                     lineterm="")
                   if line.startswith("-") and not line.startswith("---") and "\t" not in line[1:].strip())
    link.locator("a.scan-diff").click()
    page.wait_for_url("**/c/**")
    pane = page.wait_for_selector(f'#compare-pane .compare-diff[data-a="{PTX}"][data-b="{PTX}"]')
    assert removed in pane.inner_text() and "identical" not in pane.inner_text()

    # the stage picker: another stage of the same jobs compared, on the scan's own page
    page.goto(f"/scan/{scan['scan']}")
    page.select_option("#scan-stage-key", "triton.sass")
    page.click("#scan-stage button[type=submit]")
    page.wait_for_selector('.scan-jobs[data-status="done"]')
    assert page.inner_text("#scan-compared") == "stage triton.sass"
    assert page.input_value("#scan-stage-key") == "triton.sass"
    assert page.locator(".scan-row td a").all_inner_texts() == [j["job"] for j in scan["jobs"]]

    # "scan versions" on a job page: the editor's source and options, the same jobs, the same scan
    page.goto(scan["jobs"][0]["url"])
    page.click("#scan-versions")
    page.wait_for_url(f"**/scan/{scan['scan']}")
    page.wait_for_selector('.scan-jobs[data-status="done"]')


for _mark in BROWSER_MARKS:  # the browser's marks, on the browser test only
    test_the_scan_page_shows_the_changes_opens_a_diff_and_a_job_page_starts_the_scan = \
        _mark(test_the_scan_page_shows_the_changes_opens_a_diff_and_a_job_page_starts_the_scan)

"""Jobs on other toolchains, end to end on one real `irscope serve`: GET /api/toolchains, a compile in
torch-2.14.1 through the HTTP API with its versions on the job, its refusal when not installed, the
comparison of the same model on the default toolchain (torch 2.13) and torch-2.14.1 with every stage
paired and what changed counted, a kernel renamed between two jobs paired by its source lines, the
MCP compile with `toolchain`, the reproducer's pinned versions, and the page's toolchain picker in a
real browser.

The module's three jobs (the model on both toolchains, and a variant on the default whose kernel
is named otherwise) are compiled once, at the same time; every test reads them, and the browser's
and MCP's compiles of the same requests are answered from the store."""
from __future__ import annotations

import re
import urllib.request
from urllib.parse import quote

import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from service import toolchain_envs
from testbed.real_servers import Serve, http, wait_job
from tests.browser import BROWSER_MARKS, wait_finished
from tests.conftest import make_app, needs_bwrap, seed_kernel_toolchain_cache, seed_toolchain_cache
from tests.test_mcp import _result, over_http

pytestmark = needs_bwrap

MODEL = ("import torch\n\n\ndef model(x):\n    return torch.{op}(x) + 1\n\n\n"
         "example_inputs = (torch.randn(32),)\n")
OTHER = "torch-2.14.1"


@pytest.fixture(scope="module")
def served(tmp_path_factory, pytorch_toolchain_cache, torch_2_14_toolchain_cache):
    data = str(tmp_path_factory.mktemp("toolchains"))
    for cache in (pytorch_toolchain_cache, torch_2_14_toolchain_cache):  # both toolchains' jobs start warm
        seed_toolchain_cache(cache, data)
    seed_kernel_toolchain_cache(data)
    server = Serve(data, {"languages": "fake,pytorch,triton,jax", "workers": 2, "spare_workers": 0,
                          "warm_toolchain_cache": False, "poll_interval_ms": 250, "max_jobs_per_client": 0,
                          "rate_limit": "", "mcp_compile_wait_s": 5}).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(served):
    """The browser fixtures' server (tests/browser.py): this module's."""
    return served.base


@pytest.fixture(scope="module")
def jobs(served) -> dict:
    """cos on the default toolchain and on torch-2.14.1, sin on the default; each job's JSON."""
    requests = {"default": ("pytorch", MODEL.format(op="cos"), {}),
                OTHER: ("pytorch", MODEL.format(op="cos"), {"toolchain": OTHER}),
                "renamed": ("pytorch", MODEL.format(op="sin"), {})}
    started = {}
    for name, (language, source, options) in requests.items():
        status, body = http(served.base, "/api/compile", {"language": language, "source": source,
                                                          "options": options})
        assert status == 202, body
        started[name] = body["job"]
    found = {name: wait_job(served.base, job_id, timeout=420) for name, job_id in started.items()}
    for name, job in found.items():
        assert job["status"] == "done", (name, job.get("error"))
    return found


def _text(base: str, job_id: str, key: str) -> str:
    """A stage's stored text, as it is (not parsed, JSON stages included)."""
    with urllib.request.urlopen(f"{base}/api/jobs/{job_id}/stages/{quote(key, safe='')}", timeout=30) as r:
        return r.read().decode("utf-8")


def test_the_api_lists_the_installed_toolchains_and_refuses_one_not_installed(served):
    status, body = http(served.base, "/api/toolchains")
    assert status == 200
    rows = body["toolchains"]
    installed = [c.name for c in toolchain_envs.installed()]
    assert [r["name"] for r in rows] == installed and rows[0]["name"] == "default" and rows[0]["default"]
    other = next(r for r in rows if r["name"] == OTHER)
    assert other["default"] is False and (other["versions"]["torch"], other["versions"]["triton"]) == ("2.14.1",
                                                                                                       "3.8.0")
    # the server's languages only, each one the toolchain serves
    assert "pytorch" in other["languages"] and "jax" not in other["languages"] and "hlo" not in rows[0]["languages"]
    assert other["supports"]["virtual_gpu"] is False and other["size_bytes"] > 1 << 30
    status, body = http(served.base, "/api/compile", {"language": "pytorch", "source": MODEL.format(op="cos"),
                                                      "options": {"toolchain": "torch-2.9.0"}})
    assert status == 400 and body["error"]["kind"] == "RequestError"
    message = body["error"]["message"]
    assert "no toolchain 'torch-2.9.0' is installed" in message
    assert f"installed: {', '.join(installed)}" in message


def test_the_picker_is_hidden_when_the_default_is_the_only_toolchain(tmp_path):
    app = make_app(tmp_path, toolchains_dir=str(tmp_path / "no-toolchains"))
    try:
        page = app.test_client().get("/?language=pytorch").get_data(as_text=True)
    finally:
        app.extensions["irscope"].runner.shutdown()
    assert '<span id="toolchain-picker" class="toolchain-picker" hidden>' in page
    picker = re.search(r'<select name="toolchain".*?</select>', page, re.S).group(0)
    assert re.findall(r'<option value="([^"]*)"', picker) == ["default"]


def test_a_compile_on_another_toolchain_carries_its_versions_and_its_page_says_so(served, jobs):
    default, other = jobs["default"], jobs[OTHER]
    assert other["toolchain"]["toolchain"] == OTHER
    assert (other["toolchain"]["torch"], other["toolchain"]["triton"]) == ("2.14.1", "3.8.0")
    assert "toolchain" not in default["toolchain"] and default["toolchain"]["torch"].startswith("2.13.0")
    assert other["id"] != default["id"]  # its own cache key
    # Inductor of torch 2.14.1 wrote this output code: its header names its own version's paths
    assert "def call(" in _text(served.base, other["id"], "inductor.output_code:0/0")
    status, page = http(served.base, f"/j/{other['id']}")
    assert status == 200
    assert '<span class="tool toolchain-name"' in page and f"toolchain {OTHER}</span>" in page
    assert "torch 2.14.1</span>" in page and "triton 3.8.0</span>" in page
    # the picker shows the toolchain the job ran in, selected
    assert '<span id="toolchain-picker" class="toolchain-picker">' in page
    assert re.search(rf'<option value="{OTHER}" selected>{OTHER} · torch 2.14.1 · triton 3.8.0</option>', page)
    # and offers the same source on another version
    assert re.search(rf'href="/compare\?job={other["id"]}&amp;toolchain=default"[^>]*>compare with… another version',
                     page)


def _comparison(base: str, a: str, b: str) -> dict:
    status, made = http(base, "/api/comparisons", {"a": {"job": a}, "b": {"job": b}})
    assert status == 200, made
    status, body = http(base, f"/c/{made['id']}.json")
    assert status == 200
    return dict(body, url=made["url"])


def test_the_same_model_on_two_toolchains_pairs_every_stage_and_counts_what_changed(served, jobs):
    a, b = jobs["default"], jobs[OTHER]
    compared = _comparison(served.base, a["id"], b["id"])
    keys_a, keys_b = [s["key"] for s in a["stages"]], [s["key"] for s in b["stages"]]
    pairs = compared["pairs"]
    # every stage of both jobs is in a pair, A's in order; both releases make the same stages here
    assert [p["a"] for p in pairs if p["a"]] == keys_a and sorted(p["b"] for p in pairs if p["b"]) == sorted(keys_b)
    assert all(p["a"] == p["b"] and p["how"] in ("key", "kernel name") for p in pairs)
    assert compared["paired"] == len(keys_a)
    # each pair's same/changed is what the two stored texts say
    for p in pairs:
        same = _text(served.base, a["id"], p["a"]) == _text(served.base, b["id"], p["b"])
        assert p["same"] is same, p
    assert compared["changed"] == sum(1 for p in pairs if p["same"] is False) > 0
    assert next(p for p in pairs if p["a"] == "source")["same"] is True
    summary = {row["what"]: row for row in compared["summary"]}
    for side, job in (("a", a), ("b", b)):
        keys = [s["key"] for s in job["stages"]]
        assert summary["graphs"][side] == sum(k.startswith("dynamo.fx_graph:") for k in keys) == 1
        assert summary["kernels"][side] == sum(k.startswith("kernel:") for k in keys) >= 1
        code = [_text(served.base, job["id"], k) for k in keys if k.startswith("inductor.output_code:")]
        assert summary["output-code lines"][side] == sum(len(t.split("\n")) for t in code)
        assert summary["graph breaks"][side] == 0
    lines = summary["output-code lines"]
    assert lines["changed"] is (lines["a"] != lines["b"])
    # the page says the same at its top
    status, page = http(served.base, compared["url"])
    assert status == 200 and "What changed" in page
    assert f"{len(keys_a)} stages paired: {compared['changed']} changed" in page
    assert re.search(rf'data-what="output-code lines"[^<]*<th scope="row">output-code lines</th>\s*'
                     rf'<td class="num">{lines["a"]}</td><td class="num">{lines["b"]}</td>', page)


def test_a_kernel_named_otherwise_is_paired_by_the_source_lines_it_came_from(served, jobs):
    a, b = jobs["default"], jobs["renamed"]
    kernel_a = next(s["key"] for s in a["stages"] if s["key"].startswith("kernel:"))
    kernel_b = next(s["key"] for s in b["stages"] if s["key"].startswith("kernel:"))
    assert "cos" in kernel_a and "sin" in kernel_b  # Inductor names the fusion after its ops
    compared = _comparison(served.base, a["id"], b["id"])
    pair = next(p for p in compared["pairs"] if p["a"] == kernel_a)
    assert (pair["b"], pair["how"], pair["same"]) == (kernel_b, "source lines", False)
    assert not any(p["b"] == kernel_b and p["a"] is None for p in compared["pairs"])
    assert next(p for p in compared["pairs"] if p["a"] == "source")["same"] is False


def test_mcp_lists_the_toolchains_and_compiles_in_one(served, jobs):
    async def work(session: ClientSession):
        listed = _result(await session.call_tool("list_toolchains", {}))
        compiled = _result(await session.call_tool("compile", {"language": "pytorch", "source": MODEL.format(op="cos"),
                                                               "toolchain": OTHER}))
        with pytest.raises(MCPError) as refused:
            await session.call_tool("compile", {"language": "pytorch", "source": MODEL.format(op="cos"),
                                                "toolchain": "torch-2.9.0"})
        compared = _result(await session.call_tool("compare_jobs", {"job_a": jobs["default"]["id"],
                                                                    "job_b": compiled["job"]}))
        return listed, compiled, refused.value, compared
    listed, compiled, refused, compared = over_http(served.base, work)
    assert [t["name"] for t in listed["toolchains"]] == [c.name for c in toolchain_envs.installed()]
    # the same request as the HTTP API's: answered by that job, in torch-2.14.1
    assert compiled["job"] == jobs[OTHER]["id"] and compiled["cached"] is True
    assert compiled["options"]["toolchain"] == OTHER
    assert refused.error.data["kind"] == "RequestError" and "no toolchain 'torch-2.9.0'" in refused.error.message
    assert compared["differences"] == [{"what": "toolchain", "a": "default", "b": OTHER}]
    assert compared["changes"]["paired"] == len(jobs["default"]["stages"])


def test_the_reproducer_pins_the_versions_of_the_job_s_toolchain(served, jobs):
    for name, index in ((OTHER, ""), ("default", " --extra-index-url https://download.pytorch.org/whl/cpu")):
        job = jobs[name]
        status, script = http(served.base, f"/j/{job['id']}/reproducer.py")
        assert status == 200
        versions = job["toolchain"]
        pins = f"pip install torch=={versions['torch']} triton=={versions['triton']}{index}"
        assert f"\n    {pins}\n" in script, script[:1500]
        assert (f"irscope's toolchain {OTHER}" in script) is (name == OTHER)
        assert f'"torch": "{versions["torch"]}"' in script  # the script's own version check agrees


def test_the_picker_compiles_in_another_toolchain_and_compares_the_versions(watched, jobs, shots):
    page = watched.page
    page.goto("/?language=pytorch")
    picker = page.locator("#toolchain")
    labels = picker.locator("option").all_inner_texts()
    assert labels[0].startswith("default · torch 2.13.0") and f"{OTHER} · torch 2.14.1 · triton 3.8.0" in labels
    page.evaluate("(t) => document.querySelector('.CodeMirror').CodeMirror.setValue(t)", MODEL.format(op="cos"))
    picker.select_option(OTHER)
    page.click("#compile")
    assert wait_finished(page) == "done"
    job_id = page.get_attribute("#job-bar", "data-job")
    assert job_id == jobs[OTHER]["id"]  # the picker's toolchain went with the compile
    status_line = page.inner_text("#results .status")
    assert f"toolchain {OTHER}" in status_line and "torch 2.14.1" in status_line and "triton 3.8.0" in status_line
    # a reload of the job's address keeps the toolchain it ran in
    page.reload()
    assert page.input_value("#toolchain") == OTHER
    # the picker follows the language: JAX's toolchains, none of torch's
    page.select_option("#language", "jax")
    page.wait_for_function("() => Array.from(document.querySelectorAll('#toolchain option')).some("
                           "o => o.value === 'jax-0.9.2')")
    assert OTHER not in page.locator("#toolchain option").all_inner_texts()
    page.goto(f"/j/{job_id}")
    page.click(f"#compare-version-{job_id}")
    page.wait_for_selector("#compare-new-form")
    assert page.input_value("#toolchain") == "default"
    page.click("#compare-submit")
    page.wait_for_selector("#compare-summary")
    assert page.locator("#stage-pairs tr.pair").count() == len(jobs[OTHER]["stages"])
    assert "output-code lines" in page.inner_text(".compare-changes")
    head = page.inner_text(".compare-head")
    assert re.search(rf"toolchain\s+{OTHER}\s+default", head), head
    assert "torch 2.14.1 · triton 3.8.0" in page.inner_text(".compare-head tr.versions")
    # a pair's button shows that pair's diff below
    page.locator("#stage-pairs tr.pair[data-a='inductor.post_grad_graph:0/0'] .show-pair").click()
    page.wait_for_selector("#compare-pane .compare-diff[data-a='inductor.post_grad_graph:0/0']"
                           "[data-b='inductor.post_grad_graph:0/0']")
    page.screenshot(path=str(shots / "toolchain-compare.png"), full_page=True)


for _mark in BROWSER_MARKS:
    test_the_picker_compiles_in_another_toolchain_and_compares_the_versions = _mark(
        test_the_picker_compiles_in_another_toolchain_and_compares_the_versions)

"""irscope for agents, through the official MCP SDK's own clients: `/mcp` of a real `irscope serve`
(streamable HTTP) and `irscope mcp` (stdio, forwarded to that server and embedded), and the
reproducer script of a job run with plain PyTorch outside irscope.

One server for the module; its two PyTorch jobs (the same model with relu, then with sigmoid) are
compiled once, at the same time, and every test reads them."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from compiler import registry
from compiler.errors import ErrorKind
from testbed.real_servers import IRSCOPE, ROOT, Serve, http
from tests.conftest import needs_bwrap, seed_toolchain_cache

pytestmark = needs_bwrap

MODEL = ("import torch\n\n\ndef model(x):\n    return torch.{op}(x) * 2 + 1\n\n\n"
         "example_inputs = (torch.randn(64),)\n")
TOOLS = {"list_languages", "compile", "job_status", "get_stage", "diff_stages", "compare_jobs", "list_lessons", "scan",
         "get_lesson_source", "kernel_resources", "get_reproducer"}
SETTINGS = {"languages": "fake,pytorch,jax", "workers": 2, "warm_toolchain_cache": False, "spare_workers": 0,
            "max_jobs_per_client": 0, "rate_limit": "", "mcp_compile_wait_s": 5}


def _result(called) -> dict:
    """A tool's answer: the JSON object it returned."""
    assert not called.is_error, called.content
    return json.loads(called.content[0].text)


async def _http_session(base: str, work):
    async with streamable_http_client(base + "/mcp") as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            return await work(session)


def _in_own_thread(*args):
    """anyio.run in a thread of its own, as an MCP client program would run its loop: the browser
    tests' Playwright (sync API) keeps an event loop in the main thread for the whole session."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, *args).result()


def over_http(base: str, work):
    return _in_own_thread(_http_session, base, work)


def over_stdio(args: list[str], env: dict, work):
    async def run():
        params = StdioServerParameters(command=IRSCOPE, args=["mcp", *args], env=env, cwd=ROOT)
        async with stdio_client(params) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                return await work(session)
    return _in_own_thread(run)


async def _until_done(session: ClientSession, job_id: str) -> dict:
    for _ in range(120):  # each call waits up to the server's mcp_compile_wait_s
        job = _result(await session.call_tool("job_status", {"job_id": job_id}))
        if job["status"] in ("done", "failed"):
            return job
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture(scope="module")
def server(tmp_path_factory, pytorch_toolchain_cache):
    data = str(tmp_path_factory.mktemp("mcp"))
    seed_toolchain_cache(pytorch_toolchain_cache, data)  # the jobs start warm, as a running server's do
    served = Serve(data, dict(SETTINGS)).start()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def jobs(server) -> dict:
    """The relu and sigmoid jobs and JAX's example, compiled at once through MCP over HTTP."""
    async def work(session: ClientSession) -> dict:
        started = {}
        for op in ("relu", "sigmoid"):
            answer = _result(await session.call_tool("compile", {"language": "pytorch", "source": MODEL.format(op=op),
                                                                 "wait_s": 0}))
            started[op] = answer["job"]
        answer = _result(await session.call_tool("compile", {"language": "jax", "source": registry.get("jax").example,
                                                             "wait_s": 0}))
        started["jax"] = answer["job"]
        return {op: await _until_done(session, job_id) for op, job_id in started.items()}
    found = over_http(server.base, work)
    for job in found.values():
        assert job["status"] == "done", job.get("error")
    return found


def _stage_text(base: str, job_id: str, key: str) -> str:
    status, text = http(base, f"/api/jobs/{job_id}/stages/{quote(key, safe='')}")
    assert status == 200, text
    return text


def test_an_mcp_client_over_http_lists_the_tools_compiles_and_reads_the_output_code(server, jobs):
    job = jobs["relu"]
    keys = [s["key"] for s in job["stages"]]
    assert "inductor.output_code:0/0" in keys and job["url"].endswith(f"/j/{job['job']}")
    assert job["reproducer"].endswith(f"/j/{job['job']}/reproducer.py")
    api_text = _stage_text(server.base, job["job"], "inductor.output_code:0/0")

    async def work(session: ClientSession):
        tools = (await session.list_tools()).tools
        languages = _result(await session.call_tool("list_languages", {}))
        whole = _result(await session.call_tool("get_stage", {"job_id": job["job"], "key": "inductor.output_code"}))
        part = _result(await session.call_tool("get_stage", {"job_id": job["job"], "key": "inductor.output_code:0/0",
                                                             "first_line": 3, "last_line": 7}))
        resources = _result(await session.call_tool("kernel_resources", {"job_id": job["job"]}))
        again = _result(await session.call_tool("compile", {"language": "pytorch", "source": MODEL.format(op="relu")}))
        return tools, languages, whole, part, resources, again
    tools, languages, whole, part, resources, again = over_http(server.base, work)
    assert TOOLS <= {t.name for t in tools}
    assert all(len(t.description) > 80 for t in tools if t.name in TOOLS)
    pytorch = next(lang for lang in languages["languages"] if lang["key"] == "pytorch")
    assert "cuda:sm_90" in pytorch["targets"] and {"mode", "dynamic", "inductor_config"} <= \
        {o["name"] for o in pytorch["options"]}
    # the stage as the API serves it, whole; a line range is exactly those lines
    assert whole["key"] == "inductor.output_code:0/0" and whole["text"] == api_text and "truncated" not in whole
    assert "def call(" in whole["text"] and "relu" in whole["text"]
    assert part["text"] == "\n".join(api_text.split("\n")[2:7])
    assert (part["first_line"], part["last_line"]) == (3, 7)
    assert part["truncated"] and "first_line=8" in part["next"]
    # a host job's table: Inductor's C++ kernels, each with its lines, no GPU figure
    rows = resources["resources"]["kernels"]
    assert rows and all(r["target"] == "cpu" and r["registers"] is None and r["stage"].startswith("kernel:cpp_")
                        and r["lines"] for r in rows), rows
    assert again["job"] == job["job"] and again["cached"] is True and again["status"] == "done"


def test_a_missing_stage_is_an_mcp_error_with_its_kind(server, jobs):
    async def work(session: ClientSession):
        with pytest.raises(MCPError) as raised:
            await session.call_tool("get_stage", {"job_id": jobs["relu"]["job"], "key": "triton.ptx"})
        return raised.value
    error = over_http(server.base, work)
    assert error.error.code == ErrorKind.NotFound.mcp_code and error.error.data["kind"] == "NotFound"
    assert "no stage 'triton.ptx'" in error.error.message


def test_diff_and_compare_two_jobs_over_http(server, jobs):
    relu, sigmoid = jobs["relu"]["job"], jobs["sigmoid"]["job"]

    async def work(session: ClientSession):
        diff = _result(await session.call_tool("diff_stages", {"job_id": relu, "stage": "inductor.output_code",
                                                               "other_stage": "inductor.output_code",
                                                               "other_job_id": sigmoid}))
        within = _result(await session.call_tool("diff_stages", {"job_id": relu, "stage": "dynamo.fx_graph",
                                                                 "other_stage": "aot.forward_graph"}))
        compared = _result(await session.call_tool("compare_jobs", {"job_a": relu, "job_b": sigmoid}))
        return diff, within, compared
    diff, within, compared = over_http(server.base, work)
    removed = [line for line in diff["diff"].split("\n") if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff["diff"].split("\n") if line.startswith("+") and not line.startswith("+++")]
    assert any("relu" in line or "max" in line for line in removed), diff["diff"]
    assert any("sigmoid" in line or "exp" in line for line in added), diff["diff"]
    assert diff["identical"] is False and diff["changed_lines"]["added"] == len(added)
    assert within["a"]["stage"].startswith("dynamo.fx_graph:") and within["b"]["stage"].startswith("aot.forward_graph:")
    assert within["diff"].startswith("--- dynamo.fx_graph:")
    assert compared["url"].endswith(f"/c/{compared['comparison']}")
    assert compared["differences"] == [{"what": "source", "a": "9 lines", "b": "9 lines"}]
    assert compared["diff"]["a"]["stage"] == "inductor.output_code:0/0" and "sigmoid" in compared["diff"]["diff"]
    status, page = http(server.base, f"/c/{compared['comparison']}.json")
    assert status == 200 and (page["a"]["id"], page["b"]["id"]) == (relu, sigmoid)


def test_irscope_mcp_over_stdio_forwards_to_the_server(server, jobs):
    """`irscope mcp --server URL`: the same tools, answered by the server (its stored jobs)."""
    job = jobs["relu"]

    async def work(session: ClientSession):
        tools = (await session.list_tools()).tools
        compiled = _result(await session.call_tool("compile", {"language": "pytorch",
                                                               "source": MODEL.format(op="relu")}))
        code = _result(await session.call_tool("get_stage", {"job_id": compiled["job"],
                                                             "key": "inductor.output_code:0/0"}))
        diff = _result(await session.call_tool("diff_stages", {"job_id": job["job"], "stage": "inductor.output_code",
                                                               "other_stage": "inductor.output_code",
                                                               "other_job_id": jobs["sigmoid"]["job"]}))
        return tools, compiled, code, diff
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRSCOPE_")}
    tools, compiled, code, diff = over_stdio(["--server", server.base], env, work)
    assert TOOLS <= {t.name for t in tools}
    assert compiled["job"] == job["job"] and compiled["cached"] is True
    assert code["text"] == _stage_text(server.base, job["job"], "inductor.output_code:0/0")
    assert "sigmoid" in diff["diff"]


def test_irscope_mcp_over_stdio_embedded_compiles_and_refuses_past_the_rate_limit(tmp_path):
    """`irscope mcp` with no server: jobs run in this process's own service, under its admission;
    past the rate limit a compile is an MCP error whose data names the kind."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRSCOPE_")}
    env.update({"IRSCOPE_DATA_DIR": str(tmp_path / "var"), "IRSCOPE_LANGUAGES": "fake",
                "IRSCOPE_RATE_LIMIT": "1 per minute", "IRSCOPE_WARM_TOOLCHAIN_CACHE": "false"})

    async def work(session: ClientSession):
        first = _result(await session.call_tool("compile", {"language": "fake", "source": "x = 1\ny = 2\n",
                                                            "wait_s": 60}))
        lines = _result(await session.call_tool("get_stage", {"job_id": first["job"], "key": "fake.lines"}))
        with pytest.raises(MCPError) as raised:
            await session.call_tool("compile", {"language": "fake", "source": "z = 3\n"})
        return first, lines, raised.value
    first, lines, refused = over_stdio([], env, work)
    assert first["status"] == "done" and "fake.lines" in [s["key"] for s in first["stages"]]
    assert "x = 1" in lines["text"] and "y = 2" in lines["text"]
    assert refused.error.code == ErrorKind.RateLimited.mcp_code and refused.error.data["kind"] == "RateLimited"
    assert "rate_limit" in refused.error.message and refused.error.data["retry_after_s"] > 0


def test_a_rate_limited_compile_over_http_is_an_mcp_error_with_its_kind(tmp_path):
    served = Serve(str(tmp_path / "var"), dict(SETTINGS, languages="fake", rate_limit="1 per minute")).start()
    try:
        async def work(session: ClientSession):
            first = _result(await session.call_tool("compile", {"language": "fake", "source": "a = 1\n"}))
            with pytest.raises(MCPError) as raised:
                await session.call_tool("compile", {"language": "fake", "source": "b = 2\n"})
            return first, raised.value
        first, refused = over_http(served.base, work)
    finally:
        served.stop()
    assert first["job"]
    assert refused.error.code == ErrorKind.RateLimited.mcp_code and refused.error.data["kind"] == "RateLimited"


def test_the_reproducer_of_a_pytorch_job_writes_the_same_output_code_with_plain_pytorch(server, jobs, tmp_path):
    """The job page's reproducer.py, run with this venv's Python and nothing of irscope (another
    directory, no irscope on its path): Inductor's output code, from its own TORCH_TRACE, is the
    job's, byte for byte (nothing in it varies between runs of the same compile)."""
    job = jobs["relu"]
    status, script = http(server.base, f"/j/{job['job']}/reproducer.py")
    assert status == 200 and isinstance(script, str)
    assert script.startswith("#!/usr/bin/env python3") and f"irscope job {job['job']}" in script
    assert "torch 2." in script.split('"""')[1] and "TORCH_TRACE" in script and "import irscope" not in script
    status, page = http(server.base, f"/j/{job['job']}")
    assert f'href="/j/{job["job"]}/reproducer.py"' in page
    path = tmp_path / "reproducer.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TORCH_TRACE")}
    done = subprocess.run([sys.executable, "-I", str(path), str(tmp_path / "out")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    index = json.loads((tmp_path / "out" / "output_code" / "index.json").read_text())
    assert list(index) == [s["key"] for s in job["stages"] if s["key"].startswith("inductor.output_code")]
    for key, name in index.items():
        assert (tmp_path / "out" / "output_code" / name).read_text() == _stage_text(server.base, job["job"], key)
    assert os.listdir(tmp_path / "out" / "trace")


def _xla_frames_masked(hlo: str) -> str:
    """An HLO module's text without its stack-frame tables (the Python frames that lowered it: irscope's
    child process and the job's paths in the job, the script's in the reproducer) and their ids."""
    hlo = re.sub(r"\n(FileNames|FunctionNames|FileLocations|StackFrames)\n(.+\n)*", "\n", hlo)
    return re.sub(r",? stack_frame_id=\d+", "", hlo)


def test_the_reproducer_of_a_jax_job_compiles_the_same_optimized_hlo_with_plain_jax(server, jobs, tmp_path):
    job = jobs["jax"]
    status, script = http(server.base, f"/j/{job['job']}/reproducer.py")
    assert status == 200 and "--xla_dump_hlo_pass_re=.*" in script and "jax 0." in script.split('"""')[1]
    path = tmp_path / "reproducer.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, "-I", str(path), str(tmp_path / "out")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    optimized = (tmp_path / "out" / "optimized.hlo").read_text()
    assert optimized.startswith("HloModule jit_fn") and "num_partitions=8" in optimized
    assert _xla_frames_masked(optimized) == _xla_frames_masked(_stage_text(server.base, job["job"], "xla.optimized"))
    dumped = os.listdir(tmp_path / "out" / "dump")
    assert any(name.endswith(".txt") and "after_optimizations" in name for name in dumped), dumped


def test_a_virtual_gpu_job_s_reproducer_says_what_it_needs(tmp_path):
    """Made from the request alone (nothing compiled): a cuda:sm_90 job's script stops on a machine
    without a GPU and says it needs one of that architecture, or Triton's compile-only API."""
    from compiler.model import Request
    pipeline = registry.get("pytorch")
    request = Request("pytorch", MODEL.format(op="relu"), pipeline.normalise_options({"target": "cuda:sm_90"}))
    script = pipeline.reproducer(request, {"irscope": "0", "torch": "2.13.0+cpu", "triton": "3.9.0"}, "abc")
    path = tmp_path / "reproducer.py"
    path.write_text(script)
    if _has_cuda():
        pytest.skip("this machine has a CUDA GPU")
    done = subprocess.run([sys.executable, "-I", str(path), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert "compute capability 9.0" in done.stderr and "GPUTarget('cuda', 90, 32)" in done.stderr
    triton = registry.get("triton")
    source = open(os.path.join(ROOT, "examples", "triton-registers-spills-occupancy", "source.py")).read()
    script = triton.reproducer(Request("triton", source, triton.normalise_options({"target": "cuda:sm_90"})),
                               {"irscope": "0", "triton": "3.9.0", "torch": "2.13.0+cpu"}, "abc")
    assert 'os.environ["TRITON_DUMP_DIR"]' in script and 'os.environ["TRITON_KERNEL_DUMP"] = "1"' in script
    path.write_text(script)
    done = subprocess.run([sys.executable, "-I", str(path), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and "compute capability 9.0" in done.stderr and "compile-only API" in done.stderr


def _has_cuda() -> bool:
    from tests.conftest import HAS_CUDA
    return HAS_CUDA


def test_waits_are_bounded_per_client_and_a_refused_wait_says_when_to_come_back(tmp_path):
    """Before: ten concurrent `job_status {"wait_s": 30}` calls of one client held ten of the web
    server's threads for their whole wait, and pages stopped answering. Now one client waits in at
    most mcp_max_waits_per_client calls at once: the others are refused at once (RateLimited, with
    retry_after_s), a compile whose wait is refused still makes its job, and `wait_s: 0` is never
    refused."""
    served = Serve(str(tmp_path / "var"), dict(SETTINGS, languages="fake", mcp_compile_wait_s=20,
                                               mcp_max_waits=3, mcp_max_waits_per_client=2)).start()
    try:
        async def work(session: ClientSession):
            slow = _result(await session.call_tool("compile", {"language": "fake", "wait_s": 0,
                                                               "source": "import time\ntime.sleep(12)\n"}))
            outcomes: list = []

            async def one_wait():
                async def status(other: ClientSession):
                    try:
                        return _result(await other.call_tool("job_status", {"job_id": slow["job"], "wait_s": 20}))
                    except MCPError as e:
                        return e
                outcomes.append(await _http_session(served.base, status))

            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(one_wait)
                await anyio.sleep(3)  # the two admitted waits are waiting now
                compiled = _result(await session.call_tool("compile", {"language": "fake", "wait_s": 20,
                                                                       "source": "print('queued')\n"}))
                now = _result(await session.call_tool("job_status", {"job_id": slow["job"], "wait_s": 0}))
            return outcomes, compiled, now
        outcomes, compiled, now = over_http(served.base, work)
    finally:
        served.stop()
    refused = [o for o in outcomes if isinstance(o, MCPError)]
    waited = [o for o in outcomes if not isinstance(o, MCPError)]
    assert len(waited) == 2 and len(refused) == 4, outcomes
    assert all(job["status"] == "done" for job in waited), waited  # they waited the 12 s sleep out
    for error in refused:
        assert error.error.code == ErrorKind.RateLimited.mcp_code and error.error.data["kind"] == "RateLimited"
        assert 1 <= error.error.data["retry_after_s"] <= 20, error.error.data
        assert "mcp_max_waits_per_client" in error.error.message
    assert compiled["job"] and compiled["status"] in ("queued", "running", "done"), compiled
    assert "mcp_max_waits_per_client" in compiled["wait_refused"] and 1 <= compiled["retry_after_s"] <= 20
    assert now["status"] == "running" and "wait_refused" not in now

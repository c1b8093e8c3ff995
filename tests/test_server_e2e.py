"""`irscope serve` as a real process on a free port, driven over HTTP like a browser would."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from urllib.error import HTTPError

import pytest

from tests.conftest import needs_bwrap, seed_toolchain_cache

pytestmark = [needs_bwrap, pytest.mark.slow]

TINY = '''import torch

def model(x, y):
    return torch.sin(x) * y + 1

example_inputs = (torch.randn(32), torch.randn(32))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(base: str, path: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read().decode()
            return r.status, (json.loads(raw) if r.headers.get_content_type() == "application/json" else raw)
    except HTTPError as e:
        return e.code, json.loads(e.read().decode())


def _wait(base: str, job_id: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = _call(base, f"/api/jobs/{job_id}")
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.3)
    raise AssertionError("job did not finish")


@pytest.fixture(scope="module")
def server(tmp_path_factory, pytorch_toolchain_cache):
    """The served configuration: the toolchain cache a previous start-up built (seeded, so the
    server's own warm-up finds it and skips) and a spare worker."""
    port = _free_port()
    data = tmp_path_factory.mktemp("data")
    seed_toolchain_cache(pytorch_toolchain_cache, str(data))
    env = dict(os.environ, IRSCOPE_DATA_DIR=str(data), IRSCOPE_LANGUAGES="pytorch")
    irscope = os.path.join(os.path.dirname(sys.executable), "irscope")
    proc = subprocess.Popen([irscope, "serve", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/api/languages", timeout=2)
            break
        except OSError:
            time.sleep(0.1)
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def test_compile_tiny_model_over_http(server):
    status, body = _call(server, "/api/compile", {"language": "pytorch", "source": TINY, "options": {}})
    assert status == 202 and body["url"] == f"/j/{body['job']}"
    job = _wait(server, body["job"])
    assert job["status"] == "done", job["error"]
    assert job["toolchain"]["torch"].startswith("2.13.0")
    _, graph = _call(server, f"/api/jobs/{job['id']}/stages/dynamo.fx_graph")
    assert "torch.sin(l_x_)" in graph
    _, code = _call(server, f"/api/jobs/{job['id']}/stages/inductor.output_code?format=json")
    assert "cpp_fused_add_mul_sin_0" in code["text"] and code["format"] == "python"
    assert job["timings"]["compile"]["isa_probes_from_toolchain_cache"] > 0  # the seeded cache was used
    assert any(b == 4 for a, b in code["source_map"])  # kernel lines link back to `return torch.sin(x) * y + 1`
    _, out = _call(server, f"/api/jobs/{job['id']}/stages/run.stdout")
    assert out == ""
    # a permalink round-trips, as a page and as JSON
    _, link = _call(server, "/api/shortlinks", {"job": job["id"]})
    _, page = _call(server, link["url"])
    assert "torch.sin(x) * y + 1" in page and 'data-key="inductor.output_code:0/0"' in page
    _, as_json = _call(server, link["url"] + ".json")
    assert as_json["job"]["stages"] == job["stages"] and as_json["job"]["toolchain"] == job["toolchain"]
    # the same request again is answered from the store
    status, again = _call(server, "/api/compile", {"language": "pytorch", "source": TINY})
    assert status == 200 and again["job"] == job["id"]


def test_syntax_error_keeps_the_server_serving(server):
    _, body = _call(server, "/api/compile", {"language": "pytorch", "source": "import torch\ndef model(:\n"})
    job = _wait(server, body["job"])
    assert job["error"]["kind"] == "SyntaxError" and job["error"]["line"] == 2
    status, langs = _call(server, "/api/languages")
    assert status == 200 and langs["languages"][0]["key"] == "pytorch"

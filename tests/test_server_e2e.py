"""`irscope serve` as a real process on a free port, driven over HTTP like a browser would."""
from __future__ import annotations

import pytest

from testbed.real_servers import Serve, http, wait_job
from tests.conftest import needs_bwrap, seed_toolchain_cache

pytestmark = [needs_bwrap, pytest.mark.slow]

TINY = '''import torch

def model(x, y):
    return torch.sin(x) * y + 1

example_inputs = (torch.randn(32), torch.randn(32))
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory, pytorch_toolchain_cache):
    """The served configuration: the toolchain cache a previous start-up built (seeded, so the
    server's own warm-up finds it and skips) and a spare worker."""
    data = tmp_path_factory.mktemp("data")
    seed_toolchain_cache(pytorch_toolchain_cache, str(data))
    served = Serve(str(data), {"languages": "pytorch"}).start()
    yield served.base
    served.stop()


def test_compile_tiny_model_over_http(server):
    status, body = http(server, "/api/compile", {"language": "pytorch", "source": TINY, "options": {}})
    assert status == 202 and body["url"] == f"/j/{body['job']}"
    job = wait_job(server, body["job"])
    assert job["status"] == "done", job["error"]
    assert job["toolchain"]["torch"].startswith("2.13.0")
    _, graph = http(server, f"/api/jobs/{job['id']}/stages/dynamo.fx_graph")
    assert "torch.sin(l_x_)" in graph
    _, code = http(server, f"/api/jobs/{job['id']}/stages/inductor.output_code?format=json")
    assert "cpp_fused_add_mul_sin_0" in code["text"] and code["format"] == "python"
    assert job["timings"]["compile"]["isa_probes_from_toolchain_cache"] > 0  # the seeded cache was used
    assert any(b == 4 for a, b in code["source_map"])  # kernel lines link back to `return torch.sin(x) * y + 1`
    _, out = http(server, f"/api/jobs/{job['id']}/stages/run.stdout")
    assert out == ""
    # a permalink round-trips, as a page and as JSON
    _, link = http(server, "/api/shortlinks", {"job": job["id"]})
    _, page = http(server, link["url"])
    # the page offers the output code (a tab, or an entry of its group's list)
    assert "torch.sin(x) * y + 1" in page and '"inductor.output_code:0/0"' in page
    _, as_json = http(server, link["url"] + ".json")
    assert as_json["job"]["stages"] == job["stages"] and as_json["job"]["toolchain"] == job["toolchain"]
    # the same request again is answered from the store
    status, again = http(server, "/api/compile", {"language": "pytorch", "source": TINY})
    assert status == 200 and again["job"] == job["id"]


def test_syntax_error_keeps_the_server_serving(server):
    _, body = http(server, "/api/compile", {"language": "pytorch", "source": "import torch\ndef model(:\n"})
    job = wait_job(server, body["job"])
    assert job["error"]["kind"] == "SyntaxError" and job["error"]["line"] == 2
    status, langs = http(server, "/api/languages")
    assert status == 200 and langs["languages"][0]["key"] == "pytorch"

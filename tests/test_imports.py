"""Importing compiler logs made elsewhere (compiler/imports/): hostile archives refused by rule, each
kind of log read into the stages the live pipelines write, on recorded fixtures
(tests/fixtures/imports/README.md). Jobs through the real runner and sandbox are at the end."""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import stat
import tarfile
import zipfile

import pytest

from compiler.imports import archive
from compiler.imports.pipeline import ImportPipeline, describe_upload, upload_of
from compiler.model import JobSettings, Request
from compiler.pipeline import Bundle, JobContext, UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "imports")


def fixture_path(name: str) -> str:
    return os.path.join(FIXTURES, name)


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def member(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE,
           link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


def unpack(tmp_path, data: bytes, name: str = "upload.tar.gz", max_files: int = 100, max_bytes: int = 1 << 20):
    path = tmp_path / "upload"
    path.write_bytes(data)
    return archive.unpack(str(path), str(tmp_path / "out"), max_files, max_bytes, name)


# --- hostile archives: each refused with a sentence naming the member and the rule ----------------

@pytest.mark.parametrize("name, phrase", [
    ("../escape.txt", "a path with '..' is refused"),
    ("trace/../../escape.txt", "a path with '..' is refused"),
    ("/etc/cron.d/evil", "an absolute path is refused"),
])
def test_paths_outside_the_archive_are_refused(tmp_path, name, phrase):
    with pytest.raises(archive.ArchiveError, match=phrase) as e:
        unpack(tmp_path, tar_bytes([member("trace/ok.log"), member(name)]))
    assert name in str(e.value)
    assert not (tmp_path / "escape.txt").exists() and not list(tmp_path.glob("**/evil"))


@pytest.mark.parametrize("kind, link, what", [
    (tarfile.SYMTYPE, "/etc/shadow", "a symbolic link"),
    (tarfile.LNKTYPE, "trace/ok.log", "a hard link"),
    (tarfile.CHRTYPE, "", "a device"),
    (tarfile.FIFOTYPE, "", "a FIFO"),
])
def test_links_and_devices_are_refused(tmp_path, kind, link, what):
    with pytest.raises(archive.ArchiveError, match=f"is {what}"):
        unpack(tmp_path, tar_bytes([member("trace/ok.log"), member("trace/x", kind=kind, link=link)]))
    assert not os.path.lexists(tmp_path / "out" / "trace" / "x")


def test_a_zip_symlink_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        info = zipfile.ZipInfo("dump/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "/etc/passwd")
    with pytest.raises(archive.ArchiveError, match="is a symbolic link"):
        unpack(tmp_path, buffer.getvalue(), "dump.zip")


def test_a_zip_bomb_stops_at_the_unpacked_cap(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("dump/zeros.txt", b"\0" * (8 << 20))  # 8 MiB that deflate to ~8 KiB
    assert len(buffer.getvalue()) < 64 << 10
    with pytest.raises(archive.ArchiveError, match="unpacks to more than 1,048,576 bytes .*import_max_unpacked_mb"):
        unpack(tmp_path, buffer.getvalue(), "dump.zip", max_bytes=1 << 20)
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= 1 << 20  # it stopped at the cap, it did not write the 8 MiB


def test_a_gzip_bomb_stops_at_the_unpacked_cap(tmp_path):
    bomb = gzip.compress(b"{" + b" " * (4 << 20), 9)
    with pytest.raises(archive.ArchiveError, match="decompression bomb"):
        unpack(tmp_path, bomb, "trace.ndjson.gz", max_bytes=1 << 20)


def test_a_tar_header_lying_about_its_size_changes_nothing(tmp_path):
    # the tar's own header says 4 MiB: counted as written, the cap still holds
    with pytest.raises(archive.ArchiveError, match="more than 65,536 bytes"):
        unpack(tmp_path, tar_bytes([member("t/big.log", b"y" * (4 << 20))]), max_bytes=64 << 10)


def test_too_many_files_are_refused(tmp_path):
    members = [member(f"trace/{n}.log") for n in range(11)]
    with pytest.raises(archive.ArchiveError, match="more than 10 members .*import_max_files"):
        unpack(tmp_path, tar_bytes(members), max_files=10)


def test_a_member_twice_is_refused(tmp_path):
    with pytest.raises(archive.ArchiveError, match="appears twice"):
        unpack(tmp_path, tar_bytes([member("a/b.log"), member("a/./b.log")]))


def test_a_good_archive_unpacks(tmp_path):
    done = unpack(tmp_path, tar_bytes([member("trace/", kind=tarfile.DIRTYPE), member("trace/a.log", b"hello")]))
    assert (done.kind, done.files, done.bytes) == ("tar", ["trace/a.log"], 5)
    assert (tmp_path / "out" / "trace" / "a.log").read_bytes() == b"hello"


# --- the request: an upload described, never a pasted source ----------------------------------

def test_an_import_request_names_its_upload():
    source = describe_upload("trace\n.tar.gz", "ab" * 32, 123)
    assert upload_of(source) == ("trace_.tar.gz", "ab" * 32)
    assert ImportPipeline().inputs(Request("import", source, {"kind": "auto"})) == {"archive": "ab" * 32}
    with pytest.raises(ValueError):
        upload_of("archive: x\nsha256: ../../etc/passwd\n")


# --- reading each kind of log, in this process ------------------------------------------------

def run_import(tmp_path, data: bytes, name: str, kind: str = "auto", limits: JobSettings = JobSettings()):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "archive").write_bytes(data)
    work = tmp_path / "work"
    work.mkdir()
    bundle = Bundle(str(tmp_path / "out"))
    source = describe_upload(name, "0" * 64, len(data))
    ImportPipeline().run(Request("import", source, {"kind": kind}),
                         JobContext(workdir=str(work), bundle=bundle, settings=limits, inputs_dir=str(inputs)))
    stages = {s.key: s for s in bundle.manifest.stages}

    def text(key: str) -> str:
        return (tmp_path / "out" / stages[key].file).read_text()
    return bundle, stages, text


def test_a_tritonparse_trace_gives_the_kernel_stages_of_a_live_triton_job(tmp_path):
    from compiler import formats
    with open(fixture_path("softmax.tritonparse.ndjson.gz"), "rb") as f:
        bundle, stages, text = run_import(tmp_path, f.read(), "softmax.tritonparse.ndjson.gz")
    for stage in ("source", "ttir", "ttgir", "llir", "ptx", "metadata"):
        assert f"triton.{stage}:softmax_kernel" in stages, sorted(stages)
    assert "tt.reduce" in text("triton.ttgir:softmax_kernel")
    assert ".target sm_90a" in text("triton.ptx:softmax_kernel")
    # written by kernel_stages, as for a live job: IR links from PTX back to TTGIR, source maps into the kernel
    link = next(x for x in stages["triton.ptx:softmax_kernel"].meta["ir_links"] if x["title"] == "TTGIR")
    assert link["linked_lines"] == link["located_lines"] > 100
    source = text("triton.source:softmax_kernel").splitlines()
    load_lines = {s for _, s in stages["triton.ptx:softmax_kernel"].source_map}
    assert any("tl.load" in source[n - 1] for n in load_lines)
    formats.check_ir_locations(stages["triton.ttgir:softmax_kernel"].meta["ir_locations"])
    # the compile times Triton logged on the machine that made the trace, per stage
    times = json.loads(text("triton.metadata:softmax_kernel"))["compile_times_ms"]
    assert set(times) >= {"ir_initialization", "ttir", "ttgir", "llir", "ptx", "cubin"} and times["ptx"] > 0
    origin = json.loads(text("import.origin"))
    assert origin["log"] == "TritonParse trace" and origin["device"] == "cuda:sm_90"
    assert origin["made_by"].startswith("triton 3.9")
    assert bundle.manifest.timings["target"]["imported"]


def test_a_torch_trace_made_for_a_gpu_says_so(tmp_path):
    with open(fixture_path("layernorm_sm90.torch_trace.tar.gz"), "rb") as f:
        bundle, stages, text = run_import(tmp_path, f.read(), "layernorm.tar.gz", kind="torch_trace")
    assert {"aot.forward_graph:export", "inductor.post_grad_graph:export"} <= set(stages)
    post_grad = text("inductor.post_grad_graph:export")
    assert "torch.ops.aten.relu" in post_grad and "cuda:0" in post_grad
    origin = json.loads(text("import.origin"))
    assert origin["device"].startswith("a CUDA GPU") and origin["made_by"].startswith("torch")


def test_an_upload_of_nothing_known_says_what_it_holds(tmp_path):
    data = tar_bytes([member("notes/readme.txt", b"hello\n")])
    with pytest.raises(UserError, match="none of these found in it: a TORCH_TRACE directory, .*readme.txt"):
        run_import(tmp_path, data, "notes.tar.gz")


def test_the_job_limits_reach_the_unpacking(tmp_path):
    data = tar_bytes([member(f"t/{n}.log") for n in range(5)])
    with pytest.raises(UserError, match="more than 3 members"):
        run_import(tmp_path, data, "t.tar.gz", limits=JobSettings(import_max_files=3))


def test_an_xla_dump_gives_the_pass_memory_and_kernel_stages_of_a_live_xla_job(tmp_path):
    with open(fixture_path("mlp.xla_dump.tar.gz"), "rb") as f:
        bundle, stages, text = run_import(tmp_path, f.read(), "mlp.xla_dump.tar.gz")
    # the jit'd MLP (the dump's last module to finish), not the helper modules JAX compiled before it
    assert "jit_mlp" in json.loads(text("import.origin"))["module"]
    assert "xla.passes" in stages and "xla.optimized" in stages and "xla.spmd" in stages
    snapshots = [k for k in stages if k.startswith("xla.pass:")]
    assert len(snapshots) > 20
    assert "all-reduce" in text("xla.spmd") or "all-gather" in text("xla.spmd")
    memory = json.loads(text("xla.memory"))
    assert memory["peak_bytes"] == max(memory["live_bytes"]) > 0
    assert memory["heap_bytes"] >= memory["peak_bytes"]
    assert any(k.startswith("xla.llvm_ir:") for k in stages)
    assert json.loads(text("import.origin"))["device"] == "the CPU"


USER_FILE = "/tmp/ti/var3/jobs/9429f53fe341/scratch/model.py"  # where the live job ran recompile_torch_trace.py


def torch_trace_entries(tmp_path):
    """The TORCH_TRACE the live `pytorch` job of recompile_torch_trace.py wrote (README.md)."""
    from compiler.pytorch import trace as torch_trace
    with tarfile.open(fixture_path("recompile.torch_trace.tar.gz")) as tar:
        tar.extractall(tmp_path / "t", filter="data")
    return torch_trace.read_dir(str(tmp_path / "t" / "trace"))


def test_an_imported_torch_trace_shows_the_stages_of_the_live_job_that_made_it(tmp_path):
    import hashlib
    with open(fixture_path("recompile.live_job_stages.json")) as f:
        live = json.load(f)["stages"]
    with open(fixture_path("recompile.torch_trace.tar.gz"), "rb") as f:
        bundle, stages, text = run_import(tmp_path, f.read(), "trace.tar.gz")
    imported = [k for k in stages if k != "import.origin"]
    # every stage the live job made from its trace, in the same order, with the same text; the live
    # job's other stages come from elsewhere (its source, its output, artifact logs, the profiler)
    from_elsewhere = {k for k in live if k in ("source", "run.stdout", "run.kernels") or
                      k.split(":")[0] in ("dynamo.bytecode", "inductor.ir_pre_fusion", "inductor.ir_post_fusion",
                                          "inductor.fusion")}
    from_trace = [k for k in live if k not in from_elsewhere]
    assert [k for k in imported if k in live] == from_trace
    for key in from_trace:
        assert stages[key].format == live[key]["format"], key
        if live[key]["format"] != "svg" and key != "dynamo.recompiles":  # a drawing: Graphviz's layout
            assert hashlib.sha256(text(key).encode()).hexdigest() == live[key]["sha256"], key
    assert len(from_trace) >= 30 and sum(k.startswith("dynamo.guards_explained") for k in from_trace) == 4
    # The archive also holds what the job wrote to its trace after reading it (its timing runs
    # changed torch's thread count: one more compile, 0/4), so the import shows a little more.
    # The compiles' index came after the recording (it lists that compile too), and so did each
    # recompile's kernel named as the first compile's, a stage of its own (`kernel:<name>:<compile id>`).
    recompiled_kernels = {k for k in imported if re.fullmatch(r"kernel:[^:]+:0/[1-3]", k)}
    assert len(recompiled_kernels) == 3, recompiled_kernels
    assert {k for k in imported if k not in live} - {"dynamo.compiles"} - recompiled_kernels == \
        {k for k in imported if k.endswith(":0/4")} != set()
    assert re.search(r"^- \[0/4\] \w+, line \d+: recompiled: ", text("dynamo.compiles"), re.M), text("dynamo.compiles")
    assert "## recompile 4 (compile 0/4)" in text("dynamo.recompiles")
    thread_change = json.loads(text("dynamo.guards_explained:0/4"))["recompile"][0]
    assert thread_change["kind"] == "GLOBAL_STATE" and thread_change["before"].startswith("num_threads=")
    assert thread_change["before"] != thread_change["after"]
    origin = json.loads(text("import.origin"))
    assert origin["log"] == "TORCH_TRACE" and origin["made_by"] == "torch 2.13.0+cpu" and origin["device"] == "the CPU"
    assert origin["compiled_files"] == [USER_FILE]
    assert "imported TORCH_TRACE from trace.tar.gz, made by torch 2.13.0+cpu on the CPU" in origin["summary"]
    compile_timing = bundle.manifest.timings["compile"]
    assert compile_timing["total_s"] > 0 and "imported TORCH_TRACE" in compile_timing["source"]


def test_guards_of_a_recompile_explained(tmp_path):
    from compiler.pytorch import trace_stages
    entries = torch_trace_entries(tmp_path)
    user = (USER_FILE,)
    first = trace_stages.guards_explained(entries, "0/0", user)
    assert first["recompile"] == [] and first["frame"] == "scale at model.py:4"
    groups = {g["group"] for g in first["guards"]}
    assert {"tensor", "constant", "global"} <= groups
    tensor = next(g for g in first["guards"] if g["kind"] == "TENSOR_MATCH")
    assert tensor["input"] == "x" and tensor["line"] == 5
    assert tensor["properties"] == {"device": "CPU", "class": "Tensor", "dtype": "float32", "requires_grad": "False",
                                    "size": "[4]", "stride": "[1]"}
    constant = next(g for g in first["guards"] if g["kind"] == "EQUALS_MATCH")
    assert (constant["input"], constant["meaning"], constant["line"]) == ("k", "k == 2.0", 5)
    # the source's calls: 0/1 x's size changed, 0/2 k changed; irscope's own call (0/3) x's dtype
    explained = {cid: trace_stages.guards_explained(entries, cid, user)["recompile"] for cid in ("0/1", "0/2", "0/3")}
    (size,) = explained["0/1"]
    assert (size["compile_id"], size["input"], size["kind"], size["before"], size["after"], size["line"]) == (
        "0/0", "x", "TENSOR_MATCH", "4", "8", 5)
    assert "size at dim 0 changed" in size["meaning"]
    by_compile = {f["compile_id"]: f for f in explained["0/2"]}
    assert (by_compile["0/1"]["kind"], by_compile["0/1"]["before"], by_compile["0/1"]["after"]) == (
        "EQUALS_MATCH", "k == 2.0", "k == 3.0")
    assert by_compile["0/0"]["after"] == "8"
    assert [(f["compile_id"], f["before"], f["after"]) for f in explained["0/3"]] == [
        ("0/2", "Float", "Double"), ("0/1", "k == 2.0", "k == 3.0"), ("0/0", "Float", "Double")]


def test_the_guards_viewer_shows_the_failed_guard_and_the_groups(tmp_path):
    import viewers
    from compiler import formats
    from compiler.pytorch import trace_stages
    data = trace_stages.guards_explained(torch_trace_entries(tmp_path), "0/2", (USER_FILE,))
    html = viewers.render("guards", formats.get("guards").encode(data), {})
    assert html.count('<tr class="failed-guard"') == 2
    assert "k changed: compile 0/1 was specialised on k == 2.0, the call passed k == 3.0" in html
    assert '<a href="#" class="goto-line" data-line="5"' in html
    for title in ("tensor match: dtype, device, shape, stride, requires_grad", "constant values", "global state"):
        assert title in html


# --- through the server: the upload, the sandboxed job, the refusals ---------------------------

@pytest.fixture(scope="module")
def server_app(tmp_path_factory):
    from tests.conftest import make_app
    flask_app = make_app(tmp_path_factory.mktemp("imports"), workers=2, import_max_upload_mb=1)
    yield flask_app
    flask_app.extensions["irscope"].runner.shutdown()


@pytest.mark.slow
@pytest.mark.usefixtures("server_app")
def test_an_upload_becomes_a_sandboxed_job_with_a_permalink(server_app):
    from tests.conftest import needs_bwrap, wait_job  # noqa: F401
    if not server_app.extensions["irscope"].sandboxed:
        pytest.skip("no sandbox")
    client = server_app.test_client()
    with open(fixture_path("softmax.tritonparse.ndjson.gz"), "rb") as f:
        data = f.read()
    response = client.post("/api/imports", data={"archive": (io.BytesIO(data), "softmax.ndjson.gz")},
                           content_type="multipart/form-data")
    assert response.status_code == 202, response.get_json()
    job = wait_job(client, response.get_json()["job"], timeout=300)
    assert job["status"] == "done", job["error"]
    assert job["request"]["language"] == "import" and "sha256: " in job["request"]["source"]
    keys = [s["key"] for s in job["stages"]]
    assert "triton.ptx:softmax_kernel" in keys and "import.origin" in keys
    assert job["timings"]["target"]["summary"].startswith("imported TritonParse trace from softmax.ndjson.gz")
    assert job["timings"]["job"]["sandbox"] == "bubblewrap"
    # the same file again: the stored job answers
    again = client.post("/api/imports", data={"archive": (io.BytesIO(data), "softmax.ndjson.gz")},
                        content_type="multipart/form-data")
    assert again.status_code == 200 and again.get_json()["job"] == job["id"] and again.get_json()["cached"]
    link = client.post("/api/shortlinks", json={"job": job["id"]}).get_json()
    assert client.get(link["url"] + ".json").get_json()["job"]["id"] == job["id"]
    assert client.get(f"/j/{job['id']}").status_code == 200


@pytest.mark.slow
def test_a_hostile_archive_fails_its_job_naming_the_rule(server_app):
    from tests.conftest import wait_job
    if not server_app.extensions["irscope"].sandboxed:
        pytest.skip("no sandbox")
    client = server_app.test_client()
    data = tar_bytes([member("trace/ok.log"), member("trace/evil", kind=tarfile.SYMTYPE, link="/etc/shadow")])
    response = client.post("/api/imports", data={"archive": (io.BytesIO(data), "evil.tar.gz")},
                           content_type="multipart/form-data")
    job = wait_job(client, response.get_json()["job"], timeout=300)
    assert job["status"] == "failed" and job["error"]["kind"] == "InputError"
    assert "evil.tar.gz: member 'trace/evil' is a symbolic link" in job["error"]["message"]


def test_uploads_are_checked_by_the_web_process(server_app):
    client = server_app.test_client()
    big = client.post("/api/imports", data={"archive": (io.BytesIO(b"x" * (2 << 20)), "big.tar.gz")},
                      content_type="multipart/form-data")
    assert big.status_code == 413 and "import_max_upload_mb" in big.get_json()["error"]["message"]
    none = client.post("/api/imports", data={}, content_type="multipart/form-data")
    assert none.status_code == 400 and "archive" in none.get_json()["error"]["message"]
    pasted = client.post("/api/compile", json={"language": "import", "source": describe_upload("x", "0" * 64, 1)})
    assert pasted.status_code == 400 and "unknown language 'import'" in pasted.get_json()["error"]["message"]
    # even where a server lists `import` among its languages, a pasted import request is refused
    import dataclasses

    from service.jobs import Jobs, RequestError
    svc = server_app.extensions["irscope"]
    listing = Jobs(svc.store, svc.runner, dataclasses.replace(svc.jobs.config, languages=("fake", "import")))
    with pytest.raises(RequestError, match="made by uploading a file"):
        listing.parse({"language": "import", "source": describe_upload("x", "ab" * 32, 1), "options": {}})
    page = client.get("/import")
    assert page.status_code == 200 and b'id="import-form"' in page.data
    assert b'enctype="multipart/form-data"' in page.data
    refused = client.post("/import", data={"archive": (io.BytesIO(b""), "empty.zip")},
                          content_type="multipart/form-data")
    assert refused.status_code == 400 and b"the file is empty" in refused.data

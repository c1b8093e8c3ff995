"""Importing compiler logs made elsewhere (compiler/imports/): hostile archives refused by rule, each
kind of log read into the stages the live pipelines write, on recorded fixtures
(tests/fixtures/imports/README.md). Jobs through the real runner and sandbox are at the end."""
from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tarfile
import zipfile

import pytest

from compiler.imports import archive
from compiler.imports.pipeline import ImportPipeline, describe_upload, upload_of
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, JobLimits, UserError

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


def member(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
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

def run_import(tmp_path, data: bytes, name: str, kind: str = "auto", limits: JobLimits = JobLimits()):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "archive").write_bytes(data)
    work = tmp_path / "work"
    work.mkdir()
    bundle = Bundle(str(tmp_path / "out"))
    source = describe_upload(name, "0" * 64, len(data))
    ImportPipeline().run(Request("import", source, {"kind": kind}),
                         JobContext(workdir=str(work), bundle=bundle, limits=limits, inputs_dir=str(inputs)))
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
    origin = json.loads(text("import.origin"))
    assert origin["log"] == "TritonParse trace" and origin["device"] == "cuda:sm_90"
    assert origin["made_by"].startswith("triton 3.9")
    assert bundle.manifest.timings["target"]["imported"]


def test_an_upload_of_nothing_known_says_what_it_holds(tmp_path):
    data = tar_bytes([member("notes/readme.txt", b"hello\n")])
    with pytest.raises(UserError, match="no TORCH_TRACE log, TritonParse trace or XLA dump found in it .*readme.txt"):
        run_import(tmp_path, data, "notes.tar.gz")


def test_the_job_limits_reach_the_unpacking(tmp_path):
    data = tar_bytes([member(f"t/{n}.log") for n in range(5)])
    with pytest.raises(UserError, match="more than 3 members"):
        run_import(tmp_path, data, "t.tar.gz", limits=JobLimits(import_files=3))


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


def torch_trace_entries(tmp_path):
    """The recorded TORCH_TRACE of recompile_torch_trace.py (run as /tmp/ti/g/model.py)."""
    from compiler.pytorch import trace as torch_trace
    with tarfile.open(fixture_path("recompile.torch_trace.tar.gz")) as tar:
        tar.extractall(tmp_path / "t", filter="data")
    return torch_trace.read_dir(str(tmp_path / "t" / "trace"))


def test_an_imported_torch_trace_shows_the_stages_the_pytorch_pipeline_writes_from_it(tmp_path):
    from compiler.pytorch import trace_stages
    entries = torch_trace_entries(tmp_path)
    expected = trace_stages.trace_stages(entries, ("/tmp/ti/g/model.py",))
    (tmp_path / "job").mkdir()
    with open(fixture_path("recompile.torch_trace.tar.gz"), "rb") as f:
        bundle, stages, text = run_import(tmp_path / "job", f.read(), "trace.tar.gz")
    # the same stages, in the same order, with the same texts (drawings: the same kind of stage)
    assert [s.key for s in expected] == [k for k in stages if k != "import.origin"]
    for spec in expected:
        if not spec.drawing:
            assert text(spec.key) == formats_text(spec), spec.key
    origin = json.loads(text("import.origin"))
    assert origin["log"] == "TORCH_TRACE" and origin["made_by"] == "torch 2.13.0+cpu" and origin["device"] == "the CPU"
    assert origin["compiled_files"] == ["/tmp/ti/g/model.py"]
    compile_timing = bundle.manifest.timings["compile"]
    assert compile_timing["total_s"] > 0 and "imported TORCH_TRACE" in compile_timing["source"]


def formats_text(spec) -> str:
    from compiler import formats
    return formats.get(spec.format).encode(spec.value)


def test_guards_of_a_recompile_explained(tmp_path):
    from compiler.pytorch import trace_stages
    entries = torch_trace_entries(tmp_path)
    user = ("/tmp/ti/g/model.py",)
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
    # 0/1: x's size changed; 0/2: its dtype; 0/3: k (and, for 0/0, x's size)
    explained = {cid: trace_stages.guards_explained(entries, cid, user)["recompile"] for cid in ("0/1", "0/2", "0/3")}
    (size,) = explained["0/1"]
    assert (size["compile_id"], size["input"], size["kind"], size["before"], size["after"], size["line"]) == (
        "0/0", "x", "TENSOR_MATCH", "4", "8", 5)
    assert "size at dim 0 changed" in size["meaning"]
    assert [(f["compile_id"], f["before"], f["after"]) for f in explained["0/2"]] == [
        ("0/1", "Float", "Double"), ("0/0", "Float", "Double")]
    by_compile = {f["compile_id"]: f for f in explained["0/3"]}
    assert (by_compile["0/2"]["kind"], by_compile["0/2"]["before"], by_compile["0/2"]["after"]) == (
        "EQUALS_MATCH", "k == 2.0", "k == 3.0")
    assert by_compile["0/0"]["after"] == "8"


def test_the_guards_viewer_shows_the_failed_guard_and_the_groups(tmp_path):
    import viewers
    from compiler import formats
    from compiler.pytorch import trace_stages
    data = trace_stages.guards_explained(torch_trace_entries(tmp_path), "0/3", ("/tmp/ti/g/model.py",))
    html = viewers.render("guards", formats.get("guards").encode(data), {})
    assert html.count('<tr class="failed-guard"') == 3
    assert "k changed: compile 0/2 was specialised on k == 2.0, the call passed k == 3.0" in html
    assert '<a href="#" class="goto-line" data-line="5"' in html
    for title in ("tensor match: dtype, device, shape, stride, requires_grad", "constant values", "global state"):
        assert title in html

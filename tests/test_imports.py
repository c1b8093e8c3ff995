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

"""The runner's side of a result bundle: a worker's `out/` directory, read as hostile input.

User code runs in the worker and `/job/out` is writable, so everything there - the manifest, the
stage files, what they are (links, FIFOs, devices) and how big they are - is the job's to choose.
The runner reads it outside the sandbox, so it trusts nothing:

- files are opened relative to a directory fd with O_NOFOLLOW | O_NONBLOCK (no link is followed,
  no open blocks), and must be regular files (fstat), so no FIFO, device or socket is ever read;
- stage files must have the names the worker's Bundle gives them (`NNNN.txt`);
- every read is capped here: the manifest, each stage, the stages of a job together;
- every manifest field is checked: key syntax, a known format, plain JSON of bounded size, and the
  typed meta the page reads (`ir_locations`, compiler/formats/ir_links.py).

A broken rule raises BundleRuleError naming the rule; nothing of the offending file is stored.
"""
from __future__ import annotations

import json
import os
import re
import stat
import time
from typing import Any

from compiler import formats
from compiler.errors import ErrorKind
from compiler.model import JobError, JobSettings, Manifest, Stage

# Stage formats a pipeline may write (compiler/formats/; each has a viewer, tests/test_formats.py checks).
KNOWN_FORMATS = frozenset(formats.FORMATS)
STAGE_FILE_RE = re.compile(r"^\d{4}\.txt$")
# Stage keys: a kind, then qualifiers (`dynamo.fx_graph:0/0_1`, `kernel:cpp_fused_add_0`,
# `xla.pass:0012.spmd.sharding-propagation`). No spaces, quotes or markup.
KEY_RE = re.compile(r"^[\w][\w.:/+\-\[\]@#=,]{0,199}$")
_MANIFEST_FIELDS = {"status", "stages", "timings", "toolchain", "error", "progress", "compiled"}
_STAGE_FIELDS = {"key", "title", "group", "format", "size", "file", "source_map", "meta"}
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class BundleRuleError(Exception):
    """The worker's output broke one of the runner's rules; the message names the rule."""


# The manifest's timings, as JSON, at most (a fixed cap: timings are small records).
TIMINGS_BYTES = 1 << 20


def open_out_dir(job_dir: str) -> int | None:
    """A directory fd for `job_dir/out` (the job may have replaced it with a link: refused), or
    None when it does not exist."""
    try:
        parent = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return os.open("out", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise BundleRuleError(f"the job replaced its out/ directory (out/ must be a directory, not a link: "
                              f"{e.strerror})") from None
    finally:
        os.close(parent)


def read_file(dir_fd: int, name: str, cap: int, what: str) -> bytes | None:
    """At most `cap` bytes of the regular file `name` in `dir_fd`; None if it does not exist.
    Raises BundleRuleError for anything but a regular file, or one larger than `cap`."""
    try:
        fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        # ELOOP: a symbolic link; ENXIO: a FIFO without a writer or a socket.
        raise BundleRuleError(f"{what} {name!r} is not a regular file ({e.strerror}); the runner reads only "
                              "regular files and never follows links") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BundleRuleError(f"{what} {name!r} is not a regular file; the runner reads only regular files")
        if st.st_size > cap:
            raise BundleRuleError(f"{what} {name!r} has {st.st_size:,} bytes, over the {cap:,}-byte cap")
        chunks, left = [], cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > cap:  # it grew after fstat
            raise BundleRuleError(f"{what} {name!r} has more than {cap:,} bytes, over the cap")
        return data
    finally:
        os.close(fd)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not plain JSON")


def _plain_json(value: Any, cap: int, what: str) -> Any:
    """`value` if it is plain JSON (dicts with string keys, lists, strings, finite numbers, bools,
    null) of at most `cap` bytes encoded."""
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError) as e:
        raise BundleRuleError(f"{what} is not plain JSON: {e}") from None
    if len(encoded.encode("utf-8")) > cap:
        raise BundleRuleError(f"{what} has {len(encoded.encode('utf-8')):,} bytes of JSON, over the {cap:,}-byte cap")
    return value


def _string(value: Any, limit: int, what: str) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise BundleRuleError(f"{what} must be a string of at most {limit} characters")
    return value


def _int(value: Any, what: str, lo: int = 0, hi: int = 10**9) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise BundleRuleError(f"{what} must be an integer from {lo} to {hi}")
    return value


def parse_manifest(data: bytes, caps: JobSettings) -> Manifest:
    """The manifest, every field checked. Raises BundleRuleError naming the first rule broken."""
    try:
        raw = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BundleRuleError(f"manifest.json is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(raw, dict) or not set(raw) <= _MANIFEST_FIELDS:
        raise BundleRuleError(f"manifest.json must be an object with only the fields {sorted(_MANIFEST_FIELDS)}")
    status = raw.get("status")
    if status not in ("running", "done", "failed"):
        raise BundleRuleError("the manifest's status must be running, done or failed")
    stages_raw = raw.get("stages", [])
    if not isinstance(stages_raw, list):
        raise BundleRuleError("the manifest's stages must be a list")
    if len(stages_raw) > caps.max_stages:
        raise BundleRuleError(f"the manifest lists {len(stages_raw)} stages, over the cap of {caps.max_stages} "
                              "(setting max_stages)")
    stages, keys = [], set()
    for n, s in enumerate(stages_raw):
        stage = _stage(s, n, caps)
        if stage.key in keys:
            raise BundleRuleError(f"stage {n}: the key {stage.key!r} is listed twice")
        keys.add(stage.key)
        stages.append(stage)
    timings = raw.get("timings") or {}
    if not isinstance(timings, dict):
        raise BundleRuleError("the manifest's timings must be an object")
    _plain_json(timings, TIMINGS_BYTES, "the manifest's timings")
    toolchain = raw.get("toolchain") or {}
    if not isinstance(toolchain, dict) or len(toolchain) > 32 or not all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 128 for k, v in toolchain.items()):
        raise BundleRuleError("the manifest's toolchain must map at most 32 short names to short version strings")
    error = raw.get("error")
    if error is not None:
        if not isinstance(error, dict) or not set(error) <= {"kind", "message", "line"}:
            raise BundleRuleError("the manifest's error must be an object with kind, message and line")
        kind = error.get("kind")
        if not isinstance(kind, str) or kind not in ErrorKind.__members__:
            raise BundleRuleError(f"the manifest's error kind {str(kind)[:64]!r} is not one of irscope's error kinds "
                                  "(compiler/errors.py)")
        line = error.get("line")
        error = JobError(kind=kind, message=_string(error.get("message"), 65536, "the manifest's error message"),
                         line=None if line is None else _int(line, "the manifest's error line", 1))
    progress = _string(raw.get("progress", ""), 1000, "the manifest's progress")
    compiled = raw.get("compiled", False)
    if not isinstance(compiled, bool):
        raise BundleRuleError("the manifest's compiled must be true or false")
    return Manifest(status=status, stages=stages, timings=timings, toolchain=toolchain, error=error,
                    progress=progress, compiled=compiled)


def _stage(s: Any, n: int, caps: JobSettings) -> Stage:
    where = f"stage {n}"
    if not isinstance(s, dict) or not set(s) <= _STAGE_FIELDS:
        raise BundleRuleError(f"{where} must be an object with only the fields {sorted(_STAGE_FIELDS)}")
    key = s.get("key")
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise BundleRuleError(f"{where}: the key {str(key)[:80]!r} is not a stage key (letters, digits and "
                              "._:/+-[]@#=, only, 200 characters at most)")
    where = f"stage {n} ({key})"
    file = s.get("file")
    if not isinstance(file, str) or not STAGE_FILE_RE.match(file):
        raise BundleRuleError(f"{where} names the file {str(file)[:200]!r}; stage files must be named NNNN.txt by "
                              r"the worker (^\d{4}\.txt$), inside out/")
    fmt = s.get("format")
    if fmt not in KNOWN_FORMATS:
        raise BundleRuleError(f"{where}: the format {str(fmt)[:40]!r} is not one the viewers know")
    source_map = s.get("source_map") or []
    if not isinstance(source_map, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                        and 0 < x < 10**8 for x in p) for p in source_map):
        raise BundleRuleError(f"{where}: the source map must be a list of [artifact line, source line] pairs "
                              "of positive integers")
    meta = s.get("meta") or {}
    if not isinstance(meta, dict):
        raise BundleRuleError(f"{where}: meta must be an object")
    if "runner" in meta:
        raise BundleRuleError(f"{where}'s meta names `runner`, the runner's own key (what it did to the stage)")
    _plain_json(meta, caps.meta_bytes, f"{where}'s meta")
    if "ir_locations" in meta:  # the page reads it line by line: its shape is checked here
        try:
            formats.check_ir_locations(meta["ir_locations"])
        except formats.FormatError as e:
            raise BundleRuleError(f"{where}'s meta: {e}") from None
    return Stage(key=key, title=_string(s.get("title", ""), 300, f"{where}'s title"),
                 group=_string(s.get("group", ""), 64, f"{where}'s group"), format=fmt, size=0, file=file,
                 source_map=source_map, meta=meta)


class BundleReader:
    """Reads one job's `out/` as the worker writes it, a little more on every call of `manifest`
    and `stage_text`, enforcing the caps (the job's settings) across the whole job."""

    def __init__(self, job_dir: str, caps: JobSettings):
        self.job_dir, self.caps = job_dir, caps
        self.bytes_read = 0
        self._dir_fd: int | None = None
        self._last: tuple[int, int, int] | None = None
        self._manifest: Manifest | None = None
        self._next_parse = 0.0  # time.monotonic() before which a changed manifest is not parsed again

    def _dir(self) -> int | None:
        """The fd of out/, checked on every call: a job that swaps out/ for a link or another
        directory after the runner opened it is caught, not read around."""
        if self._dir_fd is None:
            self._dir_fd = open_out_dir(self.job_dir)
            return self._dir_fd
        try:
            now = os.lstat(os.path.join(self.job_dir, "out"))
        except FileNotFoundError:
            now = None
        held = os.fstat(self._dir_fd)
        if now is None or not stat.S_ISDIR(now.st_mode) or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            raise BundleRuleError("the job replaced its out/ directory (out/ must stay the directory the runner "
                                  "made, not a link)")
        return self._dir_fd

    def manifest(self, final: bool = False) -> Manifest | None:
        """The manifest as last written, or None if there is none yet. Parsed again only when the
        file changed, and, while the job runs, no sooner than ten times the last parse took after
        it: a job rewriting a huge manifest over and over costs the runner (in the web process,
        embedded) a tenth of a core at most. `final`: the job ended, read it whatever the time."""
        dir_fd = self._dir()
        if dir_fd is None:
            return None
        try:
            st = os.stat("manifest.json", dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        ident = (st.st_ino, st.st_size, st.st_mtime_ns)
        if (ident != self._last or self._manifest is None) and (final or time.monotonic() >= self._next_parse):
            started = time.monotonic()
            data = read_file(dir_fd, "manifest.json", self.caps.manifest_bytes, "the manifest")
            if data is None:
                return None
            self._manifest = parse_manifest(data, self.caps)
            self._last = ident
            self._next_parse = time.monotonic() + 9 * (time.monotonic() - started)
        return self._manifest

    def stage_text(self, stage: Stage) -> str | None:
        """A stage's text (invalid UTF-8 replaced), or None if its file is not there yet."""
        dir_fd = self._dir()
        if dir_fd is None:
            return None
        data = read_file(dir_fd, stage.file, self.caps.stage_bytes, f"stage {stage.key!r}'s file")
        if data is None:
            return None
        self.bytes_read += len(data)
        if self.bytes_read > self.caps.job_stage_bytes:
            raise BundleRuleError(f"the job's stages add up to more than {self.caps.job_stage_bytes:,} bytes "
                                  "(setting job_disk_mb)")
        lines = data.count(b"\n") + 1
        pairs = len(stage.source_map)
        if pairs > self.caps.source_map_pairs_per_line * lines + 64 or \
                any(p[0] > lines + 1 for p in stage.source_map):
            raise BundleRuleError(f"stage {stage.key!r}'s source map has {pairs:,} pairs for its {lines:,} lines; a "
                                  f"source map has at most {self.caps.source_map_pairs_per_line} pairs per line, each "
                                  "naming one of the stage's lines")
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None


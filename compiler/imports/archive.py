"""An uploaded archive (.tar.gz, .tgz, .tar, .zip, a single .gz file, or a plain file) unpacked by
rules, inside the sandbox: it was made on someone else's machine and is hostile input.

- paths: relative, no `..` part, no empty or absolute name, no NUL; each is created under the
  destination with O_EXCL | O_NOFOLLOW, so no member can land outside it or replace another;
- kinds: regular files and directories only; a symbolic or hard link, a device, a FIFO is refused;
- counts and sizes: at most `max_files` members; the bytes written, counted as they are written
  (never trusting a header's size), at most `max_bytes` in all, so a decompression bomb stops at
  the cap instead of filling the disk.

Every refusal is an ArchiveError whose message names the member and the rule.
"""
from __future__ import annotations

import gzip
import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from typing import BinaryIO

_CHUNK = 1 << 16


class ArchiveError(ValueError):
    """An archive that breaks a rule; the message says which member and which rule."""


@dataclass(frozen=True)
class Unpacked:
    kind: str  # "tar", "zip", "gzip" (one compressed file) or "file"
    files: list[str]  # relative paths of the regular files written, in archive order
    bytes: int  # bytes written in all


def detect(path: str) -> str:
    """The container kind of an upload, from its first bytes."""
    with open(path, "rb") as f:
        head = f.read(262)
    if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "gzip"  # a .tar.gz or one gzipped file: told apart when opened
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return "file"


def safe_name(name: str) -> str:
    """A member name checked against the path rules, as a normalised relative path."""
    if not name or "\x00" in name:
        raise ArchiveError(f"member {name!r}: an empty name or a NUL byte is refused")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"member {name!r}: an absolute path is refused")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ArchiveError(f"member {name!r}: a path with '..' is refused (it could reach outside the archive)")
    if not parts:
        raise ArchiveError(f"member {name!r}: the name names no file")
    return "/".join(parts)


class _Writer:
    """Creates files and directories under `dest` and counts what it writes against the caps."""

    def __init__(self, dest: str, max_files: int, max_bytes: int):
        self.dest, self.max_files, self.max_bytes = dest, max_files, max_bytes
        self.files: list[str] = []
        self.members = 0
        self.bytes = 0
        os.makedirs(dest, exist_ok=True)

    def count(self, name: str) -> None:
        self.members += 1
        if self.members > self.max_files:
            raise ArchiveError(f"the archive has more than {self.max_files} members (at {name!r}; setting "
                               "import_max_files)")

    def directory(self, relative: str) -> None:
        path = self.dest
        for part in relative.split("/"):
            path = os.path.join(path, part)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                st = os.lstat(path)
                if not stat.S_ISDIR(st.st_mode):
                    raise ArchiveError(f"member {relative!r}: {part!r} is already a file") from None

    def file(self, relative: str, source: BinaryIO) -> None:
        parent = os.path.dirname(relative)
        if parent:
            self.directory(parent)
        path = os.path.join(self.dest, relative)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise ArchiveError(f"member {relative!r} appears twice in the archive") from None
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = source.read(_CHUNK)
                if not chunk:
                    break
                self.bytes += len(chunk)
                if self.bytes > self.max_bytes:
                    raise ArchiveError(f"the archive unpacks to more than {self.max_bytes:,} bytes (at {relative!r}; "
                                       "setting import_max_unpacked_mb): refused as a possible decompression bomb")
                out.write(chunk)
        self.files.append(relative)


def unpack(path: str, dest: str, max_files: int, max_bytes: int, name: str = "upload") -> Unpacked:
    """Unpack the upload at `path` into the empty directory `dest` by the rules above. `name` is
    the uploaded file's name (a single gzipped or plain file keeps it, without `.gz`)."""
    writer = _Writer(dest, max_files, max_bytes)
    kind = detect(path)
    if kind == "zip":
        _unzip(path, writer)
        return Unpacked("zip", writer.files, writer.bytes)
    if kind in ("gzip", "tar"):
        try:
            with tarfile.open(path, "r:*") as tar:
                _untar(tar, writer)
            return Unpacked("tar", writer.files, writer.bytes)
        except tarfile.ReadError:
            if kind == "tar":
                raise ArchiveError("the upload looks like a tar archive but cannot be read as one") from None
        # not a tar inside: one gzipped file
        plain = safe_name(os.path.basename(name[:-3] if name.endswith(".gz") else name + ".out"))
        writer.count(plain)
        try:
            with gzip.open(path, "rb") as source:
                writer.file(plain, source)
        except (OSError, EOFError) as e:
            raise ArchiveError(f"the gzip stream is broken: {e}") from None
        return Unpacked("gzip", writer.files, writer.bytes)
    plain = safe_name(os.path.basename(name))
    writer.count(plain)
    with open(path, "rb") as source:
        writer.file(plain, source)
    return Unpacked("file", writer.files, writer.bytes)


def _untar(tar: tarfile.TarFile, writer: _Writer) -> None:
    try:
        for member in tar:  # streamed: members are read one by one, never listed up front
            writer.count(member.name)
            relative = safe_name(member.name)
            if member.isdir():
                writer.directory(relative)
            elif member.isreg():
                source = tar.extractfile(member)
                if source is None:
                    raise ArchiveError(f"member {member.name!r} cannot be read")
                writer.file(relative, source)
            else:
                what = ("a symbolic link" if member.issym() else "a hard link" if member.islnk() else
                        "a FIFO" if member.isfifo() else "a device" if member.isdev() else "not a regular file")
                raise ArchiveError(f"member {member.name!r} is {what}: only regular files and directories are "
                                   "unpacked")
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ArchiveError(f"the tar archive is broken: {e}") from None


def _unzip(path: str, writer: _Writer) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                writer.count(info.filename)
                relative = safe_name(info.filename)
                mode = info.external_attr >> 16
                if info.is_dir():
                    writer.directory(relative)
                    continue
                if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # type bits absent: a plain file
                    what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                    raise ArchiveError(f"member {info.filename!r} is {what}: only regular files and directories "
                                       "are unpacked")
                with archive.open(info) as source:  # bytes counted as written, not from the header
                    writer.file(relative, source)
    except zipfile.BadZipFile as e:
        raise ArchiveError(f"the zip archive is broken: {e}") from None
    except (zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError, OSError) as e:
        raise ArchiveError(f"the zip archive cannot be read: {e}") from None

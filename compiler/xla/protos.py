"""XLA's protobuf messages, built from the descriptors compiled into jaxlib's library, for reading the
text-format protos XLA dumps (the latency-hiding scheduler's `ScheduleProto`) with protobuf's own
parser - without importing jax, and always matching the installed XLA.

Each `.proto` file's serialized FileDescriptorProto sits in the library as protoc wrote it; it is
found by its name field and cut where it ends (compiler/xla/options.descriptor_length). Its
dependencies are resolved the same way; protobuf's well-known types come from protobuf itself.
"""
from __future__ import annotations

import functools
import mmap
from typing import Any

from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    message_factory,
    text_format,
    timestamp_pb2,
)
from google.protobuf.message import DecodeError, Message

from compiler.xla.options import descriptor_length, jaxlib_library

_WELL_KNOWN = {m.DESCRIPTOR.name: m.DESCRIPTOR.serialized_pb for m in (any_pb2, duration_pb2, timestamp_pb2)}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def find_file_descriptor(library: bytes | mmap.mmap, name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto of `name` (e.g. "xla/xla.proto") in a library's bytes, or None."""
    encoded = name.encode()
    # field 1 (name), then field 2 (package): how protoc starts every descriptor
    at = library.find(b"\n" + _varint(len(encoded)) + encoded + b"\x12")
    if at < 0:
        return None
    blob = bytes(library[at: at + 4_000_000])
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(blob[:descriptor_length(blob)])
    except DecodeError:
        return None


@functools.lru_cache(maxsize=None)
def message_class(full_name: str, root_file: str = "xla/xla.proto") -> type[Message] | None:
    """The message class `full_name` ("xla.ScheduleProto") defined in `root_file` or a file it
    imports, from the installed jaxlib; None without jaxlib."""
    path = jaxlib_library()
    if path is None:
        return None
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as library:
        def add(name: str) -> None:
            if name in added:
                return
            added.add(name)
            if name in _WELL_KNOWN:
                pool.AddSerializedFile(_WELL_KNOWN[name])
                return
            proto = find_file_descriptor(library, name)
            if proto is None:
                raise LookupError(f"jaxlib's library has no descriptor for {name}")
            for dependency in proto.dependency:
                add(dependency)
            pool.Add(proto)

        add(root_file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def parse_text_proto(text: str, full_name: str) -> Any:
    """A text-format dump parsed as message `full_name`; fields this XLA does not know are skipped."""
    cls = message_class(full_name)
    if cls is None:
        raise LookupError("jaxlib is not installed here")
    message = cls()
    text_format.Parse(text, message, allow_unknown_field=True)
    return message

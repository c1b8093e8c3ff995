"""The fields of XLA's `DebugOptions` message, read from the protobuf descriptor compiled into
jaxlib's shared library - the same descriptor PjRt consults when it applies compile option
overrides (CompileOptions::ApplyOption) - so option names are checked against the real XLA
without importing jax.

The descriptor is a serialized `FileDescriptorProto` for `xla/xla.proto`, decoded with protobuf's
own `descriptor_pb2` classes. Only its end has to be found here: the library stores the
descriptors of many files one after another, and protoc writes a FileDescriptorProto's fields in
ascending field-number order, so the first top-level field that is not (or that goes back) is
where the next one begins.
"""
from __future__ import annotations

import functools
import importlib.util
import mmap
import os
import re
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

_FIELD = descriptor_pb2.FieldDescriptorProto


@dataclass(frozen=True)
class DebugOptionField:
    name: str
    number: int
    type: str            # the protobuf type, lower case: bool, int32, string, enum, message, ...
    repeated: bool
    enum_values: tuple[str, ...] = ()


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while i < len(buf) and shift < 64:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
    raise ValueError("not a varint")


def descriptor_length(blob: bytes) -> int:
    """Bytes of `blob` that belong to the FileDescriptorProto it starts with (see the docstring)."""
    numbers = {f.number for f in descriptor_pb2.FileDescriptorProto.DESCRIPTOR.fields}
    i, last = 0, 0
    while i < len(blob):
        try:
            key, j = _varint(blob, i)
            number, wire = key >> 3, key & 7
            if number not in numbers or number < last or wire not in (0, 2):
                break
            value, j = _varint(blob, j)
            j += value if wire == 2 else 0
        except ValueError:
            break
        if j > len(blob):
            break
        i, last = j, number
    return i


def debug_option_fields_from_descriptor(blob: bytes, message: str = "DebugOptions") -> dict[str, DebugOptionField]:
    """Fields of `message` in a serialized FileDescriptorProto (possibly followed by unrelated bytes)."""
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(blob[:descriptor_length(blob)])
    except DecodeError:
        return {}
    for msg in proto.message_type:
        if msg.name != message:
            continue
        enums = {e.name: tuple(v.name for v in e.value) for e in msg.enum_type}
        out = {}
        for f in msg.field:
            kind = _FIELD.Type.Name(f.type).removeprefix("TYPE_").lower()
            out[f.name] = DebugOptionField(f.name, f.number, kind, f.label == _FIELD.LABEL_REPEATED,
                                           enums.get(f.type_name.rsplit(".", 1)[-1], ()))
        return out
    return {}


_MARKER = b"\n\x0dxla/xla.proto\x12\x03xla"


def jaxlib_library() -> str | None:
    """Path of jaxlib's shared library, found without importing jaxlib."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "libjax_common.so")
        if os.path.exists(path):
            return path
    return None


@functools.lru_cache(maxsize=1)
def debug_option_fields() -> dict[str, DebugOptionField]:
    """DebugOptions fields of the installed jaxlib; empty when jaxlib is not installed here."""
    path = jaxlib_library()
    if path is None:
        return {}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        at = m.find(_MARKER)
        if at < 0:
            return {}
        # xla.proto's descriptor is ~100 KB; read generously and let the decoder stop.
        return debug_option_fields_from_descriptor(bytes(m[at: at + 2_000_000]))


# Options irscope sets itself for every compile: the user may not move the dump or device count.
RESERVED = ("xla_dump_", "xla_force_host_platform_device_count", "xla_enable_dumping")
# String options that name a file or directory (read, written, or searched): a job's files are the
# server's, as the dump's are, and a reproducer run elsewhere would read or write the reader's.
_PATH_LIKE = re.compile(r"_(path|dir|file|filename|to|from)$")
# A string value is one token: no space, no control character (an XLA flag's value on a command line).
_TOKEN = re.compile(r"[^\s\x00-\x1f\x7f]+")


def validate_xla_options(options: dict[str, Any], fields: dict[str, DebugOptionField] | None = None) -> dict[str, Any]:
    """Check names against DebugOptions and values against the field types; return the
    options with values coerced to what CompileOptions' overrides accept (bool/int/float/str).
    Raises ValueError with a message naming the bad option."""
    fields = debug_option_fields() if fields is None else fields
    out: dict[str, Any] = {}
    for name, value in options.items():
        if not isinstance(name, str):
            raise ValueError(f"XLA option names are strings, not {name!r}")
        if name.startswith(RESERVED):
            raise ValueError(f"XLA option {name!r} is set by irscope itself (use the devices option for the "
                             f"device count)")
        if not fields:  # no jaxlib in this process: the worker's compile checks the name
            if not name.startswith("xla_"):
                raise ValueError(f"unknown XLA option {name!r}: XLA debug options start with 'xla_'")
            out[name] = _one_token(name, value) if isinstance(value, str) else value
            continue
        field = fields.get(name)
        if field is None:
            close = sorted(n for n in fields if name.replace("xla_", "") in n)[:5]
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"unknown XLA option {name!r}: not a field of XLA's DebugOptions{hint}")
        out[name] = _coerce(field, value)
    return out


def _one_token(name: str, value: str) -> str:
    if _PATH_LIKE.search(name):
        raise ValueError(f"XLA option {name!r} names a file or directory, which irscope does not let a job "
                         "choose (the server's files, as the dump's)")
    if not _TOKEN.fullmatch(value):
        raise ValueError(f"XLA option {name!r} takes one token (no spaces or control characters), not {value!r}")
    return value


def _coerce(field: DebugOptionField, value: Any) -> Any:
    name, kind = field.name, field.type
    if field.repeated:
        # PjRt's override mechanism cannot set repeated fields; the disable/enable pass lists are
        # reachable through DebugOptions' own setters, which take a comma-separated string.
        if name in ("xla_disable_hlo_passes", "xla_enable_hlo_passes_only"):
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return _one_token(name, ",".join(value))
            if isinstance(value, str):
                return _one_token(name, value)
            raise ValueError(f"XLA option {name!r} takes a list of pass names or a comma-separated string")
        raise ValueError(f"XLA option {name!r} is a repeated field, which XLA's option overrides cannot set")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(f"XLA option {name!r} is a bool, not {value!r}")
    if kind in ("int32", "int64", "uint32", "uint64", "sint32", "sint64"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"XLA option {name!r} is an integer ({kind}), not {value!r}")
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"XLA option {name!r} is an integer ({kind}), not {value!r}") from None
    if kind in ("float", "double"):
        if isinstance(value, bool):
            raise ValueError(f"XLA option {name!r} is a number, not {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"XLA option {name!r} is a number, not {value!r}") from None
    if kind == "string":
        if not isinstance(value, str):
            raise ValueError(f"XLA option {name!r} is a string, not {value!r}")
        return _one_token(name, value)
    if kind == "enum":
        if isinstance(value, str) and value in field.enum_values:
            return value
        raise ValueError(f"XLA option {name!r} is one of {', '.join(field.enum_values)}, not {value!r}")
    raise ValueError(f"XLA option {name!r} has type {kind}, which irscope cannot set")

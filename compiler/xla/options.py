"""The fields of XLA's `DebugOptions` message, read from the protobuf descriptor compiled into
jaxlib's shared library - the same descriptor PjRt consults when it applies compile option
overrides (CompileOptions::ApplyOption) - so option names are checked against the real XLA
without importing jax.

The descriptor is a serialized `FileDescriptorProto` for `xla/xla.proto`; protobuf's wire format
is decoded by hand here (the venv has no protobuf package).
"""
from __future__ import annotations

import functools
import importlib.util
import mmap
import os
from dataclasses import dataclass
from typing import Any

# FieldDescriptorProto.Type values
_TYPE_NAMES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 8: "bool", 9: "string",
               11: "message", 12: "bytes", 13: "uint32", 14: "enum", 17: "sint32", 18: "sint64"}


@dataclass(frozen=True)
class DebugOptionField:
    name: str
    number: int
    type: str            # one of _TYPE_NAMES' values
    repeated: bool
    enum_values: tuple[str, ...] = ()


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 70:
            raise ValueError("bad varint")


def _fields(buf: bytes, start: int = 0, end: int | None = None, stop_on_error: bool = False):
    """(field number, wire type, value) triples of one message; length-delimited values are bytes."""
    i, end = start, len(buf) if end is None else end
    while i < end:
        try:
            key, i2 = _varint(buf, i)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ValueError("field 0")
            if wire == 0:
                value, i2 = _varint(buf, i2)
            elif wire == 2:
                length, i2 = _varint(buf, i2)
                if i2 + length > end:
                    raise ValueError("truncated field")
                value, i2 = buf[i2:i2 + length], i2 + length
            elif wire == 1:
                value, i2 = buf[i2:i2 + 8], i2 + 8
            elif wire == 5:
                value, i2 = buf[i2:i2 + 4], i2 + 4
            else:
                raise ValueError(f"wire type {wire}")
        except ValueError:
            if stop_on_error:
                return
            raise
        yield number, wire, value
        i = i2


def debug_option_fields_from_descriptor(blob: bytes, message: str = "DebugOptions") -> dict[str, DebugOptionField]:
    """Fields of `message` in a serialized FileDescriptorProto (possibly followed by unrelated
    bytes: decoding stops at the first field that is not part of a FileDescriptorProto)."""
    for number, wire, value in _fields(blob, stop_on_error=True):
        if number > 14:
            break
        if number != 4 or wire != 2:  # message_type
            continue
        name, fields, enums = "", [], {}
        for n, w, v in _fields(value):
            if n == 1:
                name = v.decode()
            elif n == 2:
                fields.append(v)
            elif n == 4:  # nested enum_type
                ename, evalues = "", []
                for en, _, ev in _fields(v):
                    if en == 1:
                        ename = ev.decode()
                    elif en == 2:
                        evalues += [x.decode() for vn, _, x in _fields(ev) if vn == 1]
                enums[ename] = tuple(evalues)
        if name != message:
            continue
        out = {}
        for f in fields:
            fname, fnum, label, ftype, type_name = "", 0, 1, 0, ""
            for n, w, v in _fields(f):
                if n == 1:
                    fname = v.decode()
                elif n == 3:
                    fnum = v
                elif n == 4:
                    label = v
                elif n == 5:
                    ftype = v
                elif n == 6:
                    type_name = v.decode()
            out[fname] = DebugOptionField(fname, fnum, _TYPE_NAMES.get(ftype, str(ftype)), label == 3,
                                          enums.get(type_name.rsplit(".", 1)[-1], ()))
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
            out[name] = value
            continue
        field = fields.get(name)
        if field is None:
            close = sorted(n for n in fields if name.replace("xla_", "") in n)[:5]
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"unknown XLA option {name!r}: not a field of XLA's DebugOptions{hint}")
        out[name] = _coerce(field, value)
    return out


def _coerce(field: DebugOptionField, value: Any) -> Any:
    name, kind = field.name, field.type
    if field.repeated:
        # PjRt's override mechanism cannot set repeated fields; the disable/enable pass lists are
        # reachable through DebugOptions' own setters, which take a comma-separated string.
        if name in ("xla_disable_hlo_passes", "xla_enable_hlo_passes_only"):
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return ",".join(value)
            if isinstance(value, str):
                return value
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
        return value
    if kind == "enum":
        if isinstance(value, str) and value in field.enum_values:
            return value
        raise ValueError(f"XLA option {name!r} is one of {', '.join(field.enum_values)}, not {value!r}")
    raise ValueError(f"XLA option {name!r} has type {kind}, which irscope cannot set")

"""Parsers of what XLA writes: dump directories (`--xla_dump_to`), HLO text, sharding and
replica-group strings, buffer assignments and live ranges.

Pure functions from text to records; nothing here imports jax. The formats are XLA's own
printers (hlo_instruction.cc, hlo_sharding.cc, replica_group.cc, buffer_assignment.cc,
hlo_live_range.cc); each parser names the printer it follows.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

# ---------------------------------------------------------------------------------------------
# Dump directory layout
# ---------------------------------------------------------------------------------------------

# module_0003.jit_fn.0012.simplification.after_algsimp.before_simplify-sorts.txt
# module_0003.jit_fn.0023.copy-insertion.after_adding_copies_to_resolve_interference.txt
_SNAPSHOT_RE = re.compile(
    r"^module_(?P<module_id>\d+)\.(?P<module>.+)\.(?P<seq>\d{4})\.(?P<pipeline>[^.]+)"
    r"\.after_(?P<after>.+?)(?:\.before_(?P<before>.+))?\.txt$")


@dataclass(frozen=True)
class SnapshotName:
    """One `--xla_dump_hlo_pass_re` file: the module after pass `after` of `pipeline`."""

    module_id: str
    module: str
    seq: int
    pipeline: str
    after: str
    before: str | None
    file: str


def parse_snapshot_name(file: str) -> SnapshotName | None:
    """The parts of a pass-snapshot file name, or None for any other dump file."""
    m = _SNAPSHOT_RE.match(file)
    if not m:
        return None
    return SnapshotName(m["module_id"], m["module"], int(m["seq"]), m["pipeline"], m["after"], m["before"], file)


@dataclass
class DumpIndex:
    """The files XLA dumped for one module, by role. Paths are relative to the dump directory."""

    prefix: str
    snapshots: list[SnapshotName] = field(default_factory=list)
    before_optimizations: str | None = None
    after_optimizations: str | None = None
    buffer_assignment: str | None = None
    live_range: str | None = None
    memory_report: str | None = None
    llvm_ir: dict[str, str] = field(default_factory=dict)        # kernel module -> optimised .ll
    llvm_ir_no_opt: dict[str, str] = field(default_factory=dict)
    object_files: dict[str, str] = field(default_factory=dict)   # kernel module -> .o


def index_dump(files: Iterable[str]) -> DumpIndex | None:
    """Sort the names in a dump directory into one DumpIndex for the compiled module.

    A dump may hold several modules (JAX compiles helpers too); the one that reached the end of
    compilation (it has `*.cpu_after_optimizations.txt`) last is the one the user asked for."""
    files = sorted(files)
    finals = [f for f in files if f.endswith(".cpu_after_optimizations.txt") or
              re.search(r"\.[a-z]+_after_optimizations\.txt$", f)]
    if finals:
        prefix = finals[-1][: finals[-1].rindex("_after_optimizations.txt")]
        prefix = prefix[: prefix.rindex(".")]  # drop the backend tag ("cpu")
    else:
        befores = [f for f in files if f.endswith(".before_optimizations.txt")]
        if not befores:
            return None
        prefix = befores[-1][: -len(".before_optimizations.txt")]
    index = DumpIndex(prefix=prefix)
    for f in files:
        if not f.startswith(prefix + "."):
            continue
        rest = f[len(prefix) + 1:]
        snap = parse_snapshot_name(f)
        if snap is not None:
            index.snapshots.append(snap)
        elif rest == "before_optimizations.txt":
            index.before_optimizations = f
        elif re.fullmatch(r"[a-z]+_after_optimizations\.txt", rest):
            index.after_optimizations = f
        elif rest.endswith("_after_optimizations-buffer-assignment.txt"):
            index.buffer_assignment = f
        elif rest.endswith("_after_optimizations-live-range.txt"):
            index.live_range = f
        elif rest.endswith("_after_optimizations-memory-usage-report.txt"):
            index.memory_report = f
        elif rest.endswith(".ir-with-opt.ll"):
            index.llvm_ir[rest[: -len(".ir-with-opt.ll")]] = f
        elif rest.endswith(".ir-no-opt.ll"):
            index.llvm_ir_no_opt[rest[: -len(".ir-no-opt.ll")]] = f
        elif rest.startswith("obj-file.") and rest.endswith(".o"):
            index.object_files[rest[len("obj-file."): -2]] = f
    index.snapshots.sort(key=lambda s: s.seq)
    return index


def read_dump(directory: str) -> DumpIndex | None:
    """index_dump over the files of a directory."""
    if not os.path.isdir(directory):
        return None
    return index_dump(os.listdir(directory))


# ---------------------------------------------------------------------------------------------
# HLO text (HloModule::ToString)
# ---------------------------------------------------------------------------------------------

@dataclass
class HloInstr:
    """One instruction line of HLO text. `attrs` keeps each attribute's text as printed."""

    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: dict[str, str]
    line: int  # 1-based line in the text
    computation: str
    is_root: bool = False

    @property
    def sharding(self) -> str | None:
        return self.attrs.get("sharding")

    @property
    def metadata(self) -> dict[str, str]:
        return parse_metadata(self.attrs.get("metadata", ""))


@dataclass
class HloComputation:
    name: str
    is_entry: bool
    line: int
    instructions: list[HloInstr] = field(default_factory=list)


@dataclass
class HloText:
    """An HLO module as printed: header attributes and computations in printed order."""

    name: str
    header: str
    computations: list[HloComputation]

    @property
    def entry(self) -> HloComputation | None:
        for c in self.computations:
            if c.is_entry:
                return c
        return self.computations[-1] if self.computations else None

    def instructions(self) -> Iterable[HloInstr]:
        for c in self.computations:
            yield from c.instructions

    def by_name(self) -> dict[str, HloInstr]:
        return {i.name: i for i in self.instructions()}

    @property
    def is_scheduled(self) -> bool:
        return "is_scheduled=true" in self.header


_INSTR_RE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_COMP_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")


def _balanced_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at text[start] (quotes respected)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    i = start
    in_str = False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return len(text)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets and quotes; parts are stripped."""
    parts, depth, cur, in_str, i = [], 0, [], False, 0
    while i < len(text):
        ch = text[i]
        if in_str:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur.append(ch)
        elif ch in "([{":
            depth += 1
            cur.append(ch)
        elif ch in ")]}":
            depth -= 1
            cur.append(ch)
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _parse_instr(body: str) -> tuple[str, str, list[str], dict[str, str]] | None:
    """`shape opcode(operands), k=v, ...` -> (shape, opcode, operands, attrs)."""
    body = body.strip()
    if not body:
        return None
    if body[0] == "(":
        end = _balanced_end(body, 0)
    else:
        m = re.match(r"[\w]+(\[[^\]]*\])?", body)
        if not m:
            return None
        end = m.end()
        if end < len(body) and body[end] == "{":
            end = _balanced_end(body, end)
    shape = body[:end]
    rest = body[end:].lstrip()
    m = re.match(r"([\w\-]+)\(", rest)
    if not m:
        return None
    opcode = m.group(1)
    close = _balanced_end(rest, m.end() - 1)
    operand_text = rest[m.end(): close - 1]
    operands = []
    for part in split_top_level(operand_text):
        # Operands print as `%name` or, with print_operand_shape, `f32[4] %name`.
        tokens = part.split()
        if tokens:
            operands.append(tokens[-1].lstrip("%"))
    attrs: dict[str, str] = {}
    tail = rest[close:].strip()
    if tail.startswith(","):
        for part in split_top_level(tail[1:]):
            if "=" in part:
                k, v = part.split("=", 1)
                attrs[k.strip()] = v.strip()
    return shape, opcode, operands, attrs


def parse_hlo_text(text: str) -> HloText:
    """Computations and instruction lines of HLO text as HloModule::ToString prints it."""
    lines = text.split("\n")
    name, header = "", ""
    computations: list[HloComputation] = []
    current: HloComputation | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        if stripped.startswith("HloModule"):
            header = stripped
            name = stripped.split()[1].rstrip(",") if len(stripped.split()) > 1 else ""
            continue
        if current is None:
            m = _COMP_RE.match(stripped)
            if m:
                current = HloComputation(m.group(2), bool(m.group(1)), number)
            continue
        if stripped == "}":
            computations.append(current)
            current = None
            continue
        m = _INSTR_RE.match(line)
        if not m:
            continue
        parsed = _parse_instr(m.group(3))
        if parsed is None:
            continue
        shape, opcode, operands, attrs = parsed
        current.instructions.append(HloInstr(m.group(2), shape, opcode, operands, attrs, number,
                                             current.name, bool(m.group(1))))
    if current is not None:
        computations.append(current)
    return HloText(name, header, computations)


def parse_metadata(text: str) -> dict[str, str]:
    """`{op_name="a" source_file="f.py" source_line=3}` -> dict of strings."""
    out: dict[str, str] = {}
    for m in re.finditer(r'(\w+)=("(?:\\.|[^"\\])*"|[^\s}]+)', text.strip("{}")):
        value = m.group(2)
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        out[m.group(1)] = value
    return out


def instruction_count(text: str) -> int:
    """Instruction lines of an HLO module, all computations included."""
    return sum(len(c.instructions) for c in parse_hlo_text(text).computations)


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------

_BYTES = {"pred": 1, "s2": 1, "s4": 1, "s8": 1, "s16": 2, "s32": 4, "s64": 8, "u2": 1, "u4": 1, "u8": 1,
          "u16": 2, "u32": 4, "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16,
          "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e5m2fnuz": 1, "f8e4m3fnuz": 1, "f8e4m3b11fnuz": 1,
          "f8e3m4": 1, "f8e8m0fnu": 1, "f4e2m1fn": 1, "token": 0}


@dataclass(frozen=True)
class ArrayShape:
    dtype: str
    dims: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def bytes(self) -> int:
        return self.elements * _BYTES.get(self.dtype, 4)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


def parse_shapes(shape: str) -> list[ArrayShape]:
    """The array leaves of an HLO shape string (`f32[4,8]{1,0}` or a tuple of them)."""
    out = []
    for m in re.finditer(r"\b([a-z][a-z0-9]*)\[([^\]]*)\]", shape):
        dims = tuple(int(d.lstrip("<=")) for d in m.group(2).split(",") if d.strip())
        out.append(ArrayShape(m.group(1), dims))
    return out


def shape_bytes(shape: str) -> int:
    return sum(s.bytes for s in parse_shapes(shape))


# ---------------------------------------------------------------------------------------------
# Tile assignments, shardings, replica groups (hlo_sharding.cc, tile_assignment.cc)
# ---------------------------------------------------------------------------------------------

def iota_devices(dims: list[int], reshape: list[int], perm: list[int] | None) -> list[int]:
    """Row-major device ids of `[dims]<=[reshape]T(perm)`: iota(prod) reshaped to `reshape`,
    transposed by `perm`, read out in row-major order (then viewed as `dims`)."""
    n = math.prod(reshape)
    if perm is None:
        perm = list(range(len(reshape)))
    tdims = [reshape[p] for p in perm]
    strides = [0] * len(reshape)
    acc = 1
    for i in range(len(reshape) - 1, -1, -1):
        strides[i] = acc
        acc *= reshape[i]
    out = []
    for flat in range(n):
        rem, src = flat, 0
        for axis in range(len(tdims) - 1, -1, -1):
            idx = rem % tdims[axis]
            rem //= tdims[axis]
            src += idx * strides[perm[axis]]
        out.append(src)
    if math.prod(dims) != n:
        raise ValueError(f"iota tile assignment [{dims}]<=[{reshape}] has mismatched sizes")
    return out


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _parse_device_array(text: str) -> tuple[list[int], list[int], str]:
    """`[4,2]<=[8]`, `[2,2]<=[2,2]T(1,0)` or `[2,2]0,2,1,3` at the start of text ->
    (dims, row-major devices, rest of text)."""
    m = re.match(r"\s*\[([\d,\s]*)\]", text)
    if not m:
        raise ValueError(f"expected a tile assignment at {text[:40]!r}")
    dims = _ints(m.group(1))
    rest = text[m.end():]
    m2 = re.match(r"<=\[([\d,\s]*)\](?:T\(([\d,\s]*)\))?", rest)
    if m2:
        devices = iota_devices(dims, _ints(m2.group(1)), _ints(m2.group(2)) if m2.group(2) else None)
        return dims, devices, rest[m2.end():]
    m3 = re.match(r"\s*([\d,\s]+)", rest)
    devices = _ints(m3.group(1)) if m3 else []
    return dims, devices, rest[m3.end():] if m3 else rest


def parse_sharding(text: str) -> dict[str, Any]:
    """An HloSharding as printed (`{devices=[4,1,2]<=[8] last_tile_dim_replicate}`,
    `{replicated}`, `{maximal device=3}`, `{manual}`, `{{...}, {...}}`) -> a record:
    type (replicated/maximal/manual/tiled/tuple/unknown), tile_dims, devices (row-major),
    subgroups (types of the trailing non-data tile dims), device, elements (tuple)."""
    s = text.strip()
    if s.startswith("{") and s.endswith("}"):
        inner = s[1:-1].strip()
    else:
        inner = s
    if inner.startswith("{"):
        return {"type": "tuple", "text": s, "elements": [parse_sharding(p) for p in split_top_level(inner)]}
    # Metadata and shard_as/shard_like annotations carry no placement; drop them.
    inner = re.sub(r"\s*metadata=\{.*\}\s*$", "", inner)
    inner = re.sub(r"\s*shard_(as|like)\s+\d+", "", inner).strip()
    if inner in ("replicated", ""):
        return {"type": "replicated", "text": s}
    if inner == "manual":
        return {"type": "manual", "text": s}
    if inner == "unknown":
        return {"type": "unknown", "text": s}
    if inner.startswith("unreduced"):
        return {"type": "unreduced", "text": s}
    m = re.match(r"maximal\s+device=(\d+)", inner)
    if m:
        return {"type": "maximal", "device": int(m.group(1)), "text": s}
    if inner.startswith("devices="):
        dims, devices, rest = _parse_device_array(inner[len("devices="):])
        subgroups: list[str] = []
        if "last_tile_dim_replicate" in rest:
            subgroups = ["replicated"]
        m = re.search(r"last_tile_dims=\{([^}]*)\}", rest)
        if m:
            subgroups = [t.strip() for t in m.group(1).split(",") if t.strip()]
        return {"type": "tiled", "tile_dims": dims, "devices": devices, "subgroups": subgroups, "text": s}
    return {"type": "unknown", "text": s}


def sharding_tiles(dims: list[int] | tuple[int, ...], sharding: dict[str, Any],
                   num_devices: int) -> list[dict[str, Any]]:
    """Which part of an array of shape `dims` each device holds: one record per distinct tile
    with its index, [start, stop) per dimension and the devices holding it. Tiles are
    ceil(dim / tiles) long as XLA's partitioner cuts them (the last one may be short or empty)."""
    rank = len(dims)
    kind = sharding.get("type")
    if kind in ("replicated", "unknown", "manual", "unreduced", None):
        return [{"index": [0] * rank, "ranges": [[0, d] for d in dims], "devices": list(range(num_devices))}]
    if kind == "maximal":
        return [{"index": [0] * rank, "ranges": [[0, d] for d in dims], "devices": [sharding["device"]]}]
    if kind != "tiled":
        return []
    tile_dims = sharding["tile_dims"]
    data_rank = len(tile_dims) - len(sharding.get("subgroups", []))
    group = math.prod(tile_dims[data_rank:]) if data_rank < len(tile_dims) else 1
    tiles: dict[tuple[int, ...], list[int]] = {}
    devices = sharding["devices"]
    for flat, device in enumerate(devices):
        data_flat = flat // group
        index = []
        for axis in range(data_rank - 1, -1, -1):
            index.append(data_flat % tile_dims[axis])
            data_flat //= tile_dims[axis]
        tiles.setdefault(tuple(reversed(index)), []).append(device)
    out = []
    for index, devs in sorted(tiles.items()):
        ranges = []
        for axis, i in enumerate(index):
            extent = dims[axis] if axis < rank else 1
            size = -(-extent // tile_dims[axis])
            ranges.append([min(i * size, extent), min((i + 1) * size, extent)])
        out.append({"index": list(index), "ranges": ranges, "devices": devs})
    return out


def _mesh_axes(text: str) -> tuple[list[str], list[int], list[int] | None, str]:
    """`mesh['a'=4,'b'=2], device_ids=(...)` -> (names, sizes, device ids or None, rest)."""
    m = re.match(r"mesh\[([^\]]*)\]", text)
    if not m:
        raise ValueError(f"expected a mesh at {text[:40]!r}")
    names, sizes = [], []
    for part in split_top_level(m.group(1)):
        name, size = part.rsplit("=", 1)
        names.append(name.strip().strip("'\""))
        sizes.append(int(size))
    rest = text[m.end():]
    ids = None
    m2 = re.match(r"\s*,\s*device_ids=\(", rest)
    if m2:
        close = _balanced_end(rest, m2.end() - 1)
        body = rest[m2.end(): close - 1]
        if "<=" in body:
            _, ids, _ = _parse_device_array(body)
        else:
            ids = _ints(body)
        rest = rest[close:]
    return names, sizes, ids, rest


def _mesh_axes_groups(text: str) -> list[list[int]]:
    """MeshAxesReplicaGroupList::ToString -> explicit groups, as flattened_replica_groups()
    computes them: reshape the mesh by the (sub-)axes, move the grouped axes last, cut rows."""
    names, sizes, ids, rest = _mesh_axes(text)
    m = re.search(r"\{([^}]*)\}", rest)
    refs = []
    for part in split_top_level(m.group(1)) if m else []:
        sm = re.match(r"'?([^':]+)'?(?::\((\d+)\)(\d+))?$", part.strip())
        if not sm:
            raise ValueError(f"cannot read mesh axis {part!r}")
        axis = names.index(sm.group(1))
        refs.append((axis, (int(sm.group(2)), int(sm.group(3))) if sm.group(2) else None))
    # Per mesh axis: the reshape of that axis and which of its pieces are grouped.
    per_axis: dict[int, tuple[list[int], list[int]]] = {}
    for axis in sorted({a for a, _ in refs}):
        subs = [(i, sub) for i, (a, sub) in enumerate(refs) if a == axis]
        full = sizes[axis]
        if len(subs) == 1 and subs[0][1] is None:
            per_axis[axis] = ([full], [0])
            continue
        if len(subs) == 1:
            pre, size = subs[0][1]
            per_axis[axis] = ([pre, size, full // (pre * size)], [1])
            continue
        order = sorted(range(len(subs)), key=lambda k: subs[k][1][0])
        reshape, agg, prefix = [], [], 1
        for k in order:
            pre, size = subs[k][1]
            if pre != prefix:
                reshape.append(pre // prefix)
                prefix = pre
            agg.append(len(reshape))
            reshape.append(size)
            prefix *= size
        if prefix != full:
            reshape.append(full // prefix)
        permuted = [0] * len(order)
        for rank_in_sorted, k in enumerate(order):
            permuted[k] = agg[rank_in_sorted]
        per_axis[axis] = (reshape, permuted)
    new_sizes: list[int] = []
    offsets = []
    for axis, size in enumerate(sizes):
        offsets.append(len(new_sizes))
        new_sizes.extend(per_axis[axis][0] if axis in per_axis else [size])
    consumed: dict[int, int] = {}
    grouped = []
    for axis, _ in refs:
        k = consumed.get(axis, 0)
        consumed[axis] = k + 1
        grouped.append(per_axis[axis][1][k] + offsets[axis])
    perm = [i for i in range(len(new_sizes)) if i not in grouped] + grouped
    base = ids if ids is not None else list(range(math.prod(sizes)))
    order_ids = iota_devices([math.prod(new_sizes)], new_sizes, perm)
    flat = [base[i] for i in order_ids]
    group = math.prod(new_sizes[g] for g in grouped) if grouped else 1
    return [flat[i:i + group] for i in range(0, len(flat), group)]


def parse_replica_groups(text: str, num_devices: int) -> list[list[int]]:
    """replica_groups as printed: `{{0,1},{2,3}}`, `{}` (one group of all devices),
    `[4,2]<=[8]` (iota: rows are groups) or `mesh['x'=4,'y'=2] {'y'}` (mesh axes)."""
    s = text.strip()
    if s.startswith("mesh"):
        return _mesh_axes_groups(s)
    if s.startswith("["):
        dims, devices, _ = _parse_device_array(s)
        width = dims[-1] if dims else 1
        return [devices[i:i + width] for i in range(0, len(devices), width)]
    inner = s[1:-1].strip() if s.startswith("{") else s
    if not inner:
        return [list(range(num_devices))]
    return [_ints(g) for g in split_top_level(inner)]


# ---------------------------------------------------------------------------------------------
# Collectives (what the SPMD partitioner inserted)
# ---------------------------------------------------------------------------------------------

COLLECTIVE_OPCODES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                      "all-reduce-start", "all-gather-start", "collective-permute-start",
                      "ragged-all-to-all", "collective-broadcast")


def collectives(module: HloText, num_devices: int) -> list[dict[str, Any]]:
    """Every collective instruction with its groups and bytes. `operand_bytes`/`result_bytes`
    are per device; `moved_bytes` is what one device sends under the textbook ring algorithm
    (all-gather/reduce-scatter/all-to-all: (n-1)/n of the large side, all-reduce: twice that,
    collective-permute: its operand) - a model for comparison, not a measurement."""
    shapes = {i.name: i.shape for i in module.instructions()}
    out = []
    for ins in module.instructions():
        if ins.opcode not in COLLECTIVE_OPCODES:
            continue
        operand_bytes = sum(shape_bytes(shapes.get(o, "")) for o in ins.operands)
        result_bytes = shape_bytes(ins.shape)
        base = ins.opcode.replace("-start", "")
        if "replica_groups" in ins.attrs:
            groups = parse_replica_groups(ins.attrs["replica_groups"], num_devices)
        elif "source_target_pairs" in ins.attrs:
            groups = [_ints(p) for p in split_top_level(ins.attrs["source_target_pairs"].strip()[1:-1])]
        else:
            groups = [list(range(num_devices))]
        n = max((len(g) for g in groups), default=1)
        if base == "collective-permute":
            moved = operand_bytes
        elif base == "all-reduce":
            moved = 2 * operand_bytes * (n - 1) // max(n, 1)
        elif base == "all-gather":
            moved = result_bytes * (n - 1) // max(n, 1)
        else:  # reduce-scatter, all-to-all
            moved = operand_bytes * (n - 1) // max(n, 1)
        out.append({"name": ins.name, "opcode": ins.opcode, "computation": ins.computation, "line": ins.line,
                    "shape": ins.shape.split("{")[0] if not ins.shape.startswith("(") else ins.shape,
                    "groups": groups, "group_size": n,
                    "groups_text": ins.attrs.get("replica_groups") or ins.attrs.get("source_target_pairs", ""),
                    "dimensions": ins.attrs.get("dimensions", ""), "operand_bytes": operand_bytes,
                    "result_bytes": result_bytes, "moved_bytes": moved})
    return out


# ---------------------------------------------------------------------------------------------
# Buffer assignment (BufferAssignment::ToString) and live ranges (HloLiveRange::ToString)
# ---------------------------------------------------------------------------------------------

@dataclass
class BufferValue:
    id: int
    instruction: str
    index: str        # shape index as printed, "{}" for the top level
    size: int
    offset: int
    shape: str

    @property
    def key(self) -> str:
        return f"{self.instruction}{self.index}"


@dataclass
class Allocation:
    index: int
    size: int
    kind: str         # parameter, output, thread-local, temp, constant, other
    description: str
    values: list[BufferValue] = field(default_factory=list)


_ALLOC_RE = re.compile(r"^allocation (\d+): size (\d+), (.*)$")
_VALUE_RE = re.compile(r"^\s*value: <(\d+) ([^\s{>]+)(\{[\d,]*\})?[^>]*> \(size=(\d+),offset=(\d+)\): (.*)$")


def parse_buffer_assignment(text: str) -> list[Allocation]:
    """Allocations with the values placed in them (size, offset inside the allocation)."""
    allocations: list[Allocation] = []
    for line in text.split("\n"):
        m = _ALLOC_RE.match(line)
        if m:
            desc = m.group(3).rstrip(":")
            if desc.startswith("parameter"):
                kind = "parameter"
            elif "preallocated-temp" in desc:
                kind = "temp"
            elif "thread-local" in desc:
                kind = "thread-local"
            elif desc.startswith("output") or "maybe-live-out" in desc:
                kind = "output"
            elif desc.startswith("constant"):
                kind = "constant"
            else:
                kind = "other"
            allocations.append(Allocation(int(m.group(1)), int(m.group(2)), kind, desc))
            continue
        m = _VALUE_RE.match(line)
        if m and allocations:
            allocations[-1].values.append(BufferValue(int(m.group(1)), m.group(2), m.group(3) or "{}",
                                                      int(m.group(4)), int(m.group(5)), m.group(6).strip()))
    return allocations


@dataclass
class LiveRanges:
    sequence: list[str]                 # flattened instruction order
    ranges: dict[str, tuple[int, int]]  # value key (name{index}) -> [start, end] positions
    peak_time: int | None
    peak_values: list[tuple[str, int]]  # (value key, bytes) live at the peak, as XLA lists them
    max_time: int


def parse_live_range(text: str) -> LiveRanges:
    sequence: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    peak_time, peak_values, max_time = None, [], 0
    section = ""
    m = re.search(r"HloLiveRange \(max (\d+)\)", text)
    if m:
        max_time = int(m.group(1))
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("InstructionSequence"):
            section = "seq"
            continue
        if s.startswith("BufferLiveRange"):
            section = "ranges"
            continue
        m = re.match(r"Live ranges at (\d+) \(peak\)", s)
        if m:
            section, peak_time = "peak", int(m.group(1))
            continue
        if s.startswith("Stack trace breakdown"):
            section = ""
            continue
        if section == "seq":
            m = re.match(r"(\d+):(\S+)$", s)
            if m:
                sequence.append(m.group(2))
        elif section == "ranges":
            m = re.match(r"(\S+):(\d+)-(\d+)$", s)
            if m:
                ranges[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif section == "peak":
            m = re.match(r"(\S+): (\d+) bytes", s)
            if m:
                peak_values.append((m.group(1), int(m.group(2))))
    return LiveRanges(sequence, ranges, peak_time, peak_values, max_time)


def memory_timeline(allocations: list[Allocation], live: LiveRanges) -> dict[str, Any]:
    """Memory over program order for XLA's temp buffer: every value placed in a
    preallocated-temp allocation becomes a block [start, end] x [offset, offset+size]; per
    program point, `live_bytes` sums the live blocks and `high_water` is the highest occupied
    byte. The peak of `high_water` is the temp size the heap simulator needed."""
    blocks = []
    temp_size = 0
    base = 0
    for alloc in allocations:
        if alloc.kind != "temp":
            continue
        for v in alloc.values:
            start, end = live.ranges.get(v.key, (0, live.max_time))
            blocks.append({"name": v.key, "offset": base + v.offset, "size": v.size, "start": start, "end": end,
                           "shape": v.shape, "allocation": alloc.index})
        base += alloc.size
        temp_size += alloc.size
    steps = max(live.max_time, max((b["end"] for b in blocks), default=0))
    live_bytes, high_water = [], []
    for t in range(steps + 1):
        here = [b for b in blocks if b["start"] <= t <= b["end"]]
        live_bytes.append(sum(b["size"] for b in here))
        high_water.append(max((b["offset"] + b["size"] for b in here), default=0))
    peak = max(high_water, default=0)
    peak_at = high_water.index(peak) if high_water else 0
    at_peak = sorted((b for b in blocks if b["start"] <= peak_at <= b["end"]), key=lambda b: -b["size"])
    others = [{"allocation": a.index, "kind": a.kind, "size": a.size,
               "values": [v.key for v in a.values][:8]} for a in allocations if a.kind != "temp"]
    return {"steps": steps, "sequence": live.sequence, "blocks": blocks, "live_bytes": live_bytes,
            "high_water": high_water, "peak_bytes": peak, "peak_at": peak_at,
            "peak_instruction": live.sequence[peak_at] if peak_at < len(live.sequence) else "",
            "live_at_peak": [{"name": b["name"], "size": b["size"], "offset": b["offset"]} for b in at_peak],
            "temp_allocation_bytes": temp_size, "other_allocations": others}


# ---------------------------------------------------------------------------------------------
# Schedule
# ---------------------------------------------------------------------------------------------

def schedule(module: HloText) -> list[dict[str, Any]]:
    """Instruction order per computation of a scheduled module (printed order is the
    sequence when the header says is_scheduled=true); fusion bodies are not scheduled."""
    fused = {i.attrs.get("calls", "").lstrip("%") for i in module.instructions() if i.opcode == "fusion"}
    out = []
    for comp in module.computations:
        if comp.name in fused:
            continue
        out.append({"computation": comp.name, "entry": comp.is_entry,
                    "instructions": [{"name": i.name, "opcode": i.opcode, "line": i.line,
                                      "bytes": shape_bytes(i.shape)} for i in comp.instructions]})
    return out


# ---------------------------------------------------------------------------------------------
# MLIR locations (for the StableHLO source map)
# ---------------------------------------------------------------------------------------------

_LOC_DEF_RE = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")


def mlir_locations(text: str) -> dict[str, list[tuple[str, int]]]:
    """#locN -> frames (file, line), innermost first, resolved through name/callsite/fused."""
    raw = {}
    for line in text.split("\n"):
        m = _LOC_DEF_RE.match(line.strip())
        if m:
            raw[m.group(1)] = m.group(2)
    cache: dict[str, list[tuple[str, int]]] = {}

    def resolve(body: str, depth: int = 0) -> list[tuple[str, int]]:
        if depth > 50:
            return []
        body = body.strip()
        if body.startswith("#loc"):
            ref = re.match(r"#loc\d*", body).group(0)
            if ref not in cache:
                cache[ref] = []
                cache[ref] = resolve(raw.get(ref, ""), depth + 1)
            return cache[ref]
        m = re.match(r'^"((?:\\.|[^"\\])*)":(\d+)(?::\d+)?', body)
        if m:
            return [(m.group(1), int(m.group(2)))]
        m = re.match(r"^callsite\((.*) at (.*)\)$", body)
        if m:
            return resolve(m.group(1), depth + 1) + resolve(m.group(2), depth + 1)
        m = re.match(r'^"(?:\\.|[^"\\])*"\((.*)\)$', body)
        if m:
            return resolve(m.group(1), depth + 1)
        m = re.match(r"^fused(?:<[^>]*>)?\[(.*)\]$", body)
        if m:
            frames = []
            for part in split_top_level(m.group(1)):
                frames += resolve(part, depth + 1)
            return frames
        return []

    return {ref: resolve(ref) for ref in raw}


def mlir_source_map(text: str, user_file: str) -> list[list[int]]:
    """[artifact line, user line] for each op line whose location reaches `user_file`."""
    locs = mlir_locations(text)
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.lstrip().startswith("#loc"):
            continue
        m = re.search(r"loc\((#loc\d*|\"[^\"]*\":\d+[^)]*)\)\s*$", line)
        if not m:
            continue
        ref = m.group(1)
        frames = locs.get(ref, []) if ref.startswith("#") else mlir_locations(f"#x = loc({ref})").get("#x", [])
        for file, src_line in frames:
            if file == user_file:
                pairs.append([number, src_line])
                break
    return pairs


def stack_frames(text: str) -> dict[int, list[tuple[str, int]]]:
    """The module's stack-frame tables (FileNames, FunctionNames, FileLocations, StackFrames,
    printed before the computations) -> frame id -> [(file, line)], innermost frame first."""
    tables: dict[str, dict[int, str]] = {}
    section = None
    for line in text.split("\n"):
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = s
            tables[s] = {}
            continue
        if section is None:
            continue
        m = re.match(r"^(\d+)\s+(.*)$", s)
        if not m:
            if s.startswith("%") or s.startswith("ENTRY") or "{" in s and "=" not in s.split("{")[0]:
                section = None
            continue
        tables[section][int(m.group(1))] = m.group(2)
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    locations = {}
    for k, v in tables.get("FileLocations", {}).items():
        md = parse_metadata(v)
        if md.get("file_name_id", "").isdigit() and md.get("line", "").isdigit():
            locations[k] = (files.get(int(md["file_name_id"]), ""), int(md["line"]))
    frames = {}
    for k, v in tables.get("StackFrames", {}).items():
        md = parse_metadata(v)
        frames[k] = (int(md.get("file_location_id", 0)), int(md.get("parent_frame_id", 0)))
    out: dict[int, list[tuple[str, int]]] = {}
    for k in frames:
        chain, seen, cur = [], set(), k
        while cur in frames and cur not in seen:
            seen.add(cur)
            loc, parent = frames[cur]
            if loc in locations:
                chain.append(locations[loc])
            cur = parent
        out[k] = chain
    return out


def hlo_source_map(module: HloText, user_file: str | None = None,
                   names: dict[str, int] | None = None, text: str | None = None) -> list[list[int]]:
    """[artifact line, user line] for HLO instructions: by the metadata's stack frame (or
    source_file/source_line) when it reaches `user_file` (JAX input; `text` holds the frame
    tables), else by instruction name or metadata op_name defined on a line of the user's HLO
    (`names`: name -> line)."""
    frames = stack_frames(text) if (user_file and text) else {}
    pairs = []
    for ins in module.instructions():
        md = ins.metadata
        line = None
        if user_file and md.get("stack_frame_id", "").isdigit():
            line = next((ln for f, ln in frames.get(int(md["stack_frame_id"]), []) if f == user_file), None)
        if line is None and user_file and md.get("source_file") == user_file and md.get("source_line", "").isdigit():
            line = int(md["source_line"])
        elif line is None and names:
            line = names.get(md.get("op_name", "")) or names.get(ins.name)
        if line:
            pairs.append([ins.line, line])
    return pairs


def mlir_name_map(text: str, names: dict[str, int]) -> list[list[int]]:
    """[artifact line, user line] for op lines whose location is a name defined in the user's
    HLO (hlo_to_stablehlo keeps each instruction's name as a NameLoc)."""
    named = {}
    for line in text.split("\n"):
        m = _LOC_DEF_RE.match(line.strip())
        if m:
            nm = re.match(r'^"((?:\\.|[^"\\])*)"', m.group(2))
            if nm:
                named[m.group(1)] = nm.group(1)
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.lstrip().startswith("#loc"):
            continue
        for ref in re.findall(r'loc\((#loc\d*|"[^"]*")\)', line):
            name = named.get(ref) if ref.startswith("#") else ref.strip('"')
            if name in names:
                pairs.append([number, names[name]])
                break
    return pairs


# ---------------------------------------------------------------------------------------------
# Pass runs from XLA's TraceMe events (HloPassPipeline traces each pipeline and each pass)
# ---------------------------------------------------------------------------------------------

def pass_runs(events: list[list[Any]], module: str) -> list[dict[str, Any]]:
    """Every pass XLA ran on `module`, in order, from profiler events [name, start_ns,
    duration_ns]: a pipeline is an event named `<pipeline> (<module>)`; its passes are the
    events directly inside it (a nested pipeline shows as a pass holding its own pipeline
    event). Invariant checkers are left out."""
    suffix = f" ({module})"
    evs = sorted(((n, int(s), int(d)) for n, s, d in events), key=lambda e: (e[1], -e[2]))
    pipelines = [e for e in evs if e[0].endswith(suffix)]
    runs = []
    for name, start, duration in evs:
        if name.endswith(suffix) or name == "RunInvariantCheckers":
            continue
        end = start + duration
        # The innermost pipeline event containing this one is its pipeline.
        parent = None
        for p in pipelines:
            if p[1] <= start and end <= p[1] + p[2] and (parent is None or p[2] <= parent[2]):
                parent = p
        if parent is None:
            continue
        depth = sum(1 for p in pipelines if p[1] <= start and end <= p[1] + p[2])
        runs.append({"pipeline": parent[0][: -len(suffix)], "pass": name, "start_ns": start,
                     "ms": duration / 1e6, "depth": depth})
    return runs


def match_runs_to_snapshots(runs: list[dict[str, Any]], snapshots: list[SnapshotName]) -> dict[int, int]:
    """Run index -> snapshot seq, for the passes that changed the module (XLA dumps a snapshot
    after each of those). Pipeline names in file names have '_' for ' '."""
    # A snapshot is written when its pass ends, and a pass may hold a whole nested pipeline, so
    # runs are walked in the order they ended.
    order = sorted(range(len(runs)), key=lambda j: (runs[j]["start_ns"] + runs[j]["ms"] * 1e6, -runs[j]["depth"]))
    out: dict[int, int] = {}
    i = 0
    for snap in snapshots:
        if snap.after == "pipeline-start":
            continue
        for k in range(i, len(order)):
            r = runs[order[k]]
            if r["pass"].replace(" ", "_") == snap.after and r["pipeline"].replace(" ", "_") == snap.pipeline:
                out[order[k]] = snap.seq
                i = k + 1
                break
    return out


# XLA CPU's trace names for the compile phases after the HLO passes (cpu_compiler.cc,
# thunk_emitter.cc, fusion_compiler.cc, jit_compiler.cc), summed per name.
CPU_PHASES = ("PjRtCpuClient::Compile", "CpuCompiler::RunBackend", "ThunkEmitter::EmitEntryComputation",
              "FusionCompiler::Compile", "Codegen", "JitCompiler::Compile")


def trace_phases(events: list[list[Any]], module: str) -> dict[str, float]:
    """Milliseconds per compile phase: the outermost HLO pass pipelines together, then the
    backend phases XLA traces."""
    suffix = f" ({module})"
    pipelines = sorted(((int(s), int(s) + int(d)) for n, s, d in events if n.endswith(suffix)))
    outer, reach = 0, -1
    for start, end in pipelines:
        if start >= reach:
            outer += end - start
            reach = end
    out = {"hlo_pass_pipelines": outer / 1e6} if pipelines else {}
    for name in CPU_PHASES:
        total = sum(int(d) for n, _, d in events if n == name)
        if total:
            out[name] = total / 1e6
    return out

"""Shardings, tile assignments and replica groups as XLA prints them (hlo_sharding.cc,
tile_assignment.cc, replica_group.cc), which part of an array each device holds, and the
collectives the SPMD partitioner inserted. Pure functions over text."""
from __future__ import annotations

import math
import re
from typing import Any

from compiler.mlir_text import balanced_end, split_top_level
from compiler.xla.hlo_text import HloText, shape_bytes


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
        close = balanced_end(rest, m2.end() - 1)
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

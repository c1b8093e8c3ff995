"""Sharding data (format "mesh": compiler.formats.Mesh, written by the XLA pipeline) -> HTML with
SVG pictures.

For each parameter and result: the array cut into tiles as XLA's partitioner cuts it, each
tile labelled with the devices that hold it (several when the sharding replicates over part of
the mesh), like jax.debug.visualize_array_sharding; beside it the device mesh, each device in
the colour of the tile it holds. Then the collectives the partitioner
inserted and the sharding of every instruction after propagation.
"""
from __future__ import annotations

from html import escape
from typing import Any

from compiler import formats

_PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
            "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")
MAX_TILES_DRAWN = 256
MAX_TABLE_ROWS = 2000


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def array_svg(array: formats.ShardedArray, width: int = 360, height: int = 200) -> str:
    """One array's tiles: rows = tiles of the leading dimensions, columns = tiles of the last."""
    tiles = array.tiles
    dims = array.dims
    if not tiles:
        return f'<p class="mesh-note">{escape(array.type)}: no tiles to draw</p>'
    if len(tiles) > MAX_TILES_DRAWN:
        return f'<p class="mesh-note">{len(tiles)} tiles: too many to draw; see the sharding text</p>'
    rank = len(dims)
    last = rank - 1

    def row_key(t: formats.Tile) -> tuple:
        return tuple(t.index[:last]) if rank > 1 else ()

    rows = sorted({row_key(t) for t in tiles})
    cols = sorted({t.index[last] for t in tiles}) if rank else [0]
    row_of = {r: i for i, r in enumerate(rows)}
    col_of = {c: i for i, c in enumerate(cols)}
    cw, rh = width / max(len(cols), 1), height / max(len(rows), 1)
    parts = [f'<svg class="mesh-array" xmlns="http://www.w3.org/2000/svg" width="{width + 2}" '
             f'height="{height + 2}" viewBox="-1 -1 {width + 2} {height + 2}" role="img">']
    for k, t in enumerate(tiles):
        r = row_of[row_key(t)]
        c = col_of[t.index[last]] if rank else 0
        devs = t.devices
        colour = _PALETTE[k % len(_PALETTE)]
        x, y = c * cw, r * rh
        ranges = " x ".join(f"{a}:{b}" for a, b in t.ranges)
        label = ",".join(map(str, devs)) if len(devs) <= 8 else f"{len(devs)} devices"
        parts.append(f'<g><title>{escape("devices " + ",".join(map(str, devs)) + "  holds [" + ranges + "]")}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{rh:.1f}" fill="{colour}" '
                     f'stroke="#333" stroke-width="1"/>'
                     f'<text x="{x + cw / 2:.1f}" y="{y + rh / 2:.1f}" text-anchor="middle" dominant-baseline="middle" '
                     f'font-size="{max(8, min(14, int(min(cw, rh) / 4)))}">{escape(label)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def device_svg(array: formats.ShardedArray, devices: int, cell: int = 46) -> str:
    """The device mesh (the tile assignment's shape, size-1 dimensions dropped): each device
    coloured like the tile it holds and labelled with that tile's index ranges."""
    tiles = array.tiles
    tile_of = {}
    for k, t in enumerate(tiles):
        for d in t.devices:
            tile_of[d] = k
    order = array.tile_devices or list(range(devices))
    dims = [d for d in (array.tile_dims or [len(order)]) if d != 1] or [1]
    cols = dims[-1]
    rows = max(len(order) // max(cols, 1), 1)
    if len(order) > MAX_TILES_DRAWN:
        return ""
    w, h = cols * cell, rows * cell
    parts = [f'<svg class="mesh-devices" xmlns="http://www.w3.org/2000/svg" width="{w + 2}" height="{h + 2}" '
             f'viewBox="-1 -1 {w + 2} {h + 2}" role="img">']
    for i, d in enumerate(order):
        r, c = divmod(i, cols)
        k = tile_of.get(d)
        colour = _PALETTE[k % len(_PALETTE)] if k is not None else "#ffffff"
        ranges = " x ".join(f"{a}:{b}" for a, b in tiles[k].ranges) if k is not None else "nothing"
        parts.append(f'<g><title>{escape(f"device {d} holds [{ranges}]")}</title>'
                     f'<rect x="{c * cell}" y="{r * cell}" width="{cell}" height="{cell}" fill="{colour}" '
                     f'stroke="#333"/><text x="{c * cell + cell / 2}" y="{r * cell + cell / 2}" text-anchor="middle" '
                     f'dominant-baseline="middle" font-size="11">d{int(d)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def table(headers: list[str], rows: list[list[str]], cls: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    # Cells are text unless a caller built them as Markup: escape() leaves Markup alone.
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render(text: str, meta: dict[str, Any]) -> str:
    try:
        data: formats.Mesh = formats.get("mesh").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    out = [f'<div class="mesh-view"><p class="mesh-summary">{data.devices} devices, '
           f'{escape(data.partitioner)} partitioner; shardings as of '
           f'<code>{escape(data.from_stage)}</code></p>']
    for array in data.arrays:
        subgroups = array.subgroups
        note = f" (replicated over the last tile dimension: {', '.join(subgroups)})" if subgroups else ""
        out.append(f'<figure class="mesh-figure"><figcaption><b>{escape(array.role)}</b> '
                   f'<code>{escape(array.name)}</code> {escape(array.shape)} '
                   f'<code>{escape(array.sharding)}</code>{escape(note)}</figcaption>'
                   f'<div class="mesh-pair">{array_svg(array)}'
                   f'{device_svg(array, data.devices)}</div></figure>')
    colls = data.collectives
    if colls:
        rows = []
        for c in colls:
            groups = c.groups
            shown = " ".join("{" + ",".join(map(str, g)) + "}" for g in groups[:16])
            if len(groups) > 16:
                shown += f" ... ({len(groups)} groups)"
            rows.append([escape(c.name), escape(c.opcode), escape(c.shape), escape(shown),
                         str(c.group_size), escape(fmt_bytes(c.operand_bytes)),
                         escape(fmt_bytes(c.result_bytes)), escape(fmt_bytes(c.moved_bytes))])
        out.append("<h4>Collectives the partitioner inserted</h4>")
        out.append(table(["instruction", "op", "shape (per device)", "replica groups", "group size", "operand",
                           "result", "sent per device (ring model)"], rows, "mesh-collectives"))
    else:
        out.append('<p class="mesh-note">The partitioned module has no collectives.</p>')
    instrs = data.instructions
    if instrs:
        rows = [[escape(i.computation), escape(i.name), escape(i.opcode), escape(i.shape),
                 f'<code>{escape(i.sharding)}</code>'] for i in instrs[:MAX_TABLE_ROWS]]
        out.append("<h4>Sharding of every instruction after propagation</h4>")
        out.append(table(["computation", "instruction", "op", "shape", "sharding"], rows, "mesh-instructions"))
        if len(instrs) > MAX_TABLE_ROWS:
            out.append(f'<p class="truncated">first {MAX_TABLE_ROWS} of {len(instrs)} instructions</p>')
    out.append("</div>")
    return "".join(out)

"""A schedule (format "timeline": compiler.formats.Schedule, written by the XLA pipeline) -> SVG.

One row per computation, the busiest first (by XLA's cost analysis, then instruction count), one
box per instruction in scheduled order. Box width is one program step; colour says what kind of
work it is (collective, fusion/kernel, data movement, other); a box wide enough is labelled with
the instruction's name, and hovering shows it with XLA's cost estimate. Below the drawing, each of
the busiest computations has a step table: step number, instruction, opcode, kind, bytes, and
XLA's cost analysis (flops, bytes accessed, transcendentals) where the pipeline has one. On XLA:GPU,
where the latency-hiding scheduler's own estimates exist, a second drawing puts each instruction at
its estimated start and end and each async start..done pair on a lane of its own, and a table lists
what was scheduled between each start and its done.
"""
from __future__ import annotations

from html import escape
from typing import Any

from compiler import formats
from viewers.cells import na

MAX_BOXES = 4000
_KINDS = (
    ("collective", "#e15759", ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                               "collective-broadcast", "ragged-all-to-all")),
    ("kernel", "#4e79a7", ("fusion", "custom-call", "dot", "convolution", "reduce", "sort", "scatter", "gather")),
    ("control", "#b07aa1", ("while", "conditional", "call", "async-start", "async-done")),
    ("layout", "#76b7b2", ("copy", "transpose", "bitcast", "reshape", "broadcast", "slice",
                           "dynamic-slice", "dynamic-update-slice", "concatenate", "pad")),
    ("bookkeeping", "#bab0ac", ("parameter", "constant", "tuple", "get-tuple-element", "partition-id",
                                "replica-id", "after-all")),
)


def kind_of(opcode: str) -> tuple[str, str]:
    base = opcode.replace("-start", "").replace("-done", "")
    for name, colour, ops in _KINDS:
        if base in ops or opcode in ops:
            return name, colour
    return "other", "#59a14f"


MAX_TABLE_ROWS = 400  # per computation: the step table lists the first ones and says how many more
MAX_TABLES = 12  # computations with a step table (the busiest first); the rest are drawn only


def busiest_first(comps: list[formats.ScheduledComputation]) -> list[formats.ScheduledComputation]:
    """The computations by the work XLA's cost analysis gives them (flops, then bytes accessed),
    then by instruction count: the one worth reading first comes first."""
    def work(comp: formats.ScheduledComputation) -> tuple[float, float, int]:
        return (sum(i.flops or 0 for i in comp.instructions), sum(i.bytes_accessed or 0 for i in comp.instructions),
                len(comp.instructions))
    return sorted(comps, key=work, reverse=True)


def render(text: str, meta: dict[str, Any], row_h: int = 26) -> str:
    try:
        data: formats.Schedule = formats.get("timeline").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    comps = busiest_first(data.computations)
    total = sum(len(c.instructions) for c in comps)
    scheduled = "" if data.scheduled else '<p class="mesh-note">the module is not scheduled: printed order</p>'
    estimated = "".join(_estimated(c, data.estimates) for c in comps
                        if any(i.start is not None for i in c.instructions))
    pairs = "".join(_pairs_table(c) for c in comps if c.async_pairs)
    drawing = _order_drawing(comps, row_h)
    note = f'<p class="truncated">drew {MAX_BOXES} of {total} instructions</p>' if total > MAX_BOXES else ""
    tables = "".join(_steps_table(c) for c in comps[:MAX_TABLES])
    more = (f'<p class="truncated">step tables for the {MAX_TABLES} busiest of {len(comps)} computations; the '
            "others are drawn above</p>" if len(comps) > MAX_TABLES else "")
    return f'<div class="timeline-view">{scheduled}{estimated}{pairs}{drawing}{note}{tables}{more}</div>'


def _order_drawing(comps: list[formats.ScheduledComputation], row_h: int) -> str:
    """One row per computation (the busiest on top), one box per instruction in scheduled order;
    a box wide enough for its name is labelled with it, every box names it on hover."""
    label_w = 180
    longest = max((len(c.instructions) for c in comps), default=0)
    step_w = max(4, min(90, 620 // max(longest, 1)))  # about the pane's width at 1500 px; else scaled down
    width = label_w + longest * step_w + 20
    height = row_h * len(comps) + 40
    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>scheduled instruction order</title>']
    drawn = 0
    fits = (step_w - 6) // 6  # characters of 10 px text a box can hold
    for r, comp in enumerate(comps):
        y = 10 + r * row_h
        name = comp.computation + (" (ENTRY)" if comp.entry else "")
        parts.append(f'<g><title>{escape(name)}</title><text x="{label_w - 6}" y="{y + row_h / 2:.1f}" '
                     f'text-anchor="end" dominant-baseline="middle" font-size="11">{escape(name[:30])}</text></g>')
        for i, ins in enumerate(comp.instructions):
            if drawn >= MAX_BOXES:
                break
            drawn += 1
            kind, colour = kind_of(ins.opcode)
            tip = f'step {i}: {ins.name} ({ins.opcode}, {kind})'
            if ins.flops is not None:
                tip += f', {ins.flops:,.0f} flops, {ins.bytes_accessed or 0:,.0f} bytes accessed'
            x = label_w + i * step_w
            parts.append(f'<rect x="{x}" y="{y + 3}" width="{step_w - 1}" height="{row_h - 6}" '
                         f'fill="{colour}" data-line="{ins.line}"><title>{escape(tip)}</title></rect>')
            if fits >= 4:  # the box's name, cut to fit; the box says it whole on hover (the label lets it)
                label = ins.name if len(ins.name) <= fits else ins.name[:fits - 1] + "…"
                parts.append(f'<text class="box-label" pointer-events="none" x="{x + 3}" y="{y + row_h / 2:.1f}" '
                             f'dominant-baseline="middle" font-size="10" fill="#fff">{escape(label)}</text>')
    legend_y = height - 14
    x = label_w
    for name, colour, _ in _KINDS + (("other", "#59a14f", ()),):
        parts.append(f'<rect x="{x}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14}" y="{legend_y}" font-size="10">{escape(name)}</text>')
        x += 90
    parts.append("</svg>")
    return "".join(parts)


# an empty cell says what it lacks (viewers/cells.py)
_NO_COST = na("XLA's cost analysis gives no figure for this instruction")
_NO_COMPUTE = na("no compute instruction is scheduled between its start and its done")


def _steps_table(comp: formats.ScheduledComputation) -> str:
    """The computation's instructions by step, named, with XLA's cost analysis where it has one;
    each row links to its line of the module (data-line)."""
    costed = any(i.flops is not None for i in comp.instructions)
    head = "<th>step</th><th>instruction</th><th>opcode</th><th>kind</th><th>bytes</th>" + (
        "<th>flops</th><th>bytes accessed</th><th>transcendentals</th>" if costed else "")
    rows = []
    for step, ins in enumerate(comp.instructions[:MAX_TABLE_ROWS]):
        kind, colour = kind_of(ins.opcode)
        cost = ""
        if costed:
            cost = "".join(f'<td class="num">{_NO_COST if v is None else f"{v:,.0f}"}</td>'
                           for v in (ins.flops, ins.bytes_accessed, ins.transcendentals))
        rows.append(f'<tr data-line="{ins.line}"><td class="num">{step}</td><td><code>{escape(ins.name)}'
                    f'</code></td><td>{escape(ins.opcode)}</td><td><span class="swatch" data-kind="{kind}">'
                    f'{escape(kind)}</span></td><td class="num">{ins.bytes:,}</td>{cost}</tr>')
    more = len(comp.instructions) - MAX_TABLE_ROWS
    tail = f'<p class="truncated">the first {MAX_TABLE_ROWS} of {len(comp.instructions)} steps</p>' if more > 0 else ""
    where = " (ENTRY)" if comp.entry else ""
    costs = ("; flops, bytes accessed and transcendentals are XLA's cost analysis of each instruction" if costed
             else "")
    return (f'<table class="data schedule-steps"><caption>{escape(comp.computation)}{where}: '
            f'{len(comp.instructions)} instructions in scheduled order{escape(costs)}</caption>'
            f'<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>{tail}')


def _estimated(comp: formats.ScheduledComputation, estimates: str, width: int = 820, lane_h: int = 22) -> str:
    """The latency-hiding scheduler's estimated timeline of one computation: compute on one lane,
    each async start..done pair as a bar on a lane of its own, in the cost model's units."""
    timed = [i for i in comp.instructions if i.start is not None and i.end is not None]
    end = max((i.end for i in timed), default=0.0) or 1.0
    pairs = comp.async_pairs
    label_w = 150
    scale = (width - label_w - 20) / end
    height = lane_h * (2 + len(pairs)) + 40
    by_name = {i.name: i for i in timed}
    parts = [f'<svg class="timeline estimated" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img">'
             f'<title>estimated schedule of {escape(comp.computation)}</title>',
             f'<text x="{label_w - 6}" y="{10 + lane_h / 2}" text-anchor="end" dominant-baseline="middle" '
             f'font-size="11">compute</text>']
    for ins in timed[:MAX_BOXES]:
        if ins.opcode.endswith(("-start", "-done")) or ins.end <= ins.start:
            continue
        kind, colour = kind_of(ins.opcode)
        x = label_w + ins.start * scale
        parts.append(f'<rect x="{x:.1f}" y="13" width="{max(1.0, (ins.end - ins.start) * scale):.1f}" '
                     f'height="{lane_h - 6}" fill="{colour}" data-line="{ins.line}"><title>'
                     f'{escape(f"{ins.name} ({ins.opcode}): estimated {ins.start:,.1f} .. {ins.end:,.1f}")}'
                     f'</title></rect>')
    for n, pair in enumerate(pairs):
        y = 10 + lane_h * (n + 1)
        start, done = by_name.get(pair.start), by_name.get(pair.done)
        parts.append(f'<g><title>{escape(pair.start)}</title><text x="{label_w - 6}" y="{y + lane_h / 2}" '
                     f'text-anchor="end" dominant-baseline="middle" font-size="11">{escape(pair.start[:24])}'
                     '</text></g>')
        if start is None or done is None:
            continue
        x0, x1 = label_w + start.start * scale, label_w + done.end * scale
        tip = (f"{pair.start} .. {pair.done}: estimated {start.start:,.1f} .. {done.end:,.1f}; scheduled between: "
               f"{', '.join(pair.compute) or 'no compute'}")
        parts.append(f'<rect class="async" x="{x0:.1f}" y="{y + 3}" width="{max(2.0, x1 - x0):.1f}" '
                     f'height="{lane_h - 6}" fill="{kind_of(pair.opcode)[1]}" fill-opacity="0.55" '
                     f'data-line="{start.line}"><title>{escape(tip)}</title></rect>')
    axis_y = height - 14
    parts.append(f'<text x="{label_w}" y="{axis_y}" font-size="10">0</text>'
                 f'<text x="{width - 20}" y="{axis_y}" text-anchor="end" font-size="10">{end:,.1f}</text>')
    parts.append("</svg>")
    return (f'<p class="mesh-note">{escape(comp.computation)}: {escape(estimates)}</p>' + "".join(parts))


def _pairs_table(comp: formats.ScheduledComputation) -> str:
    rows = []
    for p in comp.async_pairs:
        rows.append(f"<tr><td>{escape(p.opcode)}</td><td>{escape(p.start)}</td><td>{escape(p.done)}</td>"
                    f"<td>{p.done_index - p.start_index - 1}</td>"
                    f"<td>{escape(', '.join(p.compute)) or _NO_COMPUTE}</td></tr>")
    stats = "".join(f"<li>{escape(k)}: {v:,.1f}</li>" for k, v in comp.statistics.items())
    return (f'<table class="async-pairs"><caption>{escape(comp.computation)}: async start/done pairs</caption>'
            f"<tr><th>op</th><th>start</th><th>done</th><th>scheduled between</th><th>compute between</th></tr>"
            f'{"".join(rows)}</table>' + (f'<ul class="scheduler-statistics">{stats}</ul>' if stats else ""))

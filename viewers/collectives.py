"""The collectives of a virtual world's compiled graphs (format "collectives": compiler.formats.
Collectives, written by the pytorch pipeline with `devices` > 1) -> HTML: the interconnect model
stated first, then per graph each collective with its mesh dimension, bytes, estimated time and
the user's line, and the graph's totals against its compute estimate."""
from __future__ import annotations

from html import escape
from typing import Any

from compiler import formats
from viewers.mesh import fmt_bytes, table

MAX_ROWS = 2000


def _us(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1e3:.3f} ms" if value >= 1e3 else f"{value:.2f} µs"


def render(text: str, meta: dict[str, Any]) -> str:
    try:
        data: formats.Collectives = formats.get("collectives").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    comm = data.comm
    out = [f'<div class="collectives-view"><p class="mesh-summary">{data.devices} ranks; '
           f'<b>estimates, not measurements</b>: {escape(comm.interconnect)}, {comm.bandwidth_gbs:g} GB/s per GPU '
           f'one way, {comm.latency_us:g} µs per step ({escape(comm.source)}).</p>'
           f'<p class="mesh-note">{escape(comm.model)}</p>']  # data.note is the stage's note, shown by the page
    if not data.graphs:
        out.append('<p class="mesh-note">No graph was compiled by Inductor.</p>')
    rows_left = MAX_ROWS
    for graph in data.graphs:
        calls = graph.collectives
        total = sum(c.estimate_us for c in calls)
        plural = "s" if len(calls) != 1 else ""
        heading = f"Graph {graph.compile_id} ({graph.graph}): {len(calls)} collective{plural}"
        if graph.before_passes != len(calls):
            heading += f" ({graph.before_passes} before Inductor's post-grad pattern passes)"
        out.append(f"<h4>{escape(heading)}</h4>")
        summary = [f"collectives {_us(total)} estimated"]
        if graph.compute_bytes is not None:
            summary.append(f"compute kernels read and write {fmt_bytes(graph.compute_bytes)} (Inductor's count)")
        if graph.compute_estimate_us is not None:
            exposed = max(total - graph.compute_estimate_us, 0.0)
            summary.append(f"at {comm.memory_bandwidth_gbs:g} GB/s that is {_us(graph.compute_estimate_us)}: "
                           f"even fully overlapped, {_us(exposed)} of communication stays exposed")
        code_calls = graph.output_code_calls
        if graph.output_code_stage:
            bucketed = (f": Inductor merged them into {len(code_calls)} call" + ("s" if len(code_calls) != 1 else "")
                        if len(code_calls) != len(calls) else "")
            summary.append(f"{graph.output_code_stage} calls " + ", ".join(
                f"{c.op} on {c.buffer}{' ' + c.shape if c.shape else ''} at line {c.line}" for c in code_calls[:50])
                + bucketed if code_calls else f"{graph.output_code_stage} calls none")
        out.append(f'<p class="mesh-note">{escape("; ".join(summary))}</p>')
        if not calls:
            continue
        rows = []
        for c in calls[:max(rows_left, 0)]:
            rows.append([c.op, c.mesh_dim or "?", str(c.group_size), c.input + " → " + c.output,
                         fmt_bytes(c.tensor_bytes), fmt_bytes(c.sent_bytes), str(c.steps), _us(c.estimate_us),
                         _us(c.inductor_estimate_us), f"line {c.line}" if c.line else "—",
                         str(c.output_code_line) if c.output_code_line else "—"])
        rows_left -= len(rows)
        out.append(table(["collective", "mesh dim", "group", "tensor (rank 0)", "bytes", "sent per rank", "steps",
                           "estimate (model above)", "Inductor's NCCL model", "your line", "output code line"],
                          rows, "mesh-collectives"))
        if len(rows) < len(calls):
            out.append(f'<p class="truncated">first {len(rows)} of {len(calls)} collectives</p>')
    out.append("</div>")
    return "".join(out)

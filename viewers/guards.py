"""Dynamo's guards of one compiled frame (format "guards": compiler.formats.GuardsExplained, written by
the PyTorch pipeline from its structured trace) -> HTML.

First, for a recompile, why it happened: one row per earlier compile of the frame, with the guard
of that compile that failed, the input it reads, the user line that installed it, what that
compile was specialised on and what the call passed. Then every guard, grouped by kind (tensor
match, type and identity, constant values, global state, shape-environment symbols), with its
check in words and in Dynamo's own code. A user line is a link that puts the editor's cursor there.
"""
from __future__ import annotations

from html import escape
from typing import Any

from compiler import formats
from viewers.cells import breakable, na


def _line(line: int | None) -> str:
    return (f'<a href="#" class="goto-line" data-line="{line}" title="show this line in the editor">line {line}</a>'
            if line else "")


# what an empty cell of the recompile table lacks, said on its dash's hover
_NOT_FOUND = "not found among that compile's guards"
_NO_LINE = "no line of your code: the guard was not found among that compile's guards, or Dynamo printed no line"
_NOT_SAID = "PyTorch's reason does not say"


def _input(g: formats.GuardRecord) -> str:
    if g.input:
        return f"<code>{escape(g.input)}</code>"
    if g.group == "global":
        return na("no input: it checks global state")
    return na("no single input: its check names the values it reads")


def _installed_at(g: formats.GuardRecord) -> str:
    """Where a guard was installed: the user's line (a link), else the file and line Dynamo printed,
    else a dash saying that Dynamo printed no place for it."""
    if g.line or g.where:
        return _line(g.line) or escape(g.where)
    if g.group == "shape":
        return na("Dynamo printed no line for it: the shape environment collected this condition on "
                  "symbolic sizes while tracing")
    return na("Dynamo printed no line for it: it adds this guard itself, not for a line of the code")


def render(text: str, meta: dict[str, Any]) -> str:
    try:
        data: formats.GuardsExplained = formats.get("guards").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    parts = [f'<div class="guards-view" data-compile="{escape(data.compile_id)}">',
             f'<p class="guards-summary">Compile <b>{escape(data.compile_id)}</b>'
             + (f' of <code>{escape(data.frame)}</code>' if data.frame else "")
             + f': {len(data.guards)} guards'
             + (f", checked in {data.latency_us:.1f} µs (Dynamo's measurement)" if data.latency_us is not None else "")
             + ". Each call of the compiled function runs them; a call that fails them all compiles again.</p>"]
    if data.recompile:
        rows = "".join(
            f'<tr class="failed-guard" data-earlier="{escape(f.compile_id)}"><td>{escape(f.compile_id)}</td>'
            f'<td class="meaning">{escape(f.meaning)}</td><td><code>{escape(f.input)}</code></td>'
            f'<td>{breakable(f.kind) or na(_NOT_FOUND)}</td><td>{_line(f.line) or na(_NO_LINE)}</td>'
            f'<td class="before">{escape(f.before) or na(_NOT_SAID)}</td>'
            f'<td class="after">{escape(f.after) or na(_NOT_SAID)}</td>'
            f'<td class="reason"><code>{escape(f.reason.splitlines()[0])}</code></td></tr>' for f in data.recompile)
        parts.append(f'<h3 class="recompile">Why compile {escape(data.compile_id)} happened: the call failed a guard '
                     'of every earlier compile</h3><table class="data recompile-table"><thead><tr>'
                     '<th>earlier compile</th><th>what changed</th><th>input</th><th>failed guard</th>'
                     '<th>installed at</th><th>compiled for</th>'
                     '<th>the call passed</th><th>PyTorch\'s reason</th></tr></thead>'
                     f'<tbody>{rows}</tbody></table>')
    for group, title in data.groups.items():
        members = [g for g in data.guards if g.group == group]
        if not members:
            continue
        rows = "".join(
            f'<tr class="guard" data-kind="{escape(g.kind)}"><td>{_input(g)}</td>'
            f'<td>{escape(g.meaning)}</td><td>{breakable(g.kind)}</td>'
            f'<td>{_installed_at(g)}</td><td class="check"><code>{escape(g.check)}</code>'
            + (f'<br><span class="hint">{escape(g.hint)}</span>' if g.hint else "") + "</td></tr>"
            for g in members)
        parts.append(f'<h3 class="guard-group" data-group="{escape(group)}">{escape(title)} ({len(members)})</h3>'
                     '<table class="data guards-table"><thead><tr><th>input</th><th>checks that</th><th>kind</th>'
                     f'<th>installed at</th><th>Dynamo\'s code</th></tr></thead><tbody>{rows}</tbody></table>')
    if data.source:
        parts.append(f'<p class="note">read from {escape(data.source)}</p>')
    parts.append("</div>")
    return "".join(parts)

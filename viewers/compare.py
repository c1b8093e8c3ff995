"""Two jobs' timings -> one table, side by side: compile phases, run medians and the other numbers
each pipeline measured, with B's value as a multiple of A's where both are numbers."""
from __future__ import annotations

from typing import Any

from markupsafe import escape

from compiler import formats


def _rows(timings: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """(section, name) -> value, in the order the Timings tab shows them."""
    t = formats.Timings.read(timings)
    out: dict[tuple[str, str], Any] = {}
    if t.compile:
        for name, seconds in t.compile.phases_s:
            out[("compile (s)", name)] = seconds
    if t.run:
        for name, value in t.run.values.items():
            if name not in ("where", "what", "statistic"):
                out[("run", name)] = value
    for section, values in t.others.items():
        for name, value in values.items():
            if not isinstance(value, (dict, list)):
                out[(section, name)] = value
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def timings(a: dict[str, Any], b: dict[str, Any]) -> str:
    """A table with one row per measured value of either job; empty markup when neither has any."""
    rows_a, rows_b = _rows(a), _rows(b)
    keys = list(dict.fromkeys([*rows_a, *rows_b]))
    if not keys:
        return ""
    body, section = [], None
    for key in keys:
        if key[0] != section:
            section = key[0]
            body.append(f'<tr class="section"><th colspan="4" scope="rowgroup">{escape(section)}</th></tr>')
        va, vb = rows_a.get(key), rows_b.get(key)
        ratio = f"{vb / va:.2f}×" if _number(va) and _number(vb) and va else ""
        differs = ' class="differs"' if va != vb and not (_number(va) and _number(vb)) else ""
        body.append(f"<tr{differs}><th scope=\"row\">{escape(key[1])}</th><td class=\"num\">{escape(_fmt(va))}</td>"
                    f"<td class=\"num\">{escape(_fmt(vb))}</td><td class=\"num ratio\">{ratio}</td></tr>")
    return ('<table class="data compare-timings"><thead><tr><th scope="col">measured</th><th scope="col">A</th>'
            '<th scope="col">B</th><th scope="col">B / A</th></tr></thead><tbody>' + "".join(body) +
            "</tbody></table>")

"""Every GPU kernel of a job and what it uses (format "resources": compiler.formats.KernelResources,
written by the Triton and PyTorch pipelines from the compilers' own outputs) -> HTML.

One row per compiled kernel (each autotune config its own): warps and stages, the config it was
compiled for, registers per thread, spill stores and loads, stack and local memory, static and
dynamic shared memory, and the theoretical occupancy on its target with what limits it. A kernel
that spills is flagged; a kernel's name opens its metadata stage.
"""
from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from compiler import formats


def _bytes(n: int | None) -> str:
    if n is None:
        return '<span class="na">-</span>'
    return f"{n:,} B" if n < 10 * 1024 else f"{n / 1024:,.1f} KiB"


def _n(n: int | None) -> str:
    return '<span class="na">-</span>' if n is None else f"{n:,}"


def _occupancy(occ: formats.Occupancy | None) -> str:
    if occ is None:
        return '<td class="occupancy na">-</td><td class="limited-by"></td>'
    if occ.waves_per_simd is not None:
        what = f"{occ.waves_per_simd} of {occ.max_waves_per_simd} waves per SIMD"
    else:
        what = f"{occ.blocks_per_sm} blocks, {occ.warps_per_sm} of {occ.max_warps_per_sm} warps per SM"
    percent = escape(str(occ.percent))
    return (f'<td class="occupancy" data-percent="{percent}" title="{escape(occ.model)}">'
            f'<b>{percent} %</b> <span class="what">{escape(what)}</span></td>'
            f'<td class="limited-by">{escape(", ".join(occ.limited_by))}</td>')


def _lines(lines: list[int]) -> str:
    """The user's lines as ranges ("12-19, 23"), sortable by the first."""
    if not lines:
        return '<td class="lines na">-</td>'
    runs: list[list[int]] = []
    for line in lines:
        if runs and line == runs[-1][1] + 1:
            runs[-1][1] = line
        else:
            runs.append([line, line])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return f'<td class="lines" title="lines of your source this kernel\'s code came from">{text}</td>'


_COLUMNS = ("kernel", "source lines", "target", "warps", "stages", "config", "registers / thread", "spill stores",
            "spill loads", "stack", "local", "static shared", "dynamic shared", "occupancy (theoretical)", "limited by")


def render(text: str, meta: dict[str, Any]) -> str:
    try:
        data: formats.KernelResources = formats.get("resources").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    spilling = [k for k in data.kernels if k.spills]
    rows = []
    for k in data.kernels:
        config = ", ".join(f"{name}={value}" for name, value in k.config.items())
        occ = _occupancy(k.occupancy)
        rows.append(
            f'<tr class="kernel{" spills" if k.spills else ""}" data-kernel="{escape(k.kernel)}">'
            f'<td><a href="#stage={quote(k.stage, safe="")}">{escape(k.kernel)}</a>'
            + (' <span class="badge spill-flag" title="ptxas moved registers to local memory">spills</span>'
               if k.spills else "")
            + f'</td>{_lines(k.lines)}<td>{escape(k.target)}</td><td>{_n(k.num_warps)}</td><td>{_n(k.num_stages)}</td>'
            f'<td class="config"><code>{escape(config)}</code></td>'
            f'<td class="registers">{_n(k.registers)}' + (f' <span class="sgprs">({k.sgprs} SGPRs)</span>'
                                                        if k.sgprs is not None else "") + '</td>'
            f'<td class="spill-stores">{_bytes(k.spill_stores_bytes)}</td>'
            f'<td class="spill-loads">{_bytes(k.spill_loads_bytes)}</td>'
            f'<td>{_bytes(k.stack_bytes)}</td><td>{_bytes(k.local_bytes)}</td>'
            f'<td>{_bytes(k.static_shared_bytes)}</td><td>{_bytes(k.dynamic_shared_bytes)}</td>{occ}</tr>')
    models = sorted({k.occupancy.model for k in data.kernels if k.occupancy is not None})
    sources = sorted({k.source for k in data.kernels if k.source})
    # kernels told apart from their configs: `name.N` is the kernel `name`'s config N (from 0)
    names = {formats.kernel_of(k.kernel) for k in data.kernels}
    configs = "" if len(names) == len(data.kernels) else (
        f" in {len(data.kernels)} compiled configs (<code>.N</code> after a name is that kernel's config N, "
        "counted from 0, one per autotuning candidate or specialisation)")
    summary = (f'{len(names)} kernel{"" if len(names) == 1 else "s"}{configs}'
               + (f", <b>{len(spilling)} spill</b>: " + ", ".join(escape(k.kernel) for k in spilling)
                  if spilling else ", none spills") + ".")
    return ('<div class="resources-view">'
            f'<p class="resources-summary">{summary}'
            + (f" {escape(data.note)}." if data.note else "") + "</p>"
            '<div class="table-scroll"><table class="data resources-table sortable"><thead><tr>'
            + "".join(f'<th><button type="button" class="sort" title="sort by {h}">{h}</button></th>' for h in _COLUMNS)
            + '</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            + "".join(f'<p class="model">Occupancy: {escape(m)}.</p>' for m in models)
            + "".join(f'<p class="source">Numbers from: {escape(s)}.</p>' for s in sources)
            + "</div>")

"""Every GPU kernel of a job and what it uses (format "resources": compiler.formats.KernelResources,
written by the Triton and PyTorch pipelines from the compilers' own outputs) -> HTML.

One row per compiled kernel (each autotune config its own): the lines of the user's source it came
from, warps and stages, the config it was compiled for, registers per thread, spill stores and
loads, stack and local memory, shared memory (static and dynamic, summed), and the theoretical
occupancy on its target with what limits it; for Inductor's kernels, the bytes Inductor's scheduler
estimates each reads and writes (a column only where some row has that estimate). Headers are short
(each says the rest on hover) and every figure stays on one line, so the table fits its pane; the
target is said once above the table when every kernel has the same. A kernel that spills is
flagged; a kernel's name opens its metadata stage. Inductor's kernels for the host CPU (a CPU job's
C++ kernels) are a table of their own: each kernel and its lines, since the GPU figures do not apply.
"""
from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from compiler import formats
from compiler.formats import binary_size
from viewers import cells


def _na(why: str = "not reported") -> str:
    return cells.na(why)


def _bytes(n: int | None) -> str:
    return _na() if n is None else binary_size(n)


def _n(n: int | None) -> str:
    return _na() if n is None else f"{n:,}"


def _spills(k: formats.KernelResource) -> str:
    """Spill stores and loads in one cell: "0 B" when neither, else "stores / loads"."""
    stores, loads = k.spill_stores_bytes, k.spill_loads_bytes
    if stores is None and loads is None:
        return f'<td class="num spill-bytes">{_na()}</td>'
    total = (stores or 0) + (loads or 0)
    text = _bytes(0) if not total else f"{_bytes(stores)} / {_bytes(loads)}"
    return (f'<td class="num spill-bytes" data-sort="{total}" title="spill stores / spill loads, bytes '
            f'(ptxas -v)">{text}</td>')


def _shared(k: formats.KernelResource) -> str:
    """Static shared memory (the cubin's) and the dynamic shared memory of a launch, one cell: their
    sum, each part in the cell's hover text."""
    static, dynamic = k.static_shared_bytes, k.dynamic_shared_bytes
    if static is None and dynamic is None:
        return f'<td class="num shared">{_na()}</td>'
    total = (static or 0) + (dynamic or 0)
    parts = f"static {_bytes(static)} (the cubin's) + dynamic {_bytes(dynamic)} (asked for at launch)"
    return f'<td class="num shared" data-sort="{total}" title="{escape(parts)}">{_bytes(total)}</td>'


def _occupancy(occ: formats.Occupancy | None) -> str:
    """The theoretical occupancy on one line, with what limits it below 100 %; the blocks and warps
    behind it and the model in the cell's hover text."""
    if occ is None:
        return f'<td class="occupancy num">{_na("no occupancy estimate for this kernel")}</td>'
    if occ.waves_per_simd is not None:
        what = f"{occ.waves_per_simd} of {occ.max_waves_per_simd} waves per SIMD"
    else:
        what = f"{occ.blocks_per_sm} blocks, {occ.warps_per_sm} of {occ.max_warps_per_sm} warps per SM"
    limit = ", ".join(occ.limited_by)
    title = f"{what}" + (f"; limited by {limit}" if limit else "") + f". {occ.model}"
    short = ", ".join(_SHORT_LIMITS.get(x, x) for x in occ.limited_by) if occ.percent < 100 else ""
    percent = escape(str(occ.percent))
    return (f'<td class="occupancy" data-percent="{percent}" title="{escape(title)}">'
            f'<b>{percent} %</b>' + (f' <span class="what">{escape(short)}</span>' if short else "") + '</td>')


# what limits an occupancy, as the occupancy cell says it (its hover text says it whole)
_SHORT_LIMITS = {"registers": "regs", "shared memory": "smem"}


def _estimate(n: int | None) -> str:
    """Inductor's estimate of the bytes a kernel reads and writes, sortable by the bytes."""
    if n is None:
        return f'<td class="num estimated-bytes">{_na("Inductor gave no estimate of its own for this kernel")}</td>'
    return (f'<td class="num estimated-bytes" data-sort="{n}" title="{n:,} bytes read and written, '
            f'Inductor\'s scheduler estimate (not a measurement)">{binary_size(n)}</td>')


def _lines(lines: list[int]) -> str:
    """The user's lines as ranges ("12-19, 23"), sortable by the first."""
    if not lines:
        return ('<td class="lines na" title="the compiler\'s output names no line of your source for this '
                'kernel">not traced</td>')
    runs: list[list[int]] = []
    for line in lines:
        if runs and line == runs[-1][1] + 1:
            runs[-1][1] = line
        else:
            runs.append([line, line])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return f'<td class="lines" title="lines of your source this kernel\'s code came from">{text}</td>'


def _stages(k: formats.KernelResource) -> str:
    """Software-pipelining stages, or a dash saying why there are none (`why_empty`)."""
    return _na(k.why_empty.get("stages", "not reported")) if k.num_stages is None else f"{k.num_stages:,}"


_NO_CONFIG = "no config recorded: the kernel was compiled with no constexpr or autotune setting"


def _config(k: formats.KernelResource) -> str:
    """The config it was compiled for as `name=value`s, or a dash saying why there is none."""
    if not k.config:
        return f'<td class="config">{_na(k.why_empty.get("config", _NO_CONFIG))}</td>'
    config = ", ".join(f"{name}={value}" for name, value in k.config.items())
    return f'<td class="config"><code>{escape(config)}</code></td>'


# (header, its hover text): short headers, so the table fits its pane
_COLUMNS = (("kernel", "the kernel, .N its config N; its name opens its metadata"),
            ("lines", "lines of your source the kernel's code came from"),
            ("target", "the device it was compiled for"),
            ("warps", "warps per block"), ("stages", "software-pipelining stages"),
            ("config", "the constexprs it was compiled for (block sizes, ...)"),
            ("regs", "registers per thread"), ("spills", "spill stores / spill loads, bytes (ptxas -v)"),
            ("stack", "the stack frame ptxas reports"), ("local", "local memory per thread (the cubin's LOCAL)"),
            ("shared", "shared memory per block: static (the cubin's) + dynamic (asked for at launch)"),
            ("occupancy", "theoretical occupancy on the target, and what limits it"))
# Inductor's kernels only: the column is left out of a table where no row has its figure
_ESTIMATE_COLUMN = ("traffic", "the bytes the kernel reads and writes as Inductor's scheduler estimates them "
                               "(get_read_write_buffers_sizes): an estimate, not a measurement")


_NUMERIC = {"warps", "stages", "regs", "spills", "stack", "local", "shared", _ESTIMATE_COLUMN[0]}


def _header(name: str, help_: str) -> str:
    """A column's header: a button that sorts by it, its meaning in the hover text."""
    cls = ' class="num"' if name in _NUMERIC else ""
    return (f'<th{cls} title="{escape(help_)}"><button type="button" class="sort" '
            f'title="sort by {escape(name)}: {escape(help_)}">{escape(name)}</button></th>')


def _sentence(text: str) -> str:
    """A note as a sentence of its own: capitalised, ending with a full stop."""
    text = text.strip().rstrip(".")
    return (text[:1].upper() + text[1:] + ".") if text else ""


def _host_table(data: formats.KernelResources) -> str:
    """Inductor's kernels for the host CPU: each kernel and the lines it came from. Registers,
    spills, shared memory and occupancy are a GPU kernel's figures: the table has no such column."""
    rows = "".join(f'<tr class="kernel" data-kernel="{escape(k.kernel)}"><td><a href="#stage='
                   f'{quote(k.stage, safe="")}">{cells.breakable(k.kernel)}</a></td>{_lines(k.lines)}</tr>'
                   for k in data.kernels)
    n = len(data.kernels)
    columns = (("kernel", "the kernel; its name opens its code"), _COLUMNS[1])
    return ('<div class="resources-view">'
            f'<p class="resources-summary">{n} kernel{"" if n == 1 else "s"}, compiled for the host CPU: '
            "the C++ kernels Inductor wrote in its output code. Registers, spills, shared memory and occupancy "
            "are GPU figures; a GPU target's job shows them here.</p>"
            '<div class="table-scroll"><table class="data resources-table sortable"><thead><tr>'
            + "".join(_header(h, help_) for h, help_ in columns)
            + f'</tr></thead><tbody>{rows}</tbody></table></div></div>')


def render(text: str, meta: dict[str, Any]) -> str:
    try:
        data: formats.KernelResources = formats.get("resources").decode(text)
    except formats.FormatError:
        return f'<pre class="code">{escape(text)}</pre>'
    if data.kernels and all(k.target == "cpu" for k in data.kernels):
        return _host_table(data)
    spilling = [k for k in data.kernels if k.spills]
    targets = list(dict.fromkeys(k.target for k in data.kernels))
    one_target = len(targets) == 1  # the target said once, above the table, instead of in every row
    estimated = any(k.estimated_bytes is not None for k in data.kernels)  # Inductor's kernels
    rows = []
    # each kernel's configs under it (k_0.0, k_0.1, k_1.0): not in the order they were compiled
    order = {q: n for n, q in enumerate(formats.configs_under_kernels([k.kernel for k in data.kernels]))}
    for k in sorted(data.kernels, key=lambda k: order[k.kernel]):
        rows.append(
            f'<tr class="kernel{" spills" if k.spills else ""}" data-kernel="{escape(k.kernel)}">'
            f'<td><a href="#stage={quote(k.stage, safe="")}">{cells.breakable(k.kernel)}</a>'
            + (' <span class="badge spill-flag" title="ptxas moved registers to local memory">spills</span>'
               if k.spills else "")
            + f'</td>{_lines(k.lines)}' + ("" if one_target else f'<td>{escape(k.target)}</td>')
            + f'<td class="num">{_n(k.num_warps)}</td><td class="num">{_stages(k)}</td>{_config(k)}'
            f'<td class="num registers">{_n(k.registers)}' + (f' <span class="sgprs">({k.sgprs} SGPRs)</span>'
                                                            if k.sgprs is not None else "") + '</td>'
            f'{_spills(k)}<td class="num">{_bytes(k.stack_bytes)}</td><td class="num">{_bytes(k.local_bytes)}</td>'
            f'{_shared(k)}{_occupancy(k.occupancy)}' + (_estimate(k.estimated_bytes) if estimated else "")
            + '</tr>')
    models = sorted({k.occupancy.model for k in data.kernels if k.occupancy is not None})
    sources = sorted({k.source for k in data.kernels if k.source})
    # kernels told apart from their configs: `name.N` is the kernel `name`'s config N (from 0)
    names = {formats.kernel_of(k.kernel) for k in data.kernels}
    configs = "" if len(names) == len(data.kernels) else (
        f" in {len(data.kernels)} compiled configs (<code>.N</code> after a name is that kernel's config N, "
        "counted from 0, one per autotuning candidate or specialisation)")
    where = f", compiled for <code>{escape(targets[0])}</code>" if one_target and targets else ""
    if spilling:
        spills = (f' <b>{len(spilling)} of {len(data.kernels)} spill{"s" if len(spilling) == 1 else ""}</b> '
                  "registers to local memory: " + ", ".join(escape(k.kernel) for k in spilling) + ".")
    else:
        spills = " No kernel spills registers to local memory."
    summary = f'{len(names)} kernel{"" if len(names) == 1 else "s"}{configs}{where}.' + spills
    columns = [c for c in _COLUMNS if not (one_target and c[0] == "target")]
    columns += [_ESTIMATE_COLUMN] if estimated else []
    return ('<div class="resources-view">'
            f'<p class="resources-summary">{summary}'
            + (f" {escape(_sentence(data.note))}" if data.note else "") + "</p>"
            '<div class="table-scroll"><table class="data resources-table sortable"><thead><tr>'
            + "".join(_header(h, help_) for h, help_ in columns)
            + '</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            + "".join(f'<p class="model">Occupancy: {escape(m)}.</p>' for m in models)
            + "".join(f'<p class="source">Numbers from: {escape(s)}.</p>' for s in sources)
            + "</div>")

"""Source text -> highlighted HTML, one element per line, with line numbers and source-map colours.

Each line is `<span class="ln" data-line="N" data-src="M">` where M is the user's source line the
artifact line came from (absent when unknown); the page's script tints and links lines by it. IR
stages also carry `data-locs`: the compiler's own location chains of the line (stage meta
`ir_locations`, compiler/formats/ir_links.py), by which static/ir-links.js links lines of two IR stages.
In an artifact with a source map, each line also shows M beside its number (`.src-ref`).
"""
from __future__ import annotations

import re
from html import escape  # re-exported for viewers that label code

from pygments import format as pygments_format
from pygments import lex
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Error, Text
from pygments.util import ClassNotFound

from compiler import formats
from viewers import compile_ids, isa
from viewers.lexers import HloLexer, MlirLexer

_CUSTOM = {"mlir": MlirLexer, "hlo": HloLexer}
_FORMATTER = HtmlFormatter(nowrap=True)


def lexer_for(name: str) -> Lexer:
    if name in _CUSTOM:
        return _CUSTOM[name](stripnl=False, ensurenl=False)
    try:
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=False)


def highlighted_lines(text: str, lexer_name: str, instructions: str | None = None) -> list[str]:
    """The text as a list of HTML fragments, one per line, highlighted by pygments. With
    `instructions` ("ptx" or "sass"), each line's opcode is a link to its reference with a one-line
    description (viewers/isa.py)."""
    lines: list[list[tuple]] = [[]]
    for token, value in lex(text, lexer_for(lexer_name)):
        # what a lexer cannot read (PTX's `@%p2` predicate, nvdisasm's `@"ET_EXEC"`) is the limit of
        # its rules, not an error in the compiler's text: plain text, never pygments' red box
        token = Text if token in Error else token
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append((token, part))
    if len(lines) > 1 and not lines[-1] and text.endswith("\n"):
        lines.pop()
    if instructions is None:
        return [pygments_format(tokens, _FORMATTER).rstrip("\n") for tokens in lines]
    return [_with_instruction_help(tokens, instructions) for tokens in lines]


def _with_instruction_help(tokens: list[tuple], dialect: str) -> str:
    """A line's markup with its opcode wrapped in `<a class="isa-op" title=... href=...>`."""
    line = "".join(value for _, value in tokens)
    found = isa.opcode(line, dialect)
    help_ = isa.describe(found[2], dialect) if found else None
    if found is None or help_ is None:
        return pygments_format(tokens, _FORMATTER).rstrip("\n")
    start, end, mnemonic = found
    parts: list[list[tuple]] = [[], [], []]  # before, the opcode, after
    at = 0
    for token, value in tokens:
        for cut_from, cut_to, part in ((0, start, 0), (start, end, 1), (end, len(line), 2)):
            lo, hi = max(at, cut_from), min(at + len(value), cut_to)
            if lo < hi:
                parts[part].append((token, value[lo - at:hi - at]))
        at += len(value)
    text, url = help_
    html = [pygments_format(p, _FORMATTER).rstrip("\n") if p else "" for p in parts]
    return (f'{html[0]}<a class="isa-op" href="{escape(url)}" target="_blank" rel="noopener noreferrer" '
            f'title="{escape(mnemonic)}: {escape(text)}">{html[1]}</a>{html[2]}')


def _locations(value: object) -> tuple[dict[int, list[str]], str]:
    """Line -> location chains, and the files they name (for the pane's title), from a stage's
    `ir_locations` meta; nothing when it is absent or malformed (the job wrote it)."""
    if not value:
        return {}, ""
    try:
        record = formats.check_ir_locations(value)
    except formats.FormatError:
        return {}, ""
    return record.by_line(), " ".join(f"{k}={p}" for k, p in sorted(record.files.items()))


def _links_summary(located: int, links: object) -> str:
    """One line, as the pane's other notices (templates/_artifact.html): how many lines carry a
    compiler location and how many of them link to each earlier stage (stage meta `ir_links`,
    counted in the worker); how to use the links folded under it."""
    parts = []
    for link in links if isinstance(links, list) else []:
        if isinstance(link, dict) and all(isinstance(link.get(k), int) for k in ("linked_lines", "located_lines")):
            share = 100.0 * link["linked_lines"] / link["located_lines"] if link["located_lines"] else 0.0
            parts.append(f'<span class="ir-link" data-stage="{escape(str(link.get("stage", "")))}">'
                         f'{escape(str(link.get("title", "")))}: {link["linked_lines"]} ({share:.0f}%)</span>')
    reach = f"; of them, lines linked to a line of {', '.join(parts)}" if parts else ""
    return (f'<details class="ir-links-summary"><summary>{located} lines carry the compiler\'s location{reach}.'
            '</summary>Hover a line to light the lines it came from or became in the stages open beside.</details>')


def _source_ref(sources: list[int] | None) -> str:
    """The source line a linked line came from, as text beside its number (links are not shown by
    colour alone), read out as "from source line N"; an empty column on lines without one."""
    if not sources:
        return '<span class="src-ref"></span>'
    names = ", ".join(map(str, sources))
    return (f'<span class="src-ref" title="from source line{"s" if len(sources) > 1 else ""} {names}">'
            f'<span class="sr-only">from source line </span>{sources[0]}</span>')


# The stack-frame tables XLA prints between `HloModule` and the first computation (each table a
# header line, then numbered entries): the files, functions and frames that each instruction's
# `stack_frame_id=N` refers to. A viewer folds them: dozens of lines of paths before any HLO.
_HLO_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_HLO_TABLE_ENTRY = re.compile(r"^\d+ ")


def hlo_metadata_lines(lines: list[str]) -> tuple[int, int] | None:
    """(first, last) index (0-based, inclusive) of the stack-frame tables of an HLO module's text,
    from the first table's header to the last table's last entry; None where there are none (a
    module without them, or a page of a long module past its head)."""
    first = last = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if first is None:
            if stripped in _HLO_TABLES:
                first = last = i
            elif stripped and not stripped.startswith("HloModule"):
                return None  # an instruction or computation before any table: none at the head
            continue
        if stripped in _HLO_TABLES or _HLO_TABLE_ENTRY.match(stripped):
            last = i
        elif stripped:
            break
    return (first, last) if first is not None else None


def _fold(rows: list[str], first: int, last: int, first_line: int, lines: list[str]) -> list[str]:
    """rows[first..last] inside a closed <details>: the lines stay in the page (and in the raw
    text), one click away."""
    tables = [t for t in _HLO_TABLES if any(line.strip() == t for line in lines[first:last + 1])]
    count = last - first + 1
    summary = (f'<summary class="fold-summary">lines {first + first_line}–{last + first_line} ({count} lines, '
               f'folded): XLA\'s stack-frame tables ({", ".join(tables)}), the files and functions each '
               'instruction\'s stack_frame_id names</summary>')
    return [*rows[:first], f'<details class="fold hlo-metadata">{summary}{"".join(rows[first:last + 1])}</details>',
            *rows[last + 1:]]


def render(text: str, lexer_name: str = "text", source_map: list[list[int]] | None = None,
           max_lines: int = 20000, ir_locations: object = None, ir_links: object = None,
           first_line: int = 1, instructions: str | None = None) -> str:
    """Highlighted, numbered lines. `source_map` pairs (artifact line, source line), 1-based; an
    artifact line may map to several source lines, the first one colours it. `ir_locations` (stage
    meta) gives each line its location chains (`data-locs`); `ir_links` how many of them reach
    each earlier stage. `first_line` is the number of the text's first line (a page of a longer
    stage). `instructions` ("ptx", "sass") links each line's opcode to its description."""
    locations, files = _locations(ir_locations)
    by_line: dict[int, list[int]] = {}
    for artifact_line, source_line in source_map or []:
        by_line.setdefault(int(artifact_line), []).append(int(source_line))
    all_lines = text.split("\n")
    truncated = len(all_lines) > max_lines
    shown = "\n".join(all_lines[:max_lines]) if truncated else text
    rows = []
    for number, html in enumerate(highlighted_lines(shown, lexer_name, instructions), start=first_line):
        if lexer_name == "text":  # an index or log naming Dynamo's compile ids: each explained on hover
            html = compile_ids.mark(html)
        sources = by_line.get(number)
        attrs = f' data-src="{sources[0]}" data-srcs="{" ".join(map(str, sources))}"' if sources else ""
        if number in locations:
            attrs += f' data-locs="{escape(" ".join(locations[number]))}"'
        rows.append(f'<span class="ln" data-line="{number}"{attrs}><span class="no">{number}</span>'
                    f'{_source_ref(sources) if by_line else ""}<span class="tx">{html}</span></span>')
    folded = hlo_metadata_lines(all_lines[:len(rows)]) if lexer_name == "hlo" else None
    if folded:
        rows = _fold(rows, *folded, first_line, all_lines)
    note = (f'<p class="truncated">showing the first {max_lines} of {len(all_lines)} lines; '
            f'the raw text has all of them</p>') if truncated else ""
    located = f' data-ir-files="{escape(files)}"' if locations else ""
    summary = _links_summary(len(locations), ir_links) if locations else ""
    return (f'{summary}<pre class="code highlight" data-lexer="{escape(lexer_name)}"{located}>{"".join(rows)}</pre>'
            f'{note}')

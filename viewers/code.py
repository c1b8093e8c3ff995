"""Source text -> highlighted HTML, one element per line, with line numbers and source-map colours.

Each line is `<span class="ln" data-line="N" data-src="M">` where M is the user's source line the
artifact line came from (absent when unknown); the page's script tints and links lines by it.
"""
from __future__ import annotations

from html import escape  # re-exported for viewers that label code

from pygments import format as pygments_format, lex
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

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


def highlighted_lines(text: str, lexer_name: str) -> list[str]:
    """The text as a list of HTML fragments, one per line, highlighted by pygments."""
    lines: list[list[tuple]] = [[]]
    for token, value in lex(text, lexer_for(lexer_name)):
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append((token, part))
    if len(lines) > 1 and not lines[-1] and text.endswith("\n"):
        lines.pop()
    return [pygments_format(tokens, _FORMATTER).rstrip("\n") for tokens in lines]


def render(text: str, lexer_name: str = "text", source_map: list[list[int]] | None = None,
           max_lines: int = 20000, first_line: int = 1) -> str:
    """Highlighted, numbered lines. `source_map` pairs (artifact line, source line), 1-based; an
    artifact line may map to several source lines, the first one colours it. `first_line` is the
    number of the text's first line (a page of a longer stage)."""
    by_line: dict[int, list[int]] = {}
    for artifact_line, source_line in source_map or []:
        by_line.setdefault(int(artifact_line), []).append(int(source_line))
    all_lines = text.split("\n")
    truncated = len(all_lines) > max_lines
    shown = "\n".join(all_lines[:max_lines]) if truncated else text
    rows = []
    for number, html in enumerate(highlighted_lines(shown, lexer_name), start=first_line):
        sources = by_line.get(number)
        attrs = f' data-src="{sources[0]}" data-srcs="{" ".join(map(str, sources))}"' if sources else ""
        rows.append(f'<span class="ln" data-line="{number}"{attrs}><span class="no">{number}</span>'
                    f'<span class="tx">{html}</span></span>')
    note = (f'<p class="truncated">showing the first {max_lines} of {len(all_lines)} lines; '
            f'the raw text has all of them</p>') if truncated else ""
    return f'<pre class="code highlight" data-lexer="{escape(lexer_name)}">{"".join(rows)}</pre>{note}'

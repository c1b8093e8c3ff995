"""Dynamo's compile ids as PyTorch names them (`[frame/compile]`, `[frame/compile_attempt]` when
Dynamo restarted its analysis) in words, for hover text wherever one is shown: a stage's tab, its
entry in a list, its title above the pane, and each id in a stage's text (the Compiles index)."""
from __future__ import annotations

import re
from html import escape

COMPILE_ID = re.compile(r"\[(\d+)/(\d+)(?:_(\d+))?\]")
# an id in words, as the graph-break and recompile stages write them: "(compile 0/0_1)"
_NAMED_ID = re.compile(r"(?<=\bcompile )(\d+)/(\d+)(?:_(\d+))?\b")


def _words(m: re.Match) -> str:
    frame, compile_, attempt = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    cid = f"{frame}/{compile_}" + (f"_{attempt}" if m.group(3) else "")
    return (f"compile id {cid}: frame {frame}, compile {compile_}, attempt {attempt}. "
            f"Frame {frame} is a function Dynamo compiled (numbered from 0 in the order it met them); "
            + ("compile 0 is its first compile" if compile_ == 0 else
               f"compile {compile_} is recompile {compile_} of it (a guard failed)")
            + ("; attempt 0 is Dynamo's first analysis of it." if attempt == 0 else
               f"; attempt {attempt}: Dynamo restarted its analysis {'once' if attempt == 1 else f'{attempt} times'}."))


def explain(text: str) -> str:
    """What the first compile id in `text` (a stage's title) means, in words; "" without one."""
    m = COMPILE_ID.search(text)
    return _words(m) if m else ""


def mark(html: str) -> str:
    """One line of a stage's markup with each compile id in it (`[0/0_1]`, or `compile 0/0_1` in
    words) wrapped in `<abbr class="compile-id">` whose title says what it means (the line's text
    is unchanged)."""
    if "/" not in html:
        return html
    for pattern in (COMPILE_ID, _NAMED_ID):
        html = pattern.sub(lambda m: f'<abbr class="compile-id" title="{escape(_words(m))}">{m.group(0)}</abbr>', html)
    return html

"""Table cells, one helper for every viewer's tables: a cell with nothing to show says so, and a
long identifier may wrap.

A cell the data leaves empty is a muted dash whose hover says, in words, what is missing and why
(resources' "not reported", a guard Dynamo placed nowhere, an instruction XLA's cost analysis has
no figure for), never a blank a reader must guess at.
"""
from __future__ import annotations

from html import escape


def na(why: str = "not reported") -> str:
    """The markup of an empty cell's content: a dash, `why` on hover."""
    return f'<span class="na" title="{escape(why)}">-</span>'


def breakable(name: str) -> str:
    """An identifier, escaped, free to wrap after each underscore in a narrow pane (a kernel's
    `triton_per_fused_` / `native_layer_norm_0.0`, a guard's DIMENSION_DYNAMIC_MARKING_GUARD)
    rather than inside a word."""
    return escape(name).replace("_", "_<wbr>")

"""Two artifact texts -> a highlighted unified diff (difflib, shown with pygments' diff lexer)."""
from __future__ import annotations

import difflib

from viewers import code


def unified(before: str, after: str, before_name: str, after_name: str, context: int = 3) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), fromfile=before_name,
                                 tofile=after_name, lineterm="", n=context)
    return "\n".join(lines)


def render(before: str, after: str, before_name: str, after_name: str) -> str:
    text = unified(before, after, before_name, after_name)
    if not text:
        return f'<p class="note">{code.escape(before_name)} and {code.escape(after_name)} are identical.</p>'
    return code.render(text, "diff")

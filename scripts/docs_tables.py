"""Write the documents' generated tables from the code, each between its marker comments
(`<!-- name:start -->` and `<!-- name:end -->`): docs/settings.md's settings table (service/settings.py)
and docs/languages.md's table of languages (compiler/registry.py, the only list of languages).

    .venv/bin/python scripts/docs_tables.py          # rewrite the tables
    .venv/bin/python scripts/docs_tables.py --check  # exit 1 when a table is stale

tests/test_settings.py and tests/test_docs.py fail when a committed table differs from what this
writes (a setting, a language or an option changed: run the script and commit the result).
"""
from __future__ import annotations

import os
import sys
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's code, not another the environment installed

from compiler import registry  # noqa: E402
from service import settings  # noqa: E402

# file -> (marker name, the table's text)
TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "docs/settings.md": ("settings", settings.markdown_table),
    "docs/languages.md": ("languages", registry.markdown_table),
}


def with_table(text: str, name: str, table: str) -> str:
    """`text` with the table between its `name` markers replaced by `table`."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    return f"{head}{start}\n{table}\n{end}{tail}"


def main(argv: list[str]) -> int:
    stale = []
    for name, (marker, table) in TABLES.items():
        path = os.path.join(ROOT, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = with_table(text, marker, table())
        if new == text:
            continue
        stale.append(name)
        if "--check" not in argv:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    if stale:
        print(("stale: " if "--check" in argv else "rewrote: ") + ", ".join(stale))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""XLA's error messages -> what the user needs: the line of their input an error points at, and the
message of a process XLA aborted (a failed CHECK)."""
from __future__ import annotations

import re

from compiler.xla.hlo_text import parse_hlo_text


def hlo_error_line(message: str, names: dict[str, int] | None = None) -> int | None:
    """The user's line an XLA error points at: the parser's `was parsing L:C`, else the line
    defining the first instruction the message names."""
    m = re.search(r"was parsing (\d+):(\d+)", message)
    if m:
        return int(m.group(1))
    m = (re.search(r"loc\(\"[^\"]*\":(\d+):\d+\)", message) or re.search(r"<stdin>:(\d+):\d+", message)
         or re.search(r"(?:^|\s)-:(\d+):\d+: error", message))  # MLIR text is parsed as file "-"
    if m:
        return int(m.group(1))
    if names:
        # Best evidence first: the original name XLA keeps in metadata, then the instruction it
        # prints (renamed `x` -> `x.1` on import), then any word that is an instruction name.
        for name in re.findall(r'op_name=\\?"([^"\\]+)', message):
            if name in names:
                return names[name]
        for token in re.findall(r"%([\w.\-]+)", message):
            for candidate in (token, re.sub(r"\.\d+$", "", token)):
                if candidate in names:
                    return names[candidate]
        for token in re.findall(r"[\w.\-]+", message):
            if token in names:
                return names[token]
    return None


def input_names(hlo_source: str) -> dict[str, int]:
    """Instruction name -> 1-based line of the user's HLO that defines it."""
    return {i.name: i.line for i in parse_hlo_text(hlo_source).instructions()}


def fatal_message(stderr: str) -> str | None:
    """XLA's message from an aborted process: the FATAL log line (a failed CHECK) and what
    follows it, without the stack trace."""
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^F\d{4} ", line) or "Check failed" in line:
            message = re.sub(r"^F\d{4} [\d:.]+\s+\d+\s+", "", line)
            tail = []
            for extra in lines[i + 1: i + 6]:
                if extra.startswith("*** ") or "Check failure stack trace" in extra or extra.startswith("    @"):
                    break
                tail.append(extra)
            return "\n".join([message] + tail).strip()
    return None

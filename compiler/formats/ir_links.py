"""IR-to-IR links: per artifact line, the compiler's own locations (a stage's meta, not a format),
checked on write, and whether two lines of two stages are linked (the same location chain)."""
from __future__ import annotations

import re
from typing import Any

import msgspec

from compiler.formats.errors import FormatError
from compiler.formats.schemas import Record

# --- ir_locations: per artifact line, the compiler's own locations (stage meta, not a format) ----
#
# IR stages (TTIR, TTGIR, LLVM IR, PTX, SASS) carry, besides their source map to the user's lines,
# `meta["ir_locations"]`: the location chain of each line, read from the IR itself (MLIR `loc()`,
# LLVM `!dbg`, PTX `.loc`, nvdisasm's line info). A chain lists frames innermost first, each
# `<file key>:<line>[:<column>]`, joined by `<` ("a1b2c3d4:196:12<a1b2c3d4:216:16<0f0e0d0c:12:13":
# line 196 of a helper inlined at line 216, itself inlined at the kernel's line 12). The page
# links two lines of two stages when their chains are linked (`chains_linked`): compiled code
# the user wrote no line of (a helper's body, Inductor's generated kernel) is linked too.

IrFrame = tuple[str, int, "int | None"]  # (file as the compiler recorded it, line, column or None)
_IR_FRAME = r"[0-9a-f]{8}:[0-9]{1,7}(?::[0-9]{1,5})?"
IR_CHAIN_RE = re.compile(rf"^{_IR_FRAME}(?:<{_IR_FRAME}){{0,31}}$")
MAX_IR_CHAINS_PER_LINE = 8


class IrLocations(Record):
    files: dict[str, str]  # file key -> the path as the compiler recorded it
    chains: list[str]  # distinct chains of this stage
    runs: list[list[int]]  # [first line, last line, chain index]: those artifact lines carry that chain
    source: str  # what the locations were read from

    def by_line(self) -> dict[int, list[str]]:
        """Artifact line -> its chains (at most MAX_IR_CHAINS_PER_LINE each)."""
        out: dict[int, list[str]] = {}
        for first, last, index in self.runs:
            for line in range(first, last + 1):
                chains = out.setdefault(line, [])
                if len(chains) < MAX_IR_CHAINS_PER_LINE and self.chains[index] not in chains:
                    chains.append(self.chains[index])
        return out


def ir_file_key(path: str) -> str:
    """A short key for a file path, the same in every stage of a job (a digest of the normalised path)."""
    import hashlib
    import os.path
    return hashlib.sha256(os.path.normpath(path).encode("utf-8", "replace")).hexdigest()[:8]


def ir_locations(chains_by_line: dict[int, list[tuple[IrFrame, ...]]], source: str) -> IrLocations:
    """Encode artifact line -> chains of (file, line, column) frames; consecutive lines with the
    same chain become one run, so the meta stays small for long PTX and SASS listings."""
    files: dict[str, str] = {}
    index: dict[str, int] = {}
    runs: list[list[int]] = []
    open_runs: dict[int, list[int]] = {}  # chain index -> its run still growing
    for line in sorted(chains_by_line):
        here = set()
        for chain in chains_by_line[line][:MAX_IR_CHAINS_PER_LINE]:
            frames = []
            for path, number, column in chain[:32]:
                key = ir_file_key(path)
                files.setdefault(key, path)
                frames.append(f"{key}:{number}" + (f":{column}" if column else ""))
            if not frames:
                continue
            text = "<".join(frames)
            i = index.setdefault(text, len(index))
            here.add(i)
            run = open_runs.get(i)
            if run is not None and run[1] == line - 1:
                run[1] = line
            else:
                run = [line, line, i]
                runs.append(run)
                open_runs[i] = run
        for i in [i for i in open_runs if i not in here]:
            del open_runs[i]
    return IrLocations(files=files, chains=list(index), runs=runs, source=source)


def check_ir_locations(value: Any, max_line: int = 10**8) -> IrLocations:
    """The typed record of a stage's `meta["ir_locations"]`; FormatError when it is not one: an
    unknown field, a chain that is not `key:line[:col]<...`, a run out of range."""
    try:
        record = msgspec.convert(value, IrLocations)
    except msgspec.ValidationError as e:
        raise FormatError(f"ir_locations: {e}") from None
    bad = next((c for c in record.chains if not IR_CHAIN_RE.match(c)), None)
    if bad is not None:
        raise FormatError(f"ir_locations: {bad[:80]!r} is not a location chain")
    if any(not re.fullmatch(r"[0-9a-f]{8}", k) for k in record.files):
        raise FormatError("ir_locations: file keys are 8 hex digits")
    for run in record.runs:
        if len(run) != 3 or not 1 <= run[0] <= run[1] <= max_line or not 0 <= run[2] < len(record.chains):
            raise FormatError(f"ir_locations: the run {run[:3]} is not [first line, last line, chain index]")
    return record


def _coarse(chain: str) -> str:
    return "<".join(":".join(frame.split(":")[:2]) for frame in chain.split("<"))


def chains_linked(a: str, b: str) -> bool:
    """Whether two lines with these chains come from the same place: compared with columns when
    both have them on every frame, else by lines, one chain must be the other or begin it (PTX and
    SASS name only the innermost frames of an inlined call: `helper:196<helper:216` begins
    `helper:196<helper:216<kernel:12`). static/ir-links.js applies the same rule in the page."""
    if not all(f.count(":") == 2 for f in (a + "<" + b).split("<")):
        a, b = _coarse(a), _coarse(b)
    return a == b or a.startswith(b + "<") or b.startswith(a + "<")

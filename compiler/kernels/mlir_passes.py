"""MLIR per-pass IR dumps -> pass records.

Triton's pass managers print the module before every pass when `MLIR_ENABLE_DUMP=1`
(`MLIR_DUMP_PATH` sends it to a file). Each dump starts with a header like

    // -----// IR Dump Before TritonGPUCoalesce: tritongpu-coalesce ('builtin.module' operation) //----- //

Triton prints "before" dumps only, so the IR after pass i is the dump before pass i+1 of the same
pass manager; after the last pass it is the stage's output, which the caller supplies. Pure
functions: text in, records out.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from compiler.mlir_text import strip_locations

_HEADER = re.compile(
    r"^// -----// IR Dump (?P<when>Before|After) (?P<pass>.+?) "
    r"\('(?P<op>[^']+)' operation(?:: @(?P<symbol>[^)]+))?\) //----- //[ \t]*$", re.M)


@dataclass
class PassDump:
    """One header plus the IR printed under it."""

    name: str  # "TritonGPUCoalesce"
    argument: str  # the pass as the pipeline spells it, with options: "tritongpu-coalesce"
    when: str  # "Before" or "After"
    op: str  # the operation it ran on: "builtin.module" or "tt.func"
    symbol: str  # "@add_kernel" for a function pass, "" for the module
    ir: str


@dataclass
class PassRecord:
    """One pass as it ran: its IR before and after, whether it changed it, and the diff."""

    index: int  # 1-based, over the whole compilation
    stage: str  # the Triton stage whose pass manager ran it: "ttir", "ttgir", "llir"
    name: str
    argument: str
    op: str
    symbol: str
    changed: bool  # the printed IR differs (locations included)
    only_locations: bool  # it differs in location attributes only
    added: int  # lines added / removed in the location-free diff
    removed: int
    diff: list[str] = field(default_factory=list)  # unified diff lines, location-free


def parse_dumps(text: str) -> list[PassDump]:
    """Split a dump file into its (header, IR) sections, in order."""
    matches = list(_HEADER.finditer(text))
    dumps = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        name, _, argument = m.group("pass").partition(": ")
        ir = text[m.end():end].strip("\n") + "\n"
        dumps.append(PassDump(name=name.strip(), argument=argument.strip(), when=m.group("when"),
                              op=m.group("op"), symbol=("@" + m.group("symbol")) if m.group("symbol") else "",
                              ir=ir))
    return dumps


def _normalise(ir: str) -> str:
    return "\n".join(line.rstrip() for line in ir.strip("\n").splitlines())


def pass_records(stages: list[tuple[str, str, str]], context: int = 3) -> list[PassRecord]:
    """Records for every pass of a compilation.

    `stages` is, in order, (stage name, that stage's dump text, the IR after its last pass); the
    dumps of one stage come from its pass manager(s). Within a stage the IR after pass i is the dump
    before pass i+1; after the stage's last pass it is the given final IR.
    """
    records: list[PassRecord] = []
    for stage, text, final_ir in stages:
        dumps = [d for d in parse_dumps(text) if d.when == "Before"]
        irs = [d.ir for d in dumps] + [final_ir]  # irs[i] before pass i, irs[i + 1] after it
        normalised = [_normalise(ir) for ir in irs]
        plain: dict[int, list[str]] = {}  # each IR stripped once, and only where a pass changed it
        for i, dump in enumerate(dumps):
            changed = normalised[i] != normalised[i + 1]
            diff: list[str] = []
            if changed:
                for j in (i, i + 1):
                    if j not in plain:
                        plain[j] = strip_locations(irs[j]).splitlines()
                diff = list(difflib.unified_diff(plain[i], plain[i + 1], f"before {dump.name}",
                                                 f"after {dump.name}", n=context, lineterm=""))
            added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
            removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
            records.append(PassRecord(index=len(records) + 1, stage=stage, name=dump.name, argument=dump.argument,
                                      op=dump.op, symbol=dump.symbol, changed=changed,
                                      only_locations=changed and not diff, added=added, removed=removed, diff=diff))
    return records


def render_pass_log(records: list[PassRecord], max_diff_lines: int = 400) -> str:
    """The records as one diff-formatted document: a header per pass, then its diff (the first
    `max_diff_lines` lines of it: conversions to the LLVM dialect rewrite whole modules)."""
    out = []
    total = len(records)
    for r in records:
        scope = r.op + (f" {r.symbol}" if r.symbol else "")
        if not r.changed:
            verdict = "no change"
        elif r.only_locations:
            verdict = "changed locations only"
        else:
            verdict = f"changed: +{r.added} -{r.removed}"
        out.append(f"// pass {r.index}/{total} [{r.stage}] {r.name} on {scope}: {verdict}")
        out.append(f"//   {r.argument}")
        out.extend(r.diff[:max_diff_lines])
        if len(r.diff) > max_diff_lines:
            out.append(f"// ... diff cut after {max_diff_lines} of {len(r.diff)} lines")
        out.append("")
    return "\n".join(out)

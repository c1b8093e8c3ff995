"""HLO text as XLA prints it (HloModule::ToString, hlo_instruction.cc): computations, instructions
with their attributes and metadata, array shapes, and the schedule of a scheduled module.
Pure functions from text to records; nothing here imports jax."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from compiler.mlir_text import balanced_end, split_top_level


@dataclass
class HloInstr:
    """One instruction line of HLO text. `attrs` keeps each attribute's text as printed."""

    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: dict[str, str]
    line: int  # 1-based line in the text
    computation: str
    is_root: bool = False

    @property
    def sharding(self) -> str | None:
        return self.attrs.get("sharding")

    @property
    def metadata(self) -> dict[str, str]:
        return parse_metadata(self.attrs.get("metadata", ""))


@dataclass
class HloComputation:
    name: str
    is_entry: bool
    line: int
    instructions: list[HloInstr] = field(default_factory=list)


@dataclass
class HloText:
    """An HLO module as printed: header attributes and computations in printed order."""

    name: str
    header: str
    computations: list[HloComputation]

    @property
    def entry(self) -> HloComputation | None:
        for c in self.computations:
            if c.is_entry:
                return c
        return self.computations[-1] if self.computations else None

    def instructions(self) -> Iterable[HloInstr]:
        for c in self.computations:
            yield from c.instructions

    def by_name(self) -> dict[str, HloInstr]:
        return {i.name: i for i in self.instructions()}

    @property
    def is_scheduled(self) -> bool:
        return "is_scheduled=true" in self.header


_INSTR_RE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_COMP_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")


def _parse_instr(body: str) -> tuple[str, str, list[str], dict[str, str]] | None:
    """`shape opcode(operands), k=v, ...` -> (shape, opcode, operands, attrs)."""
    body = body.strip()
    if not body:
        return None
    if body[0] == "(":
        end = balanced_end(body, 0)
    else:
        m = re.match(r"[\w]+(\[[^\]]*\])?", body)
        if not m:
            return None
        end = m.end()
        if end < len(body) and body[end] == "{":
            end = balanced_end(body, end)
    shape = body[:end]
    rest = body[end:].lstrip()
    m = re.match(r"([\w\-]+)\(", rest)
    if not m:
        return None
    opcode = m.group(1)
    close = balanced_end(rest, m.end() - 1)
    operand_text = rest[m.end(): close - 1]
    operands = []
    for part in split_top_level(operand_text):
        # Operands print as `%name` or, with print_operand_shape, `f32[4] %name`.
        tokens = part.split()
        if tokens:
            operands.append(tokens[-1].lstrip("%"))
    attrs: dict[str, str] = {}
    tail = rest[close:].strip()
    if tail.startswith(","):
        for part in split_top_level(tail[1:]):
            if "=" in part:
                k, v = part.split("=", 1)
                attrs[k.strip()] = v.strip()
    return shape, opcode, operands, attrs


def parse_hlo_text(text: str) -> HloText:
    """Computations and instruction lines of HLO text as HloModule::ToString prints it."""
    lines = text.split("\n")
    name, header = "", ""
    computations: list[HloComputation] = []
    current: HloComputation | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        if stripped.startswith("HloModule"):
            header = stripped
            name = stripped.split()[1].rstrip(",") if len(stripped.split()) > 1 else ""
            continue
        if current is None:
            m = _COMP_RE.match(stripped)
            if m:
                current = HloComputation(m.group(2), bool(m.group(1)), number)
            continue
        if stripped == "}":
            computations.append(current)
            current = None
            continue
        m = _INSTR_RE.match(line)
        if not m:
            continue
        parsed = _parse_instr(m.group(3))
        if parsed is None:
            continue
        shape, opcode, operands, attrs = parsed
        current.instructions.append(HloInstr(m.group(2), shape, opcode, operands, attrs, number,
                                             current.name, bool(m.group(1))))
    if current is not None:
        computations.append(current)
    return HloText(name, header, computations)


def parse_metadata(text: str) -> dict[str, str]:
    """`{op_name="a" source_file="f.py" source_line=3}` -> dict of strings."""
    out: dict[str, str] = {}
    for m in re.finditer(r'(\w+)=("(?:\\.|[^"\\])*"|[^\s}]+)', text.strip("{}")):
        value = m.group(2)
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        out[m.group(1)] = value
    return out


def instruction_count(text: str) -> int:
    """Instruction lines of an HLO module, all computations included."""
    return sum(len(c.instructions) for c in parse_hlo_text(text).computations)


_BYTES = {"pred": 1, "s2": 1, "s4": 1, "s8": 1, "s16": 2, "s32": 4, "s64": 8, "u2": 1, "u4": 1, "u8": 1,
          "u16": 2, "u32": 4, "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16,
          "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e5m2fnuz": 1, "f8e4m3fnuz": 1, "f8e4m3b11fnuz": 1,
          "f8e3m4": 1, "f8e8m0fnu": 1, "f4e2m1fn": 1, "token": 0}


@dataclass(frozen=True)
class ArrayShape:
    dtype: str
    dims: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def bytes(self) -> int:
        return self.elements * _BYTES.get(self.dtype, 4)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


def parse_shapes(shape: str) -> list[ArrayShape]:
    """The array leaves of an HLO shape string (`f32[4,8]{1,0}` or a tuple of them)."""
    out = []
    for m in re.finditer(r"\b([a-z][a-z0-9]*)\[([^\]]*)\]", shape):
        dims = tuple(int(d.lstrip("<=")) for d in m.group(2).split(",") if d.strip())
        out.append(ArrayShape(m.group(1), dims))
    return out


def shape_bytes(shape: str) -> int:
    return sum(s.bytes for s in parse_shapes(shape))


def schedule(module: HloText) -> list[dict[str, Any]]:
    """Instruction order per computation of a scheduled module (printed order is the
    sequence when the header says is_scheduled=true); fusion bodies are not scheduled."""
    fused = {i.attrs.get("calls", "").lstrip("%") for i in module.instructions() if i.opcode == "fusion"}
    out = []
    for comp in module.computations:
        if comp.name in fused:
            continue
        out.append({"computation": comp.name, "entry": comp.is_entry,
                    "instructions": [{"name": i.name, "opcode": i.opcode, "line": i.line,
                                      "bytes": shape_bytes(i.shape)} for i in comp.instructions]})
    return out

"""Every stage format a pipeline may write, with its schema.

A stage's `format` names one entry of FORMATS. Pipelines write through it (`Bundle.add` encodes
and validates the value) and viewers read through it (`decode`), so what crosses from a job to
the page has one definition:

- code formats (`python`, `mlir`, `ptx`, ...): text, shown highlighted with the named lexer;
- JSON formats with a schema (`mesh`, `memory`, `timeline`, `profile`, `guards`): msgspec Structs that reject
  unknown fields and wrong types on write and decode to typed records on read;
- `json`: any JSON value, shown as code;
- `svg`: a drawing made in the worker (DOT laid out by Graphviz), kept only after an allowlist
  sanitizer dropped everything that could fetch, link or run something; the page sanitizes again
  on read, since a job's files are hostile input to the web process.

One module per concern: the schemas (`schemas.py`), the SVG sanitizer (`svg.py`), the IR-to-IR links
(`ir_links.py`) and the timings (`timings.py`); this module holds the table and names what callers
use, so `formats.X` reads the same wherever X lives.

A test fails when a pipeline writes a format that is not declared here or that no viewer renders.
This package imports nothing of irscope's: both the worker and the web process use it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

from compiler.formats.errors import FormatError
from compiler.formats.ir_links import (  # noqa: F401 - the package's names
    IR_CHAIN_RE,
    MAX_IR_CHAINS_PER_LINE,
    IrLocations,
    chains_linked,
    check_ir_locations,
    ir_file_key,
    ir_locations,
)
from compiler.formats.schemas import (  # noqa: F401 - the package's names
    KERNEL_NAME_ROOM,
    AsyncPair,
    Collective,
    CollectiveCall,
    CollectiveGraph,
    Collectives,
    CommModel,
    FailedGuardRecord,
    GuardRecord,
    GuardsExplained,
    KernelResource,
    KernelResources,
    LiveValue,
    MemoryBlock,
    MemoryTimeline,
    Mesh,
    Occupancy,
    OtherAllocation,
    OutputCodeCall,
    Profile,
    ProfileEvent,
    ProfileRow,
    Record,
    Schedule,
    ScheduledComputation,
    ScheduledInstruction,
    ShardedArray,
    ShardedInstruction,
    Tile,
    configs_under_kernels,
    kernel_key_name,
    kernel_of,
)
from compiler.formats.svg import (  # noqa: F401 - the package's names
    sanitize_svg,
)
from compiler.formats.timings import (  # noqa: F401 - the package's names
    TIMINGS,
    CompileTimes,
    RunTimes,
    Timings,
    binary_size,
    check_timing,
    speed_verdict,
)

# --- the table ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Format:
    """One stage format: code (`lexer`), JSON (`schema`, or any JSON when `json_any`), or SVG."""

    name: str
    help: str
    lexer: str | None = None  # pygments lexer name (or ours: viewers/lexers.py) for code formats
    schema: type[Record] | None = None
    json_any: bool = False
    svg: bool = False

    def encode(self, value: Any) -> str:
        """The stored text of a stage value; FormatError when the value does not fit."""
        if self.schema is not None:
            try:
                record = value if isinstance(value, self.schema) else msgspec.convert(
                    json.loads(value) if isinstance(value, str) else value, self.schema)
            except (msgspec.ValidationError, json.JSONDecodeError) as e:
                raise FormatError(f"{self.name}: {e}") from None
            return msgspec.json.encode(record).decode()
        if self.json_any:
            if isinstance(value, str):
                try:
                    json.loads(value)
                except json.JSONDecodeError as e:
                    raise FormatError(f"{self.name}: not JSON: {e}") from None
                return value
            return json.dumps(value, indent=2, default=str)
        if not isinstance(value, str):
            raise FormatError(f"{self.name} is a text format, not {type(value).__name__}")
        if self.svg:
            return sanitize_svg(value)
        return value

    def decode(self, text: str) -> Any:
        """What a viewer reads: the typed record (JSON schemas), the sanitized SVG, else the text."""
        if self.schema is not None:
            try:
                return msgspec.json.decode(text, type=self.schema)
            except (msgspec.ValidationError, msgspec.DecodeError) as e:
                raise FormatError(f"{self.name}: {e}") from None
        if self.svg:
            return sanitize_svg(text)
        return text


def _code(name: str, lexer: str, help: str) -> Format:
    return Format(name, help, lexer=lexer)


FORMATS: dict[str, Format] = {f.name: f for f in (
    _code("text", "text", "Plain text: logs, tables, program output."),
    _code("python", "python", "Python: FX graphs, Inductor's output code, Triton kernels."),
    _code("cpp", "cpp", "C++: Inductor's CPU kernels, AOTInductor's wrapper."),
    _code("mlir", "mlir", "MLIR: TTIR, TTGIR, StableHLO."),
    _code("hlo", "hlo", "XLA HLO text."),
    _code("llvm", "llvm", "LLVM IR."),
    _code("ptx", "ptx", "NVIDIA PTX."),
    _code("sass", "gas", "NVIDIA SASS, as nvdisasm lists it."),
    _code("amdgcn", "gas", "AMDGCN assembly."),
    _code("asm", "gas", "Host assembly (objdump -d)."),
    _code("diff", "diff", "A unified diff (pass-by-pass changes)."),
    _code("dot", "dot", "Graphviz DOT text, shown as code where it was not drawn."),
    Format("json", "Any JSON value, shown as code (launches, kernel metadata).", lexer="json", json_any=True),
    Format("svg", "A drawing made in the worker (Graphviz's layout of a DOT graph), sanitized.", svg=True),
    Format("profile", "torch.profiler over one compiled call: ops by self time and a timeline.", schema=Profile),
    Format("timeline", "The scheduled instruction order of each computation; on XLA:GPU also the latency-hiding "
           "scheduler's estimated start/end of each instruction and the async start/done pairs.", schema=Schedule),
    Format("mesh", "Shardings after propagation, tiles per device, and the partitioner's collectives.",
           schema=Mesh),
    Format("collectives", "The collectives in each graph torch.compile compiled for a virtual world, their mesh "
                          "dimension, bytes and estimated time under a stated interconnect model.",
           schema=Collectives),
    Format("memory", "XLA's temp allocation over program order: buffers, live bytes, peak.",
           schema=MemoryTimeline),
    Format("guards", "Dynamo's guards of one compiled frame by kind, and the failed guard of each earlier "
                     "compile when it is a recompile.", schema=GuardsExplained),
    Format("resources", "Every GPU kernel of a job: registers, spills, shared and local memory, and the "
                        "theoretical occupancy on its target.", schema=KernelResources),
)}


def get(name: str) -> Format:
    """The format called `name`; an unknown name is a FormatError naming the known ones."""
    if name not in FORMATS:
        raise FormatError(f"unknown stage format {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]

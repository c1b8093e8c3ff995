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

A test fails when a pipeline writes a format that is not declared here or that no viewer renders.
This module imports nothing of irscope's: both the worker and the web process use it.
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

import msgspec
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as defused_fromstring


class FormatError(ValueError):
    """A stage value that does not fit its format."""


class Record(msgspec.Struct, forbid_unknown_fields=True):
    """Base of the JSON schemas: an unknown field or a wrong type is an error."""


# --- profile: torch.profiler over one compiled call (written by the pytorch pipeline) -----------

class ProfileRow(Record):
    name: str
    calls: int
    self_us: float
    total_us: float
    self_device_us: float = 0.0


class ProfileEvent(Record):
    name: str
    start_us: float
    dur_us: float
    thread: int = 0


class Profile(Record):
    table: list[ProfileRow]
    events: list[ProfileEvent]
    where: str


# --- timeline: the schedule of a scheduled HLO module (written by the XLA pipeline) -------------

class ScheduledInstruction(Record, omit_defaults=True):
    name: str
    opcode: str
    line: int
    bytes: int
    # XLA's cost analysis, for the entry computation's instructions it could isolate
    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None
    # XLA:GPU's latency-hiding scheduler: its estimated start and end, in its cost model's units
    start: float | None = None
    end: float | None = None


class AsyncPair(Record):
    """An async collective (or other async op): its start, its done, and what was scheduled between."""

    start: str
    done: str
    opcode: str  # "all-reduce", "all-gather", "collective-permute", ...
    start_index: int
    done_index: int
    between: list[str]  # every instruction scheduled between start and done
    compute: list[str]  # the ones among them that do device work (fusions, custom calls, ...)


class ScheduledComputation(Record):
    computation: str
    entry: bool
    instructions: list[ScheduledInstruction]
    async_pairs: list[AsyncPair] = []
    # the latency-hiding scheduler's statistics for this computation (wasted cycles per collective
    # kind, total cycles, memory pressure peak), as XLA dumped them
    statistics: dict[str, float] = {}


class Schedule(Record):
    computations: list[ScheduledComputation]
    scheduled: bool
    module: str = ""
    estimates: str = ""  # what `start`/`end` are, when present (the cost model that made them)


# --- mesh: shardings after propagation and the partitioner's collectives (XLA pipeline) ---------

class Tile(Record):
    index: list[int]
    ranges: list[list[int]]  # [start, stop) per dimension
    devices: list[int]


class ShardedArray(Record):
    role: str  # "parameter 0", "result"
    name: str
    shape: str
    dims: list[int]
    sharding: str
    type: str  # replicated, maximal, manual, tiled, tuple, unknown, unreduced
    tiles: list[Tile]
    tile_dims: list[int] | None = None
    subgroups: list[str] = []
    tile_devices: list[int] | None = None


class ShardedInstruction(Record):
    name: str
    opcode: str
    shape: str
    sharding: str
    computation: str
    line: int


class Collective(Record):
    name: str
    opcode: str
    computation: str
    line: int
    shape: str
    groups: list[list[int]]
    group_size: int
    groups_text: str
    dimensions: str
    operand_bytes: int
    result_bytes: int
    moved_bytes: int


class Mesh(Record):
    devices: int
    partitioner: str
    arrays: list[ShardedArray]
    instructions: list[ShardedInstruction]
    collectives: list[Collective]
    from_stage: str


# --- collectives: what torch.compile's graphs communicate, and its cost (pytorch, devices > 1) ------

class CollectiveCall(Record, omit_defaults=True):
    """One functional collective of a post-grad graph, with its estimated time."""

    op: str  # all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, ...
    node: str
    mesh_dim: str  # the mesh dimension whose group it runs on ("tp", "dim 0", "world"; "" when none)
    group_size: int
    ranks: list[int]  # rank 0's group
    input: str  # "f32[16, 64]"
    output: str
    tensor_bytes: int  # an all_gather's result, the others' input
    input_bytes: int
    output_bytes: int
    sent_bytes: int  # per rank, by the stated model
    steps: int
    estimate_us: float  # the stated alpha-beta model
    line: int | None = None  # the user's line that caused it
    inductor_estimate_us: float | None = None  # Inductor's own NCCL model, where it gives one
    output_code_line: int | None = None  # where the output code calls it


class OutputCodeCall(Record):
    """A collective as Inductor's output code calls it (after its bucketing and reordering)."""

    line: int
    op: str
    buffer: str
    shape: str  # the buffer as the output code allocated it ("f32[4096]"), "" when it did not


class CollectiveGraph(Record, omit_defaults=True):
    compile_id: str
    graph: str  # forward, backward, inference
    collectives: list[CollectiveCall]
    before_passes: int  # how many collectives the graph had before Inductor's post-grad passes
    # (`collectives` is after its pattern passes; bucketing comes later: see output_code_calls)
    output_code_stage: str = ""  # the stage key of the output code that calls them
    output_code_calls: list[OutputCodeCall] = []
    compute_bytes: int | None = None  # Inductor's bytes read and written by the graph's kernels
    compute_estimate_us: float | None = None  # those bytes at the target's memory bandwidth


class CommModel(Record):
    interconnect: str
    bandwidth_gbs: float
    latency_us: float
    source: str
    model: str
    memory_bandwidth_gbs: float | None = None  # the compute estimate's, when the target has one


class Collectives(Record):
    devices: int
    comm: CommModel
    graphs: list[CollectiveGraph]
    note: str


# --- memory: XLA's temp allocation over program order (XLA pipeline) ----------------------------

class MemoryBlock(Record):
    name: str
    offset: int
    size: int
    start: int
    end: int
    shape: str
    allocation: int


class LiveValue(Record):
    name: str
    size: int
    offset: int
    shape: str = ""
    live: list[int] = []  # [first step, last step] of its live range
    in_place_of: str = ""  # a value live at the same step in the same bytes, updated in place


class OtherAllocation(Record):
    allocation: int
    kind: str
    size: int
    values: list[str]


class MemoryTimeline(Record):
    steps: int
    sequence: list[str]
    blocks: list[MemoryBlock]
    live_bytes: list[int]  # per step: bytes of the temp allocation holding a live value
    high_water: list[int]  # per step: the highest occupied byte, as XLA packed the heap
    peak_bytes: int  # max(live_bytes)
    peak_at: int  # the step where live_bytes reaches peak_bytes
    peak_instruction: str
    live_at_peak: list[LiveValue]  # by size, largest first
    temp_allocation_bytes: int
    other_allocations: list[OtherAllocation]
    xla_memory_stats: dict[str, int] = {}
    heap_bytes: int = 0  # max(high_water): the heap's size, XLA's temp_size_in_bytes
    xla_peak_step: int | None = None  # the step HloLiveRange calls its peak (all buffers, not only temp)
    unranged_values: list[str] = []  # temp values XLA gave no live range (drawn over the whole program)


# --- guards: a compiled frame's guards and why it was recompiled (PyTorch pipeline) -------------

class GuardRecord(Record, omit_defaults=True):
    kind: str  # as Dynamo prints it: TENSOR_MATCH, EQUALS_MATCH, ...
    group: str  # a key of GuardsExplained.groups
    check: str  # the guard's own code
    meaning: str  # the check in words
    input: str = ""  # the value it reads, as the user writes it (x, self.scale)
    source: str = ""  # the same, as Dynamo names it (L['x'])
    line: int | None = None  # the user's line that installed it
    code: str = ""  # that line's text, as Dynamo printed it
    where: str = ""  # file:line where Dynamo installed it
    hint: str = ""
    properties: dict[str, str] = {}  # a tensor match's dtype, device, size, stride, requires_grad


class FailedGuardRecord(Record, omit_defaults=True):
    compile_id: str  # the earlier compile whose guard failed
    reason: str  # PyTorch's words
    meaning: str  # in words
    kind: str = ""
    group: str = ""
    input: str = ""
    line: int | None = None
    before: str = ""  # what that compile was specialised on
    after: str = ""  # what the call that recompiled passed


class GuardsExplained(Record):
    compile_id: str
    frame: str  # the compiled function and where it starts
    groups: dict[str, str]  # group key -> what its guards check, in display order
    guards: list[GuardRecord]
    recompile: list[FailedGuardRecord] = []  # one per earlier compile of the frame, when this one is a recompile
    latency_us: float | None = None  # Dynamo's own measurement of one guard evaluation
    source: str = ""  # the trace entries it was read from


# --- resources: every GPU kernel of a job and what it uses (Triton, Inductor, ... pipelines) ------

class Occupancy(Record, omit_defaults=True):
    """compiler/targets/occupancy.py's estimate: NVIDIA's blocks and warps per SM, or AMD's waves per SIMD."""

    percent: float
    model: str
    limited_by: list[str] = []
    blocks_per_sm: int | None = None
    warps_per_sm: int | None = None
    max_warps_per_sm: int | None = None
    limits_blocks: dict[str, int] = {}  # what each limit alone would allow, in blocks per SM
    waves_per_simd: int | None = None
    max_waves_per_simd: int | None = None


class KernelResource(Record):
    kernel: str  # the kernel's qualifier, as its stages name it
    stage: str  # the kernel's metadata stage
    target: str  # "cuda:sm_90", "hip:gfx942"
    num_warps: int | None = None
    num_stages: int | None = None
    config: dict[str, int | float | str | bool] = {}  # the constexprs it was compiled for (block sizes, ...)
    registers: int | None = None  # per thread (NVIDIA: the cubin's REG; AMD: VGPRs)
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None
    stack_bytes: int | None = None  # the stack frame ptxas reports
    local_bytes: int | None = None  # the cubin's LOCAL (AMD: private segment, scratch)
    static_shared_bytes: int | None = None  # the cubin's SHARED (AMD: LDS)
    dynamic_shared_bytes: int | None = None  # the shared memory Triton asks for at launch
    sgprs: int | None = None  # AMD only
    spills: bool = False
    occupancy: Occupancy | None = None
    source: str = ""  # where the numbers come from


class KernelResources(Record):
    kernels: list[KernelResource]
    note: str = ""


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


# --- svg: drawings made in the worker -----------------------------------------------------------

_SVG_NS = "http://www.w3.org/2000/svg"
# What a Graphviz drawing uses; anything else (script, foreignObject, image, use, style, a, ...) goes.
_SVG_ELEMENTS = {"svg", "g", "title", "desc", "path", "polygon", "polyline", "ellipse", "circle", "rect", "line",
                 "text", "tspan", "defs", "linearGradient", "radialGradient", "stop"}
_UNWRAPPED = {"a"}  # links: dropped, their contents kept
_LOCAL_URL = re.compile(r"^\s*url\(\s*#[\w.\-]+\s*\)\s*$")
ET.register_namespace("", _SVG_NS)  # serialise as plain <svg>, not <ns0:svg>


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def _safe_attribute(name: str, value: str) -> bool:
    local = _local(name).lower()
    if name.startswith("{") and not name.startswith("{" + _SVG_NS):
        return False  # xlink:href, xml:base and every other namespaced attribute
    if local.startswith("on") or local in ("href", "url", "target", "style", "src", "xmlns"):
        return False
    lowered = value.lower()
    if "url(" in lowered and not _LOCAL_URL.match(value):
        return False  # fill="url(#gradient)" stays; anything that names another resource goes
    return "javascript:" not in lowered and "data:" not in lowered


def _clean(element: ET.Element) -> list[ET.Element]:
    """The element made safe (a list: an unwrapped link gives its children), or [] to drop it."""
    tag = _local(element.tag) if isinstance(element.tag, str) else ""
    if not element.tag or not isinstance(element.tag, str):
        return []
    if element.tag.startswith("{") and not element.tag.startswith("{" + _SVG_NS):
        return []
    children = [c for child in list(element) for c in _clean(child)]
    if tag in _UNWRAPPED:
        return children
    if tag not in _SVG_ELEMENTS:
        return []
    for name in list(element.attrib):
        if not _safe_attribute(name, element.attrib[name]):
            del element.attrib[name]
    for child in list(element):
        element.remove(child)
    element.extend(children)
    return [element]


def sanitize_svg(text: str) -> str:
    """An SVG document reduced to an allowlist of drawing elements and attributes: no script,
    no foreignObject, no link (`<a>` is unwrapped), no href/URL/target, no event handler, no style,
    no reference to anything outside the drawing. Raises FormatError for text that is not SVG."""
    try:  # defusedxml: no entity expansion, no external references
        root = defused_fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException:
        raise FormatError("an SVG with entity declarations or external references is refused") from None
    except ET.ParseError as e:
        raise FormatError(f"not an SVG document: {e}") from None
    if _local(root.tag) != "svg":
        raise FormatError(f"not an SVG document: the root element is <{_local(root.tag)}>")
    return ET.tostring(_clean(root)[0], encoding="unicode")


# --- timings: what a job measured (Bundle.timing), read by the Timings tab ---------------------

# Every timing a pipeline may record, by name (the runner adds "job"). Their fields differ by
# compiler, so a timing is checked for its name and for being JSON; `Timings.read` is the one
# place that interprets them for the page.
TIMINGS = {
    "compile": "compile phases in seconds (keys `<phase>_s`), their `source`, PyTorch's raw `events`",
    "run": "the compiled code's run time (`eager_ms`, `compiled_ms` medians with spread), `where`, `what`, "
           "`accuracy`, `memory`",
    "target": "where the job compiled for, and whether anything ran",
    "run_mode": "compile-only or compile-and-run, and the sentence saying why (`mode`, `sentence`, sizes, the "
                "estimated peak and, after a run, the measured one)",
    "not_measured": "a job that compiled but whose measurement was stopped or cut: the `phase`, `why`, the "
                    "error `kind` and `line`, the `setting` whose limit it met",
    "kernels": "per-launch times on a real GPU",
    "job": "the runner's wall time, sandbox and worker",
}


def check_timing(name: str, value: Any) -> None:
    """FormatError unless `name` is a declared timing and `value` a JSON object or list."""
    if name not in TIMINGS:
        raise FormatError(f"unknown timing {name!r}; known: {', '.join(TIMINGS)}")
    if not isinstance(value, (dict, list)):
        raise FormatError(f"timing {name!r} is a JSON object or list, not {type(value).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as e:
        raise FormatError(f"timing {name!r} is not JSON: {e}") from None


@dataclass(frozen=True)
class CompileTimes:
    source: str
    phases_s: list[tuple[str, float]]  # (phase, seconds), in the order the pipeline recorded them
    events: dict[str, Any]


@dataclass(frozen=True)
class RunTimes:
    where: str
    what: str
    medians_ms: list[tuple[str, float]]  # ("eager", ms), ("compiled", ms) where measured
    values: dict[str, Any]  # every plain number or text of the run, for the table
    accuracy: dict[str, Any]


@dataclass(frozen=True)
class Timings:
    """A job's timings as the Timings tab shows them."""

    compile: CompileTimes | None
    run: RunTimes | None
    others: dict[str, dict[str, Any]]  # the other timings that are objects (target, job, ...)
    not_measured: dict[str, Any] | None = None  # a compiled job's measurement that was stopped or cut

    @classmethod
    def read(cls, timings: dict[str, Any]) -> "Timings":
        compile_t, run = timings.get("compile"), timings.get("run")
        compile_times = None
        if isinstance(compile_t, dict):
            phases = [(k[:-2].replace("_", " "), float(v)) for k, v in compile_t.items()
                      if k.endswith("_s") and isinstance(v, (int, float)) and not isinstance(v, bool)]
            events = compile_t.get("events")
            compile_times = CompileTimes(str(compile_t.get("source", "")), phases,
                                         events if isinstance(events, dict) else {})
        run_times = None
        if isinstance(run, dict) and run:
            medians = [(name, float(run[f"{name}_ms"])) for name in ("eager", "compiled")
                       if isinstance(run.get(f"{name}_ms"), (int, float))]
            accuracy = run.get("accuracy")
            run_times = RunTimes(str(run.get("where", "")), str(run.get("what", "")), medians,
                                 {k: v for k, v in run.items() if not isinstance(v, (dict, list))},
                                 accuracy if isinstance(accuracy, dict) else {})
        others = {k: v for k, v in timings.items()
                  if k not in ("compile", "run", "not_measured") and isinstance(v, dict)}
        notice = timings.get("not_measured")
        return cls(compile_times, run_times, others, notice if isinstance(notice, dict) else None)


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

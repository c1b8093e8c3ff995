"""The JSON stage formats' schemas: msgspec Structs that reject unknown fields and wrong types on
write and decode to typed records on read (the table in compiler/formats/__init__.py names them)."""
from __future__ import annotations

import hashlib

import msgspec


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
    # a row's or event's name as the profiler gives it -> what to show instead, in words (a compiled
    # graph's call is named by a hash: its compile id and the user's function say which graph it is)
    labels: dict[str, str] = {}


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


# A stage key is 200 characters at most (service/bundle_reader.KEY_RE); a kernel's name leaves room
# in it for the longest stage prefix (`triton.metadata:`), a config's `.<n>` and a compile id.
KERNEL_NAME_ROOM = 150


def kernel_key_name(name: str) -> str:
    """A kernel's name as its stage keys carry it: whole when it fits KERNEL_NAME_ROOM, else its
    first characters, `+` and a digest of the whole name (Inductor names a kernel after up to ten
    of the ops it fused: a training graph's names pass 200 characters)."""
    if len(name) <= KERNEL_NAME_ROOM:
        return name
    return name[:KERNEL_NAME_ROOM - 9] + "+" + hashlib.sha1(name.encode()).hexdigest()[:8]


def kernel_of(qualifier: str) -> str:
    """The kernel a stage qualifier names (compiler/kernels/capture.qualifiers): its `.<n>`, the
    kernel's config n, taken off."""
    name, dot, n = qualifier.rpartition(".")
    return name if dot and n.isdigit() else qualifier


def configs_under_kernels(qualifiers: list[str]) -> list[str]:
    """Kernel qualifiers with each kernel's configs together, in config order (`k_0.0, k_0.1,
    k_1.0, ...`): the kernels in the order they first appear, their configs under them."""
    first: dict[str, int] = {}
    for q in qualifiers:
        first.setdefault(kernel_of(q), len(first))

    def config(q: str) -> int:
        n = q.rpartition(".")[2]
        return int(n) if kernel_of(q) != q else -1
    return sorted(qualifiers, key=lambda q: (first[kernel_of(q)], config(q)))


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
    # the user's source lines the kernel's code came from: its TTIR's locations, or for Inductor's kernels the
    # output code's source map of the kernel's definition (compiler/pytorch/source_map.kernel_user_lines)
    lines: list[int] = []
    # Inductor's scheduler estimate of the bytes the kernel reads and writes (an estimate, not a
    # measurement: compiler/pytorch/estimates.kernel_bytes); None for kernels Inductor did not schedule
    estimated_bytes: int | None = None
    # why a cell this row leaves empty is empty, by column ("stages", "config", ...): the hover of its dash
    # (a CuTe kernel has no software-pipelining stages and no autotune config)
    why_empty: dict[str, str] = {}


class KernelResources(Record):
    kernels: list[KernelResource]
    note: str = ""

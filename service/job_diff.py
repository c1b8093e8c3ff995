"""What changed between two finished jobs (a comparison, /c/<id>; the same source on two toolchains
above all): every stage of A paired with B's, and the counts that say what the compiler did
differently.

Stages pair by key; a kernel's stages pair by the kernel's name (its key's qualifier), and a kernel
renamed between the two (another release names its fusion otherwise) by the user's source lines its
stages came from. Each pair says whether the two texts are the same, read within a byte budget.
The counts are glance's (service/glance.py) for each job, side by side: graphs, graph breaks,
kernels, output-code lines; and for each paired GPU kernel its PTX instructions, registers, spills
and shared memory (from its PTX stage and the job's `kernels.resources` table). Nothing is guessed:
every number is counted from the stored stages."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Callable

from compiler import formats
from compiler.formats import kernel_of
from compiler.model import Stage
from service import glance
from service.store import Job, Store

# A stage of one kernel: Inductor's `kernel:<name>`, or one of Triton's `triton.<kind>:<qualifier>`
# (the qualifier is the kernel's name, `.N` for its config N).
_KERNEL_STAGE = re.compile(r"^(kernel|triton\.[a-z_]+):(.+)$")
MAX_COMPARED_BYTES = 8 << 20  # stage texts read to say same/changed, both sides together
MAX_PTX_KERNELS = 64  # PTX stages read per job to count instructions


@dataclass(frozen=True)
class Pair:
    """A stage of A and its partner in B (None: the other job has none), how they were paired
    ("key", "kernel name", "source lines") and whether their texts are the same (None: not read)."""

    a: str | None
    b: str | None
    how: str = "key"
    same: bool | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Change:
    """One counted fact of both jobs: what (`kernel` names the kernel it is of), A's and B's values
    (None: that job has none), and the stages that show it."""

    what: str
    a: int | None
    b: int | None
    kernel: str = ""
    stage_a: str | None = None
    stage_b: str | None = None

    @property
    def changed(self) -> bool:
        return self.a != self.b

    def to_json(self) -> dict:
        return dict(asdict(self), changed=self.changed)


@dataclass(frozen=True)
class JobDiff:
    pairs: list[Pair] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    not_compared: int = 0  # pairs whose texts were past the budget

    def to_json(self) -> dict:
        return {"pairs": [p.to_json() for p in self.pairs], "summary": [c.to_json() for c in self.changes],
                "paired": sum(1 for p in self.pairs if p.a and p.b),
                "changed": sum(1 for p in self.pairs if p.same is False), "not_compared": self.not_compared}


def _kernel_key(key: str) -> tuple[str, str] | None:
    """(stage kind, kernel name) of a kernel's stage key."""
    m = _KERNEL_STAGE.match(key)
    return (m.group(1), kernel_of(m.group(2))) if m else None


def _renamed(key: str, old: str, new: str) -> str:
    kind, qualifier = key.split(":", 1)
    return f"{kind}:{new}{qualifier[len(old):]}"


def pair(a: Job, b: Job, source_map: Callable[[Job, Stage], list] = lambda job, stage: stage.source_map) -> list[Pair]:
    """A's stages in order, each with B's partner (B's unpaired ones last): by key, then a renamed
    kernel's stages by the source lines they came from (`source_map(job, stage)`: the stage's pairs
    [its line, the source's line], asked only of kernels' stages left unpaired by key)."""
    keys_a, keys_b = {s.key for s in a.stages}, {s.key for s in b.stages}
    left_a = [s for s in a.stages if s.key not in keys_b and _kernel_key(s.key)]
    left_b = [s for s in b.stages if s.key not in keys_a and _kernel_key(s.key)]
    renames = _renames({s.key: source_map(a, s) for s in left_a}, {s.key: source_map(b, s) for s in left_b})
    unpaired_b = {s.key for s in left_b}
    out: list[Pair] = []
    used_b = set()
    for stage in a.stages:
        found = _kernel_key(stage.key)
        if stage.key in keys_b:
            out.append(Pair(stage.key, stage.key, "kernel name" if found else "key"))
            continue
        partner = _renamed(stage.key, found[1], renames[found[1]]) if found and found[1] in renames else None
        if partner is not None and partner in unpaired_b and partner not in used_b:
            out.append(Pair(stage.key, partner, "source lines"))
            used_b.add(partner)
        else:
            out.append(Pair(stage.key, None, ""))
    out += [Pair(None, s.key, "") for s in b.stages if s.key not in keys_a and s.key not in used_b]
    return out


def _renames(maps_a: dict[str, list], maps_b: dict[str, list]) -> dict[str, str]:
    """A's unpaired kernel names -> B's, each pair the one whose stages' source lines overlap most
    (`maps_*`: each unpaired kernel stage's source map)."""
    def lines_by_kernel(maps: dict[str, list]) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {}
        for key, pairs in maps.items():
            kernel = _kernel_key(key)
            if kernel is not None:
                found.setdefault(kernel[1], set()).update(int(p[1]) for p in pairs if len(p) == 2 and p[1])
        return found
    from_a, from_b = lines_by_kernel(maps_a), lines_by_kernel(maps_b)
    scored = sorted(((len(la & lb) / len(la | lb), name_a, name_b) for name_a, la in from_a.items()
                     for name_b, lb in from_b.items() if la & lb), reverse=True)
    out: dict[str, str] = {}
    for _score, name_a, name_b in scored:
        if name_a not in out and name_b not in out.values():
            out[name_a] = name_b
    return out


def compare(store: Store, a: Job, b: Job) -> JobDiff:
    """The pairs of two finished jobs, each said same or changed, and the counts side by side."""
    pairs = pair(a, b, lambda job, stage: _source_map(store, job, stage.key))
    sizes_a, sizes_b = {s.key: s.size for s in a.stages}, {s.key: s.size for s in b.stages}
    budget, marked, skipped = MAX_COMPARED_BYTES, [], 0
    for p in pairs:
        if p.a is None or p.b is None:
            marked.append(p)
            continue
        cost = sizes_a.get(p.a, 0) + sizes_b.get(p.b, 0)
        if sizes_a.get(p.a) != sizes_b.get(p.b):  # a different size is a different text: nothing to read
            marked.append(Pair(p.a, p.b, p.how, False))
        elif cost <= budget:
            budget -= cost
            marked.append(Pair(p.a, p.b, p.how, _text(store, a, p.a) == _text(store, b, p.b)))
        else:
            skipped += 1
            marked.append(p)
    return JobDiff(marked, _changes(store, a, b, marked), skipped)


def _source_map(store: Store, job: Job, key: str) -> list:
    head = store.stage_page(job.id, key, 0, 0)  # the stage's record, no text
    return head[0].source_map if head is not None else []


def _text(store: Store, job: Job, key: str) -> str | None:
    found = store.stage_text(job.id, key)
    return found[1] if found is not None else None


def _changes(store: Store, a: Job, b: Job, pairs: list[Pair]) -> list[Change]:
    count_a, count_b = glance.counts(store, a), glance.counts(store, b)
    out = [Change("graphs", len(count_a.graphs), len(count_b.graphs),
                  stage_a=count_a.graphs[0] if count_a.graphs else None,
                  stage_b=count_b.graphs[0] if count_b.graphs else None),
           Change("graph breaks", count_a.graph_breaks, count_b.graph_breaks,
                  stage_a=count_a.breaks.key if count_a.breaks else None,
                  stage_b=count_b.breaks.key if count_b.breaks else None),
           Change("kernels", len(count_a.kernels), len(count_b.kernels))]
    code_a, code_b = _output_code_lines(store, a), _output_code_lines(store, b)
    if code_a is not None or code_b is not None:
        out.append(Change("output-code lines", code_a, code_b))
    out += _kernel_changes(store, a, b, pairs)
    return out


def _output_code_lines(store: Store, job: Job) -> int | None:
    """The lines of every output code Inductor wrote (None: the job has none)."""
    keys = [s.key for s in job.stages if s.key.startswith("inductor.output_code:")]
    if not keys:
        return None
    return sum(head[1] for head in (store.stage_page(job.id, k, 0, 0) for k in keys) if head is not None)


def _kernel_changes(store: Store, a: Job, b: Job, pairs: list[Pair]) -> list[Change]:
    """Per paired GPU kernel (its PTX stages paired): PTX instructions, then registers, spills and
    shared memory from each job's resource table."""
    rows_a, rows_b = _resources(store, a), _resources(store, b)
    out: list[Change] = []
    ptx_pairs = [p for p in pairs if p.a and p.b and p.a.startswith("triton.ptx:")][:MAX_PTX_KERNELS]
    for p in ptx_pairs:
        qa, qb = p.a.split(":", 1)[1], p.b.split(":", 1)[1]
        kernel = qa if qa == qb else f"{qa} → {qb}"
        out.append(Change("PTX instructions", _instructions(_text(store, a, p.a)),
                          _instructions(_text(store, b, p.b)), kernel, p.a, p.b))
        ra, rb = rows_a.get(qa), rows_b.get(qb)
        if ra is None and rb is None:
            continue
        for what, value in (("registers", lambda r: r.registers),
                            ("spilled bytes", lambda r: (r.spill_stores_bytes or 0) + (r.spill_loads_bytes or 0)),
                            ("shared memory bytes",
                             lambda r: (r.static_shared_bytes or 0) + (r.dynamic_shared_bytes or 0))):
            out.append(Change(what, value(ra) if ra else None, value(rb) if rb else None, kernel,
                              "kernels.resources" if ra else None, "kernels.resources" if rb else None))
    return out


def _resources(store: Store, job: Job) -> dict[str, formats.KernelResource]:
    found = store.stage_text(job.id, "kernels.resources") if any(
        s.key == "kernels.resources" for s in job.stages) else None
    if found is None:
        return {}
    try:
        table = formats.get("resources").decode(found[1])
    except formats.FormatError:
        return {}
    return {row.kernel: row for row in table.kernels}


def _instructions(ptx: str | None) -> int | None:
    """PTX instructions: statements (ending in `;`) that are not directives (`.reg`, `.param`, ...)."""
    if ptx is None:
        return None
    return sum(1 for line in ptx.split("\n")
               if (s := line.strip()).endswith(";") and not s.startswith((".", "//")))

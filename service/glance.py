"""What a finished job's compiler did, at a glance: one line of counted facts, each naming the stage
that shows it ("2 graphs · 1 graph break (line 11) · 1 recompile · 3 kernels (5 configs) · compiled
1.9x faster than eager"; for XLA "sharded_mlp: 4 fusions, 45 instructions · 1 all-reduce · 180 passes
ran · temp buffers peak at 8.2 KiB"; for CuTe "1 @cute.jit function · 1 kernel: 12 registers, 0 B static shared
memory · 1 call, compiled, not run"). The page draws it above the stage tabs and the JSON API and
MCP return it, so a newcomer and an agent read the same summary. Everything here is counted from the
stages, their meta and the timings the job stored; nothing is guessed."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from compiler.formats import FORMATS, FormatError, binary_size, kernel_of, speed_verdict
from compiler.model import Stage
from service.store import Job, Store

# Dynamo's compile id in a stage key: frame/compile, with _attempt when Dynamo restarted the analysis.
_COMPILE_ID = re.compile(r":(\d+)/(\d+)(?:_(\d+))?$")
# The stages that hold one compiled GPU kernel each (compiler/kernels/stages.py): `triton.source:<q>`
# and its siblings; the qualifier is the kernel's name, `.N` when it was compiled N+1 times (configs).
_KERNEL_STAGE = re.compile(r"^triton\.(?:source|ttir|ttgir|llir|ptx|amdgcn|sass|metadata):(.+)$")


@dataclass(frozen=True)
class Item:
    """One fact: its words, the stage that shows it (None: the timings pane), the user's lines it
    names, and whether it is a warning (a graph break, a spill, a compiled call slower than eager)."""

    text: str
    stage: str | None
    lines: list[int] = field(default_factory=list)
    warn: bool = False

    def to_json(self) -> dict:
        return asdict(self)

    def parts(self) -> tuple[str, str]:
        """Its words, and apart the lines they end with ("(line 7)", as _lines_text wrote them),
        which the page strikes through once an edit makes the results stale."""
        said = _lines_text(self.lines)
        if said and self.text.endswith(said):
            return self.text[:-len(said)], said.strip()
        return self.text, ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 's'}"


def _lines(pairs: list) -> list[int]:
    return sorted({int(p[1]) for p in pairs if len(p) == 2 and p[1]})


def _lines_text(lines: list[int], most: int = 3) -> str:
    if not lines:
        return ""
    shown = ", ".join(str(n) for n in lines[:most]) + (", …" if len(lines) > most else "")
    return f" (line{'s' if len(lines) > 1 else ''} {shown})"


@dataclass(frozen=True)
class Counts:
    """What glance counts of one finished job, as numbers (service/job_diff.py compares two jobs'):
    graph stages, the graph-break stage's count, recompiled compile ids, kernels by name (a GPU
    kernel's configs: its stage qualifiers; a CPU kernel: its `kernel:` stage), the spilling ones."""

    graphs: list[str] = field(default_factory=list)  # dynamo.fx_graph:<id> keys
    breaks: Stage | None = None  # the dynamo.graph_breaks stage (its meta counts them)
    recompiled: list[str] = field(default_factory=list)  # compile ids after the first of a frame
    kernels: dict[str, set[str]] = field(default_factory=dict)  # kernel name -> its qualifiers (configs)
    first_kernel_stage: dict[str, str] = field(default_factory=dict)  # kernel name -> its first stage
    gpu: bool = False  # the kernels are Triton's (else Inductor's CPU kernels)
    spilling: list[str] = field(default_factory=list)

    @property
    def graph_breaks(self) -> int:
        return int(self.breaks.meta.get("count") or 0) if self.breaks is not None else 0


def counts(store: Store, job: Job) -> Counts:
    """The counted facts of a finished job (empty while it runs); at most two stage heads read."""
    if not job.finished:
        return Counts()
    keys = [s.key for s in job.stages]
    # one graph per compile: an attempt Dynamo abandoned and restarted (0/0, then 0/0_1) is not one
    last_attempt = {}
    for k in keys:
        if k.startswith("dynamo.fx_graph:"):
            m = _COMPILE_ID.search(k)
            last_attempt[k[:m.start()] + f":{m.group(1)}/{m.group(2)}" if m else k] = k
    graphs = list(last_attempt.values())
    breaks = None
    if "dynamo.graph_breaks" in keys:
        found = store.stage_page(job.id, "dynamo.graph_breaks", 0, 0)
        breaks = found[0] if found is not None else None
    recompiled = []
    for key in graphs:
        m = _COMPILE_ID.search(key)
        if m and int(m.group(2)) > 0:
            recompiled.append(key.split(":", 1)[1])
    kernels: dict[str, set[str]] = {}
    first: dict[str, str] = {}
    for key in keys:
        m = _KERNEL_STAGE.match(key)
        if m:
            name = kernel_of(m.group(1))
            kernels.setdefault(name, set()).add(m.group(1))
            first.setdefault(name, key)
    gpu = bool(kernels)
    if not gpu:
        for key in keys:
            if key.startswith("kernel:"):
                kernels[key.split(":", 1)[1]] = {key.split(":", 1)[1]}
                first[key.split(":", 1)[1]] = key
    spilling = []
    if "kernels.resources" in keys:
        found = store.stage_page(job.id, "kernels.resources", 0, 0)
        spilling = list((found[0].meta.get("spilling") if found else None) or [])
    return Counts(graphs, breaks, recompiled, kernels, first, gpu, spilling)


def glance(store: Store, job: Job) -> list[Item]:
    """The facts of a finished job, in the order a reader asks them: graphs, breaks, recompiles,
    kernels, spills, what XLA or CuTe made, speed. Empty while the job runs. Reads stage heads (no
    text), and a CuTe job's resource table."""
    if not job.finished:
        return []
    keys = [s.key for s in job.stages]
    c = counts(store, job)
    items: list[Item] = []
    if c.graphs:  # the index of the compiles where there are several, else the one graph
        items.append(Item(_plural(len(c.graphs), "graph"), "dynamo.compiles" if "dynamo.compiles" in keys
                          else c.graphs[0]))
    if c.breaks is not None:
        stage = c.breaks
        count = c.graph_breaks
        distinct = len(stage.meta.get("distinct") or []) or count
        lines = _lines(stage.source_map)
        text = _plural(count, "graph break") + (f", {distinct} distinct" if distinct < count else "")
        items.append(Item(text + _lines_text(lines), stage.key, lines, warn=True))
    if c.recompiled:  # the stage that says why each recompiled (the failed guard), else the first's guards
        first = f"dynamo.guards_explained:{c.recompiled[0]}"
        why = "dynamo.recompiles" if "dynamo.recompiles" in keys else first if first in keys else None
        items.append(Item(_plural(len(c.recompiled), "recompile"), why, warn=True))
    items.extend(_xla(store, job.id, keys))
    items.extend(_cute(store, job.id, keys))
    items.extend(_kernels(c, keys, _resource_rows(store, job.id, keys) if c.gpu else []))
    speed = _speed(job.timings.get("run") or {})
    if speed is not None:
        items.append(speed)
    return items


def _kernels(c: Counts, keys: list[str], rows: list) -> list[Item]:
    """GPU kernels told apart from their configs, with what the compiler reported of their
    registers, spills and occupancy (`rows`: the job's resource table), or Inductor's CPU kernels;
    spills from the job's resource table's meta."""
    items = []
    if c.gpu:
        total = sum(len(q) for q in c.kernels.values())
        text = _plural(len(c.kernels), "kernel") + (f" ({_plural(total, 'config')})" if total > len(c.kernels) else "")
        used = _registers(rows)
        spills = [r for r in rows if r.spill_stores_bytes is not None and r.spill_loads_bytes is not None]
        if rows and len(spills) == len(rows) and not c.spilling and not any(r.spills for r in rows):
            used.append("no spills")  # a spilling kernel is a warning of its own, below
        percents = sorted({r.occupancy.percent for r in rows if r.occupancy is not None})
        if percents:
            span = f"{percents[0]:g}%" if len(percents) == 1 else f"{percents[0]:g}–{percents[-1]:g}%"
            used.append(f"{span} theoretical occupancy")
        text += ": " + ", ".join(used) if used else ""
        target = "kernels.resources" if "kernels.resources" in keys else next(iter(c.first_kernel_stage.values()))
        items.append(Item(text, target))
    elif c.kernels:  # Inductor's CPU kernels: their table where the job has one
        items.append(Item(_plural(len(c.kernels), "kernel"), "kernels.resources" if "kernels.resources" in keys
                          else next(iter(c.first_kernel_stage.values()))))
    if c.spilling:
        items.append(Item(f"{_plural(len(c.spilling), 'kernel')} spill{'s' if len(c.spilling) == 1 else ''} "
                          "registers", "kernels.resources", warn=True))
    return items


def _meta(store: Store, job_id: str, key: str, keys: list[str]) -> dict:
    """A stage's meta ({} when the job has no such stage): its head only, no text."""
    found = store.stage_page(job_id, key, 0, 0) if key in keys else None
    return found[0].meta if found is not None else {}


def _xla(store: Store, job_id: str, keys: list[str]) -> list[Item]:
    """An XLA job (hlo, stablehlo, jax): the modules a JAX program compiled, the optimized modules'
    fusions and instructions, the collectives the partitioner inserted, the passes XLA ran and the
    peak of the temp buffers; each from its stage's meta (compiler/xla/pipeline.py, dump_stages.py).
    A job of one module has `xla.optimized`; a JAX program's modules `xla.optimized:<module>`: their
    counts are summed, the peak is the largest, and each item leads to the first module's stage."""
    modules = [""] if "xla.optimized" in keys else [k.split(":", 1)[1] for k in keys if k.startswith("xla.optimized:")]
    if not modules:
        return []

    def each(kind: str) -> list[tuple[str, dict]]:  # (key, meta) of one kind of stage, per module
        found = [f"{kind}:{m}" if m else kind for m in modules]
        return [(k, _meta(store, job_id, k, keys)) for k in found if k in keys]

    items = []
    jitted = _meta(store, job_id, "xla.jitted", keys).get("modules") or []
    if jitted:
        own = sum(1 for m in jitted if isinstance(m, dict) and m.get("own"))
        more = f" ({_plural(len(jitted), 'module')} compiled)" if len(jitted) > own else ""
        items.append(Item(_plural(own, "jitted function") + more, "xla.jitted"))
    optimized = [(k, m) for k, m in each("xla.optimized") if isinstance(m.get("counts"), dict)]
    if optimized:
        fusions = sum(int(m["counts"].get("fusions") or 0) for _, m in optimized)
        instructions = sum(int(m["counts"].get("instructions") or 0) for _, m in optimized)
        first, meta = optimized[0]
        # one module is named as XLA names it (an HLO module's name, `jit_fn` for a jitted function)
        name = f"{meta['module']}: " if len(optimized) == 1 and isinstance(meta.get("module"), str) else ""
        fusion_table = first.replace("xla.optimized", "xla.fusions", 1)
        items.append(Item(f"{name}{_plural(fusions, 'fusion')}, {_plural(instructions, 'instruction')}",
                          fusion_table if fusion_table in keys else first))
    inserted = [(k, c["opcode"]) for k, m in each("xla.spmd") for c in m.get("collectives") or []
                if isinstance(c, dict) and isinstance(c.get("opcode"), str)]
    if inserted:
        ops = [op for _, op in inserted]
        items.append(Item(", ".join(f"{ops.count(op)} {op}" for op in dict.fromkeys(ops)), inserted[0][0]))
    runs = [(k, len(m["runs"])) for k, m in each("xla.passes") if m.get("runs")]
    if runs:
        ran = sum(n for _, n in runs)
        items.append(Item(f"{ran} pass{'es' if ran != 1 else ''} ran", runs[0][0]))
    peaks = [(m["peak_bytes"], k) for k, m in each("xla.memory") if isinstance(m.get("peak_bytes"), (int, float))]
    if peaks:
        peak, where = max(peaks)
        items.append(Item(f"temp buffers peak at {binary_size(peak)}" if peak else "no temp buffer", where))
    return items


def _resource_rows(store: Store, job_id: str, keys: list[str]) -> list:
    """The rows of the job's resource table (`kernels.resources`, one per compiled kernel config):
    what the compiler and ptxas reported; [] when the job has none."""
    found = store.stage_text(job_id, "kernels.resources") if "kernels.resources" in keys else None
    try:
        return FORMATS["resources"].decode(found[1]).kernels if found is not None else []
    except FormatError:
        return []


def _registers(rows: list) -> list[str]:
    """The registers per thread the rows report, as words (["12 registers"], ["32–40 registers"])."""
    registers = sorted({r.registers for r in rows if r.registers is not None})
    if not registers:
        return []
    span = str(registers[0]) if len(registers) == 1 else f"{registers[0]}–{registers[-1]}"
    return [f"{span} register{'s' if registers[-1] != 1 else ''}"]


def _cute(store: Store, job_id: str, keys: list[str]) -> list[Item]:
    """A CuTe DSL job: the @cute.jit functions compiled, their kernels with the registers and static
    shared memory the cubin gives each (the `kernels.resources` table), and the calls made."""
    functions = [k for k in keys if k.startswith("cute.metadata:")]
    if not functions:
        return []
    items = [Item(_plural(len(functions), "@cute.jit function"), next((k for k in keys if k.startswith("cute.ir:")),
                                                                   functions[0]))]
    rows = _resource_rows(store, job_id, keys)
    if rows:
        used = _registers(rows)
        shared = [r.static_shared_bytes for r in rows if r.static_shared_bytes is not None]
        if shared:
            most = max(shared)
            used.append(("" if len(set(shared)) == 1 else "up to ") + f"{binary_size(most)} static shared memory")
        items.append(Item(_plural(len(rows), "kernel") + (": " + ", ".join(used) if used else ""), "kernels.resources"))
    launches = _meta(store, job_id, "cute.launches", keys)
    if isinstance(launches.get("count"), int):
        run = ", compiled, not run" if launches.get("virtual") and not launches.get("executed") else ""
        items.append(Item(_plural(launches["count"], "call") + run, "cute.launches"))
    return items


def _speed(run: dict) -> Item | None:
    """The measured speed-up, in words that say which way it went (a ratio under 1 is slower), or
    that it is within the timed runs' noise (compiler/formats/timings.py: speed_verdict)."""
    verdict = speed_verdict(run)
    if verdict is None:
        return None
    words, way = verdict
    return Item("compiled vs eager: within noise" if way == "noise" else words, None, warn=way == "slower")

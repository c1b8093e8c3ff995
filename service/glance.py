"""What a finished job's compiler did, at a glance: one line of counted facts, each naming the stage
that shows it ("2 graphs · 1 graph break (line 11) · 1 recompile · 3 kernels (5 configs) · compiled
1.9x faster than eager"). The page draws it above the stage tabs and the JSON API and MCP return it,
so a newcomer and an agent read the same summary. Everything here is counted from the stages and
timings the job stored; nothing is guessed."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from compiler.formats import kernel_of
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
    graphs = [k for k in keys if k.startswith("dynamo.fx_graph:")]
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
    kernels, spills, speed. Empty while the job runs. Reads at most two stage heads (no text)."""
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
    if c.recompiled:
        first = f"dynamo.guards_explained:{c.recompiled[0]}"
        items.append(Item(_plural(len(c.recompiled), "recompile"), first if first in keys else None, warn=True))
    items.extend(_kernels(c, keys))
    speed = _speed(job.timings.get("run") or {})
    if speed is not None:
        items.append(speed)
    return items


def _kernels(c: Counts, keys: list[str]) -> list[Item]:
    """GPU kernels told apart from their configs, or Inductor's CPU kernels; spills from the job's
    resource table's meta."""
    items = []
    if c.gpu:
        total = sum(len(q) for q in c.kernels.values())
        text = _plural(len(c.kernels), "kernel") + (f" ({_plural(total, 'config')})" if total > len(c.kernels) else "")
        target = "kernels.resources" if "kernels.resources" in keys else next(iter(c.first_kernel_stage.values()))
        items.append(Item(text, target))
    elif c.kernels:
        items.append(Item(_plural(len(c.kernels), "kernel"), next(iter(c.first_kernel_stage.values()))))
    if c.spilling:
        items.append(Item(f"{_plural(len(c.spilling), 'kernel')} spill{'s' if len(c.spilling) == 1 else ''} "
                          "registers", "kernels.resources", warn=True))
    return items


def _speed(run: dict) -> Item | None:
    """The measured speed-up, in words that say which way it went (a ratio under 1 is slower)."""
    speedup = run.get("speedup")
    if not isinstance(speedup, (int, float)) or speedup <= 0:
        return None
    if speedup >= 1:
        return Item(f"compiled {speedup:.2f}× faster than eager", None)
    return Item(f"compiled {1 / speedup:.2f}× slower than eager", None, warn=True)

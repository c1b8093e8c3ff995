"""What a finished job's compiler did, at a glance: one line of counted facts, each naming the stage
that shows it ("2 graphs · 1 graph break (line 11) · 1 recompile · 3 kernels (5 configs) · compiled
1.9x faster than eager"). The page draws it above the stage tabs and the JSON API and MCP return it,
so a newcomer and an agent read the same summary. Everything here is counted from the stages and
timings the job stored; nothing is guessed."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from compiler.formats import kernel_of
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


def glance(store: Store, job: Job) -> list[Item]:
    """The facts of a finished job, in the order a reader asks them: graphs, breaks, recompiles,
    kernels, spills, speed. Empty while the job runs. Reads at most two stage heads (no text)."""
    if not job.finished:
        return []
    keys = [s.key for s in job.stages]
    items: list[Item] = []
    graphs = [k for k in keys if k.startswith("dynamo.fx_graph:")]
    if graphs:
        items.append(Item(_plural(len(graphs), "graph"), graphs[0]))
    if "dynamo.graph_breaks" in keys:
        found = store.stage_page(job.id, "dynamo.graph_breaks", 0, 0)
        if found is not None:
            stage = found[0]
            count = int(stage.meta.get("count") or 0)
            distinct = len(stage.meta.get("distinct") or []) or count
            lines = _lines(stage.source_map)
            text = _plural(count, "graph break") + (f", {distinct} distinct" if distinct < count else "")
            items.append(Item(text + _lines_text(lines), stage.key, lines, warn=True))
    recompiled = []
    for key in graphs:
        m = _COMPILE_ID.search(key)
        if m and int(m.group(2)) > 0:
            recompiled.append(key.split(":", 1)[1])
    if recompiled:
        first = f"dynamo.guards_explained:{recompiled[0]}"
        items.append(Item(_plural(len(recompiled), "recompile"), first if first in keys else None, warn=True))
    items.extend(_kernels(store, job, keys))
    speed = _speed(job.timings.get("run") or {})
    if speed is not None:
        items.append(speed)
    return items


def _kernels(store: Store, job: Job, keys: list[str]) -> list[Item]:
    """GPU kernels told apart from their configs, or Inductor's CPU kernels; spills from the job's
    resource table's meta."""
    configs: dict[str, set[str]] = {}
    first: dict[str, str] = {}
    for key in keys:
        m = _KERNEL_STAGE.match(key)
        if m:
            qualifier = m.group(1)
            name = kernel_of(qualifier)
            configs.setdefault(name, set()).add(qualifier)
            first.setdefault(name, key)
    items = []
    if configs:
        total = sum(len(q) for q in configs.values())
        text = _plural(len(configs), "kernel") + (f" ({_plural(total, 'config')})" if total > len(configs) else "")
        target = "kernels.resources" if "kernels.resources" in keys else next(iter(first.values()))
        items.append(Item(text, target))
    else:
        cpu = [k for k in keys if k.startswith("kernel:")]
        if cpu:
            items.append(Item(_plural(len(cpu), "kernel"), cpu[0]))
    if "kernels.resources" in keys:
        found = store.stage_page(job.id, "kernels.resources", 0, 0)
        spilling = found[0].meta.get("spilling") if found else None
        if spilling:
            items.append(Item(f"{_plural(len(spilling), 'kernel')} spill{'s' if len(spilling) == 1 else ''} "
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

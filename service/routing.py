"""Where a job runs in the worker tier: its queue, and the GPU target it compiles for.

Queues are named by target: `cpu` for everything that runs on the host, `cuda:sm_90`,
`hip:gfx942`, ... for a worker with that device. A job for a GPU target goes to that target's
queue when a live worker serves it; with none online it compiles on the `cpu` queue for a virtual
device, and its placement says so ("virtual: no sm_90 worker online"). `target: auto` is resolved
here, at enqueue time, to the target it will compile for, so the resolved target is part of the
request, and so of the cache key.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from compiler.model import Request
from compiler.targets import TARGETS, resolve

CPU_QUEUE = "cpu"


@dataclass(frozen=True)
class Placement:
    queue: str
    target: str | None  # the GPU target the job compiles for; None: the host
    virtual: bool  # compiled for a device no worker of that queue has
    note: str  # what the page says about it

    def to_json(self) -> dict[str, Any]:
        return {"queue": self.queue, "target": self.target, "virtual": self.virtual, "note": self.note}


def arch_name(target: str) -> str:
    """`cuda:sm_90` -> `sm_90`, `hip:gfx942` -> `gfx942`."""
    return target.split(":", 1)[-1]


def is_gpu_queue(queue: str) -> bool:
    return queue.startswith(("cuda:", "hip:"))


def place(request: Request, live_queues: dict[str, bool], choices: tuple[Any, ...] = ()) -> tuple[Request, Placement]:
    """The request as it will be compiled (`target: auto` resolved) and where it goes.
    `live_queues` maps each queue live workers take jobs from to whether one of them has that
    queue's device; `choices` are the values the language's target option allows (auto resolves
    to one of them)."""
    target = request.options.get("target")
    if not isinstance(target, str) or (target != "auto" and target not in TARGETS and not is_gpu_queue(target)):
        return request, Placement(CPU_QUEUE, None, False, "")
    if target == "auto":
        # a served target with its device first, then any served one, else the default virtual one
        served = sorted((not has, q) for q, has in live_queues.items()
                        if is_gpu_queue(q) and (not choices or q in choices))
        target = resolve("auto", [q for _, q in served])
        request = replace(request, options={**request.options, "target": target})
    arch = arch_name(target)
    if target not in live_queues:
        return request, Placement(CPU_QUEUE, target, True, f"virtual: no {arch} worker online")
    if not live_queues[target]:
        return request, Placement(target, target, True, f"virtual: the {arch} workers online have no {arch} device")
    return request, Placement(target, target, False, f"on a {arch} worker")

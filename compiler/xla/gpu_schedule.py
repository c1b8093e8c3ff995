"""What XLA:GPU's latency-hiding scheduler decided: its own schedule dump (`ScheduleProto`, written
with `xla_dump_latency_hiding_schedule`: each instruction's estimated start and end in the cost
model's units, memory after it, and the wasted cycles per collective kind) and the async start/done
pairs of a scheduled module with the instructions scheduled between them. Pure functions over a
parsed message or HLO text."""
from __future__ import annotations

from typing import Any

from compiler.xla.hlo_text import HloComputation

# Instructions that do work on the device (what overlap hides a collective behind); the rest are
# bookkeeping (bitcasts, tuples, parameters, constants).
_COMPUTE = ("fusion", "custom-call", "dot", "convolution", "reduce", "sort", "scatter", "gather", "copy",
            "transpose", "while", "conditional", "call")


def is_compute(opcode: str) -> bool:
    return opcode in _COMPUTE


def async_pairs(computation: HloComputation) -> list[dict[str, Any]]:
    """Each `*-start` of a scheduled computation with its `*-done` (the done's operand is the start)
    and what was scheduled between them: every instruction, and the compute among them."""
    order = computation.instructions
    index = {ins.name: k for k, ins in enumerate(order)}
    pairs = []
    for k, ins in enumerate(order):
        if not ins.opcode.endswith("-done") or not ins.operands:
            continue
        start = ins.operands[0]
        if start not in index or not order[index[start]].opcode.endswith("-start"):
            continue
        s = index[start]
        between = order[s + 1: k]
        pairs.append({"start": start, "done": ins.name, "opcode": order[s].opcode.removesuffix("-start"),
                      "start_index": s, "done_index": k, "between": [b.name for b in between],
                      "compute": [b.name for b in between if is_compute(b.opcode)]})
    return pairs


def schedule_records(message: Any) -> dict[str, Any]:
    """A parsed `xla.ScheduleProto` -> {computation name: {"instructions": [{name, opcode, start,
    end, memory_after}], "statistics": {...}}, with "cycles_per_microsecond" when XLA gives it."""
    names = {}
    comp_names = {}
    for comp in message.hlo_module.computations:
        comp_names[comp.id] = comp.name
        for ins in comp.instructions:
            names[ins.id] = (ins.name, ins.opcode)
    out: dict[str, Any] = {}
    for sched in message.computation_schedules:
        rows = []
        for ins in sched.instructions:
            name, opcode = names.get(ins.id, (f"#{ins.id}", "?"))
            rows.append({"name": name, "opcode": opcode, "start": ins.start_timestamp_cycles,
                         "end": ins.end_timestamp_cycles, "memory_after": ins.memory_usage_after})
        stats = {f.name: value for f, value in sched.scheduler_statistics.ListFields()}
        record = {"instructions": rows, "statistics": stats}
        if sched.cycles_per_microsecond:
            record["cycles_per_microsecond"] = sched.cycles_per_microsecond
        out[comp_names.get(sched.computation_id, f"#{sched.computation_id}")] = record
    return out

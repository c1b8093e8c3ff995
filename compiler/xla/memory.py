"""XLA's buffer assignment (BufferAssignment::ToString) and live ranges (HloLiveRange::ToString),
and the memory of the temp allocation over program order built from them. Pure functions."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BufferValue:
    id: int
    instruction: str
    index: str        # shape index as printed, "{}" for the top level
    size: int
    offset: int
    shape: str

    @property
    def key(self) -> str:
        return f"{self.instruction}{self.index}"


@dataclass
class Allocation:
    index: int
    size: int
    kind: str         # parameter, output, thread-local, temp, constant, other
    description: str
    values: list[BufferValue] = field(default_factory=list)


_ALLOC_RE = re.compile(r"^allocation (\d+): size (\d+), (.*)$")
_VALUE_RE = re.compile(r"^\s*value: <(\d+) ([^\s{>]+)(\{[\d,]*\})?[^>]*> \(size=(\d+),offset=(\d+)\): (.*)$")


def parse_buffer_assignment(text: str) -> list[Allocation]:
    """Allocations with the values placed in them (size, offset inside the allocation)."""
    allocations: list[Allocation] = []
    for line in text.split("\n"):
        m = _ALLOC_RE.match(line)
        if m:
            desc = m.group(3).rstrip(":")
            if desc.startswith("parameter"):
                kind = "parameter"
            elif "preallocated-temp" in desc:
                kind = "temp"
            elif "thread-local" in desc:
                kind = "thread-local"
            elif desc.startswith("output") or "maybe-live-out" in desc:
                kind = "output"
            elif desc.startswith("constant"):
                kind = "constant"
            else:
                kind = "other"
            allocations.append(Allocation(int(m.group(1)), int(m.group(2)), kind, desc))
            continue
        m = _VALUE_RE.match(line)
        if m and allocations:
            allocations[-1].values.append(BufferValue(int(m.group(1)), m.group(2), m.group(3) or "{}",
                                                      int(m.group(4)), int(m.group(5)), m.group(6).strip()))
    return allocations


@dataclass
class LiveRanges:
    sequence: list[str]                 # flattened instruction order
    ranges: dict[str, tuple[int, int]]  # value key (name{index}) -> [start, end] positions
    peak_time: int | None
    peak_values: list[tuple[str, int]]  # (value key, bytes) live at the peak, as XLA lists them
    max_time: int


def live_range_in_buffer_assignment(buffer_assignment: str) -> str | None:
    """Adapter: XLA in jaxlib 0.9 (toolchain jax-0.9.2) writes no `-live-range.txt` dump; its
    HloLiveRange section ends the buffer-assignment dump instead (jaxlib 0.10 moved it to its own
    file). That section, or None when the dump has none."""
    at = buffer_assignment.find("\nHloLiveRange (max ")
    return buffer_assignment[at + 1:] if at >= 0 else None


def parse_live_range(text: str) -> LiveRanges:
    sequence: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    peak_time, peak_values, max_time = None, [], 0
    section = ""
    m = re.search(r"HloLiveRange \(max (\d+)\)", text)
    if m:
        max_time = int(m.group(1))
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("InstructionSequence"):
            section = "seq"
            continue
        if s.startswith("BufferLiveRange"):
            section = "ranges"
            continue
        m = re.match(r"Live ranges at (\d+) \(peak\)", s)
        if m:
            section, peak_time = "peak", int(m.group(1))
            continue
        if s.startswith("Stack trace breakdown"):
            section = ""
            continue
        if section == "seq":
            m = re.match(r"(\d+):(\S+)$", s)
            if m:
                sequence.append(m.group(2))
        elif section == "ranges":
            m = re.match(r"(\S+):(\d+)-(\d+)$", s)
            if m:
                ranges[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif section == "peak":
            m = re.match(r"(\S+): (\d+) bytes", s)
            if m:
                peak_values.append((m.group(1), int(m.group(2))))
    return LiveRanges(sequence, ranges, peak_time, peak_values, max_time)


def _live_union_bytes(blocks: list[dict[str, Any]]) -> int:
    """Bytes of the temp allocation that hold at least one of `blocks`: a value an instruction
    updates in place sits in its operand's bytes, and those bytes are counted once."""
    total, end = 0, -1
    for offset, stop in sorted((b["offset"], b["offset"] + b["size"]) for b in blocks):
        if offset >= end:
            total += stop - offset
        elif stop > end:
            total += stop - end
        end = max(end, stop)
    return total


def memory_timeline(allocations: list[Allocation], live: LiveRanges) -> dict[str, Any]:
    """Memory over program order for XLA's temp buffer.

    Every value XLA placed in a preallocated-temp allocation is a block [start, end] (its live
    range from HloLiveRange, both ends included) x [offset, offset+size). At each program step:

    - `live_bytes`: the bytes holding a value live at that step (in-place updates share their
      operand's bytes and count once);
    - `high_water`: the highest occupied byte, as XLA's heap packed the values.

    The peak is the maximum of `live_bytes`, at the first step reaching it (XLA's own peak step
    when that one reaches it too), with the values live there listed by size. The maximum of
    `high_water` is the heap's size, XLA's temp_size_in_bytes; the difference to the peak is what
    the packing left unused (fragmentation)."""
    blocks = []
    temp_size = 0
    base = 0
    unranged = []
    for alloc in allocations:
        if alloc.kind != "temp":
            continue
        for v in alloc.values:
            if v.key in live.ranges:
                start, end = live.ranges[v.key]
            else:  # XLA listed no live range: assume the whole program, and say so
                start, end = 0, live.max_time
                unranged.append(v.key)
            blocks.append({"name": v.key, "offset": base + v.offset, "size": v.size, "start": start, "end": end,
                           "shape": v.shape, "allocation": alloc.index})
        base += alloc.size
        temp_size += alloc.size
    steps = max(live.max_time, max((b["end"] for b in blocks), default=0))
    live_bytes, high_water = [], []
    for t in range(steps + 1):
        here = [b for b in blocks if b["start"] <= t <= b["end"]]
        live_bytes.append(_live_union_bytes(here))
        high_water.append(max((b["offset"] + b["size"] for b in here), default=0))
    peak = max(live_bytes, default=0)
    peak_at = live_bytes.index(peak) if live_bytes else 0
    if live.peak_time is not None and 0 <= live.peak_time < len(live_bytes) and live_bytes[live.peak_time] == peak:
        peak_at = live.peak_time
    here = [b for b in blocks if b["start"] <= peak_at <= b["end"]]
    at_peak = []
    for b in sorted(here, key=lambda b: (-b["size"], b["name"])):
        # another value live at this step in the same bytes: this one was written in place of it
        shared = [o["name"] for o in here if o is not b and o["offset"] < b["offset"] + b["size"]
                  and b["offset"] < o["offset"] + o["size"] and o["start"] < b["start"]]
        at_peak.append({"name": b["name"], "size": b["size"], "offset": b["offset"], "shape": b["shape"],
                        "live": [b["start"], b["end"]], "in_place_of": shared[0] if shared else ""})
    others = [{"allocation": a.index, "kind": a.kind, "size": a.size,
               "values": [v.key for v in a.values][:8]} for a in allocations if a.kind != "temp"]
    return {"steps": steps, "sequence": live.sequence, "blocks": blocks, "live_bytes": live_bytes,
            "high_water": high_water, "peak_bytes": peak, "peak_at": peak_at,
            "peak_instruction": live.sequence[peak_at] if peak_at < len(live.sequence) else "",
            "live_at_peak": at_peak, "heap_bytes": max(high_water, default=0),
            "temp_allocation_bytes": temp_size, "other_allocations": others,
            "xla_peak_step": live.peak_time, "unranged_values": unranged}

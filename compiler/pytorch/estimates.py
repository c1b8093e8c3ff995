"""Inductor's own estimates for each kernel it scheduled: the bytes each scheduler node reads and
writes and its estimated runtime, as Inductor's scheduler computes them (BaseSchedulerNode.
get_read_write_buffers_sizes and get_estimated_runtime, summed by GraphLowering.count_bytes).
Nothing is measured here and nothing is modelled by irscope: these are the numbers Inductor
itself works with, and every stage that shows them says they are estimates.

Inductor hands them to its "inductor_metrics" artifact logger once per compiled graph, with the
scheduler nodes themselves; a handler on that logger (the way compiler/pytorch/artifact_logs.py
collects the other artifact logs) reads each node's name, the post-grad FX nodes it came from
and, through Inductor's provenance tracking, the kernels it ended up in and the one generated from
it (whose row of the job's `kernels.resources` carries the node's bytes: `kernel_bytes`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

LOGGER = "torch._inductor.compile_fx.__inductor_metrics"

NOTE = ("Estimates, not measurements: Inductor's scheduler's own figures for each scheduled node after "
        "fusion, the bytes it reads and writes (get_read_write_buffers_sizes) and its estimated runtime "
        "(get_estimated_runtime). Inductor estimates runtimes only for GPU kernels it can place on a roofline "
        "(from the device's DRAM bandwidth and peak FLOPS, which it asks the CUDA driver for); for CPU kernels "
        "and on a virtual GPU it estimates none, and the column is left out.")


@dataclass
class GraphEstimates:
    """One compiled graph's estimates, in the scheduler's order."""

    compile_id: str
    backward: bool
    total_bytes: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        runtimes = [r["estimated_runtime_ms"] for r in self.rows if "estimated_runtime_ms" in r]
        out: dict[str, Any] = {"what": "estimates (Inductor's scheduler), not measurements",
                               "graph": "backward" if self.backward else "forward",
                               "total_bytes_read_and_written": self.total_bytes, "nodes": self.rows}
        if runtimes:
            out["total_estimated_runtime_ms"] = round(sum(runtimes), 6)
        return out


class _Collector(logging.Handler):
    def __init__(self, torch: Any):
        super().__init__(level=logging.DEBUG)
        self.torch = torch
        self.graphs: list[GraphEstimates] = []
        self._kernels_seen: set[str] = set()  # provenance keeps every graph's kernels: take the new ones

    def emit(self, record: logging.LogRecord) -> None:
        try:
            metrics = record.args[0] if isinstance(record.args, tuple) and record.args else record.args
            if isinstance(metrics, dict) and "node_runtimes" in metrics:
                self.graphs.append(self._graph(metrics))
        except Exception:  # noqa: BLE001 - reading estimates must never fail a compile
            return

    def _graph(self, metrics: dict[str, Any]) -> GraphEstimates:
        from torch._inductor import debug
        from torch._inductor.virtualized import V
        cid = self.torch._guards.CompileContext.current_compile_id()
        # Inductor's provenance tracking: kernel name (with ":<debug handle>") -> post-grad FX nodes
        provenance: dict[str, set[str]] = {}
        generated: list[tuple[str, frozenset[str]]] = []  # each kernel Inductor generated, with its FX nodes
        known = dict(getattr(debug, "_inductor_triton_kernel_to_post_grad_node_info", {}))
        for kernel, fx_nodes in known.items():
            if kernel in self._kernels_seen:
                continue
            generated.append((kernel.split(":", 1)[0], frozenset(fx_nodes)))
            for name in fx_nodes:
                provenance.setdefault(name, set()).add(kernel.split(":", 1)[0])
        self._kernels_seen.update(known)
        graph = GraphEstimates(str(cid) if cid is not None else "?", bool(getattr(V.graph, "is_backward", False)),
                               int(metrics.get("num_bytes_accessed", 0)))
        for node, runtime_ms in metrics["node_runtimes"]:
            origins = sorted({o.name for sub in node.get_nodes() for o in getattr(sub.node, "origins", ())
                              if getattr(o, "name", None)})
            kernels = sorted({k for name in origins for k in provenance.get(name, ())})
            row: dict[str, Any] = {"node": node.get_name(), "kernels": kernels,
                                   "bytes_read_and_written": int(node.get_read_write_buffers_sizes()),
                                   "from_fx_nodes": origins[:20]}
            # `kernels` names every kernel any of the node's FX nodes went into (an FX node can feed
            # several); the kernel generated from exactly this node's FX nodes is the node's own
            own = {name for name, fx_nodes in generated if fx_nodes == set(origins)} if origins else set()
            if len(own) == 1:
                row["kernel"] = own.pop()
            if runtime_ms:
                row["estimated_runtime_ms"] = round(float(runtime_ms), 6)
            graph.rows.append(row)
        return graph


# The artifact log this module reads; compiler/pytorch/artifact_logs.install switches it on with the
# others (torch._logging.set_logs resets every log it is not given).
ARTIFACT = "inductor_metrics"


def install(torch: Any) -> _Collector:
    """Route the inductor_metrics artifact log (switched on by artifact_logs.install) to a
    collector, and nowhere else."""
    import torch._inductor.compile_fx  # noqa: F401 - creates the artifact logger
    collector = _Collector(torch)
    logger = logging.getLogger(LOGGER)
    logger.handlers = [collector]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return collector


def graphs(collector: _Collector) -> list[GraphEstimates]:
    return list(collector.graphs)


def kernel_bytes(graphs: list[GraphEstimates]) -> dict[str, int]:
    """Each kernel's bytes read and written in one launch as Inductor's scheduler estimates them, by
    the kernel's name: the figure of the scheduler node it was generated from (a row's `kernel`).
    A kernel generated from several nodes (Inductor reuses a kernel whose code is the same, and a
    backward kernel may be named as a forward one) has a figure only where they all have the same."""
    figures: dict[str, set[int]] = {}
    for graph in graphs:
        for row in graph.rows:
            if row.get("kernel"):
                figures.setdefault(row["kernel"], set()).add(int(row["bytes_read_and_written"]))
    return {kernel: next(iter(n)) for kernel, n in figures.items() if len(n) == 1}

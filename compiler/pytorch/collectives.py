"""The collectives `torch.compile` put into each graph it compiled for a virtual world, read from
the graphs themselves, and what they cost under a stated interconnect model.

Inductor runs two hooks of its own on every post-grad graph: `post_grad_custom_pre_pass` before its
post-grad passes and `post_grad_custom_post_pass` after its pattern passes. irscope hangs a
read-only pass on both: it walks the graph, changes nothing, and records every functional
collective (`torch.ops._c10d_functional.*`) with what the FX node itself carries: its operand's and
result's fake tensors (shape, dtype, bytes), its process group (resolved by name to its ranks, and
to the dimension of the mesh that owns it), and its stack trace (the user's innermost line).
Inductor's comm passes come after both hooks (FX bucketing of all-gathers, reduce-scatters and
all-reduces at the end of the post-grad passes, then the scheduler's reordering for overlap), so
what they made of the collectives is read from the output code (`output_code_collectives`): the
calls, their buffers and their order among the kernels.

Costs are estimates, never measurements: an alpha-beta model of a ring on the chosen interconnect
(stated on the page, its bandwidth and latency options of the job), and Inductor's own NCCL model
(`torch._inductor.comm_analysis.estimate_nccl_collective_runtime_from_fx_node`) beside it.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Iterator
from unittest import mock

from compiler.user_code import line_on_stack

# --- the interconnect model -----------------------------------------------------------------------

@dataclass(frozen=True)
class Interconnect:
    """One link technology: per-GPU bandwidth in one direction, and the latency of one step."""

    key: str
    title: str
    bandwidth_gbs: float  # GB/s per GPU, one direction
    latency_us: float  # one step of a ring (launch, synchronisation, first byte)
    source: str


INTERCONNECTS = {
    i.key: i for i in (
        Interconnect("nvlink4", "NVLink 4 (H100 SXM, NVSwitch)", 450.0, 3.0,
                     "NVIDIA H100 datasheet: 900 GB/s NVLink per GPU, both directions together"),
        Interconnect("nvlink3", "NVLink 3 (A100 SXM, NVSwitch)", 300.0, 3.0,
                     "NVIDIA A100 datasheet: 600 GB/s NVLink per GPU, both directions together"),
        Interconnect("nvlink5", "NVLink 5 (B200, NVSwitch)", 900.0, 3.0,
                     "NVIDIA B200 datasheet: 1.8 TB/s NVLink per GPU, both directions together"),
        Interconnect("pcie5", "PCIe 5.0 x16", 64.0, 5.0, "PCI-SIG: 32 GT/s per lane, 16 lanes, one direction"),
        Interconnect("ib-ndr", "InfiniBand NDR (400 Gb/s per GPU)", 50.0, 10.0,
                     "NVIDIA ConnectX-7: 400 Gb/s per port, one port per GPU"),
    )
}
DEFAULT_GPU_INTERCONNECT = "nvlink4"
DEFAULT_HOST_INTERCONNECT = "ib-ndr"
DEFAULT_BY_TARGET = {"cuda:sm_80": "nvlink3", "cuda:sm_90": "nvlink4", "cuda:sm_100": "nvlink5"}

MODEL = ("alpha-beta model of a ring: a collective of n ranks takes steps × latency + bytes each rank sends ÷ "
         "bandwidth. all_reduce sends 2(n−1)/n of the tensor in 2(n−1) steps; all_gather (of its result), "
         "reduce_scatter (of its input) and all_to_all send (n−1)/n in n−1 steps; broadcast and the others send the "
         "whole tensor in n−1 steps. One link per GPU, no contention, no overlap with compute.")


def interconnect_for(key: str, target: str) -> Interconnect:
    """The `interconnect` option's link ("auto": the target GPU's NVLink, InfiniBand between hosts)."""
    if key == "auto":
        key = DEFAULT_BY_TARGET.get(target, DEFAULT_HOST_INTERCONNECT)
    return INTERCONNECTS[key]


def ring_cost(op: str, tensor_bytes: int, n: int) -> tuple[int, int]:
    """(bytes each rank sends, steps) of `op` over a ring of n ranks, for its model tensor's bytes
    (the result of an all_gather, the input of the others)."""
    if n <= 1:
        return 0, 0
    if op.startswith("all_reduce"):
        return round(2 * (n - 1) * tensor_bytes / n), 2 * (n - 1)
    if op.startswith(("all_gather", "reduce_scatter", "all_to_all")):
        return round((n - 1) * tensor_bytes / n), n - 1
    return tensor_bytes, n - 1


def estimate_us(moved_bytes: int, steps: int, link: Interconnect, bandwidth_gbs: float | None = None,
                latency_us: float | None = None) -> float:
    bandwidth = bandwidth_gbs or link.bandwidth_gbs
    latency = link.latency_us if latency_us is None else latency_us
    return round(steps * latency + moved_bytes / (bandwidth * 1e3), 3)  # GB/s = 1e3 bytes per µs


# --- reading collectives from FX graphs ----------------------------------------------------------

@dataclass
class GraphCollective:
    """One functional collective of one post-grad graph."""

    op: str  # "all_reduce", "all_gather_into_tensor", ...
    node: str
    group: str  # the process group's name
    group_size: int
    ranks: list[int]
    mesh_dim: str  # "tp", "dim 0", "world", or "" when no mesh owns the group
    input: str  # "f32[16, 64]"
    output: str
    input_bytes: int
    output_bytes: int
    line: int | None  # the user's innermost line in the node's stack trace
    inductor_estimate_us: float | None = None

    @property
    def tensor_bytes(self) -> int:
        """The model's tensor: an all_gather's result, the input of the others."""
        return self.output_bytes if self.op.startswith("all_gather") else self.input_bytes


@dataclass
class GraphRecord:
    compile_id: str
    graph: str  # "forward", "backward", "inference"
    before: list[GraphCollective] = field(default_factory=list)  # before Inductor's post-grad passes
    after: list[GraphCollective] = field(default_factory=list)  # after its pattern passes, before bucketing


class Recorder:
    """The two read-only passes and what they recorded, in compile order."""

    def __init__(self, torch: Any, user_file: str, meshes: list[Any]):
        self.torch = torch
        self.user_file = user_file
        self.meshes = meshes
        self.graphs: list[GraphRecord] = []
        self.eager: list[GraphCollective] = []  # called eagerly while the compiled call ran
        self.errors: list[str] = []

    def passes(self) -> tuple[Any, Any]:
        from torch._inductor.custom_graph_pass import CustomInferenceAwareGraphPass

        recorder = self

        class ReadCollectives(CustomInferenceAwareGraphPass):  # type: ignore[misc]
            def __init__(self, when: str):
                self.when = when

            def __call__(self, graph: Any, is_inference: bool = False) -> None:
                recorder._record(graph, self.when, is_inference)

            def uuid(self) -> Any:
                return f"irscope-read-collectives-{self.when}"  # reads only: the compiled code is the same

        return ReadCollectives("before"), ReadCollectives("after")

    def _record(self, graph: Any, when: str, is_inference: bool) -> None:
        try:
            cid = self.torch._guards.CompileContext.current_compile_id()
            backward = any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes)
            kind = "inference" if is_inference else ("backward" if backward else "forward")
            collectives = [c for c in (self._collective(n) for n in graph.nodes) if c is not None]
            # Both hooks run in one call of Inductor's post_grad_passes: "after" belongs to the last "before".
            if when == "before" or not self.graphs:
                self.graphs.append(GraphRecord(str(cid) if cid is not None else "?", kind))
            if when == "before":
                self.graphs[-1].before = collectives
            else:
                self.graphs[-1].after = collectives
        except Exception as e:  # noqa: BLE001 - reading must never fail the user's compile
            self.errors.append(f"{type(e).__name__}: {e}")

    def _collective(self, node: Any) -> GraphCollective | None:
        torch = self.torch
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            return None
        if target.namespace not in ("_c10d_functional", "_c10d_functional_autograd") or \
                target._opname in ("wait_tensor",):
            return None
        op = target._opname
        schema_args = [a.name for a in target._schema.arguments]
        values = dict(zip(schema_args, node.args))
        values.update(node.kwargs)
        group = str(values.get("group_name", ""))
        size, ranks = _group(group, torch)
        first = node.args[0] if node.args else None
        inputs = first if isinstance(first, (list, tuple)) else [first]
        input_vals = [a.meta.get("val") for a in inputs if hasattr(a, "meta")]
        output_val = node.meta.get("val")
        outputs = output_val if isinstance(output_val, (list, tuple)) else [output_val]
        in_bytes = sum(_nbytes(v) for v in input_vals)
        out_bytes = sum(_nbytes(v) for v in outputs)
        try:
            from torch._inductor.comm_analysis import estimate_nccl_collective_runtime_from_fx_node
            estimate = round(float(estimate_nccl_collective_runtime_from_fx_node(node)) * 1e3, 3)
        except Exception:  # noqa: BLE001 - Inductor's model may not know this op or device
            estimate = None
        return GraphCollective(op=op, node=node.name, group=group, group_size=size, ranks=ranks,
                               mesh_dim=self._mesh_dim(group), input=", ".join(_describe(v) for v in input_vals),
                               output=", ".join(_describe(v) for v in outputs), input_bytes=in_bytes,
                               output_bytes=out_bytes,
                               line=_user_line(node.meta.get("stack_trace") or "", self.user_file),
                               inductor_estimate_us=estimate)

    @contextlib.contextmanager
    def eager_installed(self) -> Iterator[None]:
        """While the compiled call runs: every collective the program calls eagerly, through
        torch.distributed's own functions (FSDP2's hooks do, between and around the compiled
        graphs), recorded with its tensors, group and the user's line, then called as it was."""
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
        torch = self.torch
        with contextlib.ExitStack() as stack:
            for name, tensor_arg in _EAGER.items():
                original = getattr(c10d, name, None)
                if original is None:
                    continue

                def call(*args: Any, __original: Any = original, __name: str = name, __arg: int = tensor_arg,
                         **kwargs: Any) -> Any:
                    if not torch.compiler.is_compiling():
                        self._record_eager(__name, __arg, __original, args, kwargs)
                    return __original(*args, **kwargs)
                for module in (dist, c10d):
                    if getattr(module, name, None) is original:
                        stack.enter_context(mock.patch.object(module, name, call))
            yield

    def _record_eager(self, name: str, tensor_arg: int, function: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        try:
            import inspect

            import torch.distributed as dist
            bound = inspect.signature(function).bind(*args, **kwargs).arguments
            group = bound.get("group") or dist.group.WORLD
            group_name = group.group_name
            size, ranks = _group(group_name, self.torch)
            tensors = [a for a in bound.values() if isinstance(a, self.torch.Tensor)]
            model = tensors[tensor_arg] if len(tensors) > tensor_arg else (tensors[0] if tensors else None)
            nbytes = _nbytes(model)
            line = line_on_stack(self.user_file)
            self.eager.append(GraphCollective(
                op=name, node=f"eager {len(self.eager) + 1}", group=group_name, group_size=size, ranks=ranks,
                mesh_dim=self._mesh_dim(group_name), input=", ".join(_describe(t) for t in tensors[1:] or tensors),
                output=_describe(tensors[0]) if tensors else "?",
                input_bytes=nbytes if not name.startswith("all_gather") else nbytes // max(size, 1),
                output_bytes=nbytes if not name.startswith("reduce_scatter") else nbytes // max(size, 1),
                line=line))
        except Exception as e:  # noqa: BLE001 - reading must never fail the user's program
            self.errors.append(f"{type(e).__name__}: {e}")

    def _mesh_dim(self, group: str) -> str:
        import torch.distributed as dist
        for mesh in self.meshes:
            names = mesh.mesh_dim_names or tuple(f"dim {i}" for i in range(mesh.ndim))
            for dim in range(mesh.ndim):
                try:
                    if mesh.get_group(dim).group_name == group:
                        return names[dim] if mesh.ndim > 1 or mesh.mesh_dim_names else "dim 0"
                except Exception:  # noqa: BLE001
                    continue
        try:
            if dist.group.WORLD is not None and dist.group.WORLD.group_name == group:
                return "world"
        except Exception:  # noqa: BLE001
            pass
        return ""


# torch.distributed's eager collectives, each with the index among its tensor arguments of the
# tensor the cost model takes (an all-gather's output, the others' input; the output comes first).
_EAGER = {"all_reduce": 0, "all_gather_into_tensor": 0, "reduce_scatter_tensor": 1, "all_to_all_single": 1,
          "broadcast": 0, "all_gather": 0, "reduce_scatter": 1, "all_gather_single": 0, "reduce_scatter_single": 1}


def _group(name: str, torch: Any) -> tuple[int, list[int]]:
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group
    try:
        pg = _resolve_process_group(name)
        return int(pg.size()), [int(r) for r in dist.get_process_group_ranks(pg)]
    except Exception:  # noqa: BLE001 - a group Dynamo named but c10d no longer knows
        return 0, []


def _nbytes(value: Any) -> int:
    try:
        return int(value.numel()) * int(value.element_size())
    except Exception:  # noqa: BLE001 - not a tensor, or symbolic sizes
        return 0


_SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
          "int32": "i32", "bool": "b8", "int8": "i8", "uint8": "u8"}


def dtype_name(dtype: Any) -> str:
    name = str(dtype).replace("torch.", "")
    return _SHORT.get(name, name)


def _describe(value: Any) -> str:
    try:
        return f"{dtype_name(value.dtype)}{list(value.shape)}"
    except Exception:  # noqa: BLE001
        return "?"


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def _user_line(stack_trace: str, user_file: str) -> int | None:
    """The innermost frame of the user's file in an FX node's stack trace (outermost first)."""
    lines = [int(line) for path, line in _FRAME.findall(stack_trace) if path == user_file]
    return lines[-1] if lines else None


# --- reading collectives from Inductor's output code ---------------------------------------------

_CALL = re.compile(r"torch\.ops\._c10d_functional\.(\w+?)_?\.default\((\w+)")
_ALLOC = re.compile(r"^\s*(buf\d+) = empty_strided_\w+\(\(([^)]*)\), \(([^)]*)\), torch\.(\w+)\)")


def output_code_collectives(text: str) -> list[dict[str, Any]]:
    """Each collective call in an output code module (pure text): its line, op, buffer, and the
    buffer's shape where the module allocated it; `wait` lines are where its result is waited for."""
    shapes: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        alloc = _ALLOC.match(line)
        if alloc:
            dims = [d.strip() for d in alloc.group(2).split(",") if d.strip()]
            shapes[alloc.group(1)] = f"{_SHORT.get(alloc.group(4), alloc.group(4))}[{', '.join(dims)}]"
            continue
        call = _CALL.search(line)
        if call:
            op, buffer = call.group(1), call.group(2)
            out.append({"line": number, "op": op, "buffer": buffer, "shape": shapes.get(buffer, ""),
                        "wait": op == "wait_tensor"})
    return out


# --- the stage -------------------------------------------------------------------------------------

# Each GPU target's HBM bandwidth, for the compute side of the comparison (memory-bound kernels).
MEMORY_BANDWIDTH_GBS = {"cuda:sm_80": 2039.0, "cuda:sm_90": 3350.0, "cuda:sm_100": 8000.0}

NOTE = ("Rank 0's graphs: every rank of the world compiles the same program. Collectives are read from each "
        "post-grad graph Inductor compiled (a read-only pass on its own post_grad_custom_pre_pass and "
        "post_grad_custom_post_pass hooks), sizes from the graph's fake tensors; Inductor's bucketing and reordering "
        "come after those hooks, and the output code's calls show what they made of them. The compute estimate is "
        "Inductor's "
        "count of the bytes its kernels read and write, at the target's memory bandwidth (a memory-bound lower "
        "bound; none on the host CPU).")


def stage_value(recorder: Recorder, devices: int, link: Interconnect, bandwidth_gbs: float | None,
                latency_us: float | None, target: str, output_codes: dict[str, list[tuple[str, str]]],
                compute_bytes: dict[tuple[str, bool], int]) -> dict[str, Any]:
    """The `collectives` stage (compiler/formats.Collectives). `output_codes`: per compile id, its
    output code stages (key, text) in order; `compute_bytes`: Inductor's bytes read and written per
    (compile id, backward)."""
    memory_bw = MEMORY_BANDWIDTH_GBS.get(target)
    bandwidth = bandwidth_gbs or link.bandwidth_gbs
    latency = link.latency_us if latency_us is None else latency_us
    graphs = []
    records = list(recorder.graphs)
    if recorder.eager:
        records.append(GraphRecord("eager", "called eagerly, outside the compiled graphs", recorder.eager,
                                   recorder.eager))
    for record in records:
        backward = record.graph == "backward"
        code_key, code_calls = "", []
        for key, text in output_codes.get(record.compile_id, []):
            if key.endswith(".backward") == backward:
                code_key = key
                code_calls = [c for c in output_code_collectives(text) if not c["wait"]]
                break
        lines = [c["line"] for c in code_calls] if len(code_calls) == len(record.after) else []
        calls = []
        for i, c in enumerate(record.after):
            sent, steps = ring_cost(c.op, c.tensor_bytes, c.group_size)
            calls.append({"op": c.op, "node": c.node, "mesh_dim": c.mesh_dim, "group_size": c.group_size,
                          "ranks": c.ranks[:1024], "input": c.input, "output": c.output,
                          "tensor_bytes": c.tensor_bytes, "input_bytes": c.input_bytes,
                          "output_bytes": c.output_bytes, "sent_bytes": sent, "steps": steps,
                          "estimate_us": estimate_us(sent, steps, link, bandwidth, latency), "line": c.line,
                          "inductor_estimate_us": c.inductor_estimate_us,
                          "output_code_line": lines[i] if lines else None})
        graph: dict[str, Any] = {"compile_id": record.compile_id, "graph": record.graph, "collectives": calls,
                                 "before_passes": len(record.before), "output_code_stage": code_key,
                                 "output_code_calls": [{k: c[k] for k in ("line", "op", "buffer", "shape")}
                                                       for c in code_calls]}
        nbytes = compute_bytes.get((record.compile_id, backward))
        if nbytes is not None:
            graph["compute_bytes"] = nbytes
            if memory_bw:
                graph["compute_estimate_us"] = round(nbytes / (memory_bw * 1e3), 3)
        graphs.append(graph)
    comm: dict[str, Any] = {"interconnect": link.title, "bandwidth_gbs": bandwidth, "latency_us": latency,
                            "source": link.source if (bandwidth, latency) == (link.bandwidth_gbs, link.latency_us)
                            else "set by the job's link_bandwidth_gbs / link_latency_ns options",
                            "model": MODEL}
    if memory_bw:
        comm["memory_bandwidth_gbs"] = memory_bw
    note = NOTE + (" Reading failed for some graphs: " + "; ".join(recorder.errors[:3]) if recorder.errors else "")
    return {"devices": devices, "comm": comm, "graphs": graphs, "note": note}


def mesh_collectives(value: dict[str, Any]) -> list[dict[str, Any]]:
    """The same collectives as rows of the `mesh` stage's table (compiler/formats.Collective)."""
    rows = []
    for graph in value["graphs"]:
        for c in graph["collectives"]:
            rows.append({"name": c["node"], "opcode": c["op"], "computation": f"{graph['compile_id']} {graph['graph']}",
                         "line": c["line"] or 0, "shape": f"{c['input']} -> {c['output']}", "groups": [c["ranks"]],
                         "group_size": c["group_size"], "groups_text": c["mesh_dim"], "dimensions": "",
                         "operand_bytes": c["input_bytes"], "result_bytes": c["output_bytes"],
                         "moved_bytes": c["sent_bytes"]})
    return rows

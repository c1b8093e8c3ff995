"""Parsers of XLA's dumps, on fixtures recorded from real XLA 0.10.2 runs (tests/fixtures/xla):

- mlp_*: the XLA pipeline's HLO example (tiled + partially replicated shardings, 8 devices);
- attention_*: the JAX example (attention on a 4x2 mesh, Shardy).
"""
from __future__ import annotations

import json
import os

import pytest

from compiler.xla import dump_index, hlo_text, sharding, source_map, traces
from compiler.xla import memory as xla_memory
from compiler.xla import options as xla_options

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "xla")
ATTENTION_FILE = "/tmp/rec/j/user_program.py"  # where the recorded run kept the user's program


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


def stats(name: str) -> dict:
    return json.loads(fixture(name))


# --- dump directory -------------------------------------------------------------------------

def test_index_dump_sorts_files_by_role():
    index = dump_index.index_dump(fixture("mlp_dump_names.txt").split())
    assert index.prefix == "module_0002.sharded_mlp"
    seqs = [s.seq for s in index.snapshots]
    assert seqs == sorted(seqs) and seqs[0] == 0 and len(seqs) == len(set(seqs)) > 20
    assert index.before_optimizations.endswith(".before_optimizations.txt")
    assert index.after_optimizations == "module_0002.sharded_mlp.cpu_after_optimizations.txt"
    assert index.buffer_assignment.endswith("-buffer-assignment.txt")
    assert index.live_range.endswith("-live-range.txt")
    # Every kernel has optimised IR and an object file.
    assert index.llvm_ir and set(index.llvm_ir) == set(index.object_files)
    passes = [(s.pipeline, s.after) for s in index.snapshots]
    assert ("spmd-partitioner", "sharding-propagation") in passes
    assert ("spmd-partitioner", "spmd-partitioning") in passes
    assert passes.index(("spmd-partitioner", "sharding-propagation")) < passes.index(
        ("spmd-partitioner", "spmd-partitioning"))


def test_snapshot_names_with_and_without_a_next_pass():
    s = dump_index.parse_snapshot_name("module_0000.jit_f.x.0012.simplification.after_algsimp."
                                       "before_simplify-sorts.txt")
    assert (s.module, s.seq, s.pipeline, s.after, s.before) == ("jit_f.x", 12, "simplification", "algsimp",
                                                                "simplify-sorts")
    s = dump_index.parse_snapshot_name("module_0000.m.0023.copy-insertion."
                                       "after_adding_copies_to_resolve_interference.txt")
    assert (s.pipeline, s.after, s.before) == ("copy-insertion", "adding_copies_to_resolve_interference", None)
    assert dump_index.parse_snapshot_name("module_0000.m.cpu_after_optimizations.txt") is None


# --- HLO text -------------------------------------------------------------------------------

def test_parse_hlo_text_reads_instructions_and_attributes():
    module = hlo_text.parse_hlo_text(fixture("mlp_propagated.txt"))
    assert module.name == "sharded_mlp" and module.entry.is_entry
    ins = module.by_name()
    assert ins["dot.1"].opcode == "dot" and ins["dot.1"].operands == ["x.1", "w.1"]
    assert ins["dot.1"].sharding == "{devices=[4,2]<=[8]}"
    assert ins["dot.1"].metadata == {"op_name": "dot"}
    assert ins["tuple.1"].sharding == "{{devices=[4,2]<=[8] last_tile_dim_replicate}}"
    assert ins["get-tuple-element.1"].is_root
    text = fixture("mlp_propagated.txt").split("\n")
    assert text[ins["dot.1"].line - 1].lstrip().startswith("%dot.1 = ")


def test_schedule_leaves_out_fusion_bodies():
    module = hlo_text.parse_hlo_text(fixture("mlp_optimized.txt"))
    assert module.is_scheduled
    comps = {c["computation"]: c for c in hlo_text.schedule(module)}
    assert not any(name.startswith("fused_computation") for name in comps)
    entry = next(c for c in comps.values() if c["entry"])
    order = [i["name"] for i in entry["instructions"]]
    # The all-reduce consumes the local reduction, so it is scheduled after it.
    assert order.index("all-reduce") > order.index("wrapped_reduce")


# --- shardings ------------------------------------------------------------------------------

def test_parse_sharding_forms():
    s = sharding.parse_sharding("{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}")
    assert s["type"] == "tiled" and s["tile_dims"] == [1, 2, 4] and s["subgroups"] == ["replicated"]
    assert s["devices"] == [0, 2, 4, 6, 1, 3, 5, 7]
    s = sharding.parse_sharding("{devices=[2,2]0,2,1,3}")
    assert s["devices"] == [0, 2, 1, 3] and s["subgroups"] == []
    s = sharding.parse_sharding("{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}")
    assert s["subgroups"] == ["manual", "replicated"]
    assert sharding.parse_sharding("{maximal device=3}") == {"type": "maximal", "device": 3,
                                                            "text": "{maximal device=3}"}
    assert sharding.parse_sharding("{replicated}")["type"] == "replicated"
    t = sharding.parse_sharding("{{replicated}, {devices=[2,1]<=[2]}, {maximal device=0}}")
    assert [e["type"] for e in t["elements"]] == ["replicated", "tiled", "maximal"]


def test_tiles_with_partial_replication():
    s = sharding.parse_sharding("{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}")
    tiles = sharding.sharding_tiles([128, 256], s, 8)
    assert [(t["ranges"], t["devices"]) for t in tiles] == [
        ([[0, 128], [0, 128]], [0, 2, 4, 6]), ([[0, 128], [128, 256]], [1, 3, 5, 7])]
    # Uneven split: XLA's tiles are ceil(10/4) = 3 long, the last one is short.
    tiles = sharding.sharding_tiles([10], sharding.parse_sharding("{devices=[4]<=[4]}"), 4)
    assert [t["ranges"][0] for t in tiles] == [[0, 3], [3, 6], [6, 9], [9, 10]]
    assert sharding.sharding_tiles([4], {"type": "maximal", "device": 5}, 8)[0]["devices"] == [5]


def test_replica_group_forms():
    assert sharding.parse_replica_groups("{{0,1},{2,3}}", 4) == [[0, 1], [2, 3]]
    assert sharding.parse_replica_groups("{}", 4) == [[0, 1, 2, 3]]
    assert sharding.parse_replica_groups("[2,4]<=[4,2]T(1,0)", 8) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    mesh = "mesh['axis_0'=4,'axis_1'=2] "
    assert sharding.parse_replica_groups(mesh + "{'axis_1'}", 8) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert sharding.parse_replica_groups(mesh + "{'axis_0'}", 8) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert sharding.parse_replica_groups(mesh + "{'axis_0','axis_1'}", 8) == [list(range(8))]
    # A sub-axis: 'a':(2)2 is the middle factor of a = 2x2x2.
    assert sharding.parse_replica_groups("mesh['a'=8] {'a':(2)2}", 8) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert sharding.parse_replica_groups("mesh['a'=2,'b'=2], device_ids=(3,2,1,0) {'b'}", 4) == [[3, 2], [1, 0]]


def test_collectives_of_partitioned_modules():
    mlp = sharding.collectives(hlo_text.parse_hlo_text(fixture("mlp_spmd.txt")), 8)
    assert [c["opcode"] for c in mlp] == ["all-reduce"]
    assert mlp[0]["groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert mlp[0]["operand_bytes"] == 16 * 4  # f32[16]: the row tile of the 64-row result
    attention = sharding.collectives(hlo_text.parse_hlo_text(fixture("attention_spmd.txt")), 8)
    (ar,) = [c for c in attention if c["opcode"] == "all-reduce"]
    assert ar["shape"] == "f32[2,32,64]" and ar["group_size"] == 2
    assert ar["moved_bytes"] == 2 * (2 * 32 * 64 * 4) * 1 // 2


# --- memory ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mlp", "attention"])
def test_memory_peak_is_the_most_bytes_live_and_the_heap_is_xla_temp_size(name):
    allocations = xla_memory.parse_buffer_assignment(fixture(f"{name}_buffer_assignment.txt"))
    live = xla_memory.parse_live_range(fixture(f"{name}_live_range.txt"))
    assert live.sequence and live.ranges and live.peak_time is not None
    timeline = xla_memory.memory_timeline(allocations, live)
    temp_size = stats(f"{name}_xla_stats.json")["memory"]["temp_size_in_bytes"]
    # The peak is the top of the live-bytes line, at the step it names; the line never passes it.
    assert timeline["peak_bytes"] == max(timeline["live_bytes"]) == timeline["live_bytes"][timeline["peak_at"]] > 0
    # The heap as XLA packed it is XLA's temp size; what is live at once never needs more.
    assert timeline["heap_bytes"] == max(timeline["high_water"]) == temp_size == timeline["temp_allocation_bytes"]
    assert timeline["peak_bytes"] <= temp_size
    # Every temp value live at the peak step is listed, largest first, and no other.
    at = timeline["peak_at"]
    live_there = {b["name"] for b in timeline["blocks"] if b["start"] <= at <= b["end"]}
    listed = timeline["live_at_peak"]
    assert {v["name"] for v in listed} == live_there
    assert [v["size"] for v in listed] == sorted((v["size"] for v in listed), reverse=True)
    # No value at the peak shares bytes with another here, so their sizes add up to the peak.
    assert not any(v["in_place_of"] for v in listed)
    assert sum(v["size"] for v in listed) == timeline["peak_bytes"]
    # XLA's own live-range report agrees: its peak step, and the temp values it lists there.
    temp_names = {v.key for a in allocations if a.kind == "temp" for v in a.values}
    assert at == live.peak_time
    assert {name for name, _ in live.peak_values if name in temp_names} == live_there


def test_memory_of_the_sharded_mlp():
    """The chart of the hlo example: the peak is at wrapped_reduce-window, where add_tanh_fusion
    (being reduced) and the reduce-window's result are live together, and it fills XLA's heap;
    the in-place update of ynn_fusion by add_tanh_fusion (same bytes) counts once."""
    allocations = xla_memory.parse_buffer_assignment(fixture("mlp_buffer_assignment.txt"))
    timeline = xla_memory.memory_timeline(allocations, xla_memory.parse_live_range(fixture("mlp_live_range.txt")))
    assert (timeline["peak_bytes"], timeline["peak_at"], timeline["peak_instruction"]) == (
        8448, 8, "wrapped_reduce-window")
    assert [(v["name"], v["size"]) for v in timeline["live_at_peak"]] == [
        ("add_tanh_fusion{}", 8192), ("wrapped_reduce-window{}", 256)]
    step = timeline["sequence"].index("add_tanh_fusion")
    assert timeline["live_bytes"][step] == 8192  # ynn_fusion and add_tanh_fusion: one buffer, written in place


def test_memory_of_the_attention_leaves_part_of_the_heap_unused():
    allocations = xla_memory.parse_buffer_assignment(fixture("attention_buffer_assignment.txt"))
    timeline = xla_memory.memory_timeline(allocations,
                                          xla_memory.parse_live_range(fixture("attention_live_range.txt")))
    assert timeline["peak_bytes"] == 32768 and timeline["heap_bytes"] == 40960
    # somewhere the packing reaches the heap's top with less than the peak live (fragmentation)
    assert any(h == 40960 and b < 40960 for h, b in zip(timeline["high_water"], timeline["live_bytes"]))


def test_an_in_place_update_at_the_peak_is_named():
    allocations = xla_memory.parse_buffer_assignment(
        "allocation 0: size 96, preallocated-temp:\n"
        " value: <1 a @0> (size=64,offset=0): f32[16]{0}\n"
        " value: <2 b @0> (size=64,offset=0): f32[16]{0}\n"
        " value: <3 c @0> (size=32,offset=64): f32[8]{0}\n")
    live = xla_memory.parse_live_range(
        "HloLiveRange (max 3):\n  InstructionSequence:\n    0:a\n    1:b\n    2:c\n"
        "  BufferLiveRange:\n    a{}:0-1\n    b{}:1-2\n    c{}:1-2\n")
    timeline = xla_memory.memory_timeline(allocations, live)
    assert timeline["live_bytes"] == [64, 96, 96, 0] and timeline["peak_at"] == 1
    by_name = {v["name"]: v for v in timeline["live_at_peak"]}
    assert by_name["b{}"]["in_place_of"] == "a{}" and not by_name["c{}"]["in_place_of"]


def test_buffer_assignment_kinds():
    allocations = xla_memory.parse_buffer_assignment(fixture("mlp_buffer_assignment.txt"))
    kinds = [a.kind for a in allocations]
    assert kinds.count("parameter") == 3 and "output" in kinds and kinds.count("temp") == 1
    params = sum(a.size for a in allocations if a.kind == "parameter")
    assert params == stats("mlp_xla_stats.json")["memory"]["argument_size_in_bytes"]


# --- source maps ----------------------------------------------------------------------------

def _line_of(source: str, needle: str) -> int:
    return next(n for n, line in enumerate(source.split("\n"), start=1) if needle in line)


def test_hlo_stack_frames_map_to_user_lines():
    text = fixture("attention_before_optimizations.txt")
    source = fixture("attention_source.py")
    module = hlo_text.parse_hlo_text(text)
    pairs = dict(map(tuple, source_map.hlo_source_map(module, ATTENTION_FILE, text=text)))
    by_line = {i.line: i for i in module.instructions()}
    out_proj = [l for l, i in by_line.items() if "bhqk,hkd->bqd" in i.metadata.get("op_name", "")]
    assert out_proj and all(pairs[l] == _line_of(source, '"bhqk,hkd->bqd"') for l in out_proj)
    softmax_exp = [l for l, i in by_line.items() if i.opcode == "exponential"]
    assert softmax_exp and all(pairs[l] == _line_of(source, "softmax") for l in softmax_exp)


def test_mlir_locations_map_to_user_lines():
    text = fixture("attention_stablehlo.mlir")
    source = fixture("attention_source.py")
    pairs = source_map.mlir_source_map(text, ATTENTION_FILE)
    lines = text.split("\n")
    dots = [u for a, u in pairs if "stablehlo.dot_general" in lines[a - 1]]
    # the attention has six einsums, each a dot_general mapped to its einsum line
    assert len(dots) == 6 and all("einsum" in source.split("\n")[u - 1] for u in dots)


def test_hlo_names_map_to_input_lines():
    propagated = hlo_text.parse_hlo_text(fixture("mlp_propagated.txt"))
    names = {"x": 10, "w": 11, "dot": 13, "act": 16}
    pairs = dict(map(tuple, source_map.hlo_source_map(propagated, names=names)))
    ins = propagated.by_name()
    assert pairs[ins["dot.1"].line] == 13 and pairs[ins["x.1"].line] == 10 and pairs[ins["act.1"].line] == 16


# --- XLA debug options ----------------------------------------------------------------------

def test_descriptor_decoder_on_a_built_file_descriptor():
    """A FileDescriptorProto built with protobuf, followed by the next file's descriptor (as in the
    library: descriptors are stored one after another) and garbage."""
    from google.protobuf import descriptor_pb2 as d
    F = d.FieldDescriptorProto
    debug = d.DescriptorProto(name="DebugOptions", field=[
        F(name="xla_flag", number=7, label=F.LABEL_OPTIONAL, type=F.TYPE_BOOL),
        F(name="xla_passes", number=8, label=F.LABEL_REPEATED, type=F.TYPE_STRING),
        F(name="xla_mode", number=9, label=F.LABEL_OPTIONAL, type=F.TYPE_ENUM, type_name=".xla.DebugOptions.Mode")],
        enum_type=[d.EnumDescriptorProto(name="Mode", value=[d.EnumValueDescriptorProto(name="FAST", number=0),
                                                             d.EnumValueDescriptorProto(name="SLOW", number=1)])])
    xla = d.FileDescriptorProto(name="xla/xla.proto", package="xla", dependency=["xla/xla_data.proto"],
                                message_type=[d.DescriptorProto(name="Other"), debug], syntax="proto3")
    # The next file also has a DebugOptions (with another field): it must not leak into the first.
    other = d.FileDescriptorProto(name="other.proto", message_type=[d.DescriptorProto(name="DebugOptions", field=[
        F(name="xla_other", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32)])])
    blob = xla.SerializeToString()
    assert xla_options.descriptor_length(blob + other.SerializeToString() + b"\xff\xff trailing") == len(blob)
    fields = xla_options.debug_option_fields_from_descriptor(blob + other.SerializeToString() + b"\xff\xff")
    assert set(fields) == {"xla_flag", "xla_passes", "xla_mode"}
    assert fields["xla_flag"].type == "bool" and not fields["xla_flag"].repeated
    assert fields["xla_passes"].repeated and fields["xla_mode"].enum_values == ("FAST", "SLOW")
    assert xla_options.validate_xla_options({"xla_mode": "SLOW", "xla_flag": "true"}, fields) == {
        "xla_mode": "SLOW", "xla_flag": True}
    with pytest.raises(ValueError, match="not a field of XLA's DebugOptions"):
        xla_options.validate_xla_options({"xla_flagg": True}, fields)
    with pytest.raises(ValueError, match="is a bool"):
        xla_options.validate_xla_options({"xla_flag": 3}, fields)


def test_real_debug_options_from_jaxlib():
    fields = xla_options.debug_option_fields()  # jaxlib is pinned: an empty table is a failure
    assert len(fields) > 200
    assert fields["xla_cpu_enable_fast_math"].type == "bool"
    assert fields["xla_backend_optimization_level"].type == "int32"
    assert fields["xla_disable_hlo_passes"].repeated
    with pytest.raises(ValueError, match="set by irscope"):
        xla_options.validate_xla_options({"xla_dump_to": "/tmp"})


# --- pass runs from XLA's trace events --------------------------------------------------------

def test_pass_runs_from_trace_match_the_snapshots():
    events = json.loads(fixture("mlp_trace_events.json"))
    runs = traces.pass_runs(events, "sharded_mlp")
    names = [(r["pipeline"], r["pass"]) for r in runs]
    assert ("spmd-partitioner", "sharding-propagation") in names and ("simplification", "algsimp") in names
    # The partitioner's cleanup pipeline runs inside the spmd-partitioning pass.
    part = runs[names.index(("spmd-partitioner", "spmd-partitioning"))]
    inner = [r for r in runs if r["pipeline"] == "spmd-cleanup"]
    assert inner and all(r["depth"] == part["depth"] + 1 for r in inner)
    assert all(part["start_ns"] <= r["start_ns"] for r in inner)
    index = dump_index.index_dump(fixture("mlp_dump_names.txt").split())
    matched = traces.match_runs_to_snapshots(runs, index.snapshots)
    by_seq = {seq: runs[j] for j, seq in matched.items()}
    for snap in index.snapshots:
        if snap.after == "pipeline-start" or snap.pipeline == "copy-insertion":
            continue  # copy-insertion dumps its own internal steps, which are not passes
        assert snap.seq in by_seq, snap.file
        assert by_seq[snap.seq]["pass"].replace(" ", "_") == snap.after
    # Most passes change nothing and leave no snapshot.
    assert len(runs) > 3 * len(matched)
    phases = traces.trace_phases(events, "sharded_mlp")
    assert phases["PjRtCpuClient::Compile"] > phases["CpuCompiler::RunBackend"] > phases["Codegen"] > 0
    assert 0 < phases["hlo_pass_pipelines"] < phases["PjRtCpuClient::Compile"]

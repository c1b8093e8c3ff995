"""End to end: the XLA pipelines compile with the real XLA in jaxlib (8 virtual CPU devices,
in the pipeline's child process) and every stage is checked against what XLA itself reports."""
from __future__ import annotations

import json
import os
import re

import pytest

from compiler import registry
from compiler.model import Request
from compiler.pipeline import Bundle, JobContext, OptionError, UserError
from compiler.xla import child_process, hlo_text

pytestmark = pytest.mark.slow  # each test compiles with XLA in a child process

# x: rows split 2 ways, columns 2 ways, each tile on 2 devices; w: columns split 2 ways, each on 4.
PARTIAL_HLO = """HloModule partial_replication

ENTRY main {
  x = f32[32,64] parameter(0), sharding={devices=[2,2,2]<=[8] last_tile_dim_replicate}
  w = f32[64,16] parameter(1), sharding={devices=[1,2,4]<=[8] last_tile_dim_replicate}
  dot = f32[32,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = f32[32,16] negate(dot), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}
}
"""


class Result:
    def __init__(self, bundle: Bundle):
        self.manifest = bundle.manifest
        self.directory = bundle.directory
        self.stages = {s.key: s for s in bundle.manifest.stages}

    def text(self, key: str) -> str:
        with open(os.path.join(self.directory, self.stages[key].file), encoding="utf-8") as f:
            return f.read()

    def data(self, key: str) -> dict:
        return json.loads(self.text(key))


def compile_source(language: str, source: str, tmp: str, **options) -> Result:
    pipeline = registry.get(language)
    request = Request(language, source, pipeline.normalise_options(options))
    bundle = Bundle(os.path.join(tmp, "out"))
    pipeline.run(request, JobContext(workdir=tmp, bundle=bundle))
    return Result(bundle)


@pytest.fixture(scope="module")
def hlo(tmp_path_factory) -> Result:
    return compile_source("hlo", PARTIAL_HLO, str(tmp_path_factory.mktemp("hlo")))


@pytest.fixture(scope="module")
def attention(tmp_path_factory) -> Result:
    return compile_source("jax", registry.get("jax").example, str(tmp_path_factory.mktemp("jax")))


REQUIRED = ("xla.input", "xla.stablehlo", "xla.passes", "xla.sharding", "xla.spmd", "xla.optimized", "xla.schedule",
            "xla.buffer_assignment", "xla.memory", "xla.cost", "xla.asm", "xla.graph")


def test_hlo_every_stage_present(hlo):
    assert set(REQUIRED) <= set(hlo.stages)
    assert any(k.startswith("xla.llvm_ir:") for k in hlo.stages)
    assert "Disassembly of section" in hlo.text("xla.asm")
    # XLA's DOT of the optimized entry computation, laid out by Graphviz in the worker: one box per
    # node, the partitioner's collectives among them
    graph = hlo.text("xla.graph")
    assert hlo.stages["xla.graph"].format == "svg" and graph.startswith("<svg")
    assert graph.count('class="node"') == hlo.stages["xla.graph"].meta["nodes"] > 10
    assert ">all-gather</text>" in graph and ">collective-permute</text>" in graph


def test_hlo_pass_snapshots_listed_in_order_with_diffs(hlo):
    passes = hlo.stages["xla.passes"].meta["passes"]
    assert len(passes) > 20
    names = [(p["pipeline"], p["pass"]) for p in passes]
    assert names.index(("spmd-partitioner", "sharding-propagation")) < \
        names.index(("spmd-partitioner", "spmd-partitioning"))
    keys = [k for k in hlo.stages if re.match(r"xla\.pass:\d{4}\.", k)]
    assert keys == [p["key"] for p in passes]
    # Each snapshot names the one before it for the diff view; the chain starts at the input.
    previous = "xla.pass:before_optimizations"
    for key in keys:
        assert hlo.stages[key].meta["diff_with"] == previous
        previous = key
    # 'changed' and the instruction count come from the snapshot texts themselves.
    for p in passes:
        assert p["instructions"] == hlo_text.instruction_count(hlo.text(p["key"]))
    part = next(p for p in passes if p["pass"] == "spmd-partitioning")
    assert part["changed"]
    # Every pass XLA ran, timed by its own trace; the changed ones point at their snapshot.
    runs = hlo.stages["xla.passes"].meta["runs"]
    assert len(runs) > len(passes)
    snap_keys = {p["seq"]: p["key"] for p in passes}
    with_snapshot = [r for r in runs if r["snapshot"] is not None]
    assert len(with_snapshot) > 10
    assert all(snap_keys[r["snapshot"]].endswith("." + r["pass"].replace(" ", "_")) for r in with_snapshot)
    assert "spmd-partitioning" in {r["pass"] for r in with_snapshot}
    timing = hlo.manifest.timings["compile"]
    assert timing["total_ms"] > 0 and timing["phases_ms"]["CpuCompiler::RunBackend"] > 0
    assert sum(1 for p in timing["passes"] if not p["changed"]) > 0


def test_hlo_partitioner_inserted_the_collectives_the_shardings_need(hlo):
    data = hlo.data("xla.sharding")
    x = next(a for a in data["arrays"] if a["role"] == "parameter 0")
    # Partial replication: 4 tiles, each held by 2 devices.
    assert [t["devices"] for t in x["tiles"]] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert x["tiles"][1]["ranges"] == [[0, 16], [32, 64]]
    spmd = hlo.text("xla.spmd")
    found = {c["name"]: c for c in hlo.stages["xla.spmd"].meta["collectives"]}
    ops = sorted(c["opcode"] for c in found.values())
    assert "all-gather" in ops and "collective-permute" in ops
    for c in found.values():
        assert re.search(rf"%{re.escape(c['name'])} = .* {c['opcode']}\(", spmd)
    # The dot contracts x's split columns: x is all-gathered over dimension 1 between the devices
    # holding the same rows and different columns.
    tile_of = {d: tuple(t["index"]) for t in x["tiles"] for d in t["devices"]}
    gather_x = next(c for c in found.values() if c["opcode"] == "all-gather" and c["dimensions"] == "{1}"
                    and c["operand_bytes"] == 16 * 32 * 4)
    for group in gather_x["groups"]:
        assert len({tile_of[d][0] for d in group}) == 1 and len({tile_of[d][1] for d in group}) == 2
    # Propagation gave the dot the result's sharding.
    table = {i["name"]: i["sharding"] for i in data["instructions"]}
    assert table["dot.1"] == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"


def test_hlo_memory_peak_is_xla_temp_size(hlo):
    memory = hlo.data("xla.memory")
    # the sharded MLP packs without waste: the most bytes live at once fill XLA's temp allocation
    assert memory["peak_bytes"] == max(memory["live_bytes"]) == memory["xla_memory_stats"]["temp_size_in_bytes"] > 0
    assert memory["heap_bytes"] == memory["xla_memory_stats"]["temp_size_in_bytes"]
    assert memory["peak_instruction"] == memory["sequence"][memory["peak_at"]] != "partition-id"
    assert memory["live_at_peak"]
    assert "preallocated-temp" in hlo.text("xla.buffer_assignment")


def test_hlo_cost_per_instruction_adds_up_to_xla_total(hlo):
    meta = hlo.stages["xla.cost"].meta
    rows = [r for r in meta["instructions"] if "error" not in r]
    assert sum(r["flops"] for r in rows) == pytest.approx(meta["total"]["flops"])
    assert sum(r["bytes_accessed"] for r in rows) == pytest.approx(meta["total"]["bytes accessed"])
    # Per device: a 16x64 by 64x16 dot.
    assert meta["total"]["flops"] >= 2 * 16 * 64 * 16


def test_hlo_schedule_and_source_map(hlo):
    sched = hlo.data("xla.schedule")
    entry = next(c for c in sched["computations"] if c["entry"])
    optimized = hlo_text.parse_hlo_text(hlo.text("xla.optimized"))
    assert [i["name"] for i in entry["instructions"]] == [i.name for i in optimized.entry.instructions]
    # The dot's metadata names the input's `dot`, line 6.
    pairs = dict(map(tuple, hlo.stages["xla.optimized"].source_map))
    dots = [i.line for i in optimized.instructions() if i.metadata.get("op_name") == "dot"]
    assert dots and all(pairs[line] == 6 for line in dots)
    run = hlo.manifest.timings["run"]
    assert run["repeats"] >= 3 and run["min_ms"] <= run["compiled_ms"] <= run["max_ms"]
    assert run["where"] == "host CPU, 8 virtual XLA devices"


def test_the_summary_says_what_xla_made_each_fact_from_its_stage(hlo, tmp_path):
    """The one line above the results (service/glance.py) for an HLO job, counted from XLA's own
    stages: the optimized module's fusions and instructions, the partitioner's collectives, the
    passes XLA ran and the peak of its temp buffers, each item naming the stage that shows it."""
    from tests.conftest import glance_of_bundle
    items = glance_of_bundle(tmp_path, "hlo", hlo.manifest.stages, hlo.text)
    by_stage = {i["stage"]: i["text"] for i in items}
    optimized = hlo_text.parse_hlo_text(hlo.text("xla.optimized"))
    fusions = sum(1 for i in optimized.instructions() if i.opcode == "fusion")
    instructions = sum(1 for _ in optimized.instructions())
    assert fusions > 0
    assert by_stage["xla.optimized"] == f"partial_replication: {fusions} fusions, {instructions} instructions"
    inserted = [i.opcode for i in hlo_text.parse_hlo_text(hlo.text("xla.spmd")).instructions()
                if i.opcode in ("all-gather", "collective-permute", "all-reduce", "reduce-scatter", "all-to-all")]
    assert inserted and all(f"{inserted.count(op)} {op}" in by_stage["xla.spmd"] for op in set(inserted))
    ran = len(hlo.stages["xla.passes"].meta["runs"])
    assert by_stage["xla.passes"] == f"{ran} passes ran" and f"Every pass XLA ran ({ran})" in hlo.text("xla.passes")
    peak = hlo.data("xla.memory")["peak_bytes"]
    assert by_stage["xla.memory"].startswith("temp buffers peak at ") and (f"{peak:,} B" in by_stage["xla.memory"]
                                                                        or "KiB" in by_stage["xla.memory"])
    assert [i["stage"] for i in items] == ["xla.optimized", "xla.spmd", "xla.passes", "xla.memory"]


def test_jax_attention_on_a_4x2_mesh(attention):
    # the input is the editor's Python: no stage echoes it (HLO's and StableHLO's Input is the module)
    assert set(REQUIRED) - {"xla.input"} <= set(attention.stages) and "xla.input" not in attention.stages
    data = attention.data("xla.sharding")
    assert data["partitioner"] == "shardy" and data["devices"] == 8
    x = next(a for a in data["arrays"] if a["role"] == "parameter 0")
    # Batch over "data" (4 ways), replicated over "model" (2 devices per tile).
    assert len(x["tiles"]) == 4 and all(len(t["devices"]) == 2 for t in x["tiles"])
    # Heads are split over "model", so the output projection sums partial results over it.
    colls = attention.stages["xla.spmd"].meta["collectives"]
    reduce = [c for c in colls if c["opcode"] == "all-reduce"]
    assert reduce and reduce[0]["groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    memory = attention.data("xla.memory")
    assert memory["heap_bytes"] == memory["xla_memory_stats"]["temp_size_in_bytes"]
    assert 0 < memory["peak_bytes"] == max(memory["live_bytes"]) <= memory["heap_bytes"]
    assert sum(v["size"] for v in memory["live_at_peak"] if not v["in_place_of"]) == memory["peak_bytes"]
    assert any(k.endswith(".shardy-xla") for k in attention.stages)


def test_jax_source_maps_reach_the_users_lines(attention):
    source = registry.get("jax").example.split("\n")
    stablehlo = attention.text("xla.stablehlo").split("\n")
    pairs = attention.stages["xla.stablehlo"].source_map
    exponentials = [u for a, u in pairs if "stablehlo.exponential" in stablehlo[a - 1]]
    assert exponentials and all("softmax" in source[u - 1] for u in exponentials)
    spmd_pairs = attention.stages["xla.spmd"].source_map
    spmd = attention.text("xla.spmd").split("\n")
    ar_lines = [a for a, _ in spmd_pairs if " all-reduce(" in spmd[a - 1]]
    assert ar_lines and all('"bhqk,hkd->bqd"' in source[u - 1] for a, u in spmd_pairs if a in ar_lines)
    # the Python stacks XLA keeps name the user's frames only, as a plain run's would: no frame of
    # irscope's (its child, runpy) between them
    optimized = attention.text("xla.optimized")
    names = optimized.split("\nFileNames\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(names) == 1 and names[0].endswith('user_program.py"'), names
    assert "compiler/xla/child.py" not in optimized and "runpy" not in optimized


def test_malformed_hlo_names_the_line(tmp_path):
    bad = PARTIAL_HLO.replace("dot(x, w)", "dot(x, v)")
    with pytest.raises(UserError) as info:
        compile_source("hlo", bad, str(tmp_path))
    assert info.value.error.kind == "SyntaxError"
    assert info.value.error.line == 6
    assert "instruction does not exist: v" in info.value.error.message


def test_xla_abort_comes_back_as_compile_error(tmp_path):
    # An iota replica-group list whose sizes disagree passes the parser, then fails a CHECK
    # (abort) when XLA converts the module; the worker survives and reports XLA's message.
    bad = """HloModule aborts

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  x = f32[8,8] parameter(0)
  ROOT y = f32[8,8] all-reduce(x), replica_groups=[2,2]<=[8], to_apply=add
}
"""
    with pytest.raises(UserError) as info:
        compile_source("hlo", bad, str(tmp_path))
    assert info.value.error.kind == "CompileError"
    message = info.value.error.message
    assert message.startswith("XLA aborted while converting the HLO module to StableHLO")
    assert "Check failed: new_num_elements == num_elements() (4 vs. 8)" in message


def test_xla_options_are_validated_and_applied(tmp_path):
    pipeline = registry.get("hlo")
    with pytest.raises(OptionError, match="not a field of XLA's DebugOptions"):
        pipeline.normalise_options({"xla_options": {"xla_no_such_option": True}})
    with pytest.raises(OptionError, match="is a bool"):
        pipeline.normalise_options({"xla_options": {"xla_cpu_enable_fast_math": 2}})
    result = compile_source("hlo", PARTIAL_HLO, str(tmp_path), devices=8,
                            xla_options={"xla_disable_hlo_passes": ["algsimp", "cse"]})
    passes = {p["pass"] for p in result.stages["xla.passes"].meta["passes"]}
    assert "spmd-partitioning" in passes and not passes & {"algsimp", "cse"}


def test_jax_user_error_names_the_line(tmp_path):
    source = ("import jax.numpy as jnp\n\ndef fn(x):\n    return x @ jnp.ones((3, 3))\n\n"
              "example_args = (jnp.ones((2, 2)),)\n")
    with pytest.raises(UserError) as info:
        compile_source("jax", source, str(tmp_path), devices=1)
    assert info.value.error.kind == "UserCodeError" and info.value.error.line == 4


def test_stablehlo_example_maps_hlo_back_to_its_lines(tmp_path):
    pipeline = registry.get("stablehlo")
    result = compile_source("stablehlo", pipeline.example, str(tmp_path))
    source = pipeline.example.split("\n")
    optimized = hlo_text.parse_hlo_text(result.text("xla.pass:before_optimizations"))
    pairs = dict(map(tuple, result.stages["xla.pass:before_optimizations"].source_map))
    dot = next(i for i in optimized.instructions() if i.opcode == "dot")
    assert "stablehlo.dot_general" in source[pairs[dot.line] - 1]
    colls = result.stages["xla.spmd"].meta["collectives"]
    # Rows in, columns out: the partitioner has to move data between all 8 devices.
    assert colls and all(c["group_size"] == 8 for c in colls)


def test_pipeline_modules_import_no_jax():
    import subprocess
    import sys
    code = ("import sys; from compiler import registry\n"
            "for k in ('hlo', 'stablehlo', 'jax'):\n"
            "    p = registry.get(k); p.normalise_options({'xla_options': {'xla_cpu_enable_fast_math': True}})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib')))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_malformed_stablehlo_names_the_line(tmp_path):
    bad = registry.get("stablehlo").example.replace("stablehlo.logistic %0", "stablehlo.logistic %9")
    with pytest.raises(UserError) as info:
        compile_source("stablehlo", bad, str(tmp_path))
    line = next(n for n, text in enumerate(bad.split("\n"), start=1) if "logistic %9" in text)
    assert info.value.error.kind == "SyntaxError" and info.value.error.line == line
    assert "use of undeclared SSA value name" in info.value.error.message


def test_xla_verifier_error_names_the_instruction_line(tmp_path):
    bad = PARTIAL_HLO.replace("sharding={devices=[1,2,4]<=[8] last_tile_dim_replicate}",
                              "sharding={devices=[2,2]<=[4]}")
    with pytest.raises(UserError) as info:
        compile_source("hlo", bad, str(tmp_path))
    assert info.value.error.kind == "CompileError"
    assert "tile_assignment should have 8 devices but has 4" in info.value.error.message
    assert info.value.error.line == 5  # the line defining w


# A JAX program as JAX's docs write them: a jitted layer, a loss, jax.jit(jax.grad(loss)), a
# jax.vmap, a few steps of gradient descent from a main() guard; no `fn`, no `example_args`.
JAX_PROGRAM = '''import jax
import jax.numpy as jnp


@jax.jit
def layer(params, x):
    w, b = params
    return jnp.tanh(x @ w + b)


def loss(params, x, y):
    pred = layer(params, x)
    return jnp.mean((pred - y) ** 2)


def row_norm(v):
    return jnp.sqrt(jnp.sum(v * v))


def main():
    key = jax.random.PRNGKey(0)
    kw, kx, ky = jax.random.split(key, 3)
    params = (jax.random.normal(kw, (16, 8)), jnp.zeros(8))
    x, y = jax.random.normal(kx, (32, 16)), jax.random.normal(ky, (32, 8))
    print("before", layer(params, x).shape)
    print("norms", jax.jit(jax.vmap(row_norm))(x).shape)
    grad_fn = jax.jit(jax.grad(loss))
    for step in range(3):
        grads = grad_fn(params, x, y)
        params = tuple(p - 0.1 * g for p, g in zip(params, grads))
    print("loss after", float(loss(params, x, y)))


if __name__ == "__main__":
    main()
'''


def test_a_jax_program_that_calls_jit_itself_runs_as_written(tmp_path):
    """Before: "the program must define a function named `fn`"; then only the largest module it
    compiled had stages. Now the program runs as written, every module its jax.jit calls compiled
    is listed, and each of its own (jax.jit, jax.jit(jax.grad(...)), jax.jit(jax.vmap(...))) has
    every stage a `fn` job has, keyed `<stage>:<module>`, titled `[<module>]` and grouped by its
    function and the line that called it; the operations run eagerly get none."""
    result = compile_source("jax", JAX_PROGRAM, str(tmp_path), devices=1)
    out = result.text("run.stdout")
    assert "before (32, 8)" in out and "norms (32,)" in out and "loss after" in out, out
    lines = JAX_PROGRAM.splitlines()
    modules = result.stages["xla.jitted"].meta["modules"]
    own = {m["key"]: m for m in modules if m["own"]}
    assert list(own) == ["jit_layer", "jit_row_norm", "jit_loss"], modules  # JAX's order
    assert own["jit_layer"]["defined"] == lines.index("def layer(params, x):") + 1
    assert own["jit_layer"]["called"] == lines.index('    print("before", layer(params, x).shape)') + 1
    assert own["jit_row_norm"]["called"] == lines.index('    print("norms", jax.jit(jax.vmap(row_norm))(x).shape)') + 1
    assert own["jit_loss"]["called"] == lines.index("        grads = grad_fn(params, x, y)") + 1
    for key, m in own.items():
        assert m["group"] == f"{key} (defined line {m['defined']}, called line {m['called']})" and not m.get("why"), m
        for base in REQUIRED[1:]:  # xla.input is the job's
            stage = result.stages[f"{base}:{key}"]
            assert stage.group == m["group"] and stage.title.endswith(f"[{key}]"), stage
        # what JAX dumped for this function and what XLA made of it, each naming the function
        assert f"module @{key} " in result.text(f"xla.stablehlo:{key}")
        assert result.text(f"xla.optimized:{key}").startswith(f"HloModule {key},")
        assert result.stages[f"xla.optimized:{key}"].source_map, key  # its lines reach the program's
        passes = result.stages[f"xla.passes:{key}"].meta["passes"]
        assert passes and all(p["key"].startswith(f"xla.pass:{key}/") and p["key"] in result.stages for p in passes)
        assert result.data(f"xla.sharding:{key}")["from_stage"] in result.stages
    # JAX compiled the eager operations too (the random initialisation): listed, never compiled again
    eager = {m["module"] for m in modules if not m["own"]}
    assert "jit__normal" in eager, modules
    qualified = {k.split(":", 1)[1].split("/", 1)[0] for k in result.stages if ":" in k}
    assert qualified == set(own), qualified
    # the stage keys of a job of one module are not a program's
    assert not {"xla.stablehlo", "xla.optimized", "xla.passes"} & set(result.stages)
    # the gradient's module holds tanh's derivative, and its lines name the program's lines
    stablehlo = result.text("xla.stablehlo:jit_loss")
    assert "stablehlo.tanh" in stablehlo
    tanh_line = lines.index("    return jnp.tanh(x @ w + b)") + 1
    assert tanh_line in {line for _, line in result.stages["xla.stablehlo:jit_loss"].source_map}
    # the index names each function's lines and links its stages
    jitted = result.stages["xla.jitted"]
    assert {line for _, line in jitted.source_map} == {m["called"] for m in own.values()}
    assert [f["stage"] for f in jitted.meta["file_names"]] == [f"xla.optimized:{k}" for k in own]
    assert "3 of the program's own jitted functions" in result.text("xla.jitted")
    timing = result.manifest.timings["compile"]
    assert [m["module"] for m in timing["modules"]] == list(own) and timing["program_s"] > 0
    assert result.manifest.timings["run"]["module"] == "jit_layer"
    assert registry.get("jax").reproducer(Request("jax", JAX_PROGRAM, {}), {}) is None


def test_a_program_of_many_jitted_functions_compiles_the_first_few(tmp_path):
    """The work is bounded: past the program_modules setting's count of its own modules, the rest are
    listed with why they were not compiled, and the program compiles them untouched: no XLA dump
    (JAX's real dump of a real run, in a child as the pipeline's)."""
    import subprocess
    import sys
    (tmp_path / "user_program.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n\n"
        + "".join(f"@jax.jit\ndef f{n}(x):\n    return x + {n}\n\n\n" for n in range(3))
        + "for f in (f0, f1, f2):\n    print(f(jnp.float32(1)))\n")
    code = ("import json, sys; from compiler.model import JobSettings; from compiler.xla import child\n"
            "child._WORKDIR = sys.argv[1]\n"
            "path = sys.argv[1] + '/user_program.py'\n"
            "job = {'workdir': sys.argv[1], 'dump_dir': sys.argv[1] + '/dump', 'target': 'cpu', 'options': {}}\n"
            "lowered = child._lower_program(job, path, JobSettings(program_modules=2))\n"
            "print(json.dumps([m for m in lowered['program'] if m['own']] + [sorted(lowered['captured'])]))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=root, capture_output=True, text=True,
                         check=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    *own, captured = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m["key"] for m in own] == ["jit_f0", "jit_f1", "jit_f2"], own
    assert [("mlir" in m) for m in own] == [True, True, False]
    assert "compiles the first 2 with every stage (setting program_modules)" in own[2]["why"], own
    assert [m["called"] for m in own] == [21, 21, 21], own
    # the first two captured from the program's compiles, each dumped to its directory; the third not
    assert captured == [m["order"] for m in own[:2]], captured
    assert sorted(os.listdir(tmp_path / "dump")) == [f"{m['order']:04d}" for m in own[:2]]


def test_a_cpu_program_compiles_each_of_its_modules_once(tmp_path):
    """On the CPU target each of the program's own modules is compiled once, by the program itself
    (with XLA's dump on), and its stages read that executable: no second compile by irscope. The
    child runs as the pipeline runs it, every compile through JAX's entry point and irscope's own
    (compile_module) counted by module name."""
    import subprocess
    import sys
    (tmp_path / "user_program.py").write_text(
        "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef f(x):\n    return jnp.sin(x) * 2\n\n\n"
        "@jax.jit\ndef g(x):\n    return f(x) + jnp.cos(x)\n\n\n"
        "x = jnp.ones((8, 8))\nprint(f(x).sum(), g(x).sum(), f(x).sum())\n")
    job = {"language": "jax", "source": "", "options": {"devices": 1}, "workdir": str(tmp_path),
           "dump_dir": str(tmp_path / "dump"), "run": True, "settings": {}, "target": "cpu",
           "user_file": str(tmp_path / "user_program.py"), "program": True}
    (tmp_path / "job.json").write_text(json.dumps(job))
    code = ("import collections, json, sys\n"
            "from jax._src import compiler\nfrom jax._src.lib.mlir import ir\n"
            "from compiler.xla import child\n"
            "counts = collections.Counter()\nreal_jax, real_irscope = compiler.backend_compile_and_load, "
            "child.compile_module\n"
            "def jax_compile(backend, module, *rest):\n"
            "    counts[ir.StringAttr(module.operation.attributes['sym_name']).value] += 1\n"
            "    return real_jax(backend, module, *rest)\n"
            "def irscope_compile(job, lowered):\n"
            "    counts[lowered['module']] += 1\n"
            "    return real_irscope(job, lowered)\n"
            "compiler.backend_compile_and_load, child.compile_module = jax_compile, irscope_compile\n"
            "child.main(['child', sys.argv[1]])\nprint(json.dumps(counts))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "job.json")], cwd=root, capture_output=True,
                         text=True, check=True, env=dict(os.environ, JAX_PLATFORMS="cpu",
                                                         XLA_FLAGS="--xla_force_host_platform_device_count=1"))
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    result = json.loads((tmp_path / "result.json").read_text())
    assert "error" not in result, result
    assert [c["key"] for c in result["compiled"]] == ["jit_f", "jit_g"], result["modules"]
    assert counts["jit_f"] == 1 and counts["jit_g"] == 1, counts  # f called twice: JAX's cache, one compile
    for c in result["compiled"]:  # each one's stages come from the dump of that one compile
        dumped = os.listdir(tmp_path / "dump" / c["dump"])
        assert sum(n.endswith(f".{c['key']}.before_optimizations.txt") for n in dumped) == 1, dumped
        assert c["optimized"].startswith(f"HloModule {c['key']},") and c["compile_ms"] > 0 and c["trace"]
    assert result["compiled"][0]["run"]["repeats"] >= 3, result["compiled"][0]["run"]


def test_a_jax_program_whose_own_module_fails_to_compile_is_its_error(tmp_path):
    """XLA failing the program's own compile of its module (captured on the CPU target) is the
    program's exception at its line, as a plain run says it, not irscope's failure."""
    source = ("import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef f(x):\n"
              "    return jax.ffi.ffi_call('no_such_target', jax.ShapeDtypeStruct(x.shape, x.dtype))(x)\n\n\n"
              "print(f(jnp.ones(4)))\n")
    with pytest.raises(UserError) as info:
        compile_source("jax", source, str(tmp_path), devices=1)
    assert info.value.error.kind == "UserCodeError" and info.value.error.line == 10, info.value.error
    assert "No FFI handler registered for no_such_target" in info.value.error.message


def test_a_jax_program_that_compiles_nothing_says_so(tmp_path):
    with pytest.raises(UserError) as info:
        compile_source("jax", "import jax.numpy as jnp\n\nif __name__ == '__main__':\n    print(jnp.ones(2))\n",
                       str(tmp_path), devices=1)
    assert info.value.error.kind == "InputError"
    assert info.value.error.message.startswith("the program ran to its end and compiled no function of its own")
    assert "operations it ran eagerly" in info.value.error.message


# A program as JAX's sharding tutorials write one: a mesh over every device, an input laid out on it.
SHARDED_PROGRAM = '''import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


@jax.jit
def column_sums(a):
    return (a * 2.0).sum(axis=0)


def main():
    devices = jax.devices()
    print("devices", len(devices))
    mesh = Mesh(devices, ("rows",))
    x = jax.device_put(jnp.arange(64.0).reshape(16, 4), NamedSharding(mesh, P("rows")))
    print(column_sums(x))


if __name__ == "__main__":
    main()
'''

# Set before `import jax`, as people turn on 64-bit floats: JAX reads it when it is imported; set
# after, it is only a variable.
X64_PROGRAM = '''import os
os.environ["JAX_ENABLE_X64"] = "1"

import jax
import jax.numpy as jnp


@jax.jit
def double(x):
    return x * 2


print(double(jnp.arange(4.0)).dtype)
'''
X64_TOO_LATE = X64_PROGRAM.replace('os.environ["JAX_ENABLE_X64"] = "1"\n\nimport jax\n',
                                   'import jax\n\nos.environ["JAX_ENABLE_X64"] = "1"\n')


def test_a_spares_child_started_ahead_compiles_what_a_child_started_for_the_job_does(tmp_path):
    """A spare's XLA child imports jax before its job exists (compiler/xla/child_process.py); the
    job's device count still reaches XLA (XLA_FLAGS, read when its first client starts) and every
    stage is what a child started for the job makes. A JAX_* variable the program sets before its
    `import jax` reaches JAX in either child, as in a plain run; set after, it does not."""
    pipeline = registry.get("jax")
    os.makedirs(tmp_path / "spare")
    pipeline.prepare_spare(str(tmp_path / "spare"), "")
    ahead = pipeline._ahead
    assert ahead is not None and ahead.ready
    served = compile_source("jax", SHARDED_PROGRAM, str(tmp_path / "ahead"), devices=4)
    assert pipeline._ahead is None and ahead.proc.returncode == 0  # it ran the job and ended
    fresh = compile_source("jax", SHARDED_PROGRAM, str(tmp_path / "fresh"), devices=4)
    assert served.manifest.timings["compile"]["child_process"] == child_process.AHEAD
    assert fresh.manifest.timings["compile"]["child_process"] == child_process.FOR_THE_JOB
    for result in (served, fresh):
        assert "devices 4" in result.text("run.stdout"), result.text("run.stdout")
        assert "num_partitions=4" in result.text("xla.optimized:jit_column_sums")
    for key in ("xla.stablehlo:jit_column_sums", "xla.optimized:jit_column_sums", "xla.schedule:jit_column_sums"):
        # (the locations name the program's file in each job's own work directory)
        texts = [re.sub(r"/(ahead|fresh)/xla-\w+/", "/job/", r.text(key)) for r in (served, fresh)]
        assert texts[0] == texts[1], key
        assert key != "xla.stablehlo:jit_column_sums" or "/job/user_program.py" in texts[0]

    pipeline.prepare_spare(str(tmp_path / "spare"), "")
    ahead = pipeline._ahead
    x64 = compile_source("jax", X64_PROGRAM, str(tmp_path / "x64"), devices=1)
    assert ahead.proc.returncode == 0
    assert x64.text("run.stdout").strip() == "float64"
    assert "tensor<4xf64>" in x64.text("xla.stablehlo:jit_double")
    late = compile_source("jax", X64_TOO_LATE, str(tmp_path / "late"), devices=1)
    assert late.text("run.stdout").strip() == "float32"
    assert "tensor<4xf32>" in late.text("xla.stablehlo:jit_double")


def _waiting_children(under: str) -> list[int]:
    """The processes of this host that are XLA children started ahead (compiler/xla/child_process.py)
    by a sandbox of the server whose data directory is `under` (an ancestor's command line names it)."""
    def read(pid: str, name: str) -> bytes:
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                return f.read()
        except OSError:
            return b""

    def ancestors_name(pid: str) -> bool:
        for _ in range(64):
            status = read(pid, "status")
            parent = next((line.split()[1] for line in status.splitlines() if line.startswith(b"PPid:")), b"0")
            pid = parent.decode()
            if pid in ("0", "1"):
                return False
            if under.encode() in read(pid, "cmdline"):
                return True
        return False

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        args = read(pid, "cmdline").split(b"\0")
        if b"compiler.xla.child" in args and b"--wait" in args and ancestors_name(pid):
            found.append(int(pid))
    return found


def test_a_jax_job_is_served_by_a_spare_whose_child_was_started_ahead_and_none_outlives_the_server(tmp_path):
    """Through the runner and its sandbox: a JAX spare starts its XLA child ahead, the job it is
    handed runs there (pre-started, with the job's own device count), the next spare starts its own
    child, and shutting the server down leaves no child behind."""
    import time

    from tests.conftest import make_app, stage_text, wait_job
    app = make_app(tmp_path, languages="jax", workers=1, spare_workers=1)
    runner = app.extensions["irscope"].runner
    try:
        # (a job takes a spare still warming up; on a busy host it warms up at a spare's CPU weight)
        deadline = time.monotonic() + 300
        while not _waiting_children(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_waiting_children(str(tmp_path))) == 1, runner.spares.report()
        client = app.test_client()
        response = client.post("/api/compile", json={"language": "jax", "source": SHARDED_PROGRAM,
                                                     "options": {"devices": 4}})
        job = wait_job(client, response.get_json()["job"])
        assert job["status"] == "done", job["error"]
        assert job["timings"]["job"]["worker"] == "pre-started"
        assert job["timings"]["compile"]["child_process"] == child_process.AHEAD
        assert "devices 4" in stage_text(client, job["id"], "run.stdout")
        assert "num_partitions=4" in stage_text(client, job["id"], "xla.optimized:jit_column_sums")
    finally:
        runner.shutdown()
    deadline = time.monotonic() + 10
    while _waiting_children(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _waiting_children(str(tmp_path))

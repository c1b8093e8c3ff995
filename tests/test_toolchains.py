"""irscope's job-side code on every installed toolchain, end to end through the real service (the
jobs API of an app with the real runner and sandbox): a Triton kernel compiled for a virtual sm_90
by Triton 3.9.0 (default), 3.8.0 (triton-3.8.0, and torch-2.14.1 under torch 2.14.1) and 3.7.0
(triton-3.7.0), and a Gluon kernel by each of those three releases; the `jax`, `hlo` and
`stablehlo` languages on jaxlib 0.10 (default) and 0.9.2 (jax-0.9.2); three PyTorch programs on
torch 2.13 (default) and 2.14.1 (host). Each job records the versions that made it, makes the same
kinds of stage as the default toolchain's job of the same request, and shows what the release
changed; the lesson examples/triton-release-reduction is checked on two of these jobs. The adapters
this exercises: compiler/kernels/jit_location.py (Triton 3.7), compiler/xla/jaxlib_hlo.py and
memory.live_range_in_buffer_assignment (jaxlib 0.9).

Every job is submitted at once by one module fixture and read by every test. The toolchains are
installed by `./run.sh setup` (from toolchain_locks/); a missing one fails here, naming it."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from app import lessons
from compiler import registry
from compiler.gluon.pipeline import EXAMPLE as GLUON_EXAMPLE
from compiler.model import Request
from service import toolchain_envs
from tests.conftest import make_app, needs_bwrap, seed_toolchain_cache, wait_job
from tests.test_examples import run_check

pytestmark = needs_bwrap

# The toolchains toolchain_locks/ pins, and what each holds.
TRITONS = {"default": "3.9.0", "triton-3.8.0": "3.8.0", "triton-3.7.0": "3.7.0", "torch-2.14.1": "3.8.0"}
# Gluon on each Triton release (torch-2.14.1's Triton is triton-3.8.0's: its Triton kernel shows it)
GLUON_TRITONS = {chain: TRITONS[chain] for chain in ("default", "triton-3.8.0", "triton-3.7.0")}
TORCH_2_14 = "torch-2.14.1"
JAX_0_9 = "jax-0.9.2"
LESSON = "triton-release-reduction"

# A script that calls torch.compile itself (no `model`), on a function whose print breaks the graph
# in two: irscope captures the compiles the script makes.
SELF_COMPILING_WITH_A_BREAK = '''import torch


def f(x, w):
    h = torch.relu(x @ w)
    print("hidden norm", h.norm())
    return torch.softmax(h * 2 + 1, dim=-1)


compiled = torch.compile(f)
print(compiled(torch.randn(8, 32), torch.randn(32, 32)).shape)
'''
# AOTInductor's package of a one-kernel model (its C++ wrapper and kernels are compiled for it)
EXPORTED = '''import torch


def model(x):
    return torch.relu(x) * 2


example_inputs = (torch.randn(16),)
'''
# PyTorch's programs: (source, options), each compiled on the default toolchain and on torch-2.14.1:
# the default example as a training compile that runs nothing (training and compile-only share a
# job; its plain compile-and-run is tests/test_toolchain_compare.py's), a script that compiles for
# itself and breaks its graph, and an export (AOTInductor).
PYTORCH = {
    "training-compile-only": (registry.get("pytorch").example, {"training": True, "run": "compile-only"}),
    "self-compiling-graph-break": (SELF_COMPILING_WITH_A_BREAK, {}),
    "export": (EXPORTED, {"export": True}),
}


def _requests() -> dict[tuple[str, str], Request]:
    """Every job of the module: (what, toolchain) -> its request. The Triton kernel's requests are
    the lesson's own (its A on triton-3.7.0, its B on triton-3.8.0) with the toolchain changed."""
    lesson = lessons.by_slug(lessons.load(), LESSON)
    assert lesson is not None, f"examples/{LESSON} is the lesson built on these jobs"
    triton_options = {k: v for k, v in lesson.request.options.items() if k != "toolchain"}
    out: dict[tuple[str, str], Request] = {}

    def add(what: str, language: str, source: str, options: dict, chain: str) -> None:
        extra = {} if chain == "default" else {"toolchain": chain}
        out[(what, chain)] = Request(language, source, registry.get(language).normalise_options({**options, **extra}))

    for chain in TRITONS:
        add("triton", "triton", lesson.request.source, triton_options, chain)
    for chain in GLUON_TRITONS:
        add("gluon", "gluon", GLUON_EXAMPLE, {"target": "cuda:sm_90"}, chain)
    assert out[("triton", "triton-3.7.0")] == lesson.request
    assert out[("triton", "triton-3.8.0")] == lesson.compare.request
    for language in ("jax", "hlo", "stablehlo"):
        for chain in ("default", JAX_0_9):
            add(language, language, registry.get(language).example, {}, chain)
    for what, (source, options) in PYTORCH.items():
        for chain in ("default", TORCH_2_14):
            add(what, "pytorch", source, options, chain)
    return out


@dataclass
class Compiled:
    app: object
    jobs: dict  # (what, toolchain) -> the job's JSON (GET /api/jobs/<id>)

    @property
    def store(self):
        return self.app.extensions["irscope"].store

    def text(self, what: str, chain: str, key: str) -> str:
        found = self.store.stage_text(self.jobs[(what, chain)]["id"], key)
        assert found is not None, (what, chain, key)
        return found[1]

    def keys(self, what: str, chain: str) -> list[str]:
        return [s["key"] for s in self.jobs[(what, chain)]["stages"]]


def _require_installed() -> None:
    have = {c.name for c in toolchain_envs.installed()}
    wanted = {*TRITONS, TORCH_2_14, JAX_0_9} - {"default"}
    missing = sorted(wanted - have)
    if missing:
        pytest.fail(f"toolchain(s) {', '.join(missing)} not installed in {toolchain_envs.root()}: `./run.sh setup` "
                    f"installs them from toolchain_locks/ (these tests need every pinned toolchain)")


def _order(name: tuple[str, str], request: Request) -> int:
    """Submission order: the slowest first (torch-2.14.1's PyTorch jobs, then the default's), so
    that the two workers end together."""
    if request.language == "pytorch":
        return 0 if name[1] == TORCH_2_14 else 1
    return 2


@pytest.fixture(scope="module")
def compiled(request, tmp_path_factory) -> Compiled:
    _require_installed()
    # IRSCOPE_TEST_TOOLCHAIN_STORE: a directory kept between runs (while writing a test here): its
    # store answers every job compiled there before
    kept = os.environ.get("IRSCOPE_TEST_TOOLCHAIN_STORE")
    base = Path(kept) if kept else tmp_path_factory.mktemp("toolchains")
    if not os.path.isdir(base / "var" / "toolchain"):  # the PyTorch jobs of both toolchains start warm
        seed_toolchain_cache(request.getfixturevalue("pytorch_toolchain_cache"), str(base / "var"))
        seed_toolchain_cache(request.getfixturevalue("torch_2_14_toolchain_cache"), str(base / "var"))
    # no spares (as tests/test_toolchain_compare.py): every job starts its own sandboxed process, in
    # its toolchain's interpreter
    app = make_app(base, languages="pytorch,triton,gluon,jax,hlo,stablehlo", workers=2, spare_workers=0,
                   warm_toolchain_cache=False, rate_limit="", max_queued_jobs=0, wall_time_limit_s=600)
    client = app.test_client()
    ids = {}
    for name, request in sorted(_requests().items(), key=lambda item: _order(*item)):
        response = client.post("/api/compile", json={"language": request.language, "source": request.source,
                                                     "options": request.options})
        assert response.status_code in (200, 202), (name, response.get_json())
        ids[name] = response.get_json()["job"]
    jobs = {name: wait_job(client, job_id, timeout=900) for name, job_id in ids.items()}
    yield Compiled(app, jobs)
    app.extensions["irscope"].runner.shutdown()


def _done(compiled: Compiled, what: str, chain: str) -> dict:
    job = compiled.jobs[(what, chain)]
    assert job["status"] == "done", (what, chain, job.get("error"))
    return job


def _ptx_isa(ptx: str) -> tuple[int, int]:
    found = re.search(r"^\.version (\d+)\.(\d+)$", ptx, re.M)
    assert found, ptx[:300]
    return int(found.group(1)), int(found.group(2))


# --- Triton and Gluon: three Triton releases, a virtual sm_90 ---------------------------------------

@pytest.mark.parametrize("language", ["triton", "gluon"])
def test_a_kernel_compiles_on_every_triton_release_with_every_stage(compiled, language):
    releases = TRITONS if language == "triton" else GLUON_TRITONS
    reference = _done(compiled, language, "default")
    keys = compiled.keys(language, "default")
    kernel = "softmax_kernel"
    # what the default makes: every lowering of the kernel, its passes, resources and launch
    kinds = {"triton.ttgir", "triton.llir", "triton.ptx", "triton.sass", "triton.passes", "triton.metadata"}
    assert kinds | {"triton.source"} <= {k.split(":")[0] for k in keys}
    assert ("triton.ttir:" + kernel in keys) is (language == "triton")  # Gluon enters at TTGIR
    assert {"kernels.resources", "triton.launches"} <= set(keys)
    isa = {}
    for chain, triton in releases.items():
        job = _done(compiled, language, chain)
        versions = job["toolchain"]
        assert versions["triton"] == triton and versions.get("toolchain", "default") == chain
        if chain == TORCH_2_14:
            assert versions["torch"] == "2.14.1"
        # every stage the default makes, in the same order: no release skips one
        assert compiled.keys(language, chain) == keys, chain
        ptx = compiled.text(language, chain, "triton.ptx:" + kernel)
        isa[triton] = _ptx_isa(ptx)
        assert ".target sm_90a" in ptx and ".entry " + kernel in ptx
        sass = compiled.text(language, chain, "triton.sass:" + kernel)
        assert re.search(r"/\*[0-9a-f]{4}\*/\s+S2R R\d+, SR_TID\.X ;", sass) and "EXIT ;" in sass
        meta = json.loads(compiled.text(language, chain, "triton.metadata:" + kernel))
        assert meta["target"] == "cuda:sm_90" and meta["registers"] > 0 and "for 'sm_90a'" in meta["ptxas_log"]
        resources = json.loads(compiled.text(language, chain, "kernels.resources"))
        row = resources["kernels"][0] if isinstance(resources, dict) else resources[0]
        assert row["registers"] == meta["registers"]
        # the kernel's source, mapped to the user's `def` line (compiler/kernels/jit_location.py on 3.7)
        source = compiled.text(language, chain, "triton.source:" + kernel)
        assert source == compiled.text(language, "default", "triton.source:" + kernel)
        stage, _ = compiled.store.stage_text(job["id"], "triton.source:" + kernel)
        def_line = 1 + job["request"]["source"].split("\n").index(source.split("\n")[0])
        assert list(stage.source_map[0]) == [1, def_line], stage.source_map[:2]
        launches = json.loads(compiled.text(language, chain, "triton.launches"))
        assert [launch["kernel"] for launch in launches] == [kernel] and launches[0]["grid"][0] == 4096
        passes = compiled.text(language, chain, "triton.passes:" + kernel)
        assert passes.count("\n") > 20, passes[:300]
    # each release writes the PTX ISA of the ptxas it ships: newer Triton, newer ISA, and not all one
    in_order = [isa[v] for v in sorted(isa, key=lambda v: tuple(map(int, v.split("."))))]
    assert in_order == sorted(in_order) and len(set(in_order)) == len(isa) == 3, isa
    if language == "gluon":  # the layout as the author wrote it, on every release
        for chain in releases:
            assert "sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4]" in compiled.text(
                "gluon", chain, "triton.ttgir:" + kernel)
    else:  # and the releases' code differs: 3.7's TTGIR and PTX are not 3.8's
        assert compiled.text("triton", "triton-3.7.0", "triton.ptx:" + kernel) != compiled.text(
            "triton", "triton-3.8.0", "triton.ptx:" + kernel)
        # the same Triton (3.8.0) under torch 2.13 and torch 2.14.1 makes the same PTX
        assert compiled.text(language, "triton-3.8.0", "triton.ptx:" + kernel) == compiled.text(
            language, TORCH_2_14, "triton.ptx:" + kernel)
    assert reference["toolchain"]["triton"] == TRITONS["default"]


def test_the_lesson_on_two_triton_releases_shows_what_it_says(compiled):
    """examples/triton-release-reduction's checks, on this module's jobs of its two requests."""
    lesson = lessons.by_slug(lessons.load(), LESSON)

    @dataclass
    class LessonJobs:
        store: object
        ids: dict

    jobs = LessonJobs(compiled.store, {(LESSON, "a"): compiled.jobs[("triton", "triton-3.7.0")]["id"],
                                       (LESSON, "b"): compiled.jobs[("triton", "triton-3.8.0")]["id"]})
    for check in lesson.checks:
        run_check(jobs, LESSON, check)
    # and the change it names, counted: 5 barriers against 3, from the two PTX texts
    ptx = {chain: compiled.text("triton", chain, "triton.ptx:softmax_kernel") for chain in ("triton-3.7.0",
                                                                                           "triton-3.8.0")}
    assert [len(re.findall(r"\bbar\.sync\b", ptx[c])) for c in ptx] == [5, 3]
    assert "Triton 3.7" in lesson.explanation and "3 barriers instead of 5" in lesson.explanation


# --- JAX, HLO, StableHLO: jaxlib 0.10 and 0.9 -------------------------------------------------------

def _xla_kinds(keys: list[str]) -> list[str]:
    """A job's stage keys without XLA's per-pass snapshots, each fusion's LLVM IR as its kind (a
    release fuses and names its fusions its own way)."""
    kinds = [re.sub(r"^(xla\.llvm_ir):.*", r"\1", k) for k in keys if not k.startswith("xla.pass:")]
    return [k for i, k in enumerate(kinds) if k != "xla.llvm_ir" or kinds[i - 1] != k]


@pytest.mark.parametrize("language", ["jax", "hlo", "stablehlo"])
def test_an_xla_program_compiles_on_two_jaxlib_releases(compiled, language):
    default, old = _done(compiled, language, "default"), _done(compiled, language, JAX_0_9)
    assert (old["toolchain"]["jax"], old["toolchain"]["jaxlib"], old["toolchain"]["toolchain"]) == (
        "0.9.2", "0.9.2", JAX_0_9)
    assert default["toolchain"]["jaxlib"].startswith("0.10.") and "toolchain" not in default["toolchain"]
    keys, old_keys = compiled.keys(language, "default"), compiled.keys(language, JAX_0_9)
    # every kind of stage is paired, in order, memory timeline included (jaxlib 0.9 keeps the live
    # ranges in the buffer-assignment dump: memory.py's adapter)
    assert _xla_kinds(old_keys) == _xla_kinds(keys)
    assert {"xla.stablehlo", "xla.optimized", "xla.memory", "xla.graph", "xla.asm"} <= set(old_keys)
    for chain in ("default", JAX_0_9):
        memory = json.loads(compiled.text(language, chain, "xla.memory"))
        assert memory["peak_bytes"] > 0
    # the per-pass snapshots are the release's own: both have them, and the pipelines differ
    passes = {c: [k.split(".", 2)[-1] for k in compiled.keys(language, c) if k.startswith("xla.pass:0")]
              for c in ("default", JAX_0_9)}
    assert passes["default"] and passes[JAX_0_9] and passes["default"] != passes[JAX_0_9]
    # the HLO graph is drawn by the release's own bindings (compiler/xla/jaxlib_hlo.py)
    for chain, module in (("default", "jaxlib._hlo"), (JAX_0_9, "jaxlib._jax")):
        stage, _ = compiled.store.stage_text(compiled.jobs[(language, chain)]["id"], "xla.graph")
        assert stage.meta["note"].startswith(module + ".hlo_module_to_dot_graph"), stage.meta
    assert "ENTRY" in compiled.text(language, JAX_0_9, "xla.optimized")


# --- PyTorch: torch 2.13 (default) and 2.14.1, host target ------------------------------------------

def _kinds(keys: list[str]) -> list[str]:
    """A job's stage keys with Inductor's kernel names left out (a release may name a kernel
    otherwise; the comparison pairs those by source lines), and without `worker.log` (the worker's
    stderr, there when anything wrote to it: torch 2.14.1's CUDA build warns that it has no CUDA)."""
    return [re.sub(r"^(kernel):.*", r"\1", k) for k in keys if k != "worker.log"]


@pytest.mark.parametrize("what", list(PYTORCH))
def test_a_pytorch_program_on_torch_2_14_makes_the_stages_it_makes_on_2_13(compiled, what):
    default, new = _done(compiled, what, "default"), _done(compiled, what, TORCH_2_14)
    assert default["toolchain"]["torch"].startswith("2.13.0") and new["toolchain"]["torch"] == "2.14.1"
    assert new["toolchain"]["toolchain"] == TORCH_2_14 and new["toolchain"]["triton"] == "3.8.0"
    keys, new_keys = compiled.keys(what, "default"), compiled.keys(what, TORCH_2_14)
    assert sorted(_kinds(new_keys)) == sorted(_kinds(keys)), (keys, new_keys)
    if "worker.log" in new_keys:  # a warning, not a failure of irscope's code in 2.14.1
        assert "Traceback" not in compiled.text(what, TORCH_2_14, "worker.log")
    code = [k for k in keys if k.startswith("inductor.output_code:") or k.startswith("export.")]
    assert code, keys
    if what == "self-compiling-graph-break":
        assert sum(k.startswith("dynamo.fx_graph:") for k in new_keys) >= 2
        assert "dynamo.graph_breaks" in new_keys and "run.stdout" in new_keys
    if what == "training-compile-only":
        assert any(k.startswith("aot.backward_graph:") for k in new_keys)
        assert new["timings"]["run_mode"]["mode"] == default["timings"]["run_mode"]["mode"] == "compile-only"
    if what == "export":
        assert {"export.program", "aoti.package", "aoti.wrapper"} <= set(new_keys), new_keys


def test_torch_2_14_checks_a_graph_s_inputs_in_one_call(compiled):
    """The output code's change between the releases: where 2.13's checks each input's size and
    stride with an assert_size_stride of its own, 2.14.1's checks the same inputs a group at a time
    with assert_size_stride_grouped."""
    for what, key in (("training-compile-only", "inductor.output_code:0/0"),
                      ("training-compile-only", "inductor.output_code:0/0.backward"),
                      ("self-compiling-graph-break", "inductor.output_code:0/0_1")):
        old, new = compiled.text(what, "default", key), compiled.text(what, TORCH_2_14, key)
        assert "def call(" in old and "def call(" in new
        checked = re.findall(r"^\s+assert_size_stride\((\w+), ", old, re.M)
        assert len(checked) >= 2 and "assert_size_stride_grouped(" not in old, (what, key)
        groups = [g.split(", ") for g in re.findall(r"^\s+assert_size_stride_grouped\(\(([^)]*)\)", new, re.M)]
        singles = re.findall(r"^\s+assert_size_stride\((\w+), ", new, re.M)
        assert groups and all(len(g) >= 2 for g in groups), (what, key)
        # the same inputs checked, most of them now in groups
        assert sorted(sum(groups, []) + singles) == sorted(checked), (what, key)
        assert len(singles) < len(checked)


# --- refusals ---------------------------------------------------------------------------------------

def test_what_a_toolchain_cannot_do_is_refused_naming_those_that_can(compiled):
    client = compiled.app.test_client()
    installed = ", ".join(c.name for c in toolchain_envs.installed())

    def refused(language: str, options: dict) -> str:
        response = client.post("/api/compile", json={"language": language, "source": registry.get(language).example,
                                                     "options": options})
        assert response.status_code == 400, response.get_json()
        body = response.get_json()["error"]
        assert body["kind"] == "RequestError"
        return body["message"]

    message = refused("triton", {"toolchain": "triton-3.0.0"})
    assert "no toolchain 'triton-3.0.0' is installed" in message and f"installed: {installed}" in message
    # the virtual GPU's shim is built for torch 2.13: torch-2.14.1 cannot, the default can
    message = refused("pytorch", {"toolchain": TORCH_2_14, "target": "cuda:sm_90"})
    assert "is built for torch 2.13, and this toolchain has torch 2.14.1" in message
    assert message.endswith("Installed toolchains that can: default")
    # XLA:GPU needs the CUDA plugin of the toolchain's own jaxlib: jax-0.9.2 has none
    message = refused("jax", {"toolchain": JAX_0_9, "target": "cuda:h100"})
    assert "needs jax-cuda12-plugin 0.9.2" in message and message.endswith("Installed toolchains that can: default")

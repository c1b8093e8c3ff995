"""The house rules of the code layout (docs/architecture.md), read from the source itself:

- imports run one way: service -> compilers' pipelines (by name only, through the registry) ->
  compilers' libraries -> shared modules; no pipeline imports another pipeline, nothing in
  compiler/ imports the web side, and the web side imports no compiler package;
- only the worker's context builder reads irscope's IRSCOPE_* variables inside compiler/.
"""
from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPILER_PACKAGES = ("pytorch", "triton", "xla", "fake", "imports")

# The service and the modules every compiler package may use, by rank: a module imports only
# modules of a lower rank (so nothing runs upward and there is no cycle).
RANKS = {
    "compiler": 0, "compiler.model": 0, "compiler.formats": 0, "compiler.mlir_text": 0, "compiler.cgroups": 0,
    "compiler.targets": 0, "compiler.targets.xla_gpu": 0,
    "compiler.targets.host_devices": 0, "compiler.stage_text": 0, "compiler.migrations": 0,
    "compiler.migrations.env": 0, "compiler.migrations.versions.0001_initial": 0,
    "compiler.migrations.versions.0002_worker_tier": 1,
    "compiler.migrations.versions.0003_uploads_comparisons": 0, "compiler.routing": 1,
    "compiler.pipeline": 1, "compiler.store": 1, "compiler.targets.virtual_gpu": 1, "compiler.sandbox": 1,
    "compiler.bundle_reader": 1,
    "compiler.user_code": 2, "compiler.graph_drawing": 2, "compiler.job_dir": 2,
    "compiler.registry": 3,
    "compiler.toolchain": 4,
    "compiler.runner": 5, "compiler.worker": 5, "compiler.celery_runner": 5,
    "compiler.jobs": 6, "compiler.worker_tier": 6,
}
# What a compiler package may import from the rest of compiler/: the shared modules below it.
SHARED = {"compiler.model", "compiler.formats", "compiler.mlir_text", "compiler.targets", "compiler.pipeline",
          "compiler.targets.virtual_gpu", "compiler.targets.xla_gpu", "compiler.graph_drawing", "compiler.user_code"}


def _modules(top: str) -> dict[str, str]:
    """module name -> path, for every .py under `top` (a directory of the repository)."""
    out = {}
    for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                out[".".join(parts)] = path
    return out


ALL = {**_modules("compiler"), **_modules("app"), **_modules("viewers")}


def _resolve(name: str) -> str:
    """The most specific module of this repository `name` lies in (or `name` outside it)."""
    while name not in ALL and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(path: str, module: str) -> set[str]:
    """Every module `path` imports anywhere (function-level imports included): `from a import b`
    counts as importing a.b when that is a module, else as importing a."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {_resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[:-node.level + (1 if path.endswith("__init__.py") else 0) or None]
                base = ".".join(package + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in ALL else _resolve(base) for a in node.names}
    found.discard(module)
    return found


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "compiler" and parts[1] in COMPILER_PACKAGES else None


def _violations(module: str, path: str) -> list[str]:
    out = []
    own = _package(module)
    for imported in sorted(_imports(path, module)):
        top = imported.split(".")[0]
        other = _package(imported)
        if module.startswith("compiler") and top in ("app", "viewers", "flask"):
            out.append(f"{module} imports {imported}: compiler/ never imports the web side")
        elif module.startswith(("app", "viewers")) and other:
            out.append(f"{module} imports {imported}: the web side reaches compilers through the registry only")
        elif module.startswith("viewers") and top == "compiler" and imported != "compiler.formats":
            out.append(f"{module} imports {imported}: viewers know the stage formats, nothing else of compiler/")
        elif other and imported.endswith(".pipeline") and imported != module:
            out.append(f"{module} imports {imported}: a pipeline is imported by nothing (the registry names it)")
        elif own and top == "compiler" and not other and imported not in SHARED:
            out.append(f"{module} imports {imported}: a compiler package imports only shared modules")
        elif not own and module.startswith("compiler") and other:
            out.append(f"{module} imports {imported}: the service names compilers through the registry only")
        elif not own and module in RANKS and imported in RANKS and RANKS[imported] >= RANKS[module]:
            out.append(f"{module} imports {imported}: upward (rank {RANKS[imported]} >= {RANKS[module]})")
    return out


@pytest.mark.parametrize("module", sorted(ALL))
def test_imports_run_one_way(module):
    assert _violations(module, ALL[module]) == []


def test_every_service_module_has_a_rank():
    service = {m for m in ALL if m.startswith("compiler") and not _package(m)}
    assert service <= set(RANKS), sorted(service - set(RANKS))


def test_the_rules_catch_an_upward_import(tmp_path):
    """The checker itself: a library module importing its package's pipeline, a pipeline importing
    another, the service importing a compiler, a shared module importing the service."""
    cases = {
        "compiler.triton.capture": "from compiler.triton.pipeline import TritonPipeline",
        "compiler.pytorch.gpu_codegen": "from compiler.triton import pipeline",
        "compiler.pytorch.pipeline": "import compiler.xla.pipeline",
        "compiler.jobs": "from compiler.xla import hlo_text",
        "compiler.pipeline": "from compiler import runner",
        "compiler.xla.child": "from compiler.worker import main",
        "viewers.mesh": "from compiler.xla.sharding import parse_sharding",
    }
    for module, line in cases.items():
        path = tmp_path / (module + ".py")
        path.write_text(line + "\n")
        assert _violations(module, str(path)), (module, line)


# --- IRSCOPE_* variables ------------------------------------------------------------------------

# The runner writes the worker's environment and the sandbox sets the scratch directory: both may
# name the variables (as keys they write); the worker's context builder is the one reader.
WRITERS = {"compiler.runner", "compiler.sandbox"}
READER = ("compiler.worker", "environment_settings")


def _irscope_names(path: str) -> list[tuple[ast.AST, str | None, bool]]:
    """(node, enclosing top-level function, read?) for each "IRSCOPE_..." string constant."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("IRSCOPE_")):
            continue
        parent, function = parents.get(node), None
        up = node
        while up in parents:
            up = parents[up]
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)) and parents.get(up) is tree:
                function = up.name
        read = (isinstance(parent, ast.Call) and parent.args and parent.args[0] is node
                and (isinstance(parent.func, ast.Attribute) and parent.func.attr in ("get", "pop", "setdefault")
                     or isinstance(parent.func, ast.Name) and parent.func.id == "getenv"
                     or isinstance(parent.func, ast.Attribute) and parent.func.attr == "getenv")) \
            or (isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Load)) \
            or (isinstance(parent, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops))
        out.append((node, function, bool(read)))
    return out


def test_only_the_workers_context_builder_reads_irscope_variables():
    problems = []
    for module, path in ALL.items():
        if not module.startswith("compiler"):
            continue
        for node, function, read in _irscope_names(path):
            where = f"{module}:{node.lineno} {node.value!r}"
            if (module, function) == READER:
                continue
            if module in WRITERS and not read:
                continue
            problems.append(where + (" is read" if read else " is named") + " outside "
                            + ".".join(READER))
    assert problems == []


def test_the_irscope_check_sees_reads(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import os\nx = os.environ.get('IRSCOPE_A')\ny = os.environ['IRSCOPE_B']\n"
                    "z = 'IRSCOPE_C' in os.environ\nw = {'IRSCOPE_D': '1'}\n")
    assert [(n.value, read) for n, _, read in _irscope_names(str(path))] == [
        ("IRSCOPE_A", True), ("IRSCOPE_B", True), ("IRSCOPE_C", True), ("IRSCOPE_D", False)]


# --- adding a compiler ---------------------------------------------------------------------------

TOY_PIPELINE = '''
from compiler.pipeline import JobContext, Option, Pipeline


class ToyPipeline(Pipeline):
    key = "toy"
    title = "Toy"
    options = (Option("upper", "bool", False, "Shout."),)

    def run(self, request, ctx: JobContext) -> None:
        text = request.source.upper() if request.options["upper"] else request.source
        ctx.bundle.add("toy.words", "Words", "Toy", "text", "\\n".join(text.split()), source_map=[[1, 1]])
'''


def test_a_new_compiler_is_one_package_and_one_registry_line(tmp_path, monkeypatch):
    """A toy compiler: a package holding its pipeline, plus one register() line; the registry, the
    job parser (option schema) and a job context then serve it like any other compiler."""
    from compiler import registry
    from compiler.jobs import Jobs, JobsConfig
    from compiler.pipeline import Bundle, JobContext
    (tmp_path / "toy_compiler").mkdir()
    (tmp_path / "toy_compiler" / "__init__.py").write_text("")
    (tmp_path / "toy_compiler" / "pipeline.py").write_text(TOY_PIPELINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_TABLE", dict(registry._TABLE))
    monkeypatch.setattr(registry, "_LOADED", dict(registry._LOADED))
    registry.register("toy", "toy_compiler.pipeline:ToyPipeline")  # the one registry line
    jobs = Jobs(store=None, runner=None, config=JobsConfig(languages=("toy",), max_source_bytes=1000))
    request = jobs.parse({"language": "toy", "source": "hello small world", "options": {"upper": "true"}})
    assert request.options == {"upper": True}
    ctx = JobContext(workdir=str(tmp_path), bundle=Bundle(str(tmp_path / "out")))
    registry.get("toy").run(request, ctx)
    stage, = ctx.bundle.manifest.stages
    assert (stage.key, stage.format) == ("toy.words", "text")
    assert open(tmp_path / "out" / stage.file).read() == "HELLO\nSMALL\nWORLD"


def test_the_fake_compiler_is_one_package_and_one_registry_line():
    """compiler/fake/ is wired in by one line of compiler/registry.py and named by nothing else."""
    registry_lines = [line for line in open(ALL["compiler.registry"]).read().split("\n") if "compiler.fake" in line]
    assert registry_lines == ['register("fake", "compiler.fake.pipeline:FakePipeline")']
    importers = [m for m, path in ALL.items() if not m.startswith("compiler.fake")
                 and any(i.startswith("compiler.fake") for i in _imports(path, m))]
    assert importers == []

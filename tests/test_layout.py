"""The house rules of the code layout (docs/architecture.md), read from the source itself.

The layers, each a package, import downward only:

    irscope (the command) -> app (routes) -> service (running jobs) -> compiler (contracts, shared
    tools, one package per compiler) ; viewers (markup) know only compiler.formats

- compiler/ imports nothing of the service, the web side or the command; a language package (one
  per registered pipeline) imports the shared layers (compiler/'s own modules, compiler/kernels/,
  compiler/targets/) and its own modules, never another language's package, and a pipeline is
  imported by nothing (the registry names pipelines by string); the shared layers import no
  language package;
- the service imports no compiler package (only the contracts, and the registry by key);
- the web side imports no compiler package, and nothing of the sandbox, cgroups, job directories
  or job processes;
- no module-level import cycle anywhere;
- only the job process's context builder reads irscope's IRSCOPE_* variables inside compiler/,
  and none of them carries a job's setting or limit.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os

import pytest

from compiler import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The language packages: one per pipeline the registry names (a new language is found here too).
COMPILER_PACKAGES = tuple(sorted({registry.package(key) for key in registry.keys()}))
TOPS = ("irscope", "app", "service", "compiler", "viewers")
# What the web side may not reach: the host side of running jobs.
HOST_SIDE = ("service.sandbox", "service.cgroups", "service.job_dir", "service.job_process", "service.spares",
             "service.runner", "service.toolchain_cache")


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


ALL = {name: path for top in TOPS for name, path in _modules(top).items()}


def _resolve(name: str) -> str:
    """The most specific module of this repository `name` lies in (or `name` outside it)."""
    while name not in ALL and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(path: str, module: str, top_level_only: bool = False) -> set[str]:
    """Every module `path` imports (function-level imports included unless `top_level_only`):
    `from a import b` counts as importing a.b when that is a module, else as importing a."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    nodes = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))] if top_level_only \
        else list(ast.walk(tree))
    found = set()
    for node in nodes:
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
    """The compiler package a module belongs to (pytorch, triton, ...), or None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "compiler" and parts[1] in COMPILER_PACKAGES else None


def _violations(module: str, path: str) -> list[str]:
    out = []
    top, own = module.split(".")[0], _package(module)
    for imported in sorted(_imports(path, module)):
        other_top, other = imported.split(".")[0], _package(imported)
        if top == "compiler" and other_top in ("service", "app", "viewers", "irscope", "flask"):
            out.append(f"{module} imports {imported}: compiler/ never imports the service, the web side or the command")
        elif top == "service" and other_top in ("app", "viewers", "irscope", "flask"):
            out.append(f"{module} imports {imported}: the service never imports the web side or the command")
        elif top in ("service", "app", "viewers") and other:
            out.append(f"{module} imports {imported}: outside compiler/, compilers are reached through the registry")
        elif top == "viewers" and other_top in ("compiler", "service") and not imported.startswith("compiler.formats"):
            out.append(f"{module} imports {imported}: viewers know the stage formats, nothing else")
        elif top == "app" and (imported in HOST_SIDE or other_top == "irscope"):
            out.append(f"{module} imports {imported}: the web side routes; running jobs on this host is the service's")
        elif other and imported.endswith(".pipeline") and imported != module:
            out.append(f"{module} imports {imported}: a pipeline is imported by nothing (the registry names it)")
        elif top == "compiler" and not own and other:
            out.append(f"{module} imports {imported}: a shared module of compiler/ imports no language package")
        elif own and other and other != own:
            out.append(f"{module} imports {imported}: a language package uses the shared layers, never another "
                       "language's package")
    return out


@pytest.mark.parametrize("module", sorted(ALL))
def test_imports_run_one_way(module):
    assert _violations(module, ALL[module]) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_level_import_cycle():
    graph = {m: {i for i in _imports(p, m, top_level_only=True) if i in ALL} for m, p in ALL.items()}
    assert _cycles(graph) == []


def test_the_rules_catch_an_upward_import(tmp_path):
    """The checker itself: a library module importing its package's pipeline, a pipeline importing
    another, the service importing a compiler, a shared module importing the service, the web side
    reaching the sandbox; and the cycle finder finding a cycle."""
    cases = {
        "compiler.kernels.capture": "from compiler.triton.pipeline import TritonPipeline",
        "compiler.pytorch.gpu_codegen": "from compiler.triton import pipeline",
        "compiler.cute.stages": "from compiler.xla import hlo_text",
        "compiler.kernels.program": "from compiler.helion import kernels",
        "compiler.pytorch.pipeline": "import compiler.xla.pipeline",
        "service.jobs": "from compiler.xla import hlo_text",
        "compiler.pipeline": "from service import runner",
        "compiler.xla.child": "from compiler.sandbox_entry import main\nfrom service.store import Store",
        "compiler.registry": "from compiler.pytorch import trace",
        "viewers.mesh": "from compiler.xla.sharding import parse_sharding",
        "app.ide": "from service import sandbox",
        "service.store": "from app import services",
    }
    for module, line in cases.items():
        path = tmp_path / (module + ".py")
        path.write_text(line + "\n")
        assert _violations(module, str(path)), (module, line)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# --- IRSCOPE_* variables ------------------------------------------------------------------------

# The job process's environment is written by the service (job_process, the sandbox's scratch
# directory, the toolchain warm-up's export): those may name the variables as keys they write; the
# job process's context builder is the one reader.
WRITERS = {"service.job_process", "service.sandbox", "service.toolchain_cache"}
READER = ("compiler.sandbox_entry", "environment_settings")
# What the environment may say: where the process is, never what the job may do.
PROCESS_VARIABLES = {"IRSCOPE_WORKDIR", "IRSCOPE_SPARE_FOR", "IRSCOPE_SPARE_TEMPLATE", "IRSCOPE_TOOLCHAIN_CACHE",
                     "IRSCOPE_EXPORT_TOOLCHAIN_CACHE"}


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


def test_only_the_job_processs_context_builder_reads_irscope_variables():
    problems = []
    for module, path in ALL.items():
        if not module.startswith(("compiler", "service")):
            continue
        for node, function, read in _irscope_names(path):
            where = f"{module}:{node.lineno} {node.value!r}"
            if (module, function) == READER:
                assert node.value in PROCESS_VARIABLES, where
                continue
            if module in WRITERS and not read:
                continue
            if module.startswith("service") and node.value not in PROCESS_VARIABLES:
                continue  # the settings table's own variables, read by service/settings.py
            problems.append(where + (" is read" if read else " is named") + " outside "
                            + ".".join(READER))
    assert problems == []


def test_no_job_setting_travels_in_the_job_processs_environment(tmp_path):
    """A job's settings and limits reach the job process in its job file (model.JobSettings); its
    environment names only where it is. Built as the runner builds it, for a job, a spare and the
    toolchain warm-up, with a toolchain cache present."""
    from compiler.model import JOB_FILE, JobFile, JobSettings, Request
    from service import job_process
    config = job_process.RunnerConfig(data_dir=str(tmp_path), workers=1, use_bwrap=True,
                                      job=JobSettings(memory_limit_mb=1234, measure_s=0.25))
    os.makedirs(job_process.toolchain_cache_dir(config, "fake", {}))
    for extra in ({}, {"IRSCOPE_SPARE_FOR": "fake"}, {"IRSCOPE_EXPORT_TOOLCHAIN_CACHE": "/job/toolchain"}):
        env, _ = job_process.environment(config, "fake", {}, **extra)
        spec = job_process.spec(config, str(tmp_path), env, [])
        irscope = {k for k in spec.env if k.startswith("IRSCOPE_")}
        assert irscope <= PROCESS_VARIABLES and "IRSCOPE_TOOLCHAIN_CACHE" in irscope, irscope
        assert not any(v in ("1234", "0.25") for v in spec.env.values())
    job_process.write_job_file(str(tmp_path), Request("fake", "x = 1", {}), {"irscope": "0"}, config.job)
    job = JobFile.from_json(__import__("json").load(open(tmp_path / JOB_FILE)))
    assert job.settings == config.job and job.settings.memory_limit_mb == 1234
    every = {f.name for f in dataclasses.fields(JobSettings)}
    from service import settings
    assert every <= set(settings.BY_NAME), every - set(settings.BY_NAME)  # each field is a setting
    assert all(settings.BY_NAME[name].default == getattr(JobSettings(), name) for name in every)


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
    job parser (option schema) and a job context then serve it like any other compiler, and the
    page, the JSON API and MCP offer it with its options, the registry being their only list."""
    from compiler import registry
    from compiler.pipeline import Bundle, JobContext
    from service.jobs import Jobs, JobsConfig
    (tmp_path / "toy_compiler").mkdir()
    (tmp_path / "toy_compiler" / "__init__.py").write_text("")
    (tmp_path / "toy_compiler" / "pipeline.py").write_text(TOY_PIPELINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_TABLE", dict(registry._TABLE))
    monkeypatch.setattr(registry, "_LOADED", dict(registry._LOADED))
    monkeypatch.setattr(registry, "_OFFERED", list(registry._OFFERED))
    registry.register("toy", "toy_compiler.pipeline:ToyPipeline")  # the one registry line
    assert "toy" in registry.offered() and registry.package("toy") == "toy_compiler"
    jobs = Jobs(store=None, runner=None, config=JobsConfig(languages=("toy",), max_source_bytes=1000))
    request = jobs.parse({"language": "toy", "source": "hello small world", "options": {"upper": True}})
    assert request.options == {"upper": True}
    ctx = JobContext(workdir=str(tmp_path), bundle=Bundle(str(tmp_path / "out")))
    registry.get("toy").run(request, ctx)
    stage, = ctx.bundle.manifest.stages
    assert (stage.key, stage.format) == ("toy.words", "text")
    assert open(tmp_path / "out" / stage.file).read() == "HELLO\nSMALL\nWORLD"

    from tests.conftest import make_app
    app = make_app(tmp_path / "served", languages="toy")
    try:
        client = app.test_client()
        listed = {lang["key"]: lang for lang in client.get("/api/languages").get_json()["languages"]}
        assert [o["name"] for o in listed["toy"]["options"]] == ["upper"]
        assert 'value="toy"' in client.get("/").get_data(as_text=True)
        called = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                           "params": {"name": "list_languages", "arguments": {}}},
                             headers={"Accept": "application/json, text/event-stream"})
        offered = json.loads(called.get_json()["result"]["content"][0]["text"])["languages"]
        assert [o["name"] for lang in offered if lang["key"] == "toy" for o in lang["options"]] == ["upper"]
    finally:
        app.extensions["irscope"].runner.shutdown()


def test_the_fake_compiler_is_one_package_and_one_registry_line():
    """compiler/fake/ is wired in by one line of compiler/registry.py and named by nothing else."""
    registry_lines = [line for line in open(ALL["compiler.registry"]).read().split("\n") if "compiler.fake" in line]
    assert registry_lines == ['register("fake", "compiler.fake.pipeline:FakePipeline", offered=False)']
    importers = [m for m, path in ALL.items() if not m.startswith("compiler.fake")
                 and any(i.startswith("compiler.fake") for i in _imports(path, m))]
    assert importers == []


def test_the_worker_tier_and_the_cli_run_without_the_web_app():
    """`irscope worker`, `irscope compile` and `irscope gc` build the service without Flask: the
    host policy lives in service/configure.py, not in app/."""
    import subprocess
    import sys
    code = ("import sys\n"
            "import irscope.cli, service.configure, service.worker_daemon, service.retention\n"
            "print(sorted(m for m in sys.modules if m == 'flask' or m.startswith(('flask.', 'app'))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout

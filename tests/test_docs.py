"""The documents say what the code does: docs/api.md names every route and every error kind the
code emits (and nothing else), every "(setting X)" in a message names a real setting, the module
map in docs/architecture.md lists every module under compiler/, and static/pygments.css is what
pygments generates. (The README's settings table is checked by tests/test_settings.py.)"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

from app import settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def _sources(*tops: str) -> dict[str, str]:
    out = {}
    for top in tops:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    out[os.path.relpath(path, ROOT)] = open(path, encoding="utf-8").read()
    return out


def _route_key(method: str, path: str) -> str:
    path = re.sub(r"\[.*?\]|\?.*$", "", path)  # optional parts and query strings
    return f"{method} {re.sub(r'<[^>]*>', '<>', path)}"


def test_api_doc_lists_every_route_and_only_those(app):
    documented = {_route_key(m, p) for m, p in re.findall(r"`(GET|POST|PUT|DELETE) (/[^`\s]*)`", _read("docs/api.md"))}
    served = {_route_key(method, rule.rule) for rule in app.url_map.iter_rules() if rule.endpoint != "static"
              for method in rule.methods - {"HEAD", "OPTIONS"}}
    assert documented == served, {"undocumented": served - documented, "not served": documented - served}


_KIND_CALLS = {"UserError": 0, "JobError": 0, "ChildError": 0, "_error": 2}


def _values(expr: ast.expr, assigned: dict[str, set[str]]) -> set[str]:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.IfExp):
        return _values(expr.body, assigned) | _values(expr.orelse, assigned)
    if isinstance(expr, ast.Name):
        return assigned.get(expr.id, set())
    return set()


def emitted_error_kinds() -> set[str]:
    """Every error kind the code can give: the kind argument of UserError, JobError, ChildError
    and the API's _error (constants, conditional constants, local names bound to them, parameter
    defaults), the runner's limit kinds, and the PyTorch pipeline's kind classifier."""
    kinds: set[str] = set()
    for path, text in _sources("compiler", "app").items():
        tree = ast.parse(text)
        assigned: dict[str, set[str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned.setdefault(node.targets[0].id, set()).update(_values(node.value, {}))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args[len(node.args.args) - len(node.args.defaults):]
                for arg, default in zip(args, node.args.defaults):
                    if arg.arg == "kind":
                        assigned.setdefault("kind", set()).update(_values(default, {}))
                if node.name == "_error_kind":
                    kinds |= {v for r in ast.walk(node) if isinstance(r, ast.Return) and r.value
                              for v in _values(r.value, {})}
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LIMIT_KINDS"
                                                    for t in node.targets):
                kinds |= {v.value for v in node.value.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _KIND_CALLS:
                index = _KIND_CALLS[node.func.id]
                arg = node.args[index] if len(node.args) > index else next(
                    (k.value for k in node.keywords if k.arg == "kind"), None)
                if arg is None and node.func.id == "_error":
                    kinds.add("RequestError")  # _error's default kind
                elif arg is not None:
                    kinds |= _values(arg, assigned)
    return kinds


def test_api_doc_lists_every_error_kind_and_only_those():
    doc = _read("docs/api.md")
    documented = set(re.findall(r"`([A-Z][A-Za-z]*(?:Error|Limit|Timeout|Crashed|Found|Unavailable|Full|Limited))`", doc))
    emitted = emitted_error_kinds()
    assert {"CompileTimeout", "NotFound", "WorkerCrashed", "MemoryLimit", "SandboxUnavailable"} <= emitted
    assert documented == emitted, {"undocumented": emitted - documented, "never emitted": documented - emitted}


def test_messages_name_real_settings():
    named = {}
    for path, text in _sources("compiler", "app").items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in re.findall(r"\(setting (\w+)\)", node.value):
                    named.setdefault(name, path)
    assert len(named) >= 7
    assert {n: p for n, p in named.items() if n not in settings.BY_NAME} == {}


def test_architecture_doc_maps_every_module():
    doc = _read("docs/architecture.md")
    modules = {p for p in _sources("compiler") if not p.endswith("__init__.py")}
    missing = sorted(p for p in modules if p not in doc and p.replace(".py", "") not in doc)
    assert missing == []
    for mentioned in set(re.findall(r"\b((?:compiler|app|viewers|tests|scripts|bench)/[\w/]+\.py)\b", doc)):
        assert os.path.exists(os.path.join(ROOT, mentioned)), mentioned


def test_pygments_css_is_generated():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "pygments_css.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, "static/pygments.css is stale: run scripts/pygments_css.py"

"""The documents say what the code does: docs/api.md names every route and every error kind the
code emits (and nothing else), every "(setting X)" in a message names a real setting, the module
map in docs/architecture.md lists every module under compiler/, and static/pygments.css is what
pygments generates, and docs/languages.md's table of languages is the registry's. (docs/settings.md's
table is checked by tests/test_settings.py; scripts/docs_tables.py writes both tables.)"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

from service import settings

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


def test_api_doc_lists_every_error_kind_and_only_those():
    """The kinds are the enum's (compiler/errors.py), and every job error and refusal is made with
    one of them (JobError and Refused check their kind)."""
    from compiler.errors import ErrorKind
    doc = _read("docs/api.md")
    kinds = {str(kind) for kind in ErrorKind}
    documented = set(re.findall(r"`([A-Z][A-Za-z]*(?:Error|Limit|Timeout|Crashed|Found|Unavailable|Full|Limited|"
                                r"Large|Request|Quota))`", doc))
    assert documented == kinds, {"undocumented": kinds - documented, "not a kind": documented - kinds}


def test_no_error_kind_is_a_free_string():
    """Errors are made with ErrorKind members, never a string literal (a typo would be a new kind)."""
    from compiler.errors import ErrorKind
    names = {str(kind) for kind in ErrorKind}
    found = []
    for path, text in _sources("compiler", "service", "app").items():
        if path == os.path.join("compiler", "errors.py"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in ("UserError", "JobError", "ChildError", "Refused") and node.args and \
                        isinstance(node.args[0], ast.Constant) and node.args[0].value in names:
                    found.append(f"{path}:{node.lineno} {name}({node.args[0].value!r})")
    assert found == []


def test_messages_name_real_settings():
    named = {}
    for path, text in _sources("compiler", "service", "app").items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in re.findall(r"\(setting (\w+)\)", node.value):
                    named.setdefault(name, path)
    assert len(named) >= 7
    assert {n: p for n, p in named.items() if n not in settings.BY_NAME} == {}


def test_architecture_doc_maps_every_module():
    """docs/architecture.md names every module of every layer, and only modules that exist."""
    doc = _read("docs/architecture.md")
    modules = {p for p in _sources("irscope", "app", "service", "compiler", "viewers")
               if not p.endswith("__init__.py") or p.count(os.sep) == 1}
    missing = sorted(p for p in modules if p not in doc and p.replace(".py", "") not in doc
                     and p.replace(os.sep + "__init__.py", "/") not in doc)
    assert missing == []
    for mentioned in set(re.findall(r"\b((?:compiler|service|app|viewers|irscope|tests|scripts|bench)/[\w/]+\.py)\b",
                                    doc)):
        assert os.path.exists(os.path.join(ROOT, mentioned)), mentioned


def test_every_file_the_readme_and_docs_link_exists():
    """A link to a file of the repository (screenshots, docs, examples) points at one that is there."""
    for doc in ["README.md", *(os.path.join("docs", n) for n in os.listdir(os.path.join(ROOT, "docs"))
                               if n.endswith(".md"))]:
        text = re.sub(r"`[^`\n]*`", "", _read(doc))  # a code span is not a link
        base = os.path.dirname(os.path.join(ROOT, doc))
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert os.path.exists(os.path.normpath(os.path.join(base, target))), (doc, target)


def test_pygments_css_is_generated():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "pygments_css.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, "static/pygments.css is stale: run scripts/pygments_css.py"


def test_languages_table_matches_the_registry():
    """docs/languages.md's table is what the registry renders, and every offered language says what it
    accepts."""
    from compiler import registry
    doc = _read("docs/languages.md")
    start, end = doc.index("<!-- languages:start -->"), doc.index("<!-- languages:end -->")
    assert doc[start:end].split("\n", 1)[1].strip() == registry.markdown_table(), \
        "docs/languages.md's table is stale: run scripts/docs_tables.py"
    assert all(registry.get(key).accepts for key in registry.offered())


def test_docs_tables_script_finds_the_tables_current():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "docs_tables.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_inputs_doc_describes_every_language_the_registry_offers():
    """The registry is the only list of languages; docs/inputs.md says what each one takes."""
    from compiler import registry
    inputs = _read("docs/inputs.md")
    for key in [*registry.offered(), "import"]:
        assert f"**{key}**" in inputs, key

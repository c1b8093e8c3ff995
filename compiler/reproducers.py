"""What every job's reproducer script shares (compiler/<package>/reproducer.py writes the rest): the
header naming the job, the versions it was made with and how to run the script; the user's source
as a Python literal; the check that warns when the installed versions differ; the output folder.

A reproducer is text built in the web process from a stored request: nothing here imports a
compiler, and nothing runs. The script it makes runs on the reader's machine, with plain torch,
triton or jax and none of irscope.
"""
from __future__ import annotations

import json

from compiler import python_ast
from compiler.model import Request
from compiler.user_code import USER_MODULE

# The user's file run as irscope runs a program that follows its language's convention (`model`,
# `fn`): as the module __irscope_user__, not as __main__, kept in sys.modules
# (compiler/user_code.run_as_module). Sets `namespace`; needs SOURCE_PATH.
RUN_AS_MODULE = f'''import importlib.util  # noqa: E402

# as irscope runs it: the module {USER_MODULE}, not __main__, kept in sys.modules (Dynamo imports
# it by name to read the globals of a function it inlines)
spec = importlib.util.spec_from_file_location("{USER_MODULE}", SOURCE_PATH)
user_module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = user_module
spec.loader.exec_module(user_module)
namespace = vars(user_module)'''


def python_literal(text: str) -> str:
    """`text` as a Python string literal that reads back exactly: a raw triple-quoted block (the
    source as the user wrote it) where Python reads that back as `text` (checked, not assumed: a
    text ending in a quote once lost it), else repr()."""
    if all(c == "\n" or c == "\t" or " " <= c < "\x7f" or c > "\x9f" for c in text) and "\r" not in text:
        block = "r'''" + text + "'''"
        try:
            if python_ast.literal_eval(block) == text:
                return block
        except (SyntaxError, ValueError):
            pass
    return repr(text)


def header(request: Request, toolchain: dict[str, str], job_id: str, title: str, what: str,
           writes: list[str], needs: str = "") -> str:
    """The script's docstring: the job, the versions, what it does, what it writes, what it needs."""
    versions = ", ".join(f"{name} {version}" for name, version in toolchain.items() if name != "irscope")
    options = json.dumps(request.options, sort_keys=True)
    lines = [
        "#!/usr/bin/env python3",
        f'"""Reproducer of irscope job {job_id or "(unsaved)"}: {title}.',
        "",
        f"Made by irscope {toolchain.get('irscope', '?')} for a job compiled with: {versions}.",
        f"Options: {options}",
        "",
        what,
        "",
        f"Install the versions the job was compiled with{_toolchain_named(toolchain)}:",
        "",
        f"    {pip_line(toolchain)}",
        "",
        "Run it with the same versions installed (it warns when they differ):",
        "",
        f"    python {_name(job_id)} [OUT_DIR]      # default: ./{out_dir(job_id)}",
        "",
        "It writes into OUT_DIR:",
        *[f"  {w}" for w in writes],
    ]
    if needs:
        lines += ["", needs]
    lines += ['"""']
    return "\n".join(_wrap(line) for line in lines)


# PyTorch's CPU builds (a local version `+cpu`) come from its own index, beside PyPI's packages
_LOCAL_INDEXES = {"cpu": "https://download.pytorch.org/whl/cpu"}


def pip_line(toolchain: dict[str, str]) -> str:
    """`pip install torch==2.14.1 triton==3.8.0`: the job's toolchain's versions, pinned."""
    pins = {name: version for name, version in toolchain.items()
            if name not in ("irscope", "toolchain") and version != "not installed"}
    indexes = sorted({_LOCAL_INDEXES[v.split("+", 1)[1]] for v in pins.values()
                      if "+" in v and v.split("+", 1)[1] in _LOCAL_INDEXES})
    return " ".join(["pip install", *(f"{name}=={version}" for name, version in pins.items()),
                     *(f"--extra-index-url {url}" for url in indexes)])


def _toolchain_named(toolchain: dict[str, str]) -> str:
    return f" (irscope's toolchain {toolchain['toolchain']})" if toolchain.get("toolchain") else ""


def _wrap(line: str, width: int = 100) -> str:
    if len(line) <= width or line.startswith("    "):
        return line
    indent = " " * (len(line) - len(line.lstrip()))
    words, out, current = line.split(" "), [], ""
    for word in words:
        if current and len(current) + 1 + len(word) > width:
            out.append(current)
            current = indent + word
        else:
            current = f"{current} {word}" if current else word
    out.append(current)
    return "\n".join(out)


def _name(job_id: str) -> str:
    return f"reproducer-{job_id}.py" if job_id else "reproducer.py"


def out_dir(job_id: str) -> str:
    return f"irscope-repro-{job_id}" if job_id else "irscope-repro"


def prologue(toolchain: dict[str, str], job_id: str, packages: tuple[str, ...]) -> str:
    """The script's first statements: the output folder from argv, and `check_versions()`, which
    compares the installed versions of `packages` with the job's (a warning, not a stop)."""
    wanted = {name: toolchain[name] for name in packages if name in toolchain}
    return f'''import importlib.metadata
import os
import sys

OUT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else {out_dir(job_id)!r})
os.makedirs(OUT, exist_ok=True)
# The versions irscope compiled the job with.
VERSIONS = {json.dumps(wanted, indent=4)}


def check_versions():
    for name, wanted in VERSIONS.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = "not installed"
        if have != wanted:
            print(f"reproducer: warning: {{name}} {{have}} is installed; the job was compiled with {{wanted}}",
                  file=sys.stderr)


check_versions()
'''


def write_source(name: str, source: str) -> str:
    """Statements writing the user's source to OUT/`name` (a real file: tracebacks and the
    compiler's locations name its lines, as in the job) and leaving its path in SOURCE_PATH."""
    return f'''SOURCE = {python_literal(source)}
SOURCE_PATH = os.path.join(OUT, {name!r})
with open(SOURCE_PATH, "w", encoding="utf-8") as f:
    f.write(SOURCE)
'''

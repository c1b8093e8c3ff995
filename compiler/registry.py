"""The pipeline registry: language key -> pipeline class.

Modules are named here and imported on first use, so listing languages costs no compiler import.
"""
from __future__ import annotations

import importlib
import json

from compiler.pipeline import Option, Pipeline

# key -> "module:Class". One line per language; a key appears once.
_TABLE: dict[str, str] = {}
_LOADED: dict[str, Pipeline] = {}
_OFFERED: list[str] = []  # the keys a server offers unless its `languages` setting says otherwise


def register(key: str, target: str, offered: bool = True) -> None:
    """Add a pipeline under `key`; `offered`: in the `languages` setting's default (and so in every
    list of languages derived from it). A key registered twice is a programming error."""
    if key in _TABLE:
        raise ValueError(f"pipeline {key!r} is already registered ({_TABLE[key]})")
    if ":" not in target:
        raise ValueError(f"pipeline target must be 'module:Class', not {target!r}")
    _TABLE[key] = target
    if offered:
        _OFFERED.append(key)


def offered() -> list[str]:
    """The languages a server offers by default, in the registry's order: this table is the only
    list of languages (the setting's default, the tests', the tools' descriptions derive from it)."""
    return list(_OFFERED)


def keys() -> list[str]:
    return list(_TABLE)


def package(key: str) -> str:
    """The compiler package `key`'s pipeline lives in (`compiler.<package>.pipeline`), read from
    the table without importing it."""
    parts = _TABLE[key].split(":")[0].split(".")
    return parts[1] if parts[0] == "compiler" and len(parts) > 2 else parts[0]


def get(key: str) -> Pipeline:
    """The pipeline for `key`; an unknown key is a KeyError naming the known ones."""
    if key not in _TABLE:
        raise KeyError(f"unknown language {key!r}; known: {', '.join(_TABLE)}")
    if key not in _LOADED:
        module, name = _TABLE[key].split(":")
        pipeline = getattr(importlib.import_module(module), name)()
        if pipeline.key != key:
            raise ValueError(f"{_TABLE[key]} declares key {pipeline.key!r}, registered as {key!r}")
        _LOADED[key] = pipeline
    return _LOADED[key]


def markdown_table() -> str:
    """The offered languages as docs/languages.md shows them: one row per language (what it
    accepts, its options with their defaults), then each language's options in full."""
    pipelines = [get(key) for key in offered()]
    rows = ["| language | title | accepts | options (default) |", "| --- | --- | --- | --- |"]
    for p in pipelines:
        options = ", ".join(f"`{o.name}` (`{json.dumps(o.default)}`)" for o in p.options) or "none"
        rows.append(f"| `{p.key}` | {_cell(p.title)} | {_cell(p.accepts)} | {options} |")
    for p in pipelines:
        rows += ["", f"### `{p.key}` options", "", "| option | kind | default | values | what it does |",
                 "| --- | --- | --- | --- | --- |"]
        rows += [f"| `{o.name}` | {o.kind} | `{json.dumps(o.default)}` | {_values(o)} | {_cell(o.help)} |"
                 for o in p.options]
    return "\n".join(rows)


def _values(option: Option) -> str:
    """What an option takes, as a table cell."""
    if option.kind == "choice":
        return ", ".join(f"`{json.dumps(choice)}`" for choice in option.choices)
    if option.kind == "int":
        low = "" if option.minimum is None else f"from {option.minimum}"
        high = "" if option.maximum is None else f"to {option.maximum}"
        return " ".join(["an integer", low, high]).strip()
    return {"bool": "`true`, `false`", "str": "a string", "dict": "an object"}.get(option.kind, option.kind)


def _cell(text: str) -> str:
    """`text` inside a Markdown table's cell: a `|` would end the cell."""
    return text.replace("|", "\\|")


def guess(path: str, source: str, offered: tuple[str, ...] | list[str]) -> str:
    """The language of a file among the `offered` ones: the one whose extension it has, else the
    first whose `source_markers` the source contains, else PyTorch (or the first offered)."""
    import os
    extension = os.path.splitext(path)[1]
    pipelines = [get(key) for key in offered]
    for pipeline in pipelines:
        if extension and extension in pipeline.extensions:
            return pipeline.key
    for pipeline in pipelines:
        if any(marker in source for marker in pipeline.source_markers):
            return pipeline.key
    return "pytorch" if "pytorch" in offered else offered[0]


register("pytorch", "compiler.pytorch.pipeline:PyTorchPipeline")
register("triton", "compiler.triton.pipeline:TritonPipeline")
register("gluon", "compiler.gluon.pipeline:GluonPipeline")
register("helion", "compiler.helion.pipeline:HelionPipeline")
register("cute", "compiler.cute.pipeline:CutePipeline")
register("hlo", "compiler.xla.pipeline:HloPipeline")
register("stablehlo", "compiler.xla.pipeline:StableHloPipeline")
register("jax", "compiler.xla.pipeline:JaxPipeline")
# the test pipeline, offered only where the `languages` setting names it
register("fake", "compiler.fake.pipeline:FakePipeline", offered=False)
# logs made elsewhere: offered by the `imports` setting, never pasted
register("import", "compiler.imports.pipeline:ImportPipeline", offered=False)

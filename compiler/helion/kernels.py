"""Helion kernels (`@helion.kernel`, PyTorch's kernel DSL that generates Triton) in a run of the
`helion` language: for each kernel bound to its inputs, the config it compiled with and how that
config was chosen, Helion's config space for those inputs (`ConfigSpec.iter_search_dimensions`),
and the Triton module Helion generated, whose `# src[file:line]` comments link its lines to the
user's. The Triton compilation of that module is captured like any other (compiler/kernels/capture.py).

Recorded by wrapping `BoundKernel.compile_config` (public: Helion compiles every config through it,
given, default or autotuned). On a virtual target nothing can be timed, so autotuning
(`BoundKernel.autotune`) takes the kernel's first config, or Helion's default config when it has
none, and says so; on a real GPU Helion autotunes as it would anywhere.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Iterator

SRC_COMMENT = re.compile(r"^\s*# src\[(?P<file>[^\]:]+):(?P<line>\d+)\]")

CHOSEN_GIVEN = "given: the kernel's config"
CHOSEN_DEFAULT = ("Helion's default config for these inputs (ConfigSpec.default_config): the kernel names no "
                  "config, and autotuning times candidates on a GPU; a virtual target times nothing")
CHOSEN_FIRST = ("the first of the kernel's {n} configs: choosing among them times each on a GPU; a virtual "
                "target times nothing")
CHOSEN_AUTOTUNED = "autotuned by Helion on this GPU"
CHOSEN_SAMPLED = ("sampled {i} of {n}: a random config of Helion's config space for these inputs "
                  "(ConfigGeneration.random_config, seed 0), compiled beside the chosen one to compare")


@dataclass
class HelionCompile:
    """One config of one bound Helion kernel, compiled."""

    kernel: str
    config: dict[str, Any]
    chosen: str
    decorator: str
    search_space: list[dict[str, Any]]
    module_file: str  # the Triton module Helion generated for it
    inputs: list[str] = field(default_factory=list)


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


def _describe_input(value: Any) -> str:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{str(dtype).replace('torch.', '')}[{', '.join(str(s) for s in shape)}]"
    return type(value).__name__


_KERNEL_DEF = re.compile(r"^def _helion_(\w+)\(", re.M)


class HelionRecorder:
    def __init__(self, virtual: bool, user_file: str):
        self.virtual = virtual
        self.user_file = user_file  # the program; the modules Helion generates are named after it
        self._named: dict[str, str] = {}  # the module's hashed path -> the path it is loaded from
        self.compiles: list[HelionCompile] = []
        self.failed_samples: list[str] = []  # sampled configs Helion or Triton could not compile, and why
        self._chosen: dict[int, str] = {}  # id(bound kernel) -> how its config was chosen
        self._called: list[tuple[Any, tuple]] = []  # each bound kernel the program called, with its arguments

    @contextlib.contextmanager
    def installed(self) -> Iterator["HelionRecorder"]:
        from helion.runtime.kernel import BoundKernel
        original_compile, original_autotune = BoundKernel.compile_config, BoundKernel.autotune
        original_call = BoundKernel.__call__
        recorder = self

        def call(bound: Any, *args: Any) -> Any:
            if not any(seen is bound for seen, _ in recorder._called):
                recorder._called.append((bound, args))
            return original_call(bound, *args)

        def compile_config(bound: Any, config: Any = None, **kwargs: Any) -> Any:
            compiled = original_compile(bound, config, **kwargs)
            recorder._record(bound, config, compiled)
            return compiled

        def autotune(bound: Any, args: Any, **kwargs: Any) -> Any:
            if not recorder.virtual:
                recorder._chosen[id(bound)] = CHOSEN_AUTOTUNED
                return original_autotune(bound, args, **kwargs)
            configs = list(bound.kernel.configs)
            config = configs[0] if configs else bound.config_spec.default_config()
            recorder._chosen[id(bound)] = CHOSEN_FIRST.format(n=len(configs)) if configs else CHOSEN_DEFAULT
            bound.set_config(config)
            return config

        helion_kernel = importlib.import_module("helion.runtime.kernel")  # `helion.runtime.kernel` is also a function
        code_cache = helion_kernel.PyCodeCache
        helion_kernel.PyCodeCache = _NamedModules(code_cache, self._module_path)
        BoundKernel.compile_config, BoundKernel.autotune, BoundKernel.__call__ = compile_config, autotune, call
        try:
            yield self
        finally:
            BoundKernel.compile_config, BoundKernel.autotune = original_compile, original_autotune
            BoundKernel.__call__ = original_call
            helion_kernel.PyCodeCache = code_cache

    def _module_path(self, source: str, hashed: str) -> str:
        """Where the module Helion generated (written by PyTorch's code cache to `hashed`, a name
        made of its hash) is loaded from: beside the program, named after it and the kernel
        (`kernels.helion.matmul.py`, then `.1`, `.2` for the kernel's next modules), so that every
        location in its IR, PTX and SASS names a file a reader can place. The text is the same."""
        if hashed not in self._named:
            found = _KERNEL_DEF.search(source)
            stem = os.path.splitext(os.path.basename(self.user_file))[0]
            base = f"{stem}.helion.{found.group(1) if found else 'module'}"
            taken = set(self._named.values())
            folder = os.path.join(os.path.dirname(self.user_file), "helion-modules")
            n, path = 0, os.path.join(folder, f"{base}.py")
            while path in taken:
                n += 1
                path = os.path.join(folder, f"{base}.{n}.py")
            os.makedirs(folder, exist_ok=True)
            shutil.copyfile(hashed, path)
            self._named[hashed] = path
        return self._named[hashed]

    def compile_samples(self, total: int) -> None:
        """For each kernel the program called, compile `total - 1` more configs sampled from its
        config space (seed 0, after the program ran: its own random state is not touched), each
        called once on the program's arguments so that Triton compiles it (on a virtual target
        nothing runs)."""
        import random
        for bound, args in list(self._called):
            generation = bound.config_spec.create_config_generation()
            random.seed(0)
            for i in range(2, total + 1):
                config = generation.random_config()
                self._chosen[id(bound)] = CHOSEN_SAMPLED.format(i=i, n=total)
                try:
                    bound.compile_config(config)(*args)
                except Exception as e:  # noqa: BLE001 - a sampled config the compilers refuse is said, not fatal
                    self.failed_samples.append(f"{bound.kernel.name}, sample {i}: {type(e).__name__}: "
                                               f"{str(e).splitlines()[0][:300] if str(e) else ''}")

    def _record(self, bound: Any, config: Any, compiled: Any) -> None:
        code = getattr(compiled, "__code__", None)
        module_file = getattr(code, "co_filename", "") if code is not None else ""
        if not module_file or any(c.module_file == module_file for c in self.compiles):
            return
        configs = list(bound.kernel.configs)
        chosen = self._chosen.get(id(bound))
        if chosen is None:
            chosen = CHOSEN_GIVEN if configs else CHOSEN_DEFAULT
        values = dict(config) if config is not None else {}
        try:
            decorator = bound.format_kernel_decorator(config, bound.settings)
        except Exception:  # noqa: BLE001 - the decorator is a convenience; the config itself is shown
            decorator = ""
        space = search_dimensions(bound.config_spec)
        inputs = [_describe_input(a) for a in getattr(bound, "fake_args", ()) or ()]
        self.compiles.append(HelionCompile(kernel=bound.kernel.name, config=_plain(values), chosen=chosen,
                                           decorator=decorator, search_space=space, module_file=module_file,
                                           inputs=inputs))


class _NamedModules:
    """PyTorch's code cache as Helion loads its generated modules through it: written where the
    cache writes them, loaded from the path `name(source, hashed_path)` gives; anything else as
    the cache itself."""

    def __init__(self, cache: Any, name: Any):
        self._cache, self._name = cache, name

    def load(self, source_code: str, extra: str = "", **kwargs: Any) -> Any:
        key, hashed = self._cache.write(source_code, extra)
        return self._cache.load_by_key_path(key, self._name(source_code, hashed), **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)


def search_dimensions(spec: Any) -> list[dict[str, Any]]:
    """Helion's config space for a bound kernel, a row per tunable field, as
    `ConfigSpec.iter_search_dimensions` describes it. Helion 1.5.1 raises NotImplementedError there for
    a reduction dimension's block sizes (`block_id_sequence._fragment`), which failed the whole job
    at the user's line: then each field is described on its own, the same way, and a field Helion
    cannot enumerate is a row saying so with Helion's own description of it (`repr`), never dropped.
    The field walk (`ConfigSpec._flat_fields`, what iter_search_dimensions walks) is Helion 1.5.1's."""
    def row(name: str, choices: Any, values: Any, items: int) -> dict[str, Any]:
        return {"name": name, "choices": choices, "values": _plain(values), "items": items}

    try:
        return [row(d.name, d.cardinality, d.values, d.num_items) for d in spec.iter_search_dimensions()]
    except NotImplementedError:
        pass
    from helion.autotuner.block_id_sequence import BlockIdSequence
    rows = []
    for name, spec_field in spec._flat_fields().items():
        sequence = isinstance(spec_field, BlockIdSequence)
        try:
            rows.append(row(name, spec_field.cardinality(spec), None, len(spec_field)) if sequence
                        else row(name, spec_field.cardinality(), spec_field.search_values(100), 0))
        except NotImplementedError as e:
            rows.append({**row(name, None, None, len(spec_field) if sequence else 0),
                         "not_enumerated": f"Helion does not enumerate this field ({type(e).__name__}"
                                           f"{': ' + str(e) if str(e) else ''}); Helion's own description: "
                                           + (", ".join(_described(item) for item in spec_field) if sequence
                                              else _described(spec_field))})
    return rows


def _described(item: Any) -> str:
    """A Helion config item by its own fields (`ReductionLoopSpec(block_ids=[1], size_hint=2560, ...)`)."""
    fields = {k: v for k, v in vars(item).items() if not k.startswith("_")} if hasattr(item, "__dict__") else {}
    return f"{type(item).__name__}({', '.join(f'{k}={v!r}' for k, v in fields.items())})" if fields else repr(item)


def user_lines(module_text: str, user_file: str) -> dict[int, int]:
    """Line of Helion's generated module -> the user's line named by the last `# src[file:line]`
    comment above it in the same top-level definition (the comment's own line too). A comment
    naming another file, and a new top-level statement, end the run."""
    name = os.path.basename(user_file)
    out: dict[int, int] = {}
    current: int | None = None
    for number, text in enumerate(module_text.splitlines(), start=1):
        m = SRC_COMMENT.match(text)
        if m:
            current = int(m.group("line")) if os.path.basename(m.group("file")) == name else None
        elif text[:1] not in ("", " ", "\t"):
            current = None
        if current is not None and text.strip():
            out[number] = current
    return out


def space_table(compile_: HelionCompile) -> str:
    """The config space as a text table: each dimension, how many choices, and what they are."""
    rows = [("dimension", "choices", "values (or items per kernel)")]
    for d in compile_.search_space:
        values = ", ".join(str(v) for v in d["values"]) if d["values"] else (
            f"{d['items']} item(s)" if d["items"] else "-")
        if d.get("not_enumerated"):
            values = f"{values}; {d['not_enumerated']}"
        rows.append((d["name"], "?" if d["choices"] is None else str(d["choices"]), values))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = [f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]}" for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines) + "\n"

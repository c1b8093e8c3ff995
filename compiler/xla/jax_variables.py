"""JAX reads its JAX_* variables (JAX_ENABLE_X64, JAX_DEFAULT_MATMUL_PRECISION, ...) once, when it is
imported. The XLA child imports jax before it runs the user's program (to dump and capture what
the program compiles; a spare's child even before the job exists), so a program that sets one in
`os.environ` before its own first `import jax`, as people turn on 64-bit floats, would lose it.

While the program has not imported jax yet (no `import` of jax or of a module under it, by the
program or a library it imports), setting such a variable in `os.environ` also sets JAX's option,
parsed as JAX parses its variables (its own `bool_env` and `int_env`, the option's own parser for
the rest). Once the program has imported jax, a variable it sets is only a variable, as in a plain
run. The options the child sets itself for the job's target and capture (CHILD_OPTIONS) stay its.
"""
from __future__ import annotations

import builtins
import os
from contextlib import contextmanager
from typing import Any, Iterator

# The child's own options, which the job's target and its capture decide (compiler/xla/child.py).
CHILD_OPTIONS = frozenset({"jax_platforms", "jax_dump_ir_to", "jax_dump_ir_modes", "jax_enable_compilation_cache"})


class _UntilJaxImported:
    def __init__(self) -> None:
        self.environ_class = type(os.environ)
        self.setitem = self.environ_class.__setitem__
        self.import_ = builtins.__import__

    def install(self) -> None:
        import jax
        from jax._src import config as jax_config
        watch = self

        def setitem(environ: Any, key: str, value: str) -> None:
            watch.setitem(environ, key, value)
            if environ is os.environ and isinstance(key, str) and key.startswith("JAX_"):
                _set_option(jax.config, jax_config, key, value)

        def import_(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
            if level == 0 and (name == "jax" or name.startswith("jax.")):
                watch.uninstall()
            return watch.import_(name, globals, locals, fromlist, level)

        self.environ_class.__setitem__ = setitem
        builtins.__import__ = import_

    def uninstall(self) -> None:
        self.environ_class.__setitem__ = self.setitem
        builtins.__import__ = self.import_


def _set_option(config: Any, jax_config: Any, key: str, value: str) -> None:
    name = key.lower()
    if name not in config.meta or name in CHILD_OPTIONS:
        return  # not an option of this JAX (it would ignore it too), or one the child decides
    kind = config.meta[name][0]
    if kind is bool:
        parsed: Any = jax_config.bool_env(key, False)
    elif kind is int:
        parsed = jax_config.int_env(key, 0)
    elif kind is float:
        parsed = float(value)
    else:
        parsed = value
    config.update(name, parsed)


@contextmanager
def until_the_program_imports_jax() -> Iterator[None]:
    """Around the program's run, in the child that imported jax."""
    watch = _UntilJaxImported()
    watch.install()
    try:
        yield
    finally:
        watch.uninstall()

"""What the user's source defines to be compiled, in either convention, and how big it is.

* irscope's: `model` (an nn.Module or a function) and `example_inputs` (a tuple, or a function
  returning one).
* KernelBench's (the convention of kernel benchmarks): `class Model`, `get_inputs()` returning
  the forward's arguments and `get_init_inputs()` returning `Model`'s constructor arguments (a list
  or tuple of positional arguments, or a dict of keyword arguments). The harness's own lines
  (`Model(*get_init_inputs())`, `model(*get_inputs())`) are not needed.

* Neither: a program that calls `torch.compile` itself (a tutorial, a training loop, a bug
  report). It binds no conventions' inputs (`example_inputs`, `get_inputs`, `get_init_inputs`),
  and runs as written (`is_script`): programs name their own model `model` (or their class
  `Model`) as often as not, so those names alone do not make a convention's source.

The source itself always runs for real (it defines things; it should allocate little). What the
conventions name as functions can also be called under a FakeTensorMode, which is how irscope
learns how much memory the inputs and parameters need without allocating it, and how a
compile-only run gets its inputs. An `example_inputs` given as a value was allocated when the
source ran: if it did not fit, that is a MemoryLimit at its line, whose message says to make it a
function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from compiler.errors import ErrorKind
from compiler.formats import binary_size
from compiler.pipeline import UserError
from compiler.user_code import runs_as_written

IRSCOPE = "model / example_inputs"
KERNELBENCH = "KernelBench (Model, get_inputs, get_init_inputs)"
SCRIPT = "a program that calls torch.compile itself"
# The names that make a source a convention's: what it gives irscope to call its model on.
_CONVENTION_NAMES = frozenset({"example_inputs", "get_inputs", "get_init_inputs"})


def is_script(source: str) -> bool:
    """True when the source binds none of the conventions' inputs (user_code.runs_as_written)."""
    return runs_as_written(source, _CONVENTION_NAMES)


@dataclass
class Program:
    """The entry points of one source. `build(mode)` returns (model, inputs); with a FakeTensorMode
    every tensor the convention's functions create is fake (a `model` or `example_inputs` given as
    a value was built when the source ran and stays what it is)."""

    convention: str
    _build: Callable[[Any], tuple[Any, tuple]]
    builds_inputs: bool  # the inputs come from a function: they can be built as fake tensors
    builds_model: bool  # so does the model

    def build(self, mode: Any = None) -> tuple[Any, tuple]:
        import contextlib
        with mode if mode is not None else contextlib.nullcontext():
            return self._build(mode)


def find(namespace: dict[str, Any], torch: Any) -> Program:
    """The entry points the source defines; an InputError naming what is missing otherwise."""
    if "model" in namespace or "example_inputs" in namespace or "Model" not in namespace:
        return _irscope_convention(namespace, torch)
    return _kernelbench_convention(namespace, torch)


def _irscope_convention(namespace: dict[str, Any], torch: Any) -> Program:
    if "model" not in namespace:
        raise UserError(ErrorKind.InputError, "the source must define `model` (an nn.Module or a function) and "
                                              "`example_inputs`, or KernelBench's `Model`, `get_inputs` and "
                                              "`get_init_inputs`")
    if "example_inputs" not in namespace:
        raise UserError(ErrorKind.InputError, "the source must define `example_inputs` (a tuple of inputs, "
                                              "or a function returning one)")
    model = namespace["model"]
    if not callable(model):
        raise UserError(ErrorKind.InputError, f"`model` must be an nn.Module or a function, not {type(model).__name__}")
    example_inputs = namespace["example_inputs"]

    def build(mode: Any) -> tuple[Any, tuple]:
        inputs = example_inputs() if callable(example_inputs) else example_inputs
        return model, _as_tuple(inputs, "`example_inputs` must be a tuple (or a function returning one)", torch)

    return Program(IRSCOPE, build, builds_inputs=callable(example_inputs), builds_model=False)


def _kernelbench_convention(namespace: dict[str, Any], torch: Any) -> Program:
    missing = [name for name in ("get_inputs", "get_init_inputs") if not callable(namespace.get(name))]
    if missing:
        raise UserError(ErrorKind.InputError, "the source defines `Model` (KernelBench's convention) but no function "
                        + " or ".join(f"`{m}`" for m in missing)
                        + "; define it (or `model` and `example_inputs` instead)")
    cls, get_inputs, get_init_inputs = namespace["Model"], namespace["get_inputs"], namespace["get_init_inputs"]
    if not callable(cls):
        raise UserError(ErrorKind.InputError, f"`Model` must be a class, not {type(cls).__name__}")

    def build(mode: Any) -> tuple[Any, tuple]:
        init = get_init_inputs()
        if isinstance(init, dict):
            model = cls(**init)
        elif isinstance(init, (list, tuple)):
            model = cls(*init)
        else:
            raise UserError(ErrorKind.InputError, "`get_init_inputs()` must return a list or tuple of `Model`'s "
                                                  "arguments, or a dict of its keyword arguments, not "
                                                  f"{type(init).__name__}")
        return model, _as_tuple(get_inputs(), "`get_inputs()` must return a list or tuple of inputs", torch)

    return Program(KERNELBENCH, build, builds_inputs=True, builds_model=True)


def _as_tuple(inputs: Any, message: str, torch: Any) -> tuple:
    if isinstance(inputs, torch.Tensor):
        return (inputs,)
    if isinstance(inputs, list):
        return tuple(inputs)
    if not isinstance(inputs, tuple):
        raise UserError(ErrorKind.InputError, f"{message}, not {type(inputs).__name__}")
    return inputs


@dataclass(frozen=True)
class Sizes:
    """Bytes the inputs and the model's parameters and buffers take, each storage counted once."""

    inputs: int
    parameters: int

    @property
    def total(self) -> int:
        return self.inputs + self.parameters


def sizes(model: Any, inputs: tuple, torch: Any) -> Sizes:
    """The memory `model` and `inputs` need (real or fake tensors alike: only metadata is read)."""
    import torch.utils._pytree as pytree
    from torch.multiprocessing.reductions import StorageWeakRef

    seen: set[Any] = set()

    def total(tensors: list[Any]) -> int:
        count = 0
        for t in tensors:
            if not isinstance(t, torch.Tensor) or t.is_meta:
                continue
            storage = t.untyped_storage()
            key = StorageWeakRef(storage)
            if key in seen:
                continue
            seen.add(key)
            count += storage.nbytes()
        return count

    params = total(list(model.parameters()) + list(model.buffers())) if isinstance(model, torch.nn.Module) else 0
    return Sizes(inputs=total(pytree.tree_leaves(inputs)), parameters=params)


# --- compile-only or compile-and-run ---------------------------------------------------------

COMPILE_ONLY = "compile-only"
COMPILE_AND_RUN = "compile-and-run"


@dataclass(frozen=True)
class RunMode:
    """Whether the compiled code runs, and the sentence the page shows saying why; the peak the
    run was estimated to hold (compiler/pytorch/peak_memory.py), and whether the accuracy check's
    float64 reference fits beside it."""

    mode: str
    sentence: str
    requested: str
    sizes: Sizes | None
    memory_limit_mb: int | None
    run_memory_percent: int
    peak: Any = None  # peak_memory.PeakEstimate, when one was made
    float64_reference: bool = True  # the accuracy check's float64 eager copy runs too

    @property
    def compile_only(self) -> bool:
        return self.mode == COMPILE_ONLY

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "sentence": self.sentence, "requested": self.requested,
                               "run_memory_percent": self.run_memory_percent}
        if self.sizes is not None:
            out["inputs_bytes"] = self.sizes.inputs
            out["parameters_bytes"] = self.sizes.parameters
        if self.memory_limit_mb is not None:
            out["memory_limit_mb"] = self.memory_limit_mb
        if self.peak is not None:
            out.update(self.peak.to_json())
        if not self.compile_only:
            out["float64_reference"] = self.float64_reference
        return out


def mebibytes(mb: int) -> str:
    """A memory_limit_mb as the page says it ("6 GiB", "1.5 GiB", "512 MiB")."""
    if mb >= 1024:
        gib = mb / 1024
        return f"{gib:.0f} GiB" if gib == int(gib) else f"{gib:.1f} GiB"
    return f"{mb} MiB"


def _needs(s: Sizes) -> str:
    if s.parameters == 0:
        return f"inputs need {binary_size(s.inputs)}"
    if s.inputs == 0:
        return f"parameters need {binary_size(s.parameters)}"
    return (f"inputs and parameters need {binary_size(s.total)} (inputs {binary_size(s.inputs)}, "
            f"parameters {binary_size(s.parameters)})")


def allowed_bytes(memory_limit_mb: int, run_memory_percent: int) -> float:
    """What a run may hold at its peak: run_memory_percent of the worker's memory limit."""
    return memory_limit_mb * 2**20 * run_memory_percent / 100


def choose(requested: str, s: Sizes | None, memory_limit_mb: int | None, run_memory_percent: int,
           virtual_target: str | None = None, peak: Any = None, world_size: int = 1) -> RunMode:
    """The run mode for the `run` option `requested` ("auto", "compile-only", "compile-and-run"),
    the sizes measured (None when the inputs were built when the source ran), the worker's memory
    limit (setting memory_limit_mb), the share of it a run may hold at its peak (setting
    run_memory_percent), the virtual GPU targeted, if any (nothing runs on one), and the peak
    estimated on fake tensors (a peak_memory.PeakEstimate; without one, the inputs and parameters
    decide, at half that share: running holds them several times over), and the world's size (rank 0
    of a virtual world is compiled, never run)."""
    estimated = peak is not None and peak.peak_bytes is not None
    if memory_limit_mb is None:
        over = False
    elif estimated:
        over = peak.without_reference_bytes > allowed_bytes(memory_limit_mb, run_memory_percent)
    else:
        over = s is not None and s.total > allowed_bytes(memory_limit_mb, run_memory_percent) / 2
    compile_only = bool(virtual_target) or world_size > 1 or requested == COMPILE_ONLY or \
        (requested == "auto" and over)
    reference = True
    reasons: list[str] = []
    if compile_only:
        if over and memory_limit_mb is not None and requested == "auto" and not virtual_target and world_size == 1:
            if estimated:
                reasons.append(f"the run would peak at {binary_size(peak.without_reference_bytes)} (estimated on fake "
                               f"tensors), and the worker allows {run_memory_percent}% of its "
                               f"{mebibytes(memory_limit_mb)} (setting run_memory_percent)")
            elif s is not None:
                reasons.append(f"{_needs(s)}, the worker allows {mebibytes(memory_limit_mb)} and runs models whose "
                               f"inputs and parameters take at most {run_memory_percent // 2}% of it (half of setting "
                               "run_memory_percent: the run's peak could not be estimated on fake tensors"
                               + (f": {peak.error}" if peak is not None and peak.error else "") + ")")
        if virtual_target:
            reasons.append(f"{virtual_target} is a virtual GPU: nothing runs on it")
        if world_size > 1:
            reasons.append(f"this is rank 0 of a virtual world of {world_size} ranks (option devices): the fake "
                           "process group moves no data, so nothing is run or timed")
        if requested == COMPILE_ONLY:
            reasons.append("the run option asked for it")
    else:
        if requested == COMPILE_AND_RUN:
            reasons.append("the run option asked for it")
        if estimated:
            where = (f", within {run_memory_percent}% of the worker's {mebibytes(memory_limit_mb)}"
                     if memory_limit_mb is not None and requested == "auto" else "")
            # the run's own peak: with the float64 reference where it keeps it (the Timings table's
            # "estimated peak memory of the run"), else without
            reference = memory_limit_mb is None or \
                peak.peak_bytes <= allowed_bytes(memory_limit_mb, run_memory_percent)
            reasons.append(f"the run would peak at "
                           f"{binary_size(peak.peak_bytes if reference else peak.without_reference_bytes)} "
                           f"(estimated on fake tensors){where}")
            if not reference:
                reasons.append(f"the accuracy check's float64 eager copy is left out: with it the run would peak at "
                               f"{binary_size(peak.peak_bytes)}")
        elif s is None:
            reasons.append("the inputs were built when the source ran")
        else:
            if peak is not None and peak.error:
                reasons.append(f"the run's peak could not be estimated on fake tensors ({peak.error})")
            reasons.append(_needs(s) + (f", within {run_memory_percent // 2}% of the worker's "
                                        f"{mebibytes(memory_limit_mb)}" if memory_limit_mb is not None
                                        and requested == "auto" else ""))
    mode = COMPILE_ONLY if compile_only else COMPILE_AND_RUN
    return RunMode(mode, f"{mode}: " + "; ".join(reasons), requested, s, memory_limit_mb, run_memory_percent, peak,
                   reference)

"""What compiling bought, measured on the worker's device: eager vs compiled time per call, peak
memory, accuracy, and the profiler's view of one compiled call. Runs after the compile, on the
objects the user's source defined; nothing here changes what was compiled (no grad-mode switch,
which would guard-fail and recompile)."""
from __future__ import annotations

import copy
import statistics
import time
import timeit
from typing import Any, Callable

from compiler.errors import ErrorKind
from compiler.user_code import CappedText, captured_stdout

MAX_TIMELINE_EVENTS = 400


def loss_of(outputs: Any, torch: Any) -> Any:
    """The training loss irscope uses: the sum of every output that requires grad."""
    import torch.utils._pytree as pytree

    from compiler.pipeline import UserError
    tensors = [t for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not tensors:
        raise UserError(ErrorKind.InputError, "training: no output requires grad, so there is no backward to compile")
    return sum(t.sum() for t in tensors)


def _stepper(inputs: tuple, training: bool, torch: Any) -> Callable[[Any], Any]:
    def step(fn: Any) -> Any:
        out = fn(*inputs)
        if training:
            loss_of(out, torch).backward()
        return out
    return step


def measure(model: Any, compiled: Any, inputs: tuple, training: bool, torch: Any,
            seconds: float = 1.0, deadline: float | None = None, float64_reference: bool = True) -> dict[str, Any]:
    """`timings.run`: medians with spread, memory peaks, accuracy; and the kernel profile. Timing
    each side (warm-up included) takes about `seconds` (setting measure_s), or one warm-up and
    one timed call where a single call takes longer. A part that would not end before `deadline`
    (time.monotonic()) is not started, and is listed in `not_measured`; the float64 reference is
    left out when `float64_reference` is false (it would not fit in memory), and says so."""
    step = _stepper(inputs, training, torch)
    skipped: list[str] = []

    def in_time(part: str, expected_s: float) -> bool:
        if deadline is not None and time.monotonic() + expected_s > deadline:
            skipped.append(part)
            return False
        return True
    on_cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)
    where = (f"{torch.cuda.get_device_name()}, CUDA events (triton.testing.do_bench)" if on_cuda
             else f"host CPU ({torch.get_num_threads()} threads), blocks of calls of about 10 ms each, "
                  f"timed with the garbage collector off (timeit)")
    result: dict[str, Any] = {"where": where, "what": "forward + backward" if training else "forward",
                              "statistic": "median over the timed blocks of the time per call, after warm-up; "
                                           "spread is the IQR of the blocks",
                              "seconds_per_side": seconds}
    outputs: dict[str, Any] = {}
    per_call_s = 0.0
    with captured_stdout(CappedText(0)):  # prints inside forward would flood the output
        for name, fn in (("eager", model), ("compiled", compiled)):
            if not in_time(f"timing {name} calls", max(seconds, 2 * per_call_s)):
                continue
            started = time.perf_counter()
            # warm-up (caches, allocator, the lazily compiled backward): up to 3 calls, a quarter
            # of the time at most
            for _ in range(3):
                before = time.perf_counter()
                outputs[name] = step(fn)
                per_call_s = time.perf_counter() - before
                if time.perf_counter() - started > seconds / 4:
                    break
            left = max(seconds - (time.perf_counter() - started), 0.05)
            times_ms, calls = _cuda_times(step, fn, left) if on_cuda else _cpu_times(step, fn, left, per_call_s)
            result[f"{name}_ms"] = round(statistics.median(times_ms), 4)
            quartiles = statistics.quantiles(times_ms, n=4) if len(times_ms) > 1 else [times_ms[0]] * 3
            result[f"{name}_iqr_ms"] = round(quartiles[2] - quartiles[0], 4)
            result[f"{name}_repeats"] = len(times_ms)
            result[f"{name}_calls_timed"] = calls
            result[f"{name}_measure_s"] = round(time.perf_counter() - started, 3)
        if "eager_ms" in result and "compiled_ms" in result:
            result["speedup"] = round(result["eager_ms"] / result["compiled_ms"], 3) if result["compiled_ms"] \
                else None
        started = time.perf_counter()
        if len(outputs) == 2:
            result["accuracy"] = {"vs_eager": _errors(outputs["eager"], outputs["compiled"], torch)}
        reference = None
        if not float64_reference:
            result["float64_reference"] = "left out: with it the run would not fit in memory (run_mode says how much)"
        elif "compiled" in outputs and in_time("the accuracy check's float64 eager copy", 4 * per_call_s):
            reference = _float64_reference(model, inputs, torch)
        if reference is not None:
            result.setdefault("accuracy", {})["vs_float64_eager"] = _errors(reference, outputs["compiled"], torch)
            if "eager" in outputs:
                result["accuracy"]["eager_vs_float64_eager"] = _errors(reference, outputs["eager"], torch)
        del reference
        outputs.clear()
        profiles = {name: _profile(step, fn, torch) for name, fn in (("eager", model), ("compiled", compiled))
                    if in_time(f"profiling one {name} call", 3 * per_call_s)}
        result["profile_s"] = round(time.perf_counter() - started, 3)
    result["memory"] = {f"{name}_peak_bytes": p["peak_bytes"] for name, p in profiles.items()}
    result["memory"]["how"] = ("torch.profiler (profile_memory) over one call: the highest running total of "
                               "bytes allocated minus freed, in time order")
    result["kernels"] = profiles["compiled"]["table"] if "compiled" in profiles else []
    result["kernel_timeline"] = profiles["compiled"]["events"] if "compiled" in profiles else []
    if skipped:
        result["not_measured"] = skipped
    return result


def _cpu_times(step: Callable[[Any], Any], fn: Any, seconds: float, per_call_s: float) -> tuple[list[float], int]:
    """Milliseconds per call of blocks of calls (about 10 ms each, so the clock's resolution does
    not matter; timed by timeit, which turns the garbage collector off), repeated for about
    `seconds` (at least one block); and how many calls that was."""
    number = max(1, min(100_000, int(0.01 / max(per_call_s, 1e-7))))
    timer = timeit.Timer(lambda: step(fn))
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while not times or time.perf_counter() < deadline:
        times.append(timer.timeit(number) / number * 1e3)
    return times, len(times) * number


def _cuda_times(step: Callable[[Any], Any], fn: Any, seconds: float) -> tuple[list[float], int]:
    """Milliseconds per call from CUDA events, Triton's do_bench (it flushes the L2 between calls)."""
    import triton.testing
    times = list(triton.testing.do_bench(lambda: step(fn), warmup=min(25, int(seconds * 250)),
                                         rep=max(int(seconds * 750), 10), return_mode="all"))
    return times, len(times)


def _float64_reference(model: Any, inputs: tuple, torch: Any) -> Any:
    """The eager model in float64 on float64 inputs, when the model can be copied and converted."""
    try:
        as64 = copy.deepcopy(model)
        if isinstance(as64, torch.nn.Module):
            as64 = as64.double()
        elif not callable(as64):
            return None
        inputs64 = tuple(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)
        with torch.no_grad():  # a separate eager copy: no compiled code is involved
            return as64(*inputs64)
    except Exception:  # noqa: BLE001 - models with state that cannot be copied simply get no reference
        return None


def _errors(expected: Any, actual: Any, torch: Any) -> dict[str, Any]:
    import torch.utils._pytree as pytree
    pairs = [(e, a) for e, a in zip(pytree.tree_leaves(expected), pytree.tree_leaves(actual))
             if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and e.is_floating_point()
             and e.shape == a.shape]
    if not pairs:
        return {"compared": 0}
    diffs = [(a.detach().double() - e.detach().double()).abs() for e, a in pairs]
    rel = [d / e.detach().double().abs().clamp_min(1e-12) for d, (e, _) in zip(diffs, pairs)]
    return {"compared": len(pairs), "max_abs_error": max(float(d.max()) for d in diffs),
            "max_rel_error": max(float(r.max()) for r in rel)}


def _profile(step: Callable[[Any], Any], fn: Any, torch: Any) -> dict[str, Any]:
    """One call under torch.profiler: per-op self time and calls, a timeline, and the memory peak."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities, profile_memory=True) as prof:
        step(fn)
    table = []
    for row in prof.key_averages():
        if row.key == "[memory]":
            continue
        device_us = getattr(row, "self_device_time_total", 0.0) or 0.0
        table.append({"name": row.key, "calls": row.count, "self_us": round(row.self_cpu_time_total, 2),
                      "total_us": round(row.cpu_time_total, 2), "self_device_us": round(device_us, 2)})
    table.sort(key=lambda r: -(r["self_device_us"] or r["self_us"]))
    events = []
    peak = running = 0
    raw = sorted(prof.events(), key=lambda e: e.time_range.start)
    origin = raw[0].time_range.start if raw else 0
    for e in raw:
        # Allocations are charged to the op that made them (its self memory); frees and
        # allocations outside any op come as "[memory]" events.
        running += e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage
        peak = max(peak, running)
        if e.name != "[memory]" and len(events) < MAX_TIMELINE_EVENTS:
            events.append({"name": e.name, "start_us": round(e.time_range.start - origin, 2),
                           "dur_us": round(e.time_range.elapsed_us(), 2), "thread": e.thread})
    return {"table": table[:60], "events": events, "peak_bytes": peak}

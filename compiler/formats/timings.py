"""A job's timings: the names a pipeline may record (Bundle.timing) and their one reading for the
page (`Timings.read`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from compiler.formats.errors import FormatError

# --- timings: what a job measured (Bundle.timing), read by the Timings tab ---------------------

# Every timing a pipeline may record, by name (the runner adds "job"). Their fields differ by
# compiler, so a timing is checked for its name and for being JSON; `Timings.read` is the one
# place that interprets them for the page.
TIMINGS = {
    "compile": "compile phases in seconds (keys `<phase>_s`), their `source`, PyTorch's raw `events`",
    "run": "the compiled code's run time (`eager_ms`, `compiled_ms` medians with spread), `where`, `what`, "
           "`accuracy`, `memory`",
    "target": "where the job compiled for, and whether anything ran",
    "run_mode": "compile-only or compile-and-run, and the sentence saying why (`mode`, `sentence`, sizes, the "
                "estimated peak and, after a run, the measured one)",
    "not_measured": "a job that compiled but whose measurement was stopped or cut: the `phase`, `why`, the "
                    "error `kind` and `line`, the `setting` whose limit it met",
    "kernels": "per-launch times on a real GPU",
    "job": "the runner's wall time, sandbox and worker",
}


def check_timing(name: str, value: Any) -> None:
    """FormatError unless `name` is a declared timing and `value` a JSON object or list."""
    if name not in TIMINGS:
        raise FormatError(f"unknown timing {name!r}; known: {', '.join(TIMINGS)}")
    if not isinstance(value, (dict, list)):
        raise FormatError(f"timing {name!r} is a JSON object or list, not {type(value).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as e:
        raise FormatError(f"timing {name!r} is not JSON: {e}") from None


@dataclass(frozen=True)
class CompileTimes:
    source: str
    phases_s: list[tuple[str, float]]  # (phase, seconds), in the order the pipeline recorded them
    events: dict[str, Any]


@dataclass(frozen=True)
class RunTimes:
    where: str
    what: str
    medians_ms: list[tuple[str, float]]  # ("eager", ms), ("compiled", ms) where measured
    values: dict[str, Any]  # every plain number or text of the run, for the table
    accuracy: dict[str, Any]


@dataclass(frozen=True)
class Timings:
    """A job's timings as the Timings tab shows them."""

    compile: CompileTimes | None
    run: RunTimes | None
    others: dict[str, dict[str, Any]]  # the other timings that are objects (target, job, ...)
    not_measured: dict[str, Any] | None = None  # a compiled job's measurement that was stopped or cut

    @classmethod
    def read(cls, timings: dict[str, Any]) -> "Timings":
        compile_t, run = timings.get("compile"), timings.get("run")
        compile_times = None
        if isinstance(compile_t, dict):
            phases = [(k[:-2].replace("_", " "), float(v)) for k, v in compile_t.items()
                      if k.endswith("_s") and isinstance(v, (int, float)) and not isinstance(v, bool)]
            events = compile_t.get("events")
            compile_times = CompileTimes(str(compile_t.get("source", "")), phases,
                                         events if isinstance(events, dict) else {})
        run_times = None
        if isinstance(run, dict) and run:
            medians = [(name, float(run[f"{name}_ms"])) for name in ("eager", "compiled")
                       if isinstance(run.get(f"{name}_ms"), (int, float))]
            accuracy = run.get("accuracy")
            run_times = RunTimes(str(run.get("where", "")), str(run.get("what", "")), medians,
                                 {k: v for k, v in run.items() if not isinstance(v, (dict, list))},
                                 accuracy if isinstance(accuracy, dict) else {})
        others = {k: v for k, v in timings.items()
                  if k not in ("compile", "run", "not_measured") and isinstance(v, dict)}
        notice = timings.get("not_measured")
        return cls(compile_times, run_times, others, notice if isinstance(notice, dict) else None)


def binary_size(n: float) -> str:
    """Bytes as the page says them: binary units, one decimal ("12.0 GiB", "193.9 KiB"), the units of
    every size on the Timings tab (viewers/timings.py), the kernel resources table (viewers/resources.py)
    and the summary line (service/glance.py)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def speed_verdict(run: dict[str, Any]) -> tuple[str, str] | None:
    """Compiled against eager in words, and which way it went ("faster", "slower", or "noise"
    when the timed runs' spreads cover the difference: the IQR ranges around the two medians
    overlap, or one side's IQR is larger than its own median, or where no IQR was kept, the
    compiled side's slowest − fastest spread is larger than the difference). None when the run
    measured no speed-up. The job bar's summary and the Timings tab both say this."""
    speedup, eager, compiled = run.get("speedup"), run.get("eager_ms"), run.get("compiled_ms")
    if not isinstance(speedup, (int, float)) or isinstance(speedup, bool) or speedup <= 0:
        return None
    if all(isinstance(v, (int, float)) for v in (eager, compiled)):
        difference = abs(eager - compiled)
        iqrs = [run.get(f"{side}_iqr_ms") for side in ("eager", "compiled")]
        why = ""
        if all(isinstance(v, (int, float)) for v in iqrs):
            # or a side whose own spread is larger than its median: its timed blocks disagree with
            # each other (a host busy with other work), whatever the other side measured
            wide = [f"the {side} side's spread (± {iqr:.3g} ms) is larger than its median"
                    for side, iqr, median in (("eager", iqrs[0], eager), ("compiled", iqrs[1], compiled))
                    if iqr > median]
            why = "the timed runs' spreads overlap the difference" if difference <= (iqrs[0] + iqrs[1]) / 2 else \
                "; ".join(wide)
        elif isinstance(run.get("spread_ms"), (int, float)) and run["spread_ms"] > difference:
            why = "the timed runs' spreads overlap the difference"
        if why:
            return (f"compiled and eager within noise ({compiled:.3g} ms against {eager:.3g} ms per call; "
                    f"{why})", "noise")
    # the ratio of the medians themselves where the run kept them (`speedup` is rounded to 0.01:
    # 0.01 said "100× slower" for 43.8 ms against 0.457 ms, 95.9×)
    timed = all(isinstance(v, (int, float)) and v > 0 for v in (eager, compiled))
    if speedup >= 1:
        return f"compiled {_times(eager / compiled if timed else speedup)} faster than eager", "faster"
    return f"compiled {_times(compiled / eager if timed else 1 / speedup)} slower than eager", "slower"


def _times(ratio: float) -> str:
    """A ratio as the verdict says it: two decimals below 10× ("1.93×"), three figures above ("95.9×")."""
    return f"{ratio:.2f}×" if ratio < 10 else f"{ratio:.3g}×" if ratio < 1000 else f"{ratio:,.0f}×"

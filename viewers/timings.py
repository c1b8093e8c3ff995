"""A job's `timings` -> HTML: compile phases as a bar chart (SVG), eager vs compiled with their
spread and which is faster, accuracy, memory, and every other figure the pipeline measured, each
labelled in words with its unit (a key no label names is read from its own words and suffix)."""
from __future__ import annotations

from typing import Any

from markupsafe import escape  # escapes anything (not only str); leaves Markup alone

from compiler import formats
from compiler.formats import binary_size

_BAR_H, _LABEL_W, _CHART_W = 20, 190, 420


def _two_digits(x: float) -> str:
    """A time to two significant digits, written out ("160", "0.47"), not as 1.6e+02."""
    return f"{float(f'{x:.2g}'):g}"


def _bars(rows: list[tuple[str, float]], unit: str, spreads: dict[str, str] | None = None,
          titles: dict[str, str] | None = None) -> str:
    """One bar per (label, value); `spreads` adds words after a value ("± 0.4 ms IQR"); `titles`
    says what each figure measures and where it comes from: the hover title of its label, bar and
    figure. The bars' fill and the words' colour are the page's theme's (static/ide.css: svg.bars)."""
    if not rows:
        return ""
    top = max(v for _, v in rows) or 1.0
    height = _BAR_H * len(rows) + 8
    parts = [f'<svg class="bars" width="{_LABEL_W + _CHART_W + 190}" height="{height}" role="img">']
    for i, (label, value) in enumerate(rows):
        y = 4 + i * _BAR_H
        width = max(1.0, _CHART_W * value / top)
        spread = (spreads or {}).get(label, "")
        what = (titles or {}).get(label, "")
        title = f"{label}: {value:g} {unit}" + (f" — {what}" if what else "")
        parts.append(f'<g class="bar"><title>{escape(title)}</title>'
                     f'<text x="{_LABEL_W - 6}" y="{y + 14}" text-anchor="end" font-size="12">{escape(label)}</text>'
                     f'<rect x="{_LABEL_W}" y="{y + 3}" width="{width:.1f}" height="{_BAR_H - 6}" fill="#0969da"/>'
                     f'<text x="{_LABEL_W + width + 6:.1f}" y="{y + 14}" font-size="12">{value:.3g} {unit}'
                     f'{escape(" " + spread if spread else "")}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


# What each compile figure measures and where it comes from (the `compile` timing's `<phase>_s`
# keys, named in words as formats.Timings.read names them), and whether it is a total: a figure
# that holds others (PyTorch's whole compile, the first call that compiles), drawn apart from the
# phases, since beside them it would count them twice. A figure not here is a phase, said as named.
_TORCH_EVENTS = "PyTorch's dynamo_timed events in TORCH_TRACE, summed over every compile"
_OUR_CLOCK = "irscope's own clock in the job process"
_COMPILE_FIGURES: dict[str, tuple[str, bool]] = {
    "dynamo tracing": (f"Dynamo tracing the bytecode into an FX graph (bytecode_tracing; {_TORCH_EVENTS})", False),
    "aot autograd": ("AOTAutograd tracing to ATen, functionalising and partitioning (aot_collect_metadata, "
                     f"aot_trace_joint_graph, aot_trace_inference_graph, the min-cut partition; {_TORCH_EVENTS})",
                     False),
    "inductor lowering": (f"Inductor lowering the graph to its loop-level IR (GraphLowering.run; {_TORCH_EVENTS})",
                          False),
    "scheduling codegen": ("Inductor's scheduler fusing and generating the output code (GraphLowering.codegen; "
                           f"{_TORCH_EVENTS})", False),
    "kernel compile": ("compiling and loading the generated kernels (PyCodeCache.load_by_key_path, "
                       f"async_compile.wait; {_TORCH_EVENTS})", False),
    "total": (f"the whole compile of every frame, the phases above included (entire_frame_compile; {_TORCH_EVENTS})",
              True),
    "import torch": ("importing torch before your source ran; 0 when a warm job process had it imported "
                     f"({_OUR_CLOCK})", False),
    "run source": (f"running your source to define the model and its inputs ({_OUR_CLOCK})", False),
    "first call": ("the compiled model's first call, which compiles it: PyTorch's whole compile is inside it "
                   f"({_OUR_CLOCK})", True),
    "program": (f"running your program, which compiles as it calls: every compile is inside it ({_OUR_CLOCK})", True),
    "later kernel configs": ("compiling each kernel's other autotune configs after the first, for their stages "
                             f"({_OUR_CLOCK})", False),
    "final stages": (f"writing the stages after the compile ended ({_OUR_CLOCK})", False),
    "jax lowering": ("JAX lowering your function to StableHLO (jax.jit(...).lower, timed in the worker)", False),
    "xla compile": ("XLA compiling the module, its HLO passes and backend included (timed in the worker)", True),
}


def compile_figure_help(label: str) -> str:
    """What one compile figure (its `<phase>_s` key in words: "first call", "total") measures, for
    hover text; "" for a phase not described here."""
    return _COMPILE_FIGURES.get(label, ("", False))[0]


# What each figure a pipeline records measures, in words, and its unit ("" for words, "bytes"
# shown in MiB or KiB, "count", "%"). A key not here is named from its own words and its unit
# read from its suffix (_ms, _s, _bytes, _mb); see `_label`.
_LABELS: dict[str, tuple[str, str]] = {
    # run (compiler/pytorch/measure.py, compiler/xla/child.py)
    "where": ("measured on", ""),
    "what": ("one call runs", ""),
    "statistic": ("how each time is taken", ""),
    "seconds_per_side": ("time given to timing each side", "s"),
    "profile_s": ("time spent profiling one call of each side", "s"),
    "float64_reference": ("float64 reference of the accuracy check", ""),
    "spread_ms": ("spread of the timed runs (slowest − fastest)", "ms"),
    "min_ms": ("fastest timed run", "ms"),
    "max_ms": ("slowest timed run", "ms"),
    "repeats": ("timed runs", "count"),
    "warmup": ("warm-up runs (not timed)", "count"),
    "inputs": ("inputs", ""),
    "skipped": ("not timed", ""),
    "not_measured": ("left out (the job's time ran short)", ""),
    # run_mode (compiler/pytorch/entry_points.py: RunMode)
    "mode": ("run mode", ""),
    "requested": ("run mode asked for", ""),
    "run_memory_percent": ("share of the worker's memory a run may use", "%"),
    "inputs_bytes": ("size of the example inputs", "bytes"),
    "parameters_bytes": ("size of the model's parameters", "bytes"),
    "memory_limit_mb": ("the worker's memory limit for a job", "MiB"),
    "estimated_peak_bytes": ("estimated peak memory of the run, with the float64 reference", "bytes"),
    "estimated_peak_without_float64_reference_bytes": ("estimated peak without the float64 reference", "bytes"),
    "estimate_s": ("time spent estimating the peak", "s"),
    "model": ("how the peak is estimated", ""),
    "measured_peak_bytes": ("measured peak memory of the job's process", "bytes"),
    "measured_how": ("how the measured peak is taken", ""),
    "program": ("the source is a program (it calls the model itself)", ""),
    # target (compiler/targets)
    "name": ("target", ""),
    "backend": ("backend", ""),
    "arch": ("architecture", ""),
    "warp_size": ("threads per warp", "count"),
    "virtual": ("virtual (compiled for it, nothing ran)", ""),
    "executed": ("ran on a device", ""),
    "worker_device": ("the worker's own GPU", ""),
    "device": ("device", ""),
    "devices": ("devices", "count"),
    "config": ("the target's description", ""),
    "note": ("note", ""),
    "imported": ("imported from a log made elsewhere", ""),
    # job (service/runner.py)
    "wall_s": ("from the job's start in the sandbox to its end", "s"),
    "sandbox": ("sandbox", ""),
    "worker": ("job process", ""),
    "worker_was_ready": ("a job process was ready before the job came", ""),
}

# The sections of the other timings, by name; a timing not here is titled from its own words.
_SECTIONS = {"run_mode": "Run mode", "target": "Target", "job": "The whole job"}

# What each accuracy comparison compares (compiler/pytorch/measure.py).
_ACCURACY = {"vs_eager": "compiled against eager",
             "vs_float64_eager": "compiled against eager in float64 (the exact answer, nearly)",
             "eager_vs_float64_eager": "eager against eager in float64 (the rounding eager itself has)"}

_SUFFIXES = (("_ms", "ms"), ("_s", "s"), ("_bytes", "bytes"), ("_mb", "MiB"), ("_percent", "%"))


def _label(key: str) -> tuple[str, str]:
    """(what a figure measures, its unit) for a timing's key."""
    if key in _LABELS:
        return _LABELS[key]
    for suffix, unit in _SUFFIXES:
        if key.endswith(suffix):
            return key[:-len(suffix)].replace("_", " "), unit
    return key.replace("_", " "), ""


def _value(value: Any, unit: str) -> str:
    """A figure in words with its unit: no Python list, None or True shown raw."""
    if isinstance(value, bool) or value is None or not isinstance(value, (int, float)):
        return _fmt(value)
    if unit == "bytes":
        return binary_size(value)
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "%":
        return f"{value:g} %"
    if unit:
        return f"{_fmt(float(value))} {unit}"
    return _fmt(value)


def _fmt(value: Any) -> str:
    """A value in words: no Python list, None or True shown raw."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        said = [_fmt(v) for v in value]
        if said and all(v.endswith(".") for v in said):  # sentences (a target's notes): read on, one after another
            return " ".join(said)
        return ", ".join(said) or "none"
    return str(value)


def _rows(rows: list[tuple[str, str]]) -> str:
    """A two-column table (what, how much); "" when there is nothing to show."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="data figures">{body}</table>' if body else ""


def _labelled(values: dict[str, Any], skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Every plain figure of a timing, labelled (`_label`), with its unit."""
    return [(_label(key)[0], _value(value, _label(key)[1])) for key, value in values.items()
            if not isinstance(value, dict) and key not in skip]


def _table(values: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    return _rows(_labelled(values, skip))


def _side(run: dict[str, Any], side: str) -> str:
    """One side's time per call in words: its median, spread, and how many calls it rests on."""
    median = run.get(f"{side}_ms")
    if not isinstance(median, (int, float)):
        return ""
    words = f"median {median:.4g} ms per call"
    iqr = run.get(f"{side}_iqr_ms")
    if isinstance(iqr, (int, float)):
        words += f", spread ± {_two_digits(iqr)} ms (IQR of the timed blocks)"
    elif isinstance(run.get("spread_ms"), (int, float)) and side == "compiled":
        words += f", spread {_two_digits(run['spread_ms'])} ms (slowest − fastest run)"
    blocks, calls = run.get(f"{side}_repeats"), run.get(f"{side}_calls_timed")
    if isinstance(blocks, int) and isinstance(calls, int):
        words += f"; {blocks} timed block{'s' if blocks != 1 else ''}, {calls} call{'s' if calls != 1 else ''} in all"
    seconds = run.get(f"{side}_measure_s")
    if isinstance(seconds, (int, float)):
        words += f", {_two_digits(seconds)} s of timing"
    return words


_SIDE_KEYS = tuple(f"{side}_{k}" for side in ("eager", "compiled")
                   for k in ("ms", "iqr_ms", "repeats", "calls_timed", "measure_s"))


def _run_section(run: dict[str, Any], accuracy: dict[str, Any]) -> list[str]:
    out = []
    medians = [(name, float(run[f"{name}_ms"])) for name in ("eager", "compiled")
               if isinstance(run.get(f"{name}_ms"), (int, float))]
    spreads = {name: f"± {_two_digits(run[f'{name}_iqr_ms'])} ms IQR" for name, _ in medians
               if isinstance(run.get(f"{name}_iqr_ms"), (int, float))}
    verdict = ""
    said = formats.speed_verdict(run)
    if said is not None:
        words, way = said
        slower = way == "slower"
        verdict = (f'<p class="verdict{" slower" if slower else ""}{" noise" if way == "noise" else ""}">'
                   f'{"<b>" if slower else ""}{escape(words)}{"</b>" if slower else ""} (median time per call)</p>')
    rows = [(f"{side}, time per call", _side(run, side)) for side in ("eager", "compiled") if _side(run, side)]
    rows += _labelled({k: v for k, v in run.items() if not isinstance(v, (dict, list)) or k == "not_measured"},
                      skip=(*_SIDE_KEYS, "speedup", "where", "what", "spread_ms"))
    where = " · ".join(escape(str(run[k])) for k in ("where", "what") if run.get(k))
    out.append(f"<h3>Run time</h3>{verdict}" + (f"<p class='note'>{where}</p>" if where else ""))
    out.append(_bars(medians, "ms", spreads, titles={
        "eager": "the median time per call of your model run eagerly, without the compile (irscope's timing "
                 "of blocks of calls; ± the interquartile range of the blocks)",
        "compiled": "the median time per call of the compiled model, after its first call (irscope's timing of "
                    "blocks of calls; ± the interquartile range of the blocks)"}))
    out.append(_rows(rows))
    accuracy_rows = [(_ACCURACY.get(k, k.replace("_", " ")), _accuracy(v)) for k, v in accuracy.items()]
    if accuracy_rows:
        out.append("<h4>Accuracy: the largest differences between outputs</h4>" + _rows(accuracy_rows))
    memory = run.get("memory")
    if isinstance(memory, dict):
        peaks = [(f"{k[:-len('_peak_bytes')]}, peak memory of one call", binary_size(v)) for k, v in memory.items()
                 if k.endswith("_peak_bytes") and isinstance(v, (int, float))]
        if peaks:
            how = f"<p class='note'>{escape(str(memory['how']))}</p>" if memory.get("how") else ""
            out.append("<h4>Memory</h4>" + how + _rows(peaks))
    return out


def _accuracy(value: Any) -> str:
    if not isinstance(value, dict):
        return _fmt(value)
    if not value.get("compared"):
        return "nothing compared (no floating-point output of the same shape)"
    n = value["compared"]
    parts = [f"largest {what} error {value[key]:.2g}" for key, what in (("max_abs_error", "absolute"),
                                                                        ("max_rel_error", "relative"))
             if isinstance(value.get(key), (int, float))]
    return f"{', '.join(parts) or 'compared'} ({n} output{'s' if n != 1 else ''} compared)"


def _other_section(name: str, value: dict[str, Any]) -> str:
    """Another timing (run mode, target, the whole job): its sentence, then its figures in words."""
    sentence = value.get("sentence") or value.get("summary")
    skip = ("sentence", "summary") + (("note",) if value.get("note") == sentence else ())
    body = (f"<p class='note'>{escape(str(sentence))}</p>" if sentence else "") + _table(value, skip=skip)
    if not body:
        return ""
    return f"<h3>{escape(_SECTIONS.get(name, name.replace('_', ' ').capitalize()))}</h3>{body}"


def render(timings: dict[str, Any]) -> str:
    t = formats.Timings.read(timings)
    out = []
    if t.not_measured:
        n = t.not_measured
        setting = f" (setting {n['setting']})" if n.get("setting") else ""
        out.append(f'<p class="notice" role="note"><b>Not measured</b>: {escape(n.get("phase", ""))} — '
                   f'{escape(n.get("why", ""))}{escape(setting)}. Every stage of the compile is here.</p>')
    if t.compile and t.compile.phases_s:
        source = f"<p class='note'>{escape(t.compile.source)}</p>" if t.compile.source else ""
        titles = {label: what for label, (what, _) in _COMPILE_FIGURES.items()}
        totals = [(k, v) for k, v in t.compile.phases_s if _COMPILE_FIGURES.get(k, ("", False))[1]]
        phases = [(k, v) for k, v in t.compile.phases_s if (k, v) not in totals]
        out.append(f"<h3>Compile time</h3>{source}")
        out.append(_bars(phases, "s", titles=titles))
        if totals:
            out.append("<h4>Totals</h4><p class='note'>Each total holds phases above: it is not one more phase, "
                       "and the phases do not add up to it (some overlap, some happen outside it).</p>")
            out.append(_bars(totals, "s", titles=titles))
    run = timings.get("run")
    if t.run and isinstance(run, dict):
        out.extend(_run_section(run, t.run.accuracy))
    for name, value in t.others.items():
        out.append(_other_section(name, value))
    if t.compile and t.compile.events:
        events = _rows([(str(k), _value(v, "s")) for k, v in t.compile.events.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)])
        if events:
            out.append("<details class='events'><summary>PyTorch's compile events: seconds in each, summed over "
                       "its calls</summary>" + events + "</details>")
    return "".join(out) or "<p class='hint'>no timings recorded</p>"

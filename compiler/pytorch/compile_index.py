"""The index of a job's compiles, as tlparse's index lists them, grouped by the user's line that
called into compiled code: for each compile id, the function Dynamo compiled, what came of it (a
graph and its size, the graph breaks it made, the guard that failed when it was a recompile, an
error), all read from the structured trace PyTorch wrote (no compile times: a stage's text is the
same on every run of the same compile; the times are the Timings pane's):

- the call site: the innermost frame of the user's file above the frame where the program entered
  compiled code (torch's `_dynamo/` frames: `compiled(x)` in a loop, a `model(x)` in `main()`); a
  graph break's resume function is called from the same line. Read from the real Python stack at
  the compile's start, where the trace has one: irscope's `irscope_call_stack` artifact (see
  CALL_STACK_ARTIFACT), else a stack torch logged while it traced the compile (`create_symbol`,
  `guard_added_fast`, ...), else the "User code traceback" of a graph break in it; else from
  `dynamo_start`'s stack, which misses the frame that called a `@torch.compile`d function (torch
  cuts two frames too many: the caller and torch's compile_wrapper), so a call at module level
  has no line there and a call in `main()` reads as the `main()` line;
- `compilation_metrics`: the function (`co_name`, `co_firstlineno`), `graph_op_count`,
  `recompile_reason` and `fail_type`/`fail_reason`;
- `dynamo_graph_break_reason`: the user's line of each break.

Pure functions of the trace entries; no torch import."""
from __future__ import annotations

import json
import re
from typing import Any

from compiler.pytorch import source_map as torch_source_map
from compiler.pytorch import trace as torch_trace

TITLE = "Compiles"


def _base(cid: str) -> str:
    """A compile id without Dynamo's restart attempt ("0/0_1" -> "0/0")."""
    return cid.split("_", 1)[0]


def _attempt(cid: str) -> int:
    """Dynamo's restart attempt of a compile id ("0/0_1" -> 1, "0/0" -> 0)."""
    return int(cid.split("_", 1)[1]) if "_" in cid else 0


def _user(path: str, user_paths: tuple[str, ...]) -> bool:
    return torch_source_map._is_user_path(path, user_paths)


# The artifact irscope's pytorch pipeline logs at each compile's start (compiler/pytorch/pipeline.py):
# the real Python stack, outermost first, as [{"filename", "line", "name", "loc"}].
CALL_STACK_ARTIFACT = "irscope_call_stack"
# The functions Dynamo makes to resume a frame after a graph break.
RESUME_PREFIX = "torch_dynamo_resume_in_"
# A graph break's "User code traceback:" frames (the real stack, then the frames Dynamo traced).
_TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)\n(?P<code>[^\n]*)',
                              re.M)


def _dynamo_frame(path: str) -> bool:
    return "/torch/_dynamo/" in path.replace("\\", "/")


def _entered_from(frames: list[tuple[str, Any, str]], user_paths: tuple[str, ...]) -> tuple[Any, str] | None:
    """(line, code) of the innermost user frame above the first of torch's `_dynamo/` frames (where
    the program entered compiled code) in a real stack of (path, line, code), outermost first; (None,
    "") when no frame of the user's led there; None when the stack shows no such frame, or nothing
    above it (a stack torch cut to its innermost frames)."""
    entered = next((i for i, (path, _, _) in enumerate(frames) if _dynamo_frame(path)), None)
    if not entered:
        return None
    site: tuple[Any, str] = (None, "")
    for path, line, code in frames[:entered]:
        if _user(path, user_paths):
            site = (line, code)
    return site


def _called_from_traceback(payload: str, function: str, user_paths: tuple[str, ...]) -> tuple[Any, str] | None:
    """(line, code) of the frame that called the compiled `function` in a graph break's "User code
    traceback:" (the real stack's user frames, then the traced ones from the compiled function
    down); None when the traceback does not show one."""
    _, found, rest = payload.partition("User code traceback:")
    # a resume function is called by its frame's own code: its stacks name the line that called the frame
    if not found or not function or function.startswith(RESUME_PREFIX):
        return None
    block = rest.split("\n\n", 1)[0] + "\n"
    frames = [(m.group("path"), int(m.group("line")), m.group("name"), m.group("code").strip())
              for m in _TRACEBACK_FRAME.finditer(block)]
    for i, (_, _, name, _) in enumerate(frames):
        if name == function:
            if i and _user(frames[i - 1][0], user_paths):
                return frames[i - 1][1], frames[i - 1][3]
            return None
    return None


def compiles(entries: list[torch_trace.TraceEntry], user_paths: tuple[str, ...]) -> list[dict[str, Any]]:
    """One record per compile id Dynamo started (restart attempts folded into their compile), in
    the order they started: compile_id (as PyTorch names it, its last attempt's: "0/0_1" where
    Dynamo restarted, the id of the compile's stages), function, line (its `def`, when in the user's file),
    call_line and call_text (the user's line that called it; None when no frame of the user's file
    led there), ops (the graph's op count; None without a graph), breaks (user lines), recompile
    (the failed guard, first line), error."""
    strings = torch_trace.string_table(entries)
    out: dict[str, dict[str, Any]] = {}
    # base id -> (rank, (line, code)): the best call site read so far (0: irscope's stack of the
    # compile's start, 1: a stack torch logged while tracing, 2: a graph break's traceback)
    sites: dict[str, tuple[int, tuple[Any, str]]] = {}

    def site(base: str, rank: int, found: tuple[Any, str] | None) -> None:
        if found is not None and (base not in sites or rank < sites[base][0]):
            sites[base] = (rank, found)

    def path(frame: dict) -> str:
        return strings.get(frame.get("filename"), str(frame.get("filename", "")))

    for e in entries:
        cid = e.compile_id
        if cid is None or cid.startswith("!"):  # compiled autograd's ids are not frames of the program
            continue
        base = _base(cid)
        if base in out and _attempt(cid) > _attempt(out[base]["compile_id"]):
            out[base]["compile_id"] = cid  # a restart: the compile is known by its last attempt
        if e.kind == "dynamo_start" and isinstance(e.data, dict):
            record = out.setdefault(base, _record(cid))
            stack = e.data.get("stack") or []
            top = stack[-1] if stack else {}
            record["function"] = record["function"] or str(top.get("name", ""))
            for frame in reversed(stack[:-1]):
                if _user(path(frame), user_paths):
                    record["call_line"] = frame.get("line")
                    record["call_text"] = str(frame.get("loc") or "").strip()
                    break
        elif e.name == CALL_STACK_ARTIFACT:
            try:
                frames = json.loads(e.payload)
            except ValueError:
                frames = None
            if isinstance(frames, list):
                site(base, 0, _entered_from([(str(f.get("filename", "")), f.get("line"), str(f.get("loc") or ""))
                                             for f in frames if isinstance(f, dict)], user_paths))
        elif e.kind == "compilation_metrics" and isinstance(e.data, dict) and base in out:
            m, record = e.data, out[base]
            record["function"] = str(m.get("co_name") or record["function"])
            if m.get("co_firstlineno") and _user(str(m.get("co_filename") or ""), user_paths):
                record["line"] = int(m["co_firstlineno"])
            if m.get("graph_op_count") is not None:
                record["ops"] = int(m["graph_op_count"])
            if m.get("recompile_reason"):
                record["recompile"] = torch_trace.reason_line(str(m["recompile_reason"]))
            if m.get("fail_type"):
                reason = str(m.get("fail_reason") or "").strip().splitlines()
                record["error"] = f"{m['fail_type']}: {reason[0]}" if reason else str(m["fail_type"])
        elif e.name == "dynamo_graph_break_reason" and base in out:
            line = torch_source_map.graph_break_line(e.payload, user_paths)
            if line and line not in out[base]["breaks"]:
                out[base]["breaks"].append(line)
            site(base, 2, _called_from_traceback(e.payload, out[base]["function"], user_paths))
        elif isinstance(e.data, dict) and isinstance(e.data.get("stack"), list):  # create_symbol, guard_added_fast, ...
            site(base, 1, _entered_from([(path(f), f.get("line"), str(f.get("loc") or ""))
                                         for f in e.data["stack"] if isinstance(f, dict)], user_paths))
    for base, (_, (line, code)) in sites.items():  # the real stack's call site over dynamo_start's
        if base in out:
            out[base]["call_line"], out[base]["call_text"] = line, code.strip()
    return list(out.values())


def _record(cid: str) -> dict[str, Any]:
    return {"compile_id": cid, "function": "", "line": None, "call_line": None, "call_text": "", "ops": None,
            "breaks": [], "recompile": None, "error": None}


# Inductor's graph-cache artifacts: one per graph Inductor compiled (a forward, a backward), each with
# the FX graph cache key the profiler names the graph's calls by (`## Call CompiledFxGraph <key> ##`).
_GRAPH_CACHE = ("fx_graph_cache_miss", "fx_graph_cache_hit", "fx_graph_cache_bypass")


def profiler_names(entries: list[torch_trace.TraceEntry], user_paths: tuple[str, ...]) -> dict[str, str]:
    """The graphs Inductor compiled, by the name torch.profiler gives a call of one (a hash:
    `## Call CompiledFxGraph <cache key> ##`), in words: its compile id (as the stage tabs show it),
    backward when it is one, and the user's function with its `def` line ("compiled graph [0/0]:
    forward(), line 9"). A graph compiled with the cache bypassed is profiled as `... None ##`: named
    when it is the job's only graph."""
    records = {_base(r["compile_id"]): r for r in compiles(entries, user_paths)}
    named: list[tuple[str | None, str]] = []
    for e in entries:
        if e.name not in _GRAPH_CACHE or e.compile_id is None or e.compile_id.startswith("!"):
            continue
        try:
            info = json.loads(e.payload) if e.payload.strip() else {}
        except ValueError:
            info = {}
        info = info if isinstance(info, dict) else {}
        # AOTAutograd names a backward graph's gradient inputs tangents_N
        backward = any("tangents_" in str(c) for c in info.get("components") or () if "gm: " in str(c))
        record = records.get(_base(e.compile_id)) or {}
        where = f": {record['function']}()" if record.get("function") else ""
        if where and record.get("line"):
            where += f", line {record['line']}"
        named.append((info.get("key"), f"compiled graph [{e.compile_id}]{', backward' if backward else ''}{where}"))
    out = {f"## Call CompiledFxGraph {key} ##": words for key, words in named if key}
    if len(named) == 1 and not named[0][0]:
        out["## Call CompiledFxGraph None ##"] = named[0][1]
    return out


def by_call_site(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records grouped by call site, in the order each site first compiled: line, text and
    compiles (records). Compiles no line of the user's file led to share one group, line None."""
    groups: dict[Any, dict[str, Any]] = {}
    for r in records:
        group = groups.setdefault(r["call_line"], {"line": r["call_line"], "text": r["call_text"], "compiles": []})
        group["compiles"].append(r)
    return list(groups.values())


def _what_came_of_it(r: dict[str, Any]) -> str:
    parts = []
    if r["recompile"]:
        parts.append(f"recompiled: {r['recompile']}")
    if r["error"]:
        parts.append(f"failed: {r['error']}")
    elif r["ops"] is not None:
        parts.append(f"a graph of {r['ops']} op{'s' if r['ops'] != 1 else ''}" if r["ops"] else "no graph (no ops)")
    if r["breaks"]:
        parts.append("graph break at line " + ", ".join(str(n) for n in r["breaks"]))
    # (no compile time: a stage's text is what the compiler made, the same on every run of it;
    # the times are the Timings pane's)
    return "; ".join(parts)


def text_and_map(groups: list[dict[str, Any]]) -> tuple[str, list[list[int]]]:
    """The stage's text (a heading per call site, a line per compile) and its source map: a
    heading to the line that called, a compile to its function's `def`."""
    records = [r for g in groups for r in g["compiles"]]
    frames = len({r["compile_id"].split("/", 1)[0] for r in records})
    sites = sum(1 for g in groups if g["line"])
    called = f", called from {sites} line{'s' if sites != 1 else ''} of yours" if sites else ""
    lines = [f"# {len(records)} compile{'s' if len(records) != 1 else ''} of {frames} "
             f"function{'s' if frames != 1 else ''}{called}"]
    pairs: list[list[int]] = []
    for g in groups:
        lines.append("")
        if g["line"]:
            lines.append(f"## line {g['line']}: {g['text']}" if g["text"] else f"## line {g['line']}")
            pairs.append([len(lines), g["line"]])
        else:
            lines.append("## called from no line of yours (irscope's call of your model, or a library's)")
        for r in g["compiles"]:
            where = f", line {r['line']}" if r["line"] else ""
            lines.append(f"- [{r['compile_id']}] {r['function'] or '?'}{where}: {_what_came_of_it(r)}")
            if r["line"]:
                pairs.append([len(lines), r["line"]])
    return "\n".join(lines) + "\n", pairs

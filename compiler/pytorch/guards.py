"""Dynamo's guards and recompile reasons, as PyTorch logs them in its structured trace, explained.

Read from two trace entries, never re-derived: `dynamo_cpp_guards_str` (the guard manager tree
Dynamo built for one compiled frame: each guard's kind, the value it reads (`source=`), its check,
and the user line that installed it) and the `recompile_reasons` artifact (for a recompiled frame,
the guard of each earlier compile that failed, in PyTorch's words). Each guard is put in a group
by its kind, and each check is said in words from its own text. Pure functions over text.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

# Guard kinds Dynamo prints, by what they check (torch/_dynamo/guards.py, GuardBuilder's methods).
GROUPS: dict[str, str] = {
    "tensor": "tensor match: dtype, device, shape, stride, requires_grad",
    "type": "type and identity",
    "constant": "constant values",
    "global": "global state",
    "shape": "shape-environment symbols",
    "other": "other checks",
}
_KIND_GROUP = {
    **dict.fromkeys(("TENSOR_MATCH", "DIMENSION_DYNAMIC_MARKING_GUARD", "NO_TENSOR_ALIASING", "STORAGE_OVERLAP",
                     "TENSOR_SUBCLASS_METADATA_MATCH", "DATA_PTR_MATCH", "TENSOR_ALIASING"), "tensor"),
    **dict.fromkeys(("TYPE_MATCH", "ID_MATCH", "CLOSURE_MATCH", "FUNCTION_MATCH", "NN_MODULE", "NOT_NONE",
                     "IS_NONE", "DICT_CONTAINS", "DICT_KEYS_MATCH", "DICT_VERSION", "LENGTH_CHECK",
                     "SEQUENCE_LENGTH", "HASATTR", "NOT_PRESENT_IN_GENERIC_DICT", "OBJECT_ALIASING",
                     "WEAKREF_ALIVE", "TUPLE_ITERATOR_LEN", "DUPLICATE_INPUT", "TYPE_MATCH_OR_NONE",
                     "BUILTIN_MATCH", "SET_CONTAINS", "DICT_KEYS"), "type"),
    **dict.fromkeys(("EQUALS_MATCH", "CONSTANT_MATCH", "BOOL_MATCH", "NONE_MATCH", "RANGE_ITERATOR_MATCH",
                     "FLOAT_MATCH", "INT_MATCH"), "constant"),
    **dict.fromkeys(("GLOBAL_STATE", "DEFAULT_DEVICE", "TORCH_FUNCTION_MODE_STACK", "GRAD_MODE",
                     "DETERMINISTIC_ALGORITHMS", "TORCH_FUNCTION_STATE", "FSDP_TRAINING_STATE",
                     "AUTOGRAD_SAVED_TENSORS_HOOKS", "DUAL_LEVEL", "FUNCTORCH_STACK_MATCH", "BACKEND_MATCH",
                     "SHAPE_ENV", "TORCH_FUNCTION_MODE_STACK_MATCH"), "global"),
}

_GUARD_LINE = re.compile(r"^(?P<indent>[| ]*)\+- (?P<kind>[A-Z][A-Z0-9_]*): (?P<rest>.*)$")
_MANAGER_LINE = re.compile(r"^(?P<indent>[| ]*)\+- (?:\w*GuardManager): source=(?P<source>.*?), accessed_by=")
_WHERE = re.compile(r"#\s*(?P<code>.*?)\s*#\s*(?P<path>\S+?):(?P<line>\d+) in (?P<fn>\S+)(?P<more>.*)$")
_AMBIENT = re.compile(r"#\s*(?P<path>_dynamo/\S+?):(?P<line>\d+) in (?P<fn>\S+)\s*$")
_HINT = re.compile(r"\(HINT: (?P<hint>.*)\)\s*$")


@dataclass
class Guard:
    """One guard of a compiled frame, as Dynamo printed it."""

    kind: str  # TENSOR_MATCH, EQUALS_MATCH, ...
    group: str  # a key of GROUPS
    source: str  # the value it reads, as Dynamo names it (L['x'], L['self'].scale, G[...]); "" for global state
    input: str  # the same, as the user wrote it (x, self.scale)
    check: str  # the check itself (the guard's code)
    meaning: str  # the check in words
    line: int | None  # the user's line that installed it (None: Dynamo's own, or another file)
    code: str = ""  # the source text of that line, as Dynamo printed it
    where: str = ""  # file:line in function, as Dynamo printed it (also when it is torch's own file)
    hint: str = ""  # Dynamo's own hint, when it printed one
    properties: dict[str, str] = field(default_factory=dict)  # a tensor match's dtype, device, size, ...

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def readable_source(source: str) -> str:
    """Dynamo's name of a value as the user would write it: `L['self']._modules['fc']._parameters['bias']`
    -> `self.fc.bias`, `G['scale']` -> `scale`."""
    out = re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", source)
    out = re.sub(r"^[LG]\['([^']+)'\]", r"\1", out)
    out = re.sub(r"(?<![\w\]])[LG]\['([^']+)'\]", r"\1", out)
    return out


def _split_where(rest: str) -> tuple[str, str, str, str, str]:
    """(check, code, path, line, hint) of a guard line's text after its kind."""
    hint = ""
    m = _HINT.search(rest)
    if m:
        hint, rest = m.group("hint"), rest[:m.start()].rstrip()
    m = _WHERE.search(rest)
    if m:
        return rest[:m.start()].strip(), m.group("code"), m.group("path"), m.group("line"), hint
    m = _AMBIENT.search(rest)
    if m:
        return rest[:m.start()].strip(), "", m.group("path"), m.group("line"), hint
    return rest.strip(), "", "", "", hint


def _where(path: str, line: str, users: bool) -> str:
    """A guard's `file:line`. Dynamo prints a path relative to the folder it shares with torch's own
    (torch.utils._traceback.shorten_filename), which for a file outside it is the path less its
    first two characters ("/tmp/work/model.py" -> "mp/work/model.py"): the user's file is named
    as the page names it (its file name), torch's own files as Dynamo printed them."""
    if not path:
        return ""
    return f"{path.rsplit('/', 1)[-1] if users else path}:{line}"


def _tensor_properties(check: str) -> dict[str, str]:
    """check_tensor(L['x'], Tensor, DispatchKeySet(CPU, ...), torch.float32, device=None,
    requires_grad=False, size=[4], stride=[1]) -> its fields."""
    m = re.match(r"check_tensor\((?P<args>.*)\)\s*$", check)
    if not m:
        return {}
    args = m.group("args")
    props: dict[str, str] = {}
    keys = re.search(r"DispatchKeySet\(([^)]*)\)", args)
    if keys:
        backends = [k.strip() for k in keys.group(1).split(",")]
        props["device"] = next((k for k in backends if k in ("CPU", "CUDA", "XPU", "MPS", "Meta", "HIP", "XLA",
                                                            "PrivateUse1")), backends[0] if backends else "")
    head = [a.strip() for a in args.split(",")[:2]]
    if len(head) > 1:
        props["class"] = head[1]
    dtype = re.search(r"torch\.(\w+)", args)
    if dtype:
        props["dtype"] = dtype.group(1)
    for name in ("device", "requires_grad"):
        found = re.search(rf"\b{name}=([^,\]]+?)(?:,|\)$|$)", args)
        if found and not (name == "device" and found.group(1) == "None"):
            props[name if name != "device" else "device_index"] = found.group(1).strip()
    for name in ("size", "stride"):
        found = re.search(rf"\b{name}=\[([^\]]*)\]", args)
        if found:
            props[name] = "[" + ", ".join("dynamic" if v.strip() == "None" else v.strip()
                                          for v in found.group(1).split(",") if v.strip()) + "]"
    return props


# A comparison with Python's None in a check's text, and the words a meaning says it in instead.
_NONE_COMPARISON = re.compile(r"\s*(?:==|\bis)\s+None\b|\s*(?:!=|\bis not)\s+None\b")


def _unset(meaning: str) -> str:
    """A meaning in words, without Python's None: `x == None` (`x is None`) says x is not set, and
    `x != None` says it is (the check itself, PyTorch's text, keeps its None)."""
    return _NONE_COMPARISON.sub(lambda m: " is set" if ("!=" in m.group(0) or "not" in m.group(0)) else " is not set",
                                meaning)


def _meaning(kind: str, check: str, name: str, props: dict[str, str], manager_type: str) -> str:
    """The check in words, from its own text."""
    if kind == "TENSOR_MATCH" and props:
        parts = [f"{name} is a {props.get('class', 'Tensor')}"]
        if "dtype" in props:
            parts.append(f"of dtype {props['dtype']}")
        if "device" in props:
            parts.append(f"on {props['device']}")
        if "size" in props:
            parts.append(f"with size {props['size']}")
        if "stride" in props:
            parts.append(f"and stride {props['stride']}")
        if "requires_grad" in props:
            parts.append(f"(requires_grad={props['requires_grad']})")
        dynamic = " (dims marked dynamic match any size)" if "dynamic" in props.get("size", "") else ""
        return " ".join(parts) + dynamic
    if kind == "DIMENSION_DYNAMIC_MARKING_GUARD":
        attr = re.search(r"'(_dynamo_\w+)'", check)
        return f"{name} carries no {attr.group(1) if attr else 'dynamic-dimension'} marking (torch._dynamo.mark_*)"
    if kind == "TYPE_MATCH":
        return f"type({name}) is {manager_type or 'the type it had'}"
    if kind == "ID_MATCH":
        return f"{name} is the very object it was ({manager_type or 'same id'})"
    if kind in ("EQUALS_MATCH", "CONSTANT_MATCH"):
        value = check.split("==", 1)[1].strip() if "==" in check else check
        return f"{name} == {value}"
    if kind == "DICT_CONTAINS":
        return f"{readable_source(check)}"
    if kind == "GLOBAL_STATE":
        state = check.split(" against ", 1)[1] if " against " in check else ""
        try:
            values = json.loads(state)
        except ValueError:
            return "the global torch state (grad mode, default dtype, autocast, ...) is as it was"
        shown = {k: values[k] for k in ("grad_mode", "default_dtype", "num_threads", "deterministic_algorithms",
                                        "allow_tf32") if k in values}
        return "the global torch state is as it was: " + ", ".join(f"{k}={v}" for k, v in shown.items())
    if kind == "DEFAULT_DEVICE":
        device = check.split("==", 1)[1].strip() if "==" in check else ""
        if device == "None":
            return "no default device is set (torch.set_default_device was not called), as when compiled"
        return "the default device is " + (device or "as it was")
    if kind == "TORCH_FUNCTION_MODE_STACK":
        return "the stack of active TorchFunctionModes is as it was"
    if kind == "LAMBDA_GUARD" and "top_saved_tensors_hooks" in check:
        return "no saved-tensors hooks are active (as when compiled)"
    return readable_source(check)


def parse_guards(text: str, is_user_path: Callable[[str], bool]) -> list[Guard]:
    """Every guard of one `dynamo_cpp_guards_str` payload, in the order Dynamo printed them.

    The tree nests guards under the GuardManager of the value they read (`source=`); guards after
    the tree, at the top level, are the shape environment's (conditions on symbolic sizes)."""
    guards: list[Guard] = []
    managers: list[tuple[int, str, str]] = []  # (depth, source, type) of the enclosing GuardManagers
    in_tree = False
    for line in text.split("\n"):
        if line.startswith("+- RootGuardManager"):
            in_tree, managers = True, []
            continue
        m = _MANAGER_LINE.match(line)
        if m:
            depth = len(m.group("indent"))
            managers = [x for x in managers if x[0] < depth]
            typ = re.search(r"type=<class '([^']+)'>", line)
            managers.append((depth, m.group("source"), typ.group(1).rsplit(".", 1)[-1] if typ else ""))
            continue
        m = _GUARD_LINE.match(line)
        if not m or m.group("kind") in ("RootGuardManager",):
            continue
        depth = len(m.group("indent"))
        top_level = depth == 0
        if top_level:
            in_tree = False
        managers = [x for x in managers if x[0] < depth]
        kind = m.group("kind")
        check, code, path, line_no, hint = _split_where(m.group("rest"))
        source = managers[-1][1] if managers and not top_level else ""
        manager_type = managers[-1][2] if managers and not top_level else ""
        shown_type = re.search(r"type=<class '([^']+)'>", check)
        if shown_type:
            manager_type = shown_type.group(1).rsplit(".", 1)[-1]
            check = check[:shown_type.start()].rstrip(", ")
        if kind == "LAMBDA_GUARD" and not in_tree:
            group = "shape"
        elif kind == "LAMBDA_GUARD" and path.startswith("_dynamo/"):
            group = "global"
        else:
            group = _KIND_GROUP.get(kind, "other")
        props = _tensor_properties(check) if kind == "TENSOR_MATCH" else {}
        name = readable_source(source) if source else ""
        if group == "shape":
            meaning = f"{readable_source(check)} (a condition on symbolic sizes, from the shape environment)"
        else:
            meaning = _unset(_meaning(kind, check, name or readable_source(check), props, manager_type))
        user_line = int(line_no) if line_no and is_user_path(path) else None
        guards.append(Guard(kind=kind, group=group, source=source, input=name, check=check, meaning=meaning,
                            line=user_line, code=code, where=_where(path, line_no, user_line is not None),
                            hint=hint, properties=props))
    return guards


def guard_latency_us(text: str) -> float | None:
    m = re.search(r"Guard latency = ([\d.]+) us", text)
    return float(m.group(1)) if m else None


# --- recompiles ---------------------------------------------------------------------------------

_TENSOR_REASON = re.compile(r"^tensor '(?P<name>[^']+)' (?P<what>[\w ]+?) mismatch(?: at index (?P<index>\d+))?\. "
                            r"expected (?P<expected>.*?),? actual (?P<actual>.*)$")
_REQUIRES_GRAD = re.compile(r"^tensor '(?P<name>[^']+)' requires_grad mismatch\. "
                            r"expected requires_grad=(?P<expected>\d)")
_PROPERTY = {"size": "size", "stride": "stride", "dtype": "dtype", "dispatch key set": "device (dispatch keys)",
             "rank": "number of dimensions", "device": "device"}


@dataclass
class FailedGuard:
    """Why one earlier compile of a frame could not be reused for the call that recompiled it."""

    compile_id: str  # the earlier compile whose guard failed
    reason: str  # PyTorch's words (the recompile_reasons entry)
    meaning: str  # in words
    kind: str = ""  # the failed guard's kind, when it is found among that compile's guards
    group: str = ""
    input: str = ""  # the input it reads
    line: int | None = None  # the user line that installed the guard
    before: str = ""  # what that compile was specialised on
    after: str = ""  # what the new call passed (from the reason, or the new compile's own guard)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_recompile_reasons(payload: str) -> list[tuple[str, str]]:
    """(earlier compile id, reason) pairs of one `recompile_reasons` artifact: one reason, or a
    JSON list of them, each "0/1: <text>"."""
    text = payload.strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    reasons = value if isinstance(value, list) else [value]
    out = []
    for reason in reasons:
        reason = str(reason)
        m = re.match(r"^(?P<cid>[!\w/]+): (?P<text>.*)$", reason, re.S)
        out.append((m.group("cid"), m.group("text")) if m else ("", reason))
    return out


def _normalised_check(text: str) -> str:
    first = text.split("\n", 1)[0].split("  #", 1)[0]
    return re.sub(r"\s+", "", readable_source(first))


def _global_state(guards: list[Guard], names: list[str]) -> str:
    """`name=value` of the named fields of a compile's GLOBAL_STATE guard."""
    guard = next((g for g in guards if g.kind == "GLOBAL_STATE"), None)
    if guard is None or " against " not in guard.check:
        return ""
    try:
        values = json.loads(guard.check.split(" against ", 1)[1])
    except ValueError:
        return ""
    return ", ".join(f"{n}={values[n]}" for n in names if n in values)


def explain_failure(cid: str, reason: str, earlier: list[Guard], now: list[Guard]) -> FailedGuard:
    """One failed guard explained: the guard it was among the earlier compile's guards, and the
    input change that failed it, from PyTorch's reason or from the new compile's guard on the same
    input."""
    m = _TENSOR_REASON.match(reason.strip())
    if m:
        name, what = m.group("name"), m.group("what")
        index = f" at dim {m.group('index')}" if m.group("index") else ""
        prop = _PROPERTY.get(what, what)
        failed = next((g for g in earlier if g.kind == "TENSOR_MATCH" and g.input == name), None)
        return FailedGuard(cid, reason, f"{name}'s {prop}{index} changed: compile {cid} was specialised on "
                                        f"{m.group('expected')}, the call passed {m.group('actual')}",
                           "TENSOR_MATCH", "tensor", name, failed.line if failed else None,
                           m.group("expected"), m.group("actual"))
    m = _REQUIRES_GRAD.match(reason.strip())
    if m:
        name = m.group("name")
        before = "True" if m.group("expected") == "1" else "False"
        after = "False" if before == "True" else "True"
        failed = next((g for g in earlier if g.kind == "TENSOR_MATCH" and g.input == name), None)
        return FailedGuard(cid, reason, f"{name}'s requires_grad changed: compile {cid} had requires_grad={before}",
                           "TENSOR_MATCH", "tensor", name, failed.line if failed else None, before, after)
    m = re.match(r"^GLOBAL_STATE changed: (?P<what>.*)$", reason.strip())
    if m:
        what = [w.strip() for w in m.group("what").split(",") if w.strip()]
        before = _global_state(earlier, what)
        after = _global_state(now, what)
        return FailedGuard(cid, reason, f"the global torch state changed ({', '.join(what) or 'see the reason'}): "
                                        f"compile {cid} was made with {before or 'another state'}"
                                        + (f", the call ran with {after}" if after else ""),
                           "GLOBAL_STATE", "global", "", None, before, after)
    wanted = _normalised_check(reason)
    failed = next((g for g in earlier if _normalised_check(g.check) == wanted), None)
    if failed is None:
        return FailedGuard(cid, reason, f"compile {cid}'s guard `{reason.splitlines()[0].split('  #')[0].strip()}` "
                                        "failed")
    replacement = [g for g in now if g.source == failed.source and g.kind == failed.kind]
    after = "; ".join(readable_source(g.check) for g in replacement)
    if failed.group == "shape":
        meaning = (f"the sizes of this call break compile {cid}'s condition `{readable_source(failed.check)}`"
                   + (f"; the new compile assumes {after}" if after else ""))
    elif failed.kind in ("EQUALS_MATCH", "CONSTANT_MATCH") and replacement:
        meaning = f"{failed.input} changed: compile {cid} was specialised on {failed.meaning}, the call passed " \
                  f"{replacement[0].meaning}"
    else:
        meaning = f"compile {cid} checks that {failed.meaning}; the call failed it" + (
            f" (the new compile checks {after})" if after else "")
    return FailedGuard(cid, reason, meaning, failed.kind, failed.group, failed.input, failed.line,
                       readable_source(failed.check), after)

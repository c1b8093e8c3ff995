"""Source maps for PyTorch artifacts, read from the annotations PyTorch itself writes into them.

- FX graph code (Dynamo's output graph, AOT graphs, post-grad graphs) carries a
  `# File: <path>:<line> in <fn>, code: ...` comment above the nodes each user line produced.
- Inductor's output code names the FX nodes a kernel or call implements:
  `# Topologically Sorted Source Nodes: [y, relu, add], Original ATen: [...]` above each call in the
  wrapper, and the same comment at the head of each kernel's definition.
Node names connect the two. Pure functions over text.
"""
from __future__ import annotations

import re

_FILE_COMMENT = re.compile(r"#\s*File:\s*(?P<path>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code:")
_NODE_DEF = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?::\s*\"[^\"]*\")?\s*=")
_SOURCE_NODES = re.compile(r"#\s*(?:Topologically Sorted )?Source Nodes:\s*\[(?P<nodes>[^\]]*)\]")
_KERNEL_START = re.compile(r"^(?P<name>\w+)\s*=\s*async_compile\.(?P<kind>\w+)\(")
# The line closing a kernel's definition: its source's closing quotes, then the call's other
# arguments if any: `''')` (a C++ kernel), `''', device_str='cuda')` (a Triton kernel).
_KERNEL_END = re.compile(r"""(?:'''|\"\"\")\s*(?:,[^'"()]*(?:'[^']*'|"[^"]*")?[^'"()]*)*\)\s*$""")


def _is_user_path(path: str, user_paths: tuple[str, ...]) -> bool:
    return any(path == p or path.endswith("/" + p.lstrip("/")) or p.endswith("/" + path) for p in user_paths)


def fx_code_map(text: str, user_paths: tuple[str, ...]) -> tuple[list[list[int]], dict[str, set[int]]]:
    """(artifact line -> user line pairs, node name -> user lines) for FX graph code.

    A `# File:` comment naming the user's file opens a block; the block's lines (until a blank
    line or the next comment) map to that user line. Frames in other files (torch's own modules)
    close the block: those nodes belong to the user line of the enclosing call, which PyTorch
    prints as a separate, earlier comment when it is in the user's file.
    """
    pairs: list[list[int]] = []
    nodes: dict[str, set[int]] = {}
    current: int | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        match = _FILE_COMMENT.search(line)
        if match:
            current = int(match.group("line")) if _is_user_path(match.group("path"), user_paths) else None
            if current is not None:
                pairs.append([number, current])
            continue
        if not stripped:
            current = None
            continue
        if current is None:
            continue
        pairs.append([number, current])
        node = _NODE_DEF.match(line)
        if node:
            nodes.setdefault(node.group("name"), set()).add(current)
    return pairs, nodes


def merge_node_lines(*maps: dict[str, set[int]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for m in maps:
        for name, lines in m.items():
            out.setdefault(name, set()).update(lines)
    return out


_TRACE_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')


def kernel_lines_from_provenance(stack_traces: dict[str, list[str]],
                                 user_paths: tuple[str, ...]) -> dict[str, set[int]]:
    """Kernel name -> user lines, from Inductor's `inductor_provenance_tracking_kernel_stack_traces`
    artifact (keys are "kernel_name:debug_handle"; values are Python stack-trace texts)."""
    out: dict[str, set[int]] = {}
    for handle, traces in stack_traces.items():
        name = handle.rsplit(":", 1)[0]
        for trace in traces:
            for frame in _TRACE_FRAME.finditer(trace):
                if _is_user_path(frame.group("path"), user_paths):
                    out.setdefault(name, set()).add(int(frame.group("line")))
    return out


def kernel_lines_from_node_mappings(mappings: dict, node_lines: dict[str, set[int]]) -> dict[str, set[int]]:
    """Kernel name -> user lines, from `inductor_provenance_tracking_node_mappings`: each kernel's
    post-grad nodes (`cppCodeToPost`, `tritonCodeToPost`, ...) and, through `postToPre`, the pre-grad
    nodes they came from. This reaches lines that pattern rewrites (attention -> SDPA) drop from
    the post-grad nodes' own stack traces."""
    post_to_pre = mappings.get("postToPre") or {}
    out: dict[str, set[int]] = {}
    for key, table in mappings.items():
        if not key.endswith("CodeToPost") or not isinstance(table, dict):
            continue
        for handle, posts in table.items():
            lines = out.setdefault(handle.rsplit(":", 1)[0], set())
            for post in posts:
                lines.update(node_lines.get(post, ()))
                for pre in post_to_pre.get(post, ()):
                    lines.update(node_lines.get(pre, ()))
    return {name: lines for name, lines in out.items() if lines}


def output_code_map(text: str, node_lines: dict[str, set[int]],
                    kernels: dict[str, set[int]] | None = None) -> list[list[int]]:
    """Pairs for Inductor's output code: each `Source Nodes` comment and the statement under it in
    the wrapper; every line of a kernel's definition and each launch of it, from `kernels` (the
    provenance data) or else from the Source Nodes comment heading the definition."""
    pairs: list[list[int]] = []
    lines = text.split("\n")
    kernel_lines: dict[str, list[int]] = {name: sorted(ls) for name, ls in (kernels or {}).items()}
    pending: list[int] = []  # user lines of the last Source Nodes comment, waiting for its statement
    in_kernel: str | None = None
    for number, line in enumerate(lines, start=1):
        match = _SOURCE_NODES.search(line)
        if match:
            names = [n.strip() for n in match.group("nodes").split(",") if n.strip()]
            pending = sorted({ln for n in names for ln in node_lines.get(n, ())})
            pairs.extend([number, ln] for ln in pending)
            continue
        kernel = _KERNEL_START.match(line)
        if kernel:
            in_kernel = kernel.group("name")
            kernel_lines[in_kernel] = sorted(set(kernel_lines.get(in_kernel, [])) | set(pending))
            pending = []
        if in_kernel is not None:
            pairs.extend([number, ln] for ln in kernel_lines[in_kernel])
            if _KERNEL_END.search(line):
                in_kernel = None
            continue
        stripped = line.strip()
        if pending and stripped and not stripped.startswith("#"):
            pairs.extend([number, ln] for ln in pending)
            pending = []
            continue
        call = re.match(r"\s*(?:# \[Provenance debug handles\] )?([\w.]+?)(?:\.run)?(?:\(|:\d+$)", line)
        if call and call.group(1) in kernel_lines:
            pairs.extend([number, ln] for ln in kernel_lines[call.group(1)])
    return pairs


def kernel_blocks(text: str) -> dict[str, tuple[int, int]]:
    """Host kernel name -> (first, last) 1-based line of its definition in the output code: the
    kernels that have no stages of their own (Inductor's C++ kernels; a Triton kernel's are the
    triton.* stages, from what Triton compiled)."""
    blocks: dict[str, tuple[int, int]] = {}
    start: tuple[str, int] | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        kernel = _KERNEL_START.match(line)
        if kernel and start is None and kernel.group("kind") != "triton":
            start = (kernel.group("name"), number)
        if start and _KERNEL_END.search(line):
            blocks[start[0]] = (start[1], number)
            start = None
    return blocks


_KERNEL_PATH = re.compile(r"^#\s*kernel path:\s*(?P<path>\S+)\s*$")


def kernel_user_lines(text: str, pairs: list[list[int]]) -> dict[str, set[int]]:
    """The user's lines each kernel an output code defines came from, read from the output code's
    source map `pairs` (`output_code_map`'s: the first line of a kernel's definition carries them).
    Keyed by the kernel's name and, where Inductor names it in the `# kernel path:` comment above
    the definition, by that file, the one Triton compiles the kernel from (names may repeat in a
    backward graph's output code; paths do not)."""
    by_line: dict[int, set[int]] = {}
    for artifact_line, user_line in pairs:
        by_line.setdefault(artifact_line, set()).add(user_line)
    lines = text.split("\n")
    out: dict[str, set[int]] = {}
    for first, line in enumerate(lines, start=1):
        kernel = _KERNEL_START.match(line)
        found = by_line.get(first) if kernel else None
        if not found:
            continue
        name = kernel.group("name")
        out.setdefault(name, set()).update(found)
        above = first - 1  # the comments heading the definition (Source Nodes, graph fragment, kernel path)
        while above >= 1 and lines[above - 1].startswith("#"):
            path = _KERNEL_PATH.match(lines[above - 1])
            if path:
                out.setdefault(path.group("path"), set()).update(found)
                break
            above -= 1
    return out


_BREAK_AT = re.compile(r"Graph break in user code at (?P<path>.+?):(?P<line>\d+)")
_TRAILING = re.compile(r"#\s*(?P<code>.*?)\s*#\s*(?P<path>\S+?):(?P<line>\d+) in \S+\s*$")


def graph_break_line(reason: str, user_paths: tuple[str, ...]) -> int | None:
    """The user line a `dynamo_graph_break_reason` names ("Graph break in user code at f.py:8")."""
    match = _BREAK_AT.search(reason)
    if match and _is_user_path(match.group("path"), user_paths):
        return int(match.group("line"))
    return None


def trailing_location_map(text: str, user_paths: tuple[str, ...]) -> list[list[int]]:
    """Pairs for texts whose lines end with "# code  # file.py:LINE in fn" (Dynamo's guards)."""
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        match = _TRAILING.search(line)
        if match and _is_user_path(match.group("path"), user_paths):
            pairs.append([number, int(match.group("line"))])
    return pairs


_IR_BLOCK = re.compile(r"^(op\d[\w]*): ")


def ir_block_map(text: str, user_paths: tuple[str, ...]) -> list[list[int]]:
    """Pairs for Inductor's scheduler IR dumps (ir_pre_fusion / ir_post_fusion): every line of an
    `opN: ...` block maps to the user lines its stack traces name."""
    lines = text.split("\n")
    pairs: list[list[int]] = []
    start = 0
    for i in range(len(lines) + 1):
        if i == len(lines) or (_IR_BLOCK.match(lines[i]) and i > start):
            block = lines[start:i]
            users = sorted({int(m.group("line")) for line in block for m in _TRACE_FRAME.finditer(line)
                            if _is_user_path(m.group("path"), user_paths)})
            pairs += [[n, u] for n in range(start + 1, i + 1) for u in users]
            start = i
    return pairs


def mention_map(text: str, user_paths: tuple[str, ...]) -> list[list[int]]:
    """Pairs for logs whose lines quote stack frames ('File "model.py", line 9'): each such line."""
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        for m in _TRACE_FRAME.finditer(line):
            if _is_user_path(m.group("path"), user_paths):
                pairs.append([number, int(m.group("line"))])
    return pairs


_BYTECODE_HEADER = re.compile(r"^(?:ORIGINAL|MODIFIED) BYTECODE \S+ (?P<path>\S+) line \d+")
_DIS_LINE = re.compile(r"^\s{0,3}(?P<line>\d+)\s{2,}")


def bytecode_map(text: str, user_paths: tuple[str, ...]) -> list[list[int]]:
    """Pairs for Dynamo's bytecode log (`dis` listings under "ORIGINAL BYTECODE fn file line N"
    headers): each instruction maps to the line `dis` gives it, in frames of the user's file."""
    pairs: list[list[int]] = []
    user_frame, current = False, None
    for number, line in enumerate(text.split("\n"), start=1):
        header = _BYTECODE_HEADER.match(line)
        if header:
            user_frame, current = _is_user_path(header.group("path"), user_paths), None
            continue
        if not user_frame:
            continue
        match = _DIS_LINE.match(line)
        if match:
            current = int(match.group("line"))
        if current is not None and line.strip():
            pairs.append([number, current])
    return pairs


_SIG_PARAM = re.compile(r'(?<![\w.])(?P<name>[A-Za-z_]\w*)\s*:\s*"(?P<type>[^"]*)"')


def saved_for_backward(backward_graph: str) -> list[tuple[str, str]]:
    """(name, type) of the tensors AOTAutograd saved for backward: the backward graph's inputs
    other than the incoming gradients (`tangents_*`)."""
    signature = backward_graph.split("def forward(", 1)[-1].split("):", 1)[0]
    return [(m.group("name"), m.group("type")) for m in _SIG_PARAM.finditer(signature)
            if not m.group("name").startswith("tangents")]

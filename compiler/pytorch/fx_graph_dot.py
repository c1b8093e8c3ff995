"""FX graph code (as PyTorch prints it in the structured trace) -> a Graphviz DOT drawing.

Nodes are the graph's assignments (`name: "f32[4, 8]..." = target(args)`), edges run from each
node named among a node's arguments, and nodes are clustered by the user's source line that
produced them (the `# File: ...:LINE ... code: ...` comment PyTorch prints above them), so a
module call like `self.fc1(h)` is one box. Pure text -> text; no torch import.
"""
from __future__ import annotations

import html
import re

from compiler.pytorch.source_map import _FILE_COMMENT

_ASSIGN = re.compile(r'^\s+(?P<name>[A-Za-z_]\w*)\s*(?::\s*"(?P<type>[^"]*)")?\s*=\s*(?P<rhs>.+?)(?:;\s.*)?$')
_PARAM = re.compile(r'(?P<name>[A-Za-z_]\w*)\s*:\s*"(?P<type>[^"]*)"')
_IDENT = re.compile(r"(?<![.\w])[A-Za-z_]\w*")  # not an attribute: `torch.relu` is no use of node `relu`


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(lines: list[str]) -> str:
    """A node's lines (its name, its target, its type) as a Graphviz HTML-like label, a row each, a
    little apart: Graphviz sets the lines of a plain label ("a\\nb") so close that an underscore of
    one sits on the tops of the next line's letters, and `torch._C._nn.linear` reads "torch. C. nn.linear"."""
    rows = "".join(f"<TR><TD>{html.escape(line, quote=False)}</TD></TR>" for line in lines)
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="1">{rows}</TABLE>>'


def to_dot(code: str, max_nodes: int = 1200) -> str:
    """The DOT text of the first `forward` in `code` (a GraphModule's printed source)."""
    lines = code.split("\n")
    nodes: list[tuple[str, list[str], str, str | None]] = []  # name, label's lines, type, cluster
    edges: list[tuple[str, str]] = []
    known: set[str] = set()
    aliases: dict[str, str] = {}
    cluster: str | None = None
    in_forward = False
    for line in lines:
        if line.strip().startswith("def forward("):
            in_forward = True
            for m in _PARAM.finditer(line):
                nodes.append((m.group("name"), [m.group("name")], m.group("type"), None))
                known.add(m.group("name"))
            continue
        if not in_forward:
            continue
        if line.strip().startswith("def ") or line.startswith("class "):
            break
        comment = _FILE_COMMENT.search(line)
        if comment:
            cluster = f"line {comment.group('line')}: " + line.split("code:", 1)[-1].strip()
            continue
        if not line.strip():
            cluster = None
            continue
        stripped = line.strip()
        if stripped.startswith("return"):
            nodes.append(("output", ["output"], "", None))
            edges += [(aliases.get(i, i), "output") for i in _IDENT.findall(stripped[6:]) if i in known]
            continue
        m = _ASSIGN.match(line)
        if not m:
            continue
        name, rhs = m.group("name"), m.group("rhs")
        if rhs in known:  # `l_x_ = L_x_`: an alias, not an operation
            aliases[name] = aliases.get(rhs, rhs)
            known.add(name)
            continue
        target = rhs.split("(", 1)[0].strip() if "(" in rhs else rhs  # `relu + 1` is its own label
        nodes.append((name, [name, target[:60]], m.group("type") or "", cluster))
        known.add(name)
        args = rhs
        edges += [(aliases.get(i, i), name) for i in dict.fromkeys(_IDENT.findall(args)) if i in known and i != name]
        if len(nodes) > max_nodes:
            break
    # a cluster's label (the user's line) in the nodes' font, not Graphviz's default serif
    out = ["digraph fx {", '  rankdir=TB; graph [fontname="monospace", fontsize=11];',
           '  node [shape=box, fontsize=10, fontname="monospace"];']
    clusters: dict[str | None, list[str]] = {}
    for name, label, type_, group in nodes:
        clusters.setdefault(group, []).append(f"  {_quote(name)} [label={_label(label + ([type_] if type_ else []))}];")
    for i, (group, statements) in enumerate(clusters.items()):
        if group is None:
            out += statements
        else:
            out += [f"  subgraph cluster_{i} {{", f"    label={_quote(group[:120])}; style=rounded; color=\"#0969da\";"]
            out += ["  " + s for s in statements] + ["  }"]
    out += [f"  {_quote(a)} -> {_quote(b)};" for a, b in edges]
    out.append("}")
    return "\n".join(out)

"""IR-to-IR linking: the compiler's own locations of each line of TTIR, TTGIR, LLVM IR, PTX and SASS
(compiler/mlir_text.py, compiler/kernels/gpu_lines.py), encoded as stage meta (compiler/formats/ir_links.py
`ir_locations`), checked by the runner and drawn by the code viewer. On the recorded stages of the
`triton` pipeline's own softmax example (tests/fixtures/triton/README.md)."""
from __future__ import annotations

import html as html_module
import json
import os
import re

import msgspec
import pytest

import viewers
from compiler import formats, mlir_text
from compiler.kernels import gpu_lines
from compiler.model import JobSettings
from service.bundle_reader import BundleRuleError, parse_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "triton")
KERNEL = "/tmp/work/kernels.py"  # the softmax fixtures' kernel file (README.md)


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


def encoded(ext: str) -> formats.IrLocations:
    text = fixture(f"softmax.sm_90.{ext}")
    if ext in ("ttir", "ttgir"):
        chains = mlir_text.line_location_chains(text)
    elif ext == "llir":
        chains = gpu_lines.llvm_location_chains(text)
    elif ext == "ptx":
        chains = gpu_lines.ptx_location_chains(text)
    else:
        llir_lines = gpu_lines.source_lines(gpu_lines.llvm_source_map(fixture("softmax.sm_90.llir"), KERNEL))
        chains = gpu_lines.sass_location_chains(text, KERNEL, llir_lines, gpu_lines.ptx_inline_asm_lines(
            fixture("softmax.sm_90.ptx"), KERNEL))
    # through the stage meta's JSON and the runner's check, as the page gets it
    return formats.check_ir_locations(json.loads(json.dumps(msgspec.to_builtins(formats.ir_locations(chains, ext)))))


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.split("\n"), start=1) if needle in line)


def ptx_instruction_lines(ptx: str) -> list[int]:
    """The PTX instructions of the kernel's body (no directive, label, comment or brace)."""
    out, inside = [], False
    for number, line in enumerate(ptx.split("\n"), start=1):
        s = line.strip()
        if s == "{" and not inside:
            inside = True
        elif s == "}" and inside:
            inside = False
        elif inside and s and not s.startswith(("//", ".")) and not s.endswith(":"):
            out.append(number)
    return out


def linked_lines(lines: dict[int, list[str]], others: dict[int, list[str]], line: int) -> set[int]:
    return {o for o, theirs in others.items() if any(formats.chains_linked(a, b) for a in lines[line] for b in theirs)}


# --- reading the locations --------------------------------------------------------------------

def test_mlir_location_chains_follow_aliases_call_sites_fused_and_names():
    aliases = {"#loc1": "unknown", "#loc2": '"k.py":12:13', "#loc3": '"x"(#loc2)', "#loc4": '"std.py":216:16',
               "#loc5": "callsite(#loc4 at #loc3)", "#loc6": '"std.py":196:12'}
    assert mlir_text.location_chains("callsite(#loc6 at #loc5)", aliases) == [
        (("std.py", 196, 12), ("std.py", 216, 16), ("k.py", 12, 13))]
    assert mlir_text.location_chains("callsite(#loc1 at #loc3)", aliases) == [(("k.py", 12, 13),)]
    assert mlir_text.location_chains('fused<"m">["a.py":1:2, #loc5]', aliases) == [
        (("a.py", 1, 2),), (("std.py", 216, 16), ("k.py", 12, 13))]
    assert mlir_text.location_chains('"a.py":3:4 to :9', {}) == [(("a.py", 3, 4),)]
    assert mlir_text.location_chains('"only a name"', {}) == []
    assert mlir_text.location_chains("#loc9", {"#loc9": "#loc9"}) == []  # a cycle ends


def test_ttgir_lines_inside_an_inlined_helper_carry_the_whole_call_chain():
    ttgir = fixture("softmax.sm_90.ttgir")
    chains = mlir_text.line_location_chains(ttgir)
    helper = next(p for f in chains[line_of(ttgir, "arith.maxnumf")][0] for p in [f[0]] if p.endswith("standard.py"))
    assert chains[line_of(ttgir, "arith.maxnumf")] == [((helper, 196, 12), (helper, 216, 16), (KERNEL, 12, 13))]
    assert chains[line_of(ttgir, "arith.subf")] == [((KERNEL, 12, 9),)]
    assert line_of(ttgir, "arith.constant dense<0xFF800000>") not in chains  # loc(unknown): no place


def test_llvm_chains_follow_inlined_at():
    llir = fixture("softmax.sm_90.llir")
    chains = gpu_lines.llvm_location_chains(llir)
    maxnum = next(n for n, line in enumerate(llir.split("\n"), 1) if "@llvm.maxnum.f32" in line and "!dbg" in line)
    assert [(f[1], f[2]) for f in chains[maxnum][0]] == [(196, 12), (216, 16), (12, 13)]


def test_ptx_chains_rebuild_the_call_chain_from_inlined_at():
    ptx = fixture("softmax.sm_90.ptx")
    chains = gpu_lines.ptx_location_chains(ptx)
    first_max = line_of(ptx, "max.f32")
    # `.loc 2 196 12, ..., inlined_at 2 216 16` names one caller; 216:16's own caller comes from its .loc lines
    assert [(f[1], f[2]) for f in chains[first_max][0]] == [(196, 12), (216, 16), (12, 13)]
    # the source map to the user's file cannot reach this line: its location is in tl.max's body
    assert first_max not in dict(map(tuple, gpu_lines.ptx_source_map(ptx, KERNEL)))


# --- the figure: PTX lines of the softmax example that link back to a TTGIR line --------------

def test_every_ptx_instruction_of_the_softmax_example_links_to_a_ttgir_line():
    ptx_text = fixture("softmax.sm_90.ptx")
    ptx, ttgir = encoded("ptx").by_line(), encoded("ttgir").by_line()
    instructions = ptx_instruction_lines(ptx_text)
    linked = [n for n in instructions if n in ptx and linked_lines(ptx, ttgir, n)]
    print(f"PTX instructions linked to a TTGIR line: {len(linked)} of {len(instructions)}; "
          f"located PTX lines linked: {sum(1 for n in ptx if linked_lines(ptx, ttgir, n))} of {len(ptx)} "
          f"(the PTX has {len(ptx_text.splitlines())} lines)")
    assert len(instructions) >= 150
    assert len(linked) == len(instructions)  # measured: 158 of 158


def test_links_are_finer_than_source_lines_and_reach_lines_no_user_line_owns():
    ptx_text, ttgir_text = fixture("softmax.sm_90.ptx"), fixture("softmax.sm_90.ttgir")
    ptx, ttgir = encoded("ptx").by_line(), encoded("ttgir").by_line()
    maxnumf, subf = line_of(ttgir_text, "arith.maxnumf"), line_of(ttgir_text, "arith.subf")
    addf = line_of(ttgir_text, "arith.addf")
    max_lines = [n for n, line in enumerate(ptx_text.split("\n"), 1) if line.strip().startswith("max.f32")]
    sub_lines = [n for n, line in enumerate(ptx_text.split("\n"), 1) if line.strip().startswith("sub.f32")]
    assert len(max_lines) >= 7 and len(sub_lines) == 8
    for n in max_lines:  # tl.max's combine: its TTGIR op and the tt.reduce around it, nothing else
        partners = linked_lines(ptx, ttgir, n)
        assert maxnumf in partners and subf not in partners and addf not in partners, (n, partners)
    for n in sub_lines:  # `x - tl.max(...)`: both are on line 12, only the subtraction links
        partners = linked_lines(ptx, ttgir, n)
        assert subf in partners and maxnumf not in partners, (n, partners)


def test_sass_lines_link_to_ptx_and_ttgir_by_line():
    sass_text = fixture("softmax.sm_90.sass")
    sass, ptx, ttgir = encoded("sass").by_line(), encoded("ptx").by_line(), encoded("ttgir").by_line()
    instructions = [n for n, line in enumerate(sass_text.split("\n"), 1) if re.match(r"\s*/\*[0-9a-f]{4}\*/", line)]
    assert len(sass) >= 0.9 * len(instructions)
    assert all(linked_lines(sass, ptx, n) and linked_lines(sass, ttgir, n) for n in sass)
    # nvdisasm names no column: a SASS FMNMX of tl.max's body links to the maxnumf line
    ttgir_text = fixture("softmax.sm_90.ttgir")
    fmnmx = next(n for n in sass if "FMNMX" in sass_text.split("\n")[n - 1])
    assert line_of(ttgir_text, "arith.maxnumf") in linked_lines(sass, ttgir, fmnmx)


def test_linking_rule():
    assert formats.chains_linked("aaaaaaaa:196:12<aaaaaaaa:216:16", "aaaaaaaa:196:12<aaaaaaaa:216:16<bbbbbbbb:12:13")
    assert not formats.chains_linked("aaaaaaaa:196:12<aaaaaaaa:216:16", "aaaaaaaa:196:12<aaaaaaaa:216:17")
    assert not formats.chains_linked("bbbbbbbb:12:13", "aaaaaaaa:216:16<bbbbbbbb:12:13")  # the call, not its body
    assert formats.chains_linked("bbbbbbbb:12", "bbbbbbbb:12:9")  # a line without columns: by line
    assert not formats.chains_linked("bbbbbbbb:12:13", "bbbbbbbb:12:9")


# --- the meta: encoded compactly, checked by the runner, drawn by the viewer -------------------

def test_runs_keep_the_meta_small_and_decode_to_the_same_lines():
    text = fixture("softmax.sm_90.ptx")
    chains = gpu_lines.ptx_location_chains(text)
    record = formats.ir_locations(chains, "ptx")
    assert len(record.runs) < len(chains) / 3
    assert {n: len(c) for n, c in record.by_line().items()} == {n: 1 for n in chains}
    assert len(msgspec.json.encode(record)) < 4096


def _manifest(ir_locations) -> bytes:
    stage = {"key": "triton.ptx:k", "title": "PTX", "group": "Triton", "format": "ptx", "file": "0001.txt",
             "source_map": [], "meta": {"ir_locations": ir_locations}}
    return json.dumps({"status": "done", "stages": [stage]}).encode()


@pytest.mark.parametrize("bad, phrase", [
    ({"files": {}, "chains": ['"><script>'], "runs": [], "source": ""}, "not a location chain"),
    ({"files": {}, "chains": ["0123abcd:1:2"], "runs": [[1, 2, 5]], "source": ""}, "not [first line"),
    ({"files": {}, "chains": [], "runs": [], "source": "", "extra": 1}, "ir_locations"),
    ("nope", "ir_locations"),
])
def test_the_runner_refuses_malformed_ir_locations(bad, phrase):
    with pytest.raises(BundleRuleError, match=re.escape(phrase)):
        parse_manifest(_manifest(bad), JobSettings())
    good = msgspec.to_builtins(formats.ir_locations({3: [(("/k.py", 1, 2),)]}, "x"))
    assert parse_manifest(_manifest(good), JobSettings()).stages[0].meta["ir_locations"] == good


def test_viewer_marks_each_line_with_its_chains():
    text = fixture("softmax.sm_90.ptx")
    record = msgspec.to_builtins(formats.ir_locations(gpu_lines.ptx_location_chains(text), "ptx"))
    links = [{"stage": "triton.ttgir:k", "title": "TTGIR", "linked_lines": 3, "located_lines": 4}]
    html = viewers.render("ptx", text, {"ir_locations": record, "ir_links": links})
    first_max = line_of(text, "max.f32")
    row = re.search(rf'<span class="ln" data-line="{first_max}"[^>]*>', html).group(0)
    chain = html_module.unescape(re.search(r'data-locs="([^"]+)"', row).group(1))
    assert chain.count("<") == 2 and chain.endswith(":12:13")
    assert "data-src" not in row  # no user line owns it; the location links it anyway
    assert 'data-ir-files="' in html and "TTGIR: 3 (75%)" in html
    # a malformed meta (the job wrote it) is ignored, not drawn
    assert "data-locs" not in viewers.render("ptx", text, {"ir_locations": {"chains": ["x"]}})


def test_job_written_link_counts_are_escaped():
    planted = '"><img src=x onerror=alert(1)>'
    record = msgspec.to_builtins(formats.ir_locations({1: [(("/k.py", 1, 2),)]}, "x"))
    record["files"] = {next(iter(record["files"])): planted}
    html = viewers.render("ptx", "mov.u32 %r1, 0;\n", {"ir_locations": record, "ir_links": [
        {"stage": planted, "title": planted, "linked_lines": 1, "located_lines": 1}]})
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html

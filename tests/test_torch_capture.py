"""Parsers of PyTorch's structured trace, on a trace recorded from a real torch.compile run of
tests/fixtures/torch/graph_break_print.py (recorded at /tmp/t1/m.py, with provenance tracking on)."""
from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

import pytest

from compiler.pytorch import source_map as sm
from compiler.pytorch import trace as torch_trace

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "torch", "graph_break_print.trace")
USER = ("/tmp/t1/m.py",)


@pytest.fixture(scope="module")
def entries():
    with open(FIXTURE, encoding="utf-8") as f:
        return torch_trace.parse(f.read())


def test_entries_and_compile_ids(entries):
    # the print graph-breaks frame 0 (attempt 0 restarts as 0/0_1); the resume function is frame 1
    assert torch_trace.compile_ids(entries) == ["0/0", "0/0_1", "1/0"]
    graphs = torch_trace.of_kind(entries, "dynamo_output_graph")
    assert [g.compile_id for g in graphs] == ["0/0_1", "1/0"]
    assert "torch._C._nn.linear" in graphs[0].payload
    assert "torch.softmax(add, dim = -1)" in graphs[1].payload
    assert torch_trace.of_kind(entries, "inductor_output_code")[1].payload.startswith("# AOT ID: ['1_forward']")
    assert "/tmp/t1/m.py" in torch_trace.string_table(entries).values()


def test_payloads_are_exact(entries):
    guards = torch_trace.of_kind(entries, "dynamo_cpp_guards_str")[0].payload
    assert guards.split("\n")[:2] == ["", "TREE_GUARD_MANAGER:"]  # the payload as PyTorch wrote it
    assert "\n\t" not in guards  # the tab that marks payload lines is removed, nothing else
    metrics = [e.data for e in torch_trace.of_kind(entries, "compilation_metrics")]
    assert metrics[-1]["co_name"] == "torch_dynamo_resume_in_forward_at_8"


def test_fx_graph_map_reaches_user_lines(entries):
    graph = torch_trace.of_kind(entries, "dynamo_output_graph")[1].payload
    pairs, nodes = sm.fx_code_map(graph, USER)
    assert nodes["softmax"] == {9} and nodes["relu"] == {9}
    lines = graph.split("\n")
    mapped = {lines[a - 1].strip().split(":")[0] for a, b in pairs if b == 9}
    assert {"relu", "add", "softmax"} <= mapped


def test_output_code_map_links_fused_kernel_to_softmax_line(entries):
    cid = "1/0"
    post = next(e for e in torch_trace.of_kind(entries, "inductor_post_grad_graph") if e.compile_id == cid)
    nodes = sm.fx_code_map(post.payload, USER)[1]
    traces = next(e for e in torch_trace.of_kind(entries, "inductor_provenance_tracking_kernel_stack_traces")
                  if e.compile_id == cid)
    kernels = sm.kernel_lines_from_provenance(json.loads(traces.payload), USER)
    assert kernels == {"cpp_fused__softmax_add_relu_threshold_backward_0": {9}}
    code = next(e for e in torch_trace.of_kind(entries, "inductor_output_code") if e.compile_id == cid).payload
    pairs = sm.output_code_map(code, nodes, kernels)
    lines = code.split("\n")
    first, last = sm.kernel_blocks(code)["cpp_fused__softmax_add_relu_threshold_backward_0"]
    mapped = {a for a, b in pairs if b == 9}
    assert set(range(first, last + 1)) <= mapped  # the whole kernel definition
    launch = next(i for i, line in enumerate(lines, 1)
                  if line.strip().startswith("cpp_fused__softmax_add_relu_threshold_backward_0("))
    assert launch in mapped  # and its launch in call()
    assert all(b == 9 for a, b in pairs)


# Two Triton kernels of a GPU output code as Inductor writes them (a virtual sm_90 job's, cut short):
# each under its `# kernel path:` and Source Nodes comments, closed by `''', device_str='cuda')`.
GPU_OUTPUT_CODE = """async_compile = AsyncCompile()


# kernel path: /tmp/work/inductor-cache/y3/cy3garw.py
# Topologically Sorted Source Nodes: [h, layer_norm], Original ATen: [aten.silu, aten.native_layer_norm]
# Source node to ATen node mapping:
#   h => add, div, exp, neg
triton_per_fused_native_layer_norm_silu_0 = async_compile.triton('triton_per_fused_native_layer_norm_silu_0', '''
import triton
''', device_str='cuda')


# kernel path: /tmp/work/inductor-cache/db/cdb2r45.py
# Topologically Sorted Source Nodes: [gelu], Original ATen: [aten.gelu]
triton_poi_fused_gelu_1 = async_compile.triton('triton_poi_fused_gelu_1', '''
import triton
''', device_str='cuda')


def call(args):
    triton_poi_fused_gelu_1.run(buf0, 128, stream=stream0)
"""


def test_each_gpu_kernel_of_an_output_code_has_the_users_lines_by_name_and_by_file():
    """A Triton kernel of Inductor's carries no line of the user's file in its own stages: the rows of
    the kernels table get them from the output code's source map, by the file Triton compiles."""
    nodes = {"h": {26}, "layer_norm": {15}, "gelu": {15}}
    pairs = sm.output_code_map(GPU_OUTPUT_CODE, nodes)
    found = sm.kernel_user_lines(GPU_OUTPUT_CODE, pairs)
    assert found == {"triton_per_fused_native_layer_norm_silu_0": {15, 26},
                     "/tmp/work/inductor-cache/y3/cy3garw.py": {15, 26},
                     "triton_poi_fused_gelu_1": {15}, "/tmp/work/inductor-cache/db/cdb2r45.py": {15}}


def test_a_gpu_output_codes_wrapper_maps_each_line_to_its_own_source_nodes_only():
    """A Triton kernel's definition ends `''', device_str='cuda')`, which the map did not see as
    its end: every line after the first kernel took the last kernel's lines, so the whole `call`
    wrapper lit one line of the model (the seventh walk: `def call` and every launch on line 22).
    Each line now has the lines of its own Source Nodes or kernel only; no Triton kernel is a host
    kernel block (its stages are Triton's)."""
    nodes = {"h": {26}, "layer_norm": {15}, "gelu": {9}}
    lines = GPU_OUTPUT_CODE.split("\n")
    by_line: dict[str, set[int]] = {}
    for a, b in sm.output_code_map(GPU_OUTPUT_CODE, nodes):
        by_line.setdefault(lines[a - 1].strip(), set()).add(b)
    assert "def call(args):" not in by_line and "" not in by_line, by_line
    assert by_line["triton_poi_fused_gelu_1.run(buf0, 128, stream=stream0)"] == {9}
    assert sm.kernel_blocks(GPU_OUTPUT_CODE) == {}


def test_extern_kernel_mapped_through_source_nodes(entries):
    cid = "0/0_1"
    graph = next(e for e in torch_trace.of_kind(entries, "dynamo_output_graph") if e.compile_id == cid)
    nodes = sm.fx_code_map(graph.payload, USER)[1]
    code = next(e for e in torch_trace.of_kind(entries, "inductor_output_code") if e.compile_id == cid).payload
    lines = code.split("\n")
    mapped = [lines[a - 1].strip() for a, b in sm.output_code_map(code, nodes) if b == 7]
    assert any(line.startswith("extern_kernels.addmm(") for line in mapped)


def test_graph_break_and_guard_locations(entries):
    reason = torch_trace.of_kind(entries, "dynamo_graph_break_reason")[0].payload
    assert sm.graph_break_line(reason, USER) == 8
    assert "builtin operator `print`" in reason
    assert sm.graph_break_line(reason, ("/elsewhere.py",)) is None
    text = "| | +- TENSOR_MATCH: check_tensor(L['x'])  # y = self.lin(x)  # tmp/t1/m.py:7 in forward"
    assert sm.trailing_location_map(text, USER) == [[1, 7]]


def test_fx_graph_drawing_has_the_graphs_dataflow(entries):
    from compiler import graph_drawing
    from compiler.pytorch import fx_graph_dot
    dot = fx_graph_dot.to_dot(torch_trace.of_kind(entries, "dynamo_output_graph")[1].payload)
    for edge in ('"L_y_" -> "relu"', '"relu" -> "add"', '"add" -> "softmax"', '"softmax" -> "output"'):
        assert edge in dot
    assert dot.count(" -> ") == 4  # `torch.relu` is an attribute, not a use of node `relu`
    assert 'label="line 9: return torch.softmax(torch.relu(y) + 1, dim=-1)"' in dot  # clustered by user line
    fmt, svg, _ = graph_drawing.draw(dot)
    assert fmt == "svg" and svg.startswith("<svg") and "softmax" in svg
    # the cluster's label (the user's line) is in the nodes' font, not Graphviz's default serif
    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ET.fromstring(svg)
    cluster = {t.get("font-family") for t in root.iterfind(".//s:g[@class='cluster']/s:text", ns)}
    nodes = {t.get("font-family") for t in root.iterfind(".//s:g[@class='node']/s:text", ns)}
    assert cluster and cluster == nodes == {"monospace"}, (cluster, nodes)


def test_fx_graph_drawing_sets_a_nodes_lines_apart_so_underscores_read(entries):
    """A node's lines (name, target, type) are set farther apart than Graphviz sets a plain label's
    lines (1.1 times the font size): there an underscore of `torch._C._nn.linear` sat on the tops
    of the next line's letters and read as a gap ("torch. C. nn.linear"). (The page's browser test
    checks the drawn boxes: tests/test_browser_newcomer.py.)"""
    from compiler import graph_drawing
    from compiler.pytorch import fx_graph_dot
    dot = fx_graph_dot.to_dot(torch_trace.of_kind(entries, "dynamo_output_graph")[0].payload)
    fmt, svg, _ = graph_drawing.draw(dot)
    assert fmt == "svg"
    ns = {"s": "http://www.w3.org/2000/svg"}
    node = next(g for g in ET.fromstring(svg).iterfind(".//s:g[@class='node']", ns)
                if g.find("s:title", ns).text == "y")
    texts = node.findall("s:text", ns)
    assert [t.text for t in texts] == ["y", "torch._C._nn.linear", "f32[4, 8][8, 1]cpu"]  # whole, escaped once
    size = float(texts[0].get("font-size"))
    ys = [float(t.get("y")) for t in texts]
    assert all(b - a >= 1.3 * size for a, b in zip(ys, ys[1:])), ys
    assert re.search(r'<TD>a &lt;b&gt; &amp; c</TD>', fx_graph_dot._label(["a <b> & c"]))


def test_saved_for_backward_are_the_backward_inputs_but_gradients(entries):
    graphs = [e.payload for e in torch_trace.of_kind(entries, "aot_backward_graph")]
    assert sm.saved_for_backward(graphs[0]) == [("primals_3", "f32[4, 8][8, 1]cpu")]
    assert sm.saved_for_backward(graphs[1]) == [("div", "f32[4, 8][8, 1]cpu"), ("le", "b8[4, 8][8, 1]cpu")]
    one_line = 'class G(torch.nn.Module):\n    def forward(self, mm: "f32[2][1]cpu", tangents_1: "f32[2][1]cpu"):\n'
    assert sm.saved_for_backward(one_line) == [("mm", "f32[2][1]cpu")]


def test_node_mappings_link_kernels_through_post_grad_nodes(entries):
    cid = "1/0"
    pre = next(e for e in torch_trace.of_kind(entries, "after_pre_grad_graph") if e.compile_id == cid)
    nodes = sm.fx_code_map(pre.payload, USER)[1]
    mappings = json.loads(next(e for e in torch_trace.of_kind(entries, "inductor_provenance_tracking_node_mappings")
                               if e.compile_id == cid).payload)
    # post-grad nodes amax, sub, exp ... exist only after decomposition; postToPre leads to `softmax`
    assert sm.kernel_lines_from_node_mappings(mappings, nodes) == {
        "cpp_fused__softmax_add_relu_threshold_backward_0": {9}}


def test_guards_of_an_automatic_dynamic_recompile_by_kind():
    """The guard tree Dynamo printed (dynamo_cpp_guards_str) for an nn.Module whose second call
    changed x's batch size (automatic dynamic shapes), recorded as /tmp/ti/g/model2.py: forward at
    line 11, `h = self.fc(x) * self.scale` line 12, `if x.shape[0] > 4:` line 13."""
    from compiler.pytorch import guards
    path = os.path.join(os.path.dirname(__file__), "fixtures", "torch", "guards_automatic_dynamic.txt")
    with open(path, encoding="utf-8") as f:
        parsed = guards.parse_guards(f.read(), lambda p: "/tmp/ti/g/model2.py".endswith(p))
    by_group: dict[str, list] = {}
    for g in parsed:
        by_group.setdefault(g.group, []).append(g)
    # the shape environment's condition on the symbolic batch size, installed by the user's `if`
    (shape,) = by_group["shape"]
    assert shape.check.startswith("5 <= L['x'].size()[0]") and shape.line == 13
    assert "x.size()[0]" in shape.meaning
    # x's tensor match leaves the dynamic dimension open
    x = next(g for g in by_group["tensor"] if g.kind == "TENSOR_MATCH" and g.input == "x")
    assert x.properties["size"] == "[dynamic, 16]" and "dims marked dynamic" in x.meaning
    # module parameters are read through the module's dicts, named as the user writes them
    assert {g.input for g in by_group["tensor"] if g.kind == "TENSOR_MATCH"} >= {"self.fc.weight", "self.fc.bias"}
    scale = next(g for g in by_group["constant"] if g.input == "self.scale")
    assert scale.meaning == "self.scale == 2" and scale.line == 12 and "static" in scale.hint
    assert any(g.kind == "TYPE_MATCH" and g.input == "self" for g in by_group["type"])
    assert {g.kind for g in by_group["global"]} >= {"GLOBAL_STATE", "DEFAULT_DEVICE"}
    # the checks that compare with None say so in words; PyTorch's own text keeps its None
    device = next(g for g in parsed if g.kind == "DEFAULT_DEVICE")
    assert device.meaning.startswith("no default device is set") and device.check.endswith("== None")
    hooks = next(g for g in parsed if "top_saved_tensors_hooks" in g.check)
    assert hooks.meaning.startswith("no saved-tensors hooks are active")
    assert not [g.meaning for g in parsed if "None" in g.meaning]


def test_a_guards_place_names_the_users_file_whole_not_as_dynamo_cut_it():
    """Dynamo prints a user file's path less its first two characters ("mp/ti/g/model2.py:13", by
    torch's shorten_filename); a guard's `where` names the user's file as the page does
    (model2.py:13), and torch's own files as Dynamo printed them (relative to torch)."""
    from compiler.pytorch import guards
    path = os.path.join(os.path.dirname(__file__), "fixtures", "torch", "guards_automatic_dynamic.txt")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert "# mp/ti/g/model2.py:13 in forward" in text  # as Dynamo printed it
    parsed = guards.parse_guards(text, lambda p: "/tmp/ti/g/model2.py".endswith(p))
    wheres = {g.where for g in parsed if g.where}
    assert "model2.py:13" in wheres and "model2.py:12" in wheres, wheres
    assert not [w for w in wheres if w.startswith("mp/") or "/ti/g/" in w], wheres
    assert "nn/modules/linear.py:134" in wheres  # torch's own file, relative to torch as printed
    assert next(g for g in parsed if g.kind == "DEFAULT_DEVICE").where == "_dynamo/output_graph.py:1122"


def test_the_guard_tables_say_what_an_empty_cell_lacks():
    """Guards explained: no cell of its tables is blank. A guard Dynamo placed nowhere (its global
    state, NO_TENSOR_ALIASING, a shape-environment condition) says so on its dash's hover, as the
    resources table's "not reported" does; so does a global guard's input, and a failed guard of a
    recompile that was not found among the earlier compile's guards."""
    import viewers
    from compiler.pytorch import guards
    path = os.path.join(os.path.dirname(__file__), "fixtures", "torch", "guards_automatic_dynamic.txt")
    with open(path, encoding="utf-8") as f:
        parsed = [g.to_json() for g in guards.parse_guards(f.read(), lambda p: "/tmp/ti/g/model2.py".endswith(p))]
    parsed.append({"kind": "NO_TENSOR_ALIASING", "group": "tensor", "input": "x",
                   "check": "check_no_aliasing(L['x'], L['y'])", "meaning": "x and y are not the same tensor"})
    parsed.append({"kind": "LAMBDA_GUARD", "group": "shape", "check": "2 <= L['x'].size()[0]",
                   "meaning": "x.size()[0] >= 2 (a condition on symbolic sizes, from the shape environment)"})
    data = {"compile_id": "0/1", "frame": "forward", "groups": dict(guards.GROUPS), "source": "a test",
            "guards": [{k: v for k, v in g.items() if v not in (None, "", {})} for g in parsed],
            "recompile": [{"compile_id": "0/0", "reason": "something else", "meaning": "something else changed"}]}
    html = viewers.render("guards", json.dumps(data), {})
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)
    assert cells and not [c for c in cells if not c.strip()], "an empty cell"
    aliasing = re.search(r'<tr class="guard" data-kind="NO_TENSOR_ALIASING">(.*?)</tr>', html, re.S).group(1)
    assert 'class="na" title="Dynamo printed no line for it' in aliasing
    shape = re.findall(r'<tr class="guard" data-kind="LAMBDA_GUARD">(.*?)</tr>', html, re.S)[-1]
    assert "the shape environment collected this condition" in shape
    state = re.search(r'<tr class="guard" data-kind="GLOBAL_STATE">(.*?)</tr>', html, re.S).group(1)
    assert 'title="no input: it checks global state"' in state
    failed = re.search(r'<tr class="failed-guard".*?</tr>', html, re.S).group(0)
    assert failed.count('class="na"') == 4  # its guard, its line, what it was compiled for, what was passed


def test_tracebacks_keep_the_users_frames_and_say_how_many_of_irscopes_were_cut():
    """A graph break's "User code traceback" as Dynamo writes it in a job: irscope's own frames
    (the job process, the pipeline, runpy running the file) are cut and counted; the user's frames
    and PyTorch's own traceback stay as they are."""
    from compiler import user_code
    root = os.path.dirname(os.path.dirname(os.path.abspath(user_code.__file__)))
    text = "\n".join([
        "Graph break in user code at /tmp/work/model.py:4",
        "User code traceback:",
        f'  File "{root}/compiler/sandbox_entry.py", line 120, in main',
        "    pipeline.run(request, ctx)",
        f'  File "{root}/compiler/pytorch/pipeline.py", line 231, in run',
        "    outputs = compiled(*inputs)",
        "              ^^^^^^^^^^^^^^^^^",
        '  File "/tmp/work/model.py", line 4, in model',
        '    print("hi")',
        "",
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 1076, in wrapper',
        "    return inner_fn(self, inst)",
        "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
    ])
    cut = user_code.cut_irscope_frames(text)
    assert root + "/compiler/" not in cut
    assert "  [irscope: 2 frames of irscope's own code cut]\n  File \"/tmp/work/model.py\", line 4, in model\n" \
           "    print(\"hi\")" in cut
    assert "symbolic_convert.py\", line 1076, in wrapper\n    return inner_fn(self, inst)" in cut
    assert user_code.cut_irscope_frames("no traceback here") == "no traceback here"


def test_an_exception_irscopes_own_code_raised_is_irscopes_fault_not_the_users_line(tmp_path):
    """A hook, recorder or shim of irscope's that fails while the user's line runs is an
    InternalError naming irscope's file; the same line failing in the library it called is the
    user's, with the line; an exception irscope raises on purpose for the user names the line."""
    from compiler import user_code
    from compiler.errors import ErrorKind
    from compiler.model import JobSettings
    from compiler.pipeline import UserError

    def error_of(source: str) -> UserError:
        path = tmp_path / "prog.py"
        path.write_text(source)
        with pytest.raises(UserError) as e:
            user_code.run_user_file(str(path), JobSettings())
        return e.value

    ours = error_of("from compiler.pipeline import lacks_release\n\nx = 1\nlacks_release(None, 'torch', (), 'f')\n")
    assert ours.error.kind == ErrorKind.InternalError and ours.error.line is None
    assert ours.error.message.startswith("irscope's own code failed in lacks_release (compiler/pipeline.py, line ")
    assert "while running your line 4. This is irscope's bug" in ours.error.message
    assert "please report this job" in ours.error.message
    theirs = error_of("import torch\n\nx = 1\ntorch.zeros(2) @ torch.zeros(3)\n")
    assert theirs.error.kind == ErrorKind.UserCodeError and theirs.error.line == 4
    assert theirs.error.message.startswith("line 4: RuntimeError")
    # raised in irscope's code on purpose (UserFacing): a tensor PyTorch cannot export to CuTe
    for_them = error_of("import torch\nfrom compiler.cute.capture import FakeDLPack\n\n"
                        "FakeDLPack(torch.empty(2, dtype=torch.bits8))\n")
    assert for_them.error.kind == ErrorKind.UserCodeError and for_them.error.line == 4
    assert "a torch.bits8 tensor cannot be passed to CuTe: Bit types are not supported by dlpack" in \
        for_them.error.message


def test_the_compile_index_groups_compiles_by_the_users_line_that_called_them(entries):
    from compiler.pytorch import compile_index
    # the recording's harness, /tmp/t1/p.py, called the module at its line 5; as the user's file,
    # that is the call site of both compiles: the forward up to its print (Dynamo's restart folded
    # into one compile, known as PyTorch and the stage tabs name it, by its last attempt: 0/0_1) and
    # the resume function after it
    records = compile_index.compiles(entries, USER + ("/tmp/t1/p.py",))
    assert [(r["compile_id"], r["function"], r["line"], r["call_line"], r["ops"], r["breaks"]) for r in records] == [
        ("0/0_1", "forward", 6, 5, 1, [8]), ("1/0", "torch_dynamo_resume_in_forward_at_8", 8, 5, 3, [])]
    assert records[0]["compile_id"] in torch_trace.compile_ids(entries)  # the id the stages are keyed by
    assert records[0]["call_text"] == 'torch.compile(ns["model"])(*ns["example_inputs"])'
    assert records[0]["recompile"] is None and records[0]["error"] is None
    text, pairs = compile_index.text_and_map(compile_index.by_call_site(records))
    assert text.splitlines()[:5] == [
        "# 2 compiles of 2 functions, called from 1 line of yours", "",
        '## line 5: torch.compile(ns["model"])(*ns["example_inputs"])',
        "- [0/0_1] forward, line 6: a graph of 1 op; graph break at line 8",
        "- [1/0] torch_dynamo_resume_in_forward_at_8, line 8: a graph of 3 ops"]
    assert pairs == [[3, 5], [4, 6], [5, 8]]
    # without the harness as the user's: one group, called from no line of the user's
    alone = compile_index.by_call_site(compile_index.compiles(entries, USER))
    assert len(alone) == 1 and alone[0]["line"] is None and len(alone[0]["compiles"]) == 2


def test_profiler_names_of_compiled_graphs_are_words(entries):
    """torch.profiler names a compiled graph's call by Inductor's cache key (a hash): each is named
    by its compile id (as the stage tabs show it) and the user's function with its line."""
    from compiler.pytorch import compile_index
    names = compile_index.profiler_names(entries, USER)
    assert names == {
        "## Call CompiledFxGraph fe6gjwoaj3c4qh6z7s3cxperi66grh65li7h32d2a4nccbhrnwtn ##":
            "compiled graph [0/0_1]: forward(), line 6",
        "## Call CompiledFxGraph fsnpjm3mwahuadfzpgb6azc2ensxdkyfqxbzy5ryih6fgnzeukfo ##":
            "compiled graph [1/0]: torch_dynamo_resume_in_forward_at_8(), line 8"}
    # a backward graph (its inputs are AOTAutograd's tangents) says so; a bypassed cache's one graph is named too
    bypass = {"components": ["[k] gm: def forward(self, primals_1, tangents_1)"]}
    backward = torch_trace.TraceEntry("artifact", {"name": "fx_graph_cache_bypass"},
                                      {"frame_id": 1, "frame_compile_id": 0}, json.dumps(bypass), "")
    only = [e for e in entries if e.name not in ("fx_graph_cache_miss", "fx_graph_cache_hit")] + [backward]
    assert compile_index.profiler_names(only, USER) == {
        "## Call CompiledFxGraph None ##":
            "compiled graph [1/0], backward: torch_dynamo_resume_in_forward_at_8(), line 8"}


def test_a_recompile_after_two_failed_guards_reads_each_and_names_the_compile_as_its_stages_do():
    """tests/fixtures/torch/recompile_two_guards.py (recorded at /tmp/gbtest/report.py): `step` compiled
    for x of size 8, then 16, then with another `scale`. The third compile's recompile_reasons
    artifact is a JSON list of two reasons (compile 0/1's failed guard, then 0/0's); the summary
    said "[0/2] [" and the stage printed the list's brackets and quotes. Each reason is read, the
    first is the summary's line with Dynamo's padding closed up, and each recompile is named by
    its last attempt, as its stages are keyed (0/2_1: the print restarted Dynamo's analysis)."""
    from compiler.pytorch import compile_index
    from compiler.pytorch.trace_stages import _recompile_summary, recompiled_frames
    path = os.path.join(os.path.dirname(__file__), "fixtures", "torch", "recompile_two_guards.trace")
    with open(path, encoding="utf-8") as f:
        entries = torch_trace.parse(f.read())
    recompiles = torch_trace.of_kind(entries, "recompile_reasons")
    assert [len(torch_trace.recompile_reasons(e.payload)) for e in recompiles] == [1, 1, 2]
    last = torch_trace.recompile_reasons(recompiles[2].payload)
    assert last[0].startswith("0/1: scale == 2.0") and "User stack trace:" in last[0]
    assert last[1] == "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"
    frames = recompiled_frames(entries, recompiles)
    step = next(f for f in frames if f["function"].startswith("step at report.py:4"))
    assert step["compiles"] == 3
    assert step["recompiles"] == [
        {"compile_id": "0/1_1", "reason": "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"},
        {"compile_id": "0/2_1", "reason": "0/1: scale == 2.0 # h = torch.relu(x) * scale # mp/gbtest/report.py:6 "
                                          "in step"}]
    summary = _recompile_summary(frames)
    assert "- [0/2_1] 0/1: scale == 2.0 # h = torch.relu(x)" in summary and "] [" not in summary
    index = {r["compile_id"]: r["recompile"] for r in compile_index.compiles(entries, ("/tmp/gbtest/report.py",))}
    assert index["0/2_1"] == "0/1: scale == 2.0 # h = torch.relu(x) * scale # mp/gbtest/report.py:6 in step"

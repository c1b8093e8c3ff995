"""The teaching and debugging views in a real browser (Debian's Chromium through Playwright, a real
`irscope serve`, the strict Content-Security-Policy; any console error or CSP violation fails the
test): IR-to-IR hover between TTGIR and PTX, the guard view of a recompile, an imported TORCH_TRACE
archive, and the XLA memory chart's peak. One server for the module (tests/browser.py's fixtures),
separate from the other modules' so each module pays its own compiles."""
from __future__ import annotations

import json
import os
import re

from tests.browser import (
    BROWSER_MARKS,
    compile_in_page,
    notices_are_one_line,
    open_stage,
    raw_stage,
    status,
    tab_keys,
    wait_finished,
)

pytestmark = BROWSER_MARKS

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "imports")

RECOMPILE = '''import torch


def scale(x, k):
    y = x * k
    return torch.relu(y) + 1


f = torch.compile(scale, backend="eager", dynamic=False)
f(torch.randn(4), 2.0)  # compile 0/0
f(torch.randn(8), 2.0)  # recompile: x's size changed
f(torch.randn(8), 3.0)  # recompile: k changed

model = scale
example_inputs = (torch.randn(8, dtype=torch.float64), 3.0)  # irscope's own call: x's dtype changed
'''


def submit_import(page, path: str) -> None:
    """Upload `path` with the form at /import and wait for the job page it leads to."""
    page.goto("/import")
    page.set_input_files("#import-archive", path)
    page.click("#import-submit")
    page.wait_for_selector("#job-bar, .import-error", timeout=60_000)
    assert page.locator(".import-error").count() == 0, page.inner_text(".import-error")
    page.wait_for_url(re.compile(r".*/j/\w+(#.*)?$"))


def lit(page, pane: str) -> list[dict]:
    return page.eval_on_selector_all(f"{pane} .ln.hot", """els => els.map(e => ({
        text: e.querySelector('.tx').textContent.trim(), src: e.dataset.src || null, line: e.dataset.line}))""")


def test_the_kernel_resources_table_shows_each_kernel_and_opens_its_metadata(watched):
    page = watched.page
    job_id = compile_in_page(page, "triton")
    open_stage(page, "kernels.resources")
    table = json.loads(raw_stage(page, job_id, "kernels.resources")["text"])
    assert page.locator("#pane .resources-table tbody tr").count() == len(table["kernels"]) >= 1
    first = table["kernels"][0]
    row = page.locator(f'#pane .resources-table tr[data-kernel="{first["kernel"]}"]')
    assert row.locator(".registers").inner_text().strip() == str(first["registers"])
    assert f'{first["occupancy"]["percent"]} %' in row.locator(".occupancy").inner_text()
    # the lines of the user's source the kernel came from, as ranges, first and last among them
    shown = row.locator("td.lines").inner_text().strip()
    assert shown.startswith(str(first["lines"][0])) and shown.endswith(str(first["lines"][-1])), shown
    row.locator("a").first.click()  # the kernel's name opens its metadata, as a lesson's link does
    page.wait_for_selector(f'#pane .artifact[data-key="{first["stage"]}"]')
    assert f'"registers": {first["registers"]}' in page.inner_text("#pane .artifact-body")


def test_a_triton_kernels_ptx_and_sass_say_their_notices_in_one_line_each_at_800_px(watched):
    """At 800 px the PTX and SASS stages of a Triton kernel start with one line per notice (what
    the stage is, its note, what file its text names, how its lines link), the rest folded under
    each line, so the code starts near the pane's top; and no token of the code is boxed as an
    error (pygments' `err`: the lexer's limits, `@%p2`, `@"ET_EXEC"`)."""
    page = watched.page
    compile_in_page(page, "triton")
    page.set_viewport_size({"width": 800, "height": 900})
    for key in ("triton.ptx:softmax_kernel", "triton.sass:softmax_kernel"):
        open_stage(page, key)
        notices = notices_are_one_line(page)
        assert {"explain", "note", "note file-name"} <= {n["cls"] for n in notices}, notices
        assert page.locator("#pane .artifact-body .err").count() == 0
        assert "@" in page.inner_text("#pane .artifact-body")
    page.set_viewport_size({"width": 1400, "height": 900})


def test_a_cute_kernels_ptx_and_sass_opcodes_carry_their_help(watched):
    """The CuTe DSL example on a virtual H100: each PTX and SASS opcode is a link to NVIDIA's
    reference titled with its description; SASS registers are not drawn as line numbers."""
    page = watched.page
    job_id = compile_in_page(page, "cute")
    open_stage(page, "cute.ptx:add")
    ptx = raw_stage(page, job_id, "cute.ptx:add")["text"]
    store = page.locator('#pane .artifact-body a.isa-op:has-text("st.global.b16")').first
    assert store.get_attribute("href").startswith("https://docs.nvidia.com/cuda/parallel-thread-execution/")
    assert store.get_attribute("title").startswith("st.global.b16: Store registers")
    instructions = [line for line in ptx.splitlines()
                    if line.startswith("\t") and not line.startswith("\t.") and line.strip().endswith(";")]
    assert page.locator("#pane .artifact-body a.isa-op").count() == len(instructions) > 10
    open_stage(page, "cute.sass:add")
    load = page.locator('#pane .artifact-body a.isa-op:has-text("LDG")').first
    assert "Load from global memory" in load.get_attribute("title")
    assert load.get_attribute("href").startswith("https://docs.nvidia.com/cuda/cuda-binary-utilities/")
    # a register (pygments' Name.Constant, class "no") is code, not a line number
    register = page.locator("#pane .artifact-body .tx .no").first
    assert register.evaluate("e => getComputedStyle(e).display") == "inline"


def test_hovering_a_ttgir_line_lights_the_ptx_it_became(watched, shots):
    page = watched.page
    job_id = compile_in_page(page, "triton")
    assert status(page) == "done"
    open_stage(page, "triton.ttgir:softmax_kernel")
    page.click('#pane .artifact[data-key="triton.ttgir:softmax_kernel"] .to-side')
    page.wait_for_selector('#pane2 .artifact[data-key="triton.ttgir:softmax_kernel"]')
    open_stage(page, "triton.ptx:softmax_kernel")
    # the PTX says how many of its lines link back to TTGIR, counted in the worker
    summary = page.inner_text("#pane .ir-links-summary")
    meta = raw_stage(page, job_id, "triton.ptx:softmax_kernel")["meta"]
    to_ttgir = next(x for x in meta["ir_links"] if x["title"] == "TTGIR")
    assert to_ttgir["linked_lines"] == to_ttgir["located_lines"] > 150
    assert f"TTGIR: {to_ttgir['linked_lines']} (100%)" in summary

    # tl.max's combine op, compiled from Triton's own standard.py: lights the PTX max.f32 instructions
    page.locator('#pane2 .ln[data-locs]:has-text("arith.maxnumf")').first.hover()
    ptx = lit(page, "#pane")
    instructions = [x["text"].split()[0] for x in ptx if not x["text"].startswith((".", "$", "//"))]
    assert instructions and set(instructions) == {"max.f32"}, instructions
    assert any(x["src"] is None for x in ptx), "no lit line without a user line"  # the helper's body
    # the PTX pane scrolled to the lit lines (the pointer stays on the TTGIR line, in the other pane)
    page.evaluate("() => document.querySelector('#pane .ln.hot').scrollIntoView({block: 'center'})")
    page.screenshot(path=str(shots / "ir-links.png"))
    # `x - tl.max(...)`: the same user line (12), but only the subtraction's PTX lights
    page.locator('#pane2 .ln[data-locs]:has-text("arith.subf")').first.hover()
    instructions = {x["text"].split()[0] for x in lit(page, "#pane") if not x["text"].startswith((".", "$", "//"))}
    assert instructions == {"sub.f32"}, instructions
    # and the other way: a PTX line lights its TTGIR op
    page.locator('#pane .ln[data-locs]:has-text("ex2.approx.f32")').first.hover()
    assert any("math.exp" in x["text"] for x in lit(page, "#pane2"))


def test_the_guard_view_of_a_recompile(watched, shots):
    page = watched.page
    page.goto("/?language=pytorch")
    page.click(".options-menu summary")
    page.select_option("#opt-backend", "eager")  # Dynamo's guards are the lesson: no Inductor needed
    page.click(".options-menu summary")
    page.evaluate("(t) => document.querySelector('.CodeMirror').CodeMirror.setValue(t)", RECOMPILE)
    page.click("#compile")
    assert wait_finished(page) == "done", page.inner_text("#results .job-error")
    keys = tab_keys(page)
    assert [k for k in keys if k.startswith("dynamo.guards_explained")] == [
        f"dynamo.guards_explained:0/{n}" for n in range(4)]
    open_stage(page, "dynamo.guards_explained:0/3")
    rows = page.eval_on_selector_all("#pane tr.failed-guard", "els => els.map(e => e.innerText)")
    assert len(rows) == 3
    assert "x's dtype changed: compile 0/2 was specialised on Float, the call passed Double" in rows[0]
    assert "k changed: compile 0/1 was specialised on k == 2.0, the call passed k == 3.0" in rows[1]
    groups = page.eval_on_selector_all("#pane h3.guard-group", "els => els.map(e => e.dataset.group)")
    assert groups[:1] == ["tensor"] and "constant" in groups and "global" in groups
    page.screenshot(path=str(shots / "guards.png"))
    # at 1500x950 every guard table fits the pane: Dynamo's code wraps in its cell, nothing is cut
    page.set_viewport_size({"width": 1500, "height": 950})
    fit = page.evaluate("""() => { const pane = document.querySelector('#pane');
        const right = pane.getBoundingClientRect().right;
        return {scroll: pane.scrollWidth, client: pane.clientWidth,
                tables: Array.from(pane.querySelectorAll('.guards-view table')).map(t => ({
                  right: t.getBoundingClientRect().right, pane: right,
                  scroll: t.scrollWidth, client: t.clientWidth}))}; }""")
    assert fit["tables"] and fit["scroll"] <= fit["client"] + 1, fit
    assert all(t["right"] <= t["pane"] + 1 and t["scroll"] <= t["client"] + 1 for t in fit["tables"]), fit
    page.set_viewport_size({"width": 1400, "height": 900})
    # the line that installed the failed guard: a link that puts the editor's cursor on it
    page.click("#pane tr.failed-guard .goto-line")
    assert page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getCursor().line") == 4


def test_an_imported_torch_trace_archive(watched):
    page = watched.page
    submit_import(page, os.path.join(FIXTURES, "recompile.torch_trace.tar.gz"))
    assert wait_finished(page) == "done", page.inner_text("#results .job-error")
    job_id = page.get_attribute("#job-bar", "data-job")
    keys = tab_keys(page)
    with open(os.path.join(FIXTURES, "recompile.live_job_stages.json")) as f:
        live = json.load(f)["stages"]
    # the live job's stages that came from its trace are all there
    assert {k for k in live if k.startswith(("dynamo.fx_graph", "inductor.output_code", "dynamo.guards"))} <= set(keys)
    open_stage(page, "import.origin")
    assert "imported TORCH_TRACE from recompile.torch_trace.tar.gz, made by torch 2.13.0+cpu on the CPU" in \
        page.inner_text("#pane .artifact")
    open_stage(page, "dynamo.guards_explained:0/1")
    assert "x's size at dim 0 changed" in page.inner_text("#pane tr.failed-guard")
    api = page.request.get(f"/api/jobs/{job_id}").json()
    assert api["request"]["language"] == "import" and api["timings"]["job"]["sandbox"] == "bubblewrap"


def test_a_hostile_archive_is_refused_on_the_page(watched, tmp_path):
    import io
    import tarfile
    page = watched.page
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("../../outside.log")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    path = tmp_path / "escape.tar.gz"
    path.write_bytes(buffer.getvalue())
    submit_import(page, str(path))
    assert wait_finished(page) == "failed"
    box = page.inner_text("#results .error-box")
    assert "InputError" in box and "member '../../outside.log': a path with '..' is refused" in box


def test_the_memory_chart_marks_the_peak_of_live_bytes(watched, shots):
    page = watched.page
    job_id = compile_in_page(page, "hlo")
    open_stage(page, "xla.memory")
    data = raw_stage(page, job_id, "xla.memory")
    memory = json.loads(data["text"])
    marker = page.locator("#pane svg.memory-chart circle.peak")
    assert int(marker.get_attribute("data-bytes")) == memory["peak_bytes"] == max(memory["live_bytes"])
    assert int(marker.get_attribute("data-step")) == memory["peak_at"]
    assert memory["sequence"][memory["peak_at"]] != "partition-id"
    # the marker sits on the live-bytes line's highest point, as drawn
    points = page.get_attribute("#pane svg.memory-chart polyline.live", "points").split()
    ys = [float(p.split(",")[1]) for p in points]
    assert abs(float(marker.get_attribute("cy")) - min(ys)) < 0.11
    # what is live there, largest first, adds up to the peak; XLA's temp size is the packed heap
    sizes = [int(x) for x in page.eval_on_selector_all("#pane table.memory-peak td[data-bytes]",
                                                       "els => els.map(e => e.dataset.bytes)")]
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) == memory["peak_bytes"]
    summary = page.inner_text("#pane .memory-summary")
    temp = memory["xla_memory_stats"]["temp_size_in_bytes"]
    assert f"equal to XLA's temp_size_in_bytes = {temp}" in summary
    page.screenshot(path=str(shots / "memory.png"))
    assert re.search(rf"peak: .*\({memory['peak_bytes']} bytes\) live at step {memory['peak_at']}", summary)


# A torch.compile bug report as people write them: a decorated function, a print that breaks the
# graph, a main() whose loop recompiles for a new size and then for a new scale. The program whose
# structured trace tests/test_torch_capture.py reads (recorded from a real run).
with open(os.path.join(os.path.dirname(__file__), "fixtures", "torch", "recompile_two_guards.py"),
          encoding="utf-8") as _f:
    BUG_REPORT = _f.read()


def _pane_lines(page) -> list[dict]:
    return page.eval_on_selector_all("#pane .ln", """els => els.map(e => ({
        text: e.querySelector('.tx').textContent, src: e.dataset.src || null}))""")


def test_a_script_that_compiles_itself_shows_its_compiles_by_call_site_its_breaks_and_recompiles(watched, shots):
    """Pasted as written (no `model`, no `example_inputs`): the Compiles index groups every compile
    under the user's line that called it, linked to that line; the graph-break summary names the
    print's line with its count and PyTorch's explanation; the recompile summary lists each frame's
    failed guards, one line each, named as the tabs name the compiles."""
    page = watched.page
    compile_in_page(page, "pytorch", BUG_REPORT)
    assert status(page) == "done", page.inner_text("#results .job-error")
    keys = tab_keys(page)
    assert {"dynamo.compiles", "dynamo.graph_breaks", "dynamo.recompiles"} <= set(keys), keys
    call = BUG_REPORT.splitlines().index("        print(step(torch.randn(n), scale))") + 1
    brk = BUG_REPORT.splitlines().index('    print("step", h.shape)  # graph break') + 1

    open_stage(page, "dynamo.compiles")
    lines = _pane_lines(page)
    assert lines[0]["text"].startswith("# 5 compiles of 2 functions"), lines[:2]
    heading = next(ln for ln in lines if ln["text"].startswith(f"## line {call}: print(step(torch.randn(n), scale))"))
    assert heading["src"] == str(call)  # the heading is linked to the line that called
    rows = [ln["text"] for ln in lines if ln["text"].startswith("- [")]
    assert any(r.startswith("- [1/1] torch_dynamo_resume_in_step_at_7") and "size mismatch" in r for r in rows), rows
    assert any(r.startswith("- [0/2_1] step, line 4: recompiled: 0/1: scale == 2.0") for r in rows), rows
    assert page.locator('#pane [title*="frame 0, compile 2, attempt 1"]').count() >= 1  # the id in words
    page.screenshot(path=str(shots / "script_compiles.png"))

    open_stage(page, "dynamo.graph_breaks")
    summary = [ln for ln in _pane_lines(page) if ln["text"].startswith(f"- line {brk} ×3 GB")]
    assert len(summary) == 1 and summary[0]["src"] == str(brk), _pane_lines(page)[:4]
    assert "Dynamo does not know how to trace builtin operator `print`" in page.inner_text("#pane")

    open_stage(page, "dynamo.recompiles")
    text = page.inner_text("#pane")
    assert "# frame 0 (step at model.py:4) compiled 3 times" in text
    assert "- [0/1_1] 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16" in text
    assert "- [0/2_1] 0/1: scale == 2.0 # h = torch.relu(x) * scale" in text and "] [" not in text

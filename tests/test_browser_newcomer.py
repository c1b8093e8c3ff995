"""The page as a newcomer meets it, in a real browser (Debian's Chromium through Playwright, a real
`irscope serve`, the strict Content-Security-Policy; any console error or CSP violation fails the
test), at 1500x950 and at 800 px wide: what the compiler did at a glance, a graph break found from
that summary and marked in the editor, results that say they are stale once the source changes, an
options menu that closes, a keyboard that is never trapped, kernels in a sortable table, and an
error that leads with its point and shows no server path. Every assertion is on what is visible
(bounding boxes, the focus), not only on what is in the DOM.

The server serves the store the session's `lesson_jobs` fixture compiled every lesson into, so a
lesson opens from the store; one failing job is compiled here.
"""
from __future__ import annotations

import json
import re
import site
import sys
from pathlib import Path

import pytest

from app import lessons
from testbed.real_servers import ROOT
from tests.browser import BROWSER_MARKS, compile_in_page, open_stage, raw_stage, set_editor, wait_finished

pytestmark = BROWSER_MARKS

SIZES = {"wide": {"width": 1500, "height": 950}, "narrow": {"width": 800, "height": 900}}
GRAPH_BREAK = lessons.by_slug(lessons.load(), "graph-break")
BREAK_LINE = next(n for n, text in enumerate(GRAPH_BREAK.request.source.splitlines(), 1) if "print(" in text)

SHAPE_MISMATCH = '''import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, x):
        return self.out(x)  # forgot self.proj


model = Head()
example_inputs = (torch.randn(4, 64),)
'''

# A small MLP trained on a virtual H100, as someone would try Inductor's GPU kernels: with its
# backward, a score of kernels (names of 90 characters and more) and more configs, and about 200
# kernel stages: the many-kernels page the issue met (41 kernel stages in one list, names cut off).
TRAINED_MLP = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.down(F.gelu(self.up(self.norm(x)))))


class MLP(nn.Module):
    def __init__(self, dim: int = 256, hidden: int = 1024, classes: int = 10, depth: int = 2):
        super().__init__()
        self.embed = nn.Linear(64, dim)
        self.blocks = nn.ModuleList(Block(dim, hidden) for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h = F.silu(self.embed(x))
        for block in self.blocks:
            h = block(h)
        return F.log_softmax(self.head(h), dim=-1)


model = MLP()
example_inputs = (torch.randn(128, 64),)
'''

CM = "document.querySelector('.CodeMirror').CodeMirror"


@pytest.fixture(scope="module")
def server_data(lesson_jobs):
    """tests/browser.py's `server` fixture serves this directory: the lessons' store."""
    return Path(lesson_jobs.data_dir)


@pytest.fixture(params=sorted(SIZES))
def sized(watched, request):
    """The watched page at one of the two window sizes the issue names."""
    watched.page.set_viewport_size(SIZES[request.param])
    return watched.page, request.param


def open_lesson(page, lesson: lessons.Lesson) -> None:
    page.goto(f"/examples/{lesson.slug}")
    page.wait_for_url(re.compile(r".*/z/\w+#stage="))
    assert wait_finished(page) == "done"
    page.wait_for_selector("#pane .artifact")


def on_first_screen(page, selector: str) -> dict:
    """The element's box; asserts that its top is inside the window (no scrolling needed)."""
    box = page.locator(selector).first.bounding_box()
    height = page.viewport_size["height"]
    assert box is not None and 0 <= box["y"] < height, (selector, box, height)
    return box


def editor_lines_with(page, cls: str) -> list[int]:
    return page.evaluate(f"""(c) => {{ const cm = {CM}; const out = [];
        for (let l = 0; l < cm.lineCount(); l++) {{
          const classes = (cm.lineInfo(l).bgClass || '').split(' ');
          if (classes.some(x => new RegExp('^' + c + '$').test(x))) out.push(l + 1); }}
        return out; }}""", cls)


def test_the_summary_says_what_happened_and_leads_to_the_graph_break(sized, shots):
    page, size = sized
    open_lesson(page, GRAPH_BREAK)
    glance = page.locator("#results .glance")
    on_first_screen(page, "#results .glance")
    text = glance.inner_text()
    # counted from the job's stages: two graphs (before the print and the resume function's), one break
    assert re.search(r"\b2 graphs\b", text) and f"1 graph break (line {BREAK_LINE})" in text, text
    assert re.search(r"\d+ kernels?\b", text) and re.search(r"compiled \d+\.\d\d× (faster|slower) than eager", text)
    # the break is marked in the editor as soon as the job ends, no tab opened, and on screen
    assert editor_lines_with(page, "break-line") == [BREAK_LINE]
    marker = page.locator(".CodeMirror .break-marker")
    assert marker.count() == 1 and marker.is_visible()
    on_first_screen(page, ".CodeMirror .break-marker")
    if size == "wide":
        page.screenshot(path=str(shots / "newcomer-summary.png"))
    page.click("#results .glance a:has-text('graph break')")
    page.wait_for_selector('#pane .artifact[data-key="dynamo.graph_breaks"]')
    assert "print" in page.inner_text("#pane .artifact-body")
    # the stage's first line starts on the first screen, under a stage bar that stays in sight
    on_first_screen(page, "#pane .artifact-body .ln")
    page.locator("#pane .artifact-body .ln").last.scroll_into_view_if_needed()
    on_first_screen(page, "#results .stage-tabs")
    if size == "narrow":  # the editor stacks above the results
        editor, results = page.locator("#editor-pane").bounding_box(), page.locator(".results-pane").bounding_box()
        assert editor["y"] + editor["height"] <= results["y"] + 1 and results["width"] > 700


def test_an_edit_marks_the_results_stale_and_no_colour_lands_on_a_moved_line(sized):
    page, _ = sized
    open_lesson(page, GRAPH_BREAK)
    page.wait_for_function(f"() => {{ const cm = {CM}; for (let l = 0; l < cm.lineCount(); l++)"
                           " if (/\\bc\\d\\b/.test(cm.lineInfo(l).bgClass || '')) return true; return false; }")
    assert not page.is_visible("#stale-note")
    original = page.evaluate(f"() => {CM}.getValue()")
    page.evaluate(f"() => {CM}.replaceRange('# a note\\n# another\\n', {{line: 0, ch: 0}})")
    note = page.locator("#stale-note")
    assert note.is_visible() and "changed since this compile" in note.inner_text()
    on_first_screen(page, "#stale-note")
    # every mark the old results put in the editor is gone: colours, the break
    assert editor_lines_with(page, "c\\d") == [] and editor_lines_with(page, "break-line") == []
    # hovering a line of the results lights nothing in the editor
    page.hover("#pane .artifact-body .ln[data-src]")
    assert page.evaluate(f"() => {CM}.getAllMarks().filter(m => m.className === 'hot-line').length") == 0
    assert page.evaluate("() => getComputedStyle(document.querySelector('#pane .ln[data-src]')).backgroundColor") \
        in ("rgba(0, 0, 0, 0)", "transparent")
    # undoing the edit makes them fit again
    page.evaluate(f"(t) => {CM}.setValue(t)", original)
    assert not page.is_visible("#stale-note")
    page.wait_for_function(f"() => {{ const cm = {CM}; for (let l = 0; l < cm.lineCount(); l++)"
                           " if (/\\bc\\d\\b/.test(cm.lineInfo(l).bgClass || '')) return true; return false; }")


def test_the_options_menu_reads_well_closes_and_shows_changes_as_chips(sized):
    page, _ = sized
    open_lesson(page, GRAPH_BREAK)
    width = page.viewport_size["width"]
    menu = page.locator(".options-menu")
    page.click(".options-menu summary")
    assert menu.get_attribute("open") is not None
    help_box = page.locator("#options td.help").first.bounding_box()
    panel = page.locator("#options").bounding_box()
    # full width, one option per row, never off the screen
    assert help_box["width"] > 0.8 * panel["width"] and panel["x"] >= 0 and panel["x"] + panel["width"] <= width
    page.keyboard.press("Escape")
    assert menu.get_attribute("open") is None
    page.click(".options-menu summary")
    size = page.viewport_size
    page.mouse.click(size["width"] - 4, size["height"] - 4)  # a click outside it closes it
    assert menu.get_attribute("open") is None
    # a changed option shows as a chip beside the language; back to its default, it goes
    page.click(".options-menu summary")
    page.select_option("#opt-mode", "max-autotune")
    chip = page.locator("#option-chips .chip")
    assert chip.count() == 1 and chip.inner_text() == "mode = max-autotune" and chip.is_visible()
    page.select_option("#opt-mode", "default")
    assert page.locator("#option-chips .chip").count() == 0
    # Compile closes it (the lesson's own source and options: answered from the store)
    page.click("#compile")
    assert menu.get_attribute("open") is None
    assert wait_finished(page) == "done"


def _focused(page) -> dict:
    return page.evaluate("""() => { const e = document.activeElement;
        const inEditor = !!e.closest('.CodeMirror');
        const target = inEditor ? e.closest('.CodeMirror') : e;
        const s = getComputedStyle(target);
        const r = target.getBoundingClientRect();
        const key = e.dataset.key || (e.matches('.stage-select') ? e.value : '');
        return {id: e.id, tag: e.tagName, key: key, editor: inEditor,
                label: (e.getAttribute('aria-label') || e.textContent || '').trim().slice(0, 30),
                outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1,
                visible: r.width > 0 && r.height > 0}; }""")


def test_the_keyboard_walks_the_whole_page_and_back_without_a_trap(sized):
    page, _ = sized
    open_lesson(page, GRAPH_BREAK)
    page.evaluate("() => document.activeElement.blur()")
    seen, editor_at = [], None
    for n in range(80):
        page.keyboard.press("Tab")
        now = _focused(page)
        if now["tag"] == "BODY":
            break
        assert now["visible"] and now["outline"], f"the focus is not visible on {now}"
        if now["editor"]:
            if editor_at is None:
                editor_at = n
                assert page.is_visible("#editor-keys .keys-hint")
                before = page.evaluate(f"() => {CM}.getValue()")
                page.keyboard.press("Escape")  # the hint's way out: Esc, then Tab moves on
                assert page.is_visible("#editor-keys .keys-escaped")
                page.keyboard.press("Tab")
                assert page.evaluate(f"() => {CM}.getValue()") == before, "Tab after Esc typed into the source"
                now = _focused(page)
                assert not now["editor"], "Esc then Tab stayed in the editor"
            else:
                raise AssertionError("Tab came back into the editor before the page's end")
        seen.append(now)
    else:
        raise AssertionError(f"80 presses of Tab never left the page: {seen[-5:]}")
    assert editor_at is not None, "Tab never reached the editor"
    assert any(s["id"] == "compile" for s in seen) and any(s["key"] for s in seen), seen  # top bar, stage tabs
    assert any(s["id"] == "tab-moves-focus" for s in seen)
    # and back: Shift+Tab from the page's end reaches the editor, and Esc, Shift+Tab leaves it upwards
    for _ in range(80):
        page.keyboard.press("Shift+Tab")
        if _focused(page)["editor"]:
            break
    else:
        raise AssertionError("Shift+Tab never reached the editor")
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Tab")
    assert not _focused(page)["editor"]
    # "Tab moves focus", remembered by this browser: Tab leaves the editor with no Esc
    page.check("#tab-moves-focus")
    page.reload()
    assert page.is_checked("#tab-moves-focus")
    page.click(".CodeMirror-code")
    before = page.evaluate(f"() => {CM}.getValue()")
    page.keyboard.press("Tab")
    assert not _focused(page)["editor"] and page.evaluate(f"() => {CM}.getValue()") == before
    page.uncheck("#tab-moves-focus")


def test_kernels_are_one_sortable_table_that_tells_kernels_from_configs(watched):
    page = watched.page
    lesson = lessons.by_slug(lessons.load(), "triton-registers-spills-occupancy")
    open_lesson(page, lesson)
    page.wait_for_selector('#pane .artifact[data-key="kernels.resources"]')
    summary = page.inner_text("#pane .resources-summary")
    rows = page.locator("#pane .resources-table tbody tr")
    names = [n.strip() for n in page.locator("#pane .resources-table tbody tr td:first-child").all_inner_texts()]
    kernels = {re.sub(r"\.\d+$", "", n.split()[0]) for n in names}
    assert summary.startswith(f"{len(kernels)} kernel"), summary
    if len(kernels) < rows.count():
        assert f"in {rows.count()} compiled configs" in summary and "config N" in summary
    # the table fits its pane (it scrolls inside it) and sorts by a column, both ways
    pane = page.locator("#pane").bounding_box()
    scroller = page.locator("#pane .table-scroll").bounding_box()
    assert scroller["x"] + scroller["width"] <= pane["x"] + pane["width"] + 1

    def registers() -> list[int]:
        return [int(t.split()[0].replace(",", "")) for t in page.locator("#pane .resources-table td.registers")
                .all_inner_texts()]
    page.click("#pane .resources-table th button.sort:text-is('registers / thread')")
    assert registers() == sorted(registers())
    page.click("#pane .resources-table th button.sort:text-is('registers / thread')")
    assert registers() == sorted(registers(), reverse=True)
    # the glance counts the same kernels and configs
    glance = page.inner_text("#results .glance")
    configs = f" ({rows.count()} configs)" if len(kernels) < rows.count() else ""
    assert f"{len(kernels)} kernel{'s' if len(kernels) > 1 else ''}{configs}" in glance, glance


def test_many_kernels_are_navigated_from_their_table_with_every_name_whole(sized):
    """A trained MLP on sm_90 (about 20 kernel configs, 200 kernel stages): the Kernels group opens
    on the table of every kernel, each name readable whole, kernels told from configs; a row opens
    that kernel's stages, its kernel picked in the picker, the stage on the first screen; at 1500 px
    and at 800 px (the second compile is answered from the store)."""
    page, _ = sized
    page.goto("/?language=pytorch")
    set_editor(page, TRAINED_MLP)
    page.click(".options-menu summary")
    page.select_option("#opt-target", "cuda:sm_90")
    page.check("#opt-training")
    page.click("#compile")
    assert wait_finished(page) == "done"
    job_id = page.get_attribute("#job-bar", "data-job")
    open_stage(page, "kernels.resources")
    table = json.loads(raw_stage(page, job_id, "kernels.resources")["text"])["kernels"]
    names = [k["kernel"] for k in table]
    kernels = {re.sub(r"\.\d+$", "", n) for n in names}
    assert len(names) >= 16 and len(kernels) < len(names) and max(map(len, names)) >= 90, names
    rows = page.locator("#pane .resources-table tbody tr")
    assert rows.count() == len(names)
    summary = page.inner_text("#pane .resources-summary")
    assert summary.startswith(f"{len(kernels)} kernels in {len(names)} compiled configs") and "config N" in summary
    # every name whole: its link is as wide as its text (wrapped, never cut), inside the pane's scroller
    longest = max(names, key=len)
    link = page.locator(f'#pane .resources-table tr[data-kernel="{longest}"] td:first-child a')
    assert link.evaluate("a => a.scrollWidth <= a.clientWidth + 1 || getComputedStyle(a).display === 'inline'")
    assert link.inner_text() == longest
    # the picker of the kernels' stages lists every config by its whole name
    picker = page.locator('#results .stage-tabs .group:has([role=tab][data-key^="triton.ptx:"]) .kernel-select')
    listed = picker.locator("option").evaluate_all("os => os.map(o => o.textContent.trim())")
    assert sorted(listed) == sorted(names), listed
    box = picker.bounding_box()
    assert box is not None and box["x"] + box["width"] <= page.viewport_size["width"] + 1
    # a row opens that kernel: its stage in the pane, its kernel picked, then its PTX is one tab away
    link.scroll_into_view_if_needed()
    link.click()
    stage = next(k["stage"] for k in table if k["kernel"] == longest)
    page.wait_for_selector(f'#pane .artifact[data-key="{stage}"]')
    assert picker.input_value() == longest
    open_stage(page, f"triton.ptx:{longest}")
    assert ".target sm_90a" in page.inner_text("#pane .artifact-body")
    on_first_screen(page, "#pane .artifact-body .ln")


@pytest.mark.parametrize("slug", ["triton-registers-spills-occupancy", "helion-two-configs"])
def test_several_kernels_are_one_picker_and_one_kernels_tabs_whatever_the_language(sized, slug):
    """Triton's kernels and Helion's alike: a group of several kernels is a kernel picker and the
    tabs of the picked kernel (source to SASS), not one long list; picking another kernel opens the
    same kind of stage of it; the stage still starts on the first screen."""
    page, size = sized
    open_lesson(page, lessons.by_slug(lessons.load(), slug))
    group = page.locator('#results .stage-tabs .group:has([role=tab][data-key^="triton.ptx:"])')
    picker = group.locator(".kernel-select")
    assert picker.count() == 1 and picker.is_visible()
    kernels = picker.locator("option").evaluate_all("os => os.map(o => o.value)")
    assert len(kernels) >= 2, kernels
    assert page.locator("#results .stage-tabs .stage-select").count() == 0  # no list of every kernel's stages
    if slug.startswith("helion"):  # Helion's own stages of each kernel: a picker of their own
        helion = page.locator('#results .stage-tabs .group:has([role=tab][data-key^="helion.config:"])')
        assert helion.locator(".kernel-select option").count() == len(kernels)
        assert helion.locator("[role=tab]").evaluate_all("ts => ts.filter(t => t.offsetParent !== null).map("
                                                         "t => t.textContent)") == ["Config", "Config space",
                                                                                    "Triton code"]

    def shown() -> list[str]:
        return group.locator("[role=tab][data-kernel]").evaluate_all(
            "ts => ts.filter(t => t.offsetParent !== null).map(t => t.dataset.key)")
    first = picker.input_value()
    keys = shown()
    assert keys and all(k.endswith(":" + first) for k in keys) and len(keys) <= 9, keys
    assert {k.split(":")[0] for k in keys} >= {"triton.ptx", "triton.sass"}
    group.locator(f'[role=tab][data-key="triton.ptx:{first}"]').click()
    page.wait_for_selector(f'#pane .artifact[data-key="triton.ptx:{first}"]')
    other = next(k for k in kernels if k != first)
    picker.select_option(other)
    page.wait_for_selector(f'#pane .artifact[data-key="triton.ptx:{other}"]')  # the same kind, the other kernel
    assert all(k.endswith(":" + other) for k in shown()), shown()
    assert page.get_attribute(f'[role=tab][data-key="triton.ptx:{other}"]', "aria-selected") == "true"
    on_first_screen(page, "#pane .artifact-body .ln")
    # the address names the stage: a reload opens it with its kernel picked
    page.reload()
    page.wait_for_selector(f'#pane .artifact[data-key="triton.ptx:{other}"]')
    assert picker.input_value() == other and all(k.endswith(":" + other) for k in shown())


def test_an_error_leads_with_its_point_and_names_no_server_path(sized, server_data):
    page, size = sized
    compile_in_page(page, "pytorch", SHAPE_MISMATCH)
    box = page.locator("#results .error-box")
    point = page.locator("#results .error-box .error-point")
    on_first_screen(page, "#results .error-box .error-point")
    assert "[4, 64] X [32, 10]" in point.inner_text() and "linear" in point.inner_text(), point.inner_text()
    assert "at line 12" in box.inner_text()
    # PyTorch's developer text is folded under the point, and the page names no path of this host
    assert not page.locator("#results .error-details pre").is_visible()
    page.click("#results .error-details summary")
    whole = page.inner_text("#results .error-box")
    assert "Developer debug context" in whole or "fake tensor" in whole
    html = page.content()
    for host in (ROOT, sys.prefix, *site.getsitepackages(), ".venv", "site-packages", str(server_data)):
        assert host not in html, host
    assert 'File "torch/nn/modules/linear.py"' in html  # a library's file by its import path
    # the stage opened beside the error has something in it
    page.wait_for_selector("#pane .artifact")
    assert page.inner_text("#pane .artifact-body").strip()
    set_editor(page, SHAPE_MISMATCH)  # leave the editor as the next size's test finds it

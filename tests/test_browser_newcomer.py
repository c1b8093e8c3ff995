"""The page as a newcomer meets it, in a real browser (Debian's Chromium through Playwright, a real
`irscope serve`, the strict Content-Security-Policy; any console error or CSP violation fails the
test), at 1500x950 and at 800 px wide: what the compiler did at a glance, a graph break found from
that summary and marked in the editor, results that say they are stale once the source changes, an
options menu that closes, a keyboard that is never trapped, a stage bar of a few rows with the open
stage's first line on the first screen, long lines that wrap on request, kernels in a sortable
table that fits its pane, an error that leads with its point and shows no server path (and no empty
tab), a top bar of one row (two at 800 px) with every control whole, an FX drawing whose names read
whole, a profile that names compiled graphs in words, and Gluon's kernels under Gluon's name. Every
assertion is on what is visible (bounding boxes, the focus), not only on what is in the DOM.

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
from compiler import formats
from testbed.real_servers import ROOT
from tests.browser import (
    BROWSER_MARKS,
    compile_in_page,
    notices_are_one_line,
    open_stage,
    raw_stage,
    set_editor,
    tab_keys,
    wait_finished,
)

pytestmark = BROWSER_MARKS

SIZES = {"wide": {"width": 1500, "height": 950}, "narrow": {"width": 800, "height": 900}}
GRAPH_BREAK = lessons.by_slug(lessons.load(), "graph-break")
# the most above its stage bar: a lesson's note, a permalink in the top bar; the longest lines
POINTWISE = lessons.by_slug(lessons.load(), "pointwise-fusion")
# The open stage's first line starts above this (px from the window's top) after a job opens, and
# the stage bar is lower than BAR_HEIGHT: about two rows of tabs and lists, never a block of its own.
FIRST_LINE_ABOVE = {"wide": 600, "narrow": 800}
BAR_HEIGHT = 90
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


def stage_starts_on_first_screen(page, size: str) -> None:
    """The stage bar is a few rows high and the open stage's first line is well inside the window."""
    bar = page.locator("#results .stage-tabs").bounding_box()
    assert bar is not None and bar["height"] < BAR_HEIGHT, bar
    line = page.locator("#pane .artifact-body .ln").first.bounding_box()
    assert line is not None and bar["y"] + bar["height"] <= line["y"] < FIRST_LINE_ABOVE[size], (line, bar, size)


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
    # compiled against eager: a verdict, or "within noise" where the timed runs' spreads overlap
    assert re.search(r"\d+ kernels?\b", text) and re.search(
        r"compiled \d+\.\d+× (faster|slower) than eager|compiled vs eager: within noise", text), text
    # the break is marked in the editor as soon as the job ends, no tab opened, and on screen
    assert editor_lines_with(page, "break-line") == [BREAK_LINE]
    marker = page.locator(".CodeMirror .break-marker")
    assert marker.count() == 1 and marker.is_visible()
    on_first_screen(page, ".CodeMirror .break-marker")
    # inside the editor's visible lines (at 800x900 the editor shows about 12: it scrolled to the
    # break), the cursor and the focus left where they were
    seen, box = page.locator(".CodeMirror-scroll").bounding_box(), marker.bounding_box()
    assert seen["y"] <= box["y"] and box["y"] + box["height"] <= seen["y"] + seen["height"] + 1, (box, seen)
    assert page.evaluate(f"() => {CM}.getCursor().line") == 0 and not page.evaluate(f"() => {CM}.hasFocus()")
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
    # it stays in sight while the open stage scrolls, the stage bar just under it
    page.locator("#pane .artifact-body .ln").last.scroll_into_view_if_needed()
    results = page.locator(".results-pane").bounding_box()
    assert page.locator("#pane .artifact-body .ln").first.bounding_box()["y"] < results["y"]  # it did scroll
    note_box = on_first_screen(page, "#stale-note")
    bar = page.locator("#results .stage-tabs").bounding_box()
    assert results["y"] - 1 <= note_box["y"] and note_box["y"] + note_box["height"] <= bar["y"] + 1, \
        (note_box, bar, results)
    # every mark the old results put in the editor is gone: colours, the break; the summary's
    # "(line N)" is struck through like the stages' line labels (the ninth walk read it as current)
    assert editor_lines_with(page, "c\\d") == [] and editor_lines_with(page, "break-line") == []
    lines = page.locator("#results .glance .glance-lines").first
    assert lines.inner_text().startswith("(line") and lines.evaluate(
        "e => getComputedStyle(e).textDecorationLine") == "line-through"
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
        // a control whose middle is on screen is seen there, not under the sticky stage bar
        const x = r.left + r.width / 2, y = r.top + r.height / 2;
        const hit = r.height < 200 && y > 0 && y < innerHeight ? document.elementFromPoint(x, y) : null;
        return {id: e.id, tag: e.tagName, key: key, editor: inEditor,
                label: (e.getAttribute('aria-label') || e.textContent || '').trim().slice(0, 30),
                outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1,
                visible: r.width > 0 && r.height > 0,
                covered: hit !== null && !target.contains(hit) && !hit.contains(target)}; }""")


def test_the_keyboard_walks_the_whole_page_and_back_without_a_trap(sized):
    page, _ = sized
    open_lesson(page, GRAPH_BREAK)
    page.evaluate("() => document.activeElement.blur()")
    # the results scrolled, as a reader leaves them: the stage bar sticks over the stage's top
    page.evaluate("() => { document.querySelector('#results').closest('.results-pane').scrollTop = 300; }")
    seen, editor_at = [], None
    for n in range(80):
        page.keyboard.press("Tab")
        now = _focused(page)
        if now["tag"] == "BODY":
            break
        assert now["visible"] and now["outline"], f"the focus is not visible on {now}"
        assert not now["covered"], f"the focus is under the sticky stage bar: {now}"
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


def test_the_stage_bar_stays_a_few_rows_and_the_stage_starts_on_the_first_screen(sized):
    """A PyTorch lesson (eight groups, nineteen stages, the lesson's note and a permalink above them):
    a group of more than two stages is one list, each as wide as the stage it shows, so the bar is
    about two rows and the opened stage's first line is on the first screen (above 600 px at
    1500x950, above 800 px at 800x900, under an editor that leaves the results room)."""
    page, size = sized
    open_lesson(page, POINTWISE)
    stage_starts_on_first_screen(page, size)
    bar = page.locator("#results .stage-tabs").bounding_box()
    lists = page.locator("#results .stage-tabs .stage-select")
    assert lists.count() >= 2  # Dynamo's and Inductor's stages
    for box in [lists.nth(n).bounding_box() for n in range(lists.count())]:
        assert bar["x"] <= box["x"] and box["x"] + box["width"] <= bar["x"] + bar["width"] + 1, (box, bar)
    # a stage opened from a list starts on the first screen too
    open_stage(page, "dynamo.fx_graph:0/0")
    stage_starts_on_first_screen(page, size)
    # the page itself never scrolls: the results scroll in their own box (the sixth walk's wheel
    # over the editor scrolled the whole page away, to a blank window, where each line's
    # screen-reader words were placed past the page's end)
    open_stage(page, "inductor.output_code:0/0")
    assert page.evaluate("() => document.scrollingElement.scrollHeight") <= page.viewport_size["height"] + 1
    page.mouse.move(100, 300)
    page.mouse.wheel(0, 2000)
    assert page.evaluate("() => document.scrollingElement.scrollTop") == 0
    if size == "narrow":
        assert page.locator("#editor-pane").bounding_box()["height"] <= 260


def test_long_stage_lines_wrap_on_request_keeping_their_numbers_and_links(sized):
    """"wrap lines" beside the open stage: the output code's long lines wrap inside the pane (no
    sideways scrolling), each under its own text with its number and source line in their column;
    a wrapped line's number still picks it into the address and hovering it still lights its source
    line; the setting is remembered by this browser."""
    page, size = sized
    open_lesson(page, POINTWISE)
    page.wait_for_selector('#pane .artifact[data-key^="inductor.output_code"]')
    pane = page.locator("#pane")

    def sideways() -> float:
        return pane.evaluate("p => p.scrollWidth - p.clientWidth")
    toggle = page.locator("#pane .artifact-head .wrap-lines-toggle")
    assert toggle.is_visible() and not toggle.is_checked()
    on_first_screen(page, "#pane .artifact-head .wrap-toggle")
    assert sideways() > 50  # its longest lines run past the pane
    toggle.check()
    assert sideways() <= 1
    wrapped = page.evaluate("""() => { const l = Array.from(document.querySelectorAll('#pane pre.code .ln[data-src]'))
        .find(l => l.getBoundingClientRect().height > 1.5 * l.querySelector('.no').getBoundingClientRect().height);
        return l ? l.dataset.line : null; }""")
    assert wrapped, "no linked line wrapped"
    line = page.locator(f'#pane pre.code .ln[data-line="{wrapped}"]')
    line.scroll_into_view_if_needed()
    no, ref, text = (line.locator(part).bounding_box() for part in (".no", ".src-ref", ".tx"))
    box = pane.bounding_box()
    # the number and the source line stay in their column; the text wraps beside them, inside the pane
    assert no["x"] < ref["x"] < text["x"] and text["height"] > 1.5 * no["height"], (no, ref, text)
    assert text["x"] + text["width"] <= box["x"] + box["width"] + 1
    assert no["x"] == page.locator("#pane pre.code .ln .no").first.bounding_box()["x"]
    line.hover()
    assert "hot" in line.get_attribute("class").split()
    assert page.evaluate(f"() => {CM}.getAllMarks().filter(m => m.className === 'hot-line').length") == 1
    line.locator(".no").click()
    assert "picked" in line.get_attribute("class").split() and page.url.endswith(f"&line={wrapped}")
    # remembered: a reload shows the stage wrapped, the toggle on
    page.reload()
    page.wait_for_selector(f'#pane pre.code .ln.picked[data-line="{wrapped}"]')
    assert page.is_checked("#pane .artifact-head .wrap-lines-toggle") and sideways() <= 1
    page.uncheck("#pane .artifact-head .wrap-lines-toggle")
    assert sideways() > 50


def test_kernels_are_one_sortable_table_that_tells_kernels_from_configs(watched):
    page = watched.page
    lesson = lessons.by_slug(lessons.load(), "triton-registers-spills-occupancy")
    open_lesson(page, lesson)
    page.wait_for_selector('#pane .artifact[data-key="kernels.resources"]')
    summary = page.inner_text("#pane .resources-summary")
    rows = page.locator("#pane .resources-table tbody tr")
    names = [n.strip() for n in page.locator("#pane .resources-table tbody tr td:first-child").all_inner_texts()]
    kernels = {re.sub(r"\.\d+$", "", n.split()[0]) for n in names}
    firsts = [n.split()[0] for n in names]  # each kernel's configs under it: k_0.0, k_0.1, k_1.0
    assert firsts == formats.configs_under_kernels(firsts), firsts
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
    page.click("#pane .resources-table th button.sort:text-is('regs')")
    assert registers() == sorted(registers())
    page.click("#pane .resources-table th button.sort:text-is('regs')")
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
    page, size = sized
    page.goto("/?language=pytorch")
    set_editor(page, TRAINED_MLP)
    page.click(".options-menu summary")
    page.select_option("#opt-target", "cuda:sm_90")
    page.check("#opt-training")
    page.click("#compile")
    assert wait_finished(page) == "done"
    job_id = page.get_attribute("#job-bar", "data-job")
    # a stage opens by itself (the output code, or a kernel's PTX where that came first while the job
    # ran), under a bar of a few rows (the kernels' picker and one kernel's tabs among them), its first
    # line on the first screen
    page.wait_for_selector("#pane .artifact .artifact-body .ln")
    stage_starts_on_first_screen(page, size)
    open_stage(page, "kernels.resources")
    resources_table_fits_its_pane(page, size)
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
    # the picker of the kernels' stages lists every config, its whole name on hover, each kernel's
    # configs under it, the .N of each in sight
    picker = page.locator('#results .stage-tabs .group:has([role=tab][data-key^="triton.ptx:"]) .kernel-select')
    listed = picker.locator("option").evaluate_all("os => os.map(o => o.title)")
    assert sorted(listed) == sorted(names) and listed == formats.configs_under_kernels(listed), listed
    kernel_picker_says_kernels_and_configs(picker)
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


def kernel_picker_says_kernels_and_configs(picker) -> None:
    """A kernel picker: each kernel's configs under it, each entry's .N config in sight (a long name
    cut in its middle, whole on hover), its name counting kernels and configs apart."""
    options = picker.locator("option").evaluate_all("os => os.map(o => [o.value, o.textContent, o.title])")
    values = [v for v, _, _ in options]
    assert values == formats.configs_under_kernels(values), values
    for value, text, title in options:
        assert title == value and text.endswith(value[-6:]) and len(text) <= 40, (value, text)
    kernels = len({formats.kernel_of(v) for v in values})
    said = f"{kernels} kernel{'s' if kernels > 1 else ''}" + \
        (f", {len(values)} configs" if kernels < len(values) else "")
    assert picker.get_attribute("aria-label").endswith(f": {said}"), picker.get_attribute("aria-label")
    picker.hover()
    assert picker.get_attribute("title").startswith(picker.input_value() + "\n")


def resources_table_fits_its_pane(page, size: str) -> None:
    """The kernels table of the trained MLP as it is first seen: its sentence inset and capitalised,
    the table starting on the first screen and fitting its pane (at 800 px it may scroll inside its
    own box, the kernel's name kept in sight), short headers that say the rest on hover, each
    figure on one line, numbers right-aligned, and the user's lines of every Inductor kernel."""
    pane = page.locator("#pane").bounding_box()
    summary = page.locator("#pane .resources-summary")
    text = summary.inner_text()
    assert summary.bounding_box()["x"] >= pane["x"] + 8
    assert "none spills" not in text and not re.search(r"[.;] [a-z]", text), text
    table = page.locator("#pane .resources-table").bounding_box()
    scroller = page.locator("#pane .table-scroll")
    box = scroller.bounding_box()
    assert 0 <= table["y"] < page.viewport_size["height"], table
    assert box["x"] + box["width"] <= pane["x"] + pane["width"] + 1, (box, pane)
    if size == "wide":  # the whole table in the pane: no column needs scrolling to
        assert table["x"] + table["width"] <= pane["x"] + pane["width"] + 1, (table, pane)
    scroller.evaluate("s => { s.scrollLeft = s.scrollWidth; }")  # its far end (a no-op where it fits)
    name = page.locator("#pane .resources-table tbody tr td:first-child").first.bounding_box()
    assert box["x"] - 1 <= name["x"] and name["x"] + name["width"] <= box["x"] + box["width"] + 1, (name, box)
    scroller.evaluate("s => { s.scrollLeft = 0; }")
    headers = page.locator("#pane .resources-table thead th")
    for n in range(headers.count()):
        assert len(headers.nth(n).inner_text().strip()) <= 9 and headers.nth(n).get_attribute("title")
    layout = page.evaluate("""() => Array.from(document.querySelectorAll('#pane .resources-table tbody tr')).map(tr => {
        const occ = tr.querySelector('td.occupancy'), range = document.createRange();
        range.selectNodeContents(occ);
        return {occupancy: range.getBoundingClientRect().height, line: parseFloat(getComputedStyle(occ).lineHeight)
                || 17, align: getComputedStyle(tr.querySelector('td.registers')).textAlign}; })""")
    assert all(r["occupancy"] < 1.5 * r["line"] and r["align"] == "right" for r in layout), layout
    lines = page.locator("#pane .resources-table td.lines").all_inner_texts()
    assert all(re.fullmatch(r"\d+(-\d+)?(, \d+(-\d+)?)*", t.strip()) for t in lines), lines


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
    kernel_picker_says_kernels_and_configs(picker)
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
    # nothing opens beside the error: the program's first op failed, so Dynamo has no graph so far;
    # never the source (the editor's text again, every line tinted in both), the worker's log of
    # PyTorch's tracebacks, nor the frame's bytecode (a failed frame has only its original bytecode,
    # which says nothing of the error). The error box is the point; the pane says so in one line
    # and no editor line is tinted but the error's
    assert page.get_attribute("#results .error-box", "data-open-stage") == ""
    assert page.get_attribute("#results .status .state", "data-open-stage") == ""
    hint = page.locator("#pane .hint.after-error")
    hint.wait_for()
    assert hint.inner_text().startswith("The job failed: the error above says why, and nothing opens beside it")
    assert page.locator("#pane .artifact").count() == 0 and box.is_visible()
    tints = page.evaluate("() => Array.from(document.querySelectorAll('.CodeMirror-linebackground'))"
                          ".map(e => e.className)")
    assert all("error-line" in t for t in tints), tints
    # the bytecode stage says it holds the original bytecode only, not the code Dynamo generated
    job_id = page.get_attribute("#job-bar", "data-job")
    bytecode = page.request.get(f"/j/{job_id}/stage/dynamo.bytecode%3A0%2F0").text()
    assert "Only the frame&#39;s original bytecode" in bytecode and "original only" in bytecode
    # the program printed nothing: no empty "Program output" tab is offered (the error says what
    # happened); the stage's own address still says it printed nothing
    assert "run.stdout" not in tab_keys(page) and not page.locator("#results .stage-tabs", has_text="Program output")\
        .count()
    assert "The program printed nothing." in page.request.get(f"/j/{job_id}/stage/run.stdout").text()
    set_editor(page, SHAPE_MISMATCH)  # leave the editor as the next size's test finds it


DOT_ON_VECTORS = '''import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)
    c = tl.dot(a, a)
    tl.store(out_ptr + offs, c)


x = torch.randn(16, device="cuda")
out = torch.empty(16, device="cuda")
k[(1,)](x, out, BLOCK=16)
'''


def test_a_triton_compile_error_leads_with_its_cause_beside_something_to_read(watched):
    """Triton's CompilationError puts its cause after the location and the source excerpt: the
    headline is that cause, at the user's line; nothing of the job has anything to read, so no
    stage opens beside it (not the empty Launches `[]`, which is no tab either, nor the empty
    output) and the pane says so."""
    page = watched.page
    compile_in_page(page, "triton", DOT_ON_VECTORS)
    point = page.locator("#results .error-box .error-point")
    assert "input and other must have equal ranks >= 2" in point.inner_text(), point.inner_text()
    assert "at line 10" in page.inner_text("#results .error-box")
    assert not point.inner_text().rstrip().endswith(":"), point.inner_text()
    page.wait_for_function("() => document.querySelector('#pane').innerText.includes('nothing opens beside it')")
    assert page.locator("#pane .artifact").count() == 0
    assert "triton.launches" not in tab_keys(page)


def test_the_timings_say_each_figure_in_words_with_its_unit(watched):
    """The Timings tab of a PyTorch job: which side is faster in words (a slower compiled call
    flagged), each figure labelled with what it measures and its unit, medians with their spread,
    no raw key of the timings record, and no heading without something under it."""
    page = watched.page
    open_lesson(page, GRAPH_BREAK)
    open_stage(page, "timings")
    view = page.locator("#pane .timings-view")
    text = view.inner_text()
    verdict = view.locator(".verdict")
    assert verdict.is_visible() and re.match(r"compiled \d+\.\d+× (faster|slower) than eager|compiled and eager "
                                             r"within noise \([\d.]+ [mµ]?s against [\d.]+ [mµ]?s per call",
                                             verdict.inner_text()), verdict.inner_text()
    if "slower" in verdict.inner_text():
        flagged = view.locator(".verdict.slower b")
        assert flagged.is_visible() and flagged.evaluate("b => getComputedStyle(b).color") != \
            view.evaluate("v => getComputedStyle(v).color")
    assert re.search(r"eager, time per call\s+median [\d.]+ ms per call, spread ± [\d.]+ ms", text), text
    assert re.search(r"measured peak memory of the job's process\s+[\d.,]+ MiB", text), text
    assert re.search(r"compiled against eager\s+largest absolute error", text), text
    for raw in ("eager_iqr_ms", "measured_peak_bytes", "float64_reference", "worker_device", "speedup", "_ms "):
        assert raw not in text, raw
    empty = view.evaluate("""v => Array.from(v.querySelectorAll('h3, h4')).filter(h => {
        const next = h.nextElementSibling; return !next || /^H[34]$/.test(next.tagName); }).map(h => h.textContent)""")
    assert empty == [], empty


def _dark(colour: str) -> bool:
    """An rgb()/rgba() colour as dark as a dark theme's panel (luma under 0.3; white is 1)."""
    r, g, b = (float(v) / 255 for v in re.findall(r"[\d.]+", colour)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.3


DRAWN = """(sel) => Array.from(document.querySelectorAll(sel)).map(svg => {
    const text = svg.querySelector('text:not(.box-label)');
    return {background: getComputedStyle(svg).backgroundColor,
            text: text ? getComputedStyle(text).fill : null}; })"""


def test_drawn_viewers_follow_the_dark_theme(watched):
    """In the dark theme the timing bars, the profile timeline, the memory chart, the schedule and
    the sharding meshes are drawn on the dark panel with light words, not as white cards."""
    page = watched.page
    page.emulate_media(color_scheme="dark")
    open_lesson(page, GRAPH_BREAK)
    seen = {}
    for key, selector in (("timings", "#pane .timings-view svg.bars"), ("run.kernels", "#pane svg.profile-timeline")):
        open_stage(page, key)
        seen[key] = page.evaluate(DRAWN, selector)
    open_lesson(page, lessons.by_slug(lessons.load(), "collective-schedule"))
    for key, selector in (("xla.memory", "#pane svg.memory-chart"), ("xla.schedule", "#pane svg.timeline"),
                          ("xla.sharding", "#pane svg.mesh-array, #pane svg.mesh-devices")):
        open_stage(page, key)
        seen[key] = page.evaluate(DRAWN, selector)
    for key, drawings in seen.items():
        assert drawings, f"{key}: nothing drawn"
        for d in drawings:
            assert _dark(d["background"]), (key, d)
            assert d["text"] is None or not _dark(d["text"]), (key, d)
    page.emulate_media(color_scheme="light")


def test_a_jax_job_opens_on_its_hlo_with_the_file_name_tables_folded(watched):
    """A JAX job opens on its optimized HLO; XLA's stack-frame tables (FileNames ... StackFrames,
    dozens of lines of paths) are folded under one line that says what they are, one click away."""
    page = watched.page
    compile_in_page(page, "jax")
    page.wait_for_selector('#pane .artifact[data-key="xla.optimized"]')
    fold = page.locator("#pane details.hlo-metadata")
    assert fold.count() == 1 and fold.get_attribute("open") is None
    summary = fold.locator("summary")
    assert summary.is_visible() and "stack-frame tables (FileNames" in summary.inner_text()
    file_names = page.locator("#pane .ln", has_text=re.compile(r"^\d+FileNames$"))
    assert file_names.count() == 1 and not file_names.is_visible()
    # what is on the first screen is the module: its header, the fold, then computations
    visible = page.evaluate("""() => Array.from(document.querySelectorAll('#pane .ln')).filter(l =>
        l.checkVisibility() && l.getBoundingClientRect().top < innerHeight)
        .map(l => l.querySelector('.tx').textContent)""")
    assert visible[0].startswith("HloModule") and not any('"/tmp/' in line for line in visible), visible
    summary.click()
    assert file_names.is_visible()  # the text is all there


def test_helion_stages_name_the_generated_module_and_ptx_notes_are_sentences(watched):
    """Helion's kernels are Triton modules Helion has PyTorch's code cache write to files named by
    a hash; the job loads each from a file named after the user's file and kernel, which the PTX
    names. The stage says beside the text that the file is the code Helion generated for the
    user's kernel, with a link to it; and the PTX stage's note is a
    sentence a newcomer can read. At 800 px every notice on the PTX and SASS panes is one line,
    the rest folded under it (a <details> Tab reaches, its focus drawn), opened on Enter."""
    from compiler.helion.pipeline import EXAMPLE
    page = watched.page
    compile_in_page(page, "helion", "# Helion's generated module, named\n" + EXAMPLE)
    open_stage(page, "triton.ptx:_helion_matmul")
    legend = page.locator("#pane .file-name")
    assert legend.count() == 1 and legend.is_visible()
    assert "the Triton code Helion generated for your kernel matmul" in legend.inner_text()
    named = legend.locator("summary code").get_attribute("title").rsplit("/", 1)[-1]
    body = page.inner_text("#pane .artifact-body")
    # the module's file is named after the user's file and kernel (the eighth walk read a hash),
    # and is the name the compiler's own text carries
    assert named == "kernels.helion.matmul.py" and f"{named}:" in body
    note = page.locator("#pane .artifact > details.note > summary, #pane .artifact > p.note:not(.file-name)")
    note = note.first.inner_text()
    assert re.match(r"[A-Z].*\.$", note) and "inside inline asm the .loc" not in note, note
    page.set_viewport_size({"width": 800, "height": 900})
    for key in ("triton.ptx:_helion_matmul", "triton.sass:_helion_matmul"):
        open_stage(page, key)
        notices_are_one_line(page)
    page.set_viewport_size({"width": 1400, "height": 900})
    open_stage(page, "triton.ptx:_helion_matmul")
    legend = page.locator("#pane .file-name")
    legend.locator("a").click()
    page.wait_for_selector('#pane .artifact[data-key="helion.triton_code:matmul"]')
    assert "def _helion_matmul(" in page.inner_text("#pane .artifact-body")


# Every control of the top bar: what a newcomer can see and press there.
BAR_CONTROLS = """() => Array.from(document.querySelectorAll(
    '.topbar a, .topbar button, .topbar select, .topbar input, .topbar summary'))
    .filter(e => e.checkVisibility() && !e.closest('#options')).map(e => {
      const r = e.getBoundingClientRect(), s = getComputedStyle(e);
      const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
      let text = 0;
      if (e.tagName === 'SELECT') {  // the width the option it shows needs, in its own font
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = s.font;
        text = ctx.measureText(e.options[e.selectedIndex].text).width;
      }
      return {name: e.id || e.textContent.trim().slice(0, 20), tag: e.tagName, left: r.left, right: r.right,
              chip: e.matches('#option-chips .chip'),
              top: r.top, bottom: r.bottom,  // (a control that takes no pointer, one disabled, is seen through)
              covered: s.pointerEvents !== 'none' && !(hit && (hit === e || e.contains(hit))),
              text: text, inner: e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight),
              cut: e.tagName === 'INPUT' && e.scrollWidth > e.clientWidth + 1}; })"""


@pytest.mark.parametrize("slug", ["graph-break", "fsdp2-training"])
def test_the_top_bar_is_one_row_wide_and_two_narrow_with_every_control_whole(sized, slug):
    """At 1500x950 the top bar is one row; at 800 px it is two, and no control is cut, covered or off
    the window: each inside the window, the one found at its middle, none overlapping another, each
    picker as wide as the text it shows (the toolchain's versions whole), the permalink whole. On a
    lesson's permalink (the permalink box shown), one with options changed too (two chips)."""
    page, size = sized
    open_lesson(page, lessons.by_slug(lessons.load(), slug))
    assert page.locator("#option-chips .chip").count() == (2 if slug == "fsdp2-training" else 0)
    top_bar_is_whole(page, size)


def test_many_changed_options_fold_into_one_chip_and_the_top_bar_keeps_its_rows(sized):
    """Options changed, one a long inductor_config: the bar keeps its row at 1500 px and its two at
    800 px, every control whole, and the chips that do not fit beside the options take one row of
    their own under them, where each is read by name (the fifth and sixth walks found only "+2
    changed" and "+3 changed"); a long value is cut, said whole on hover. Chips that do not fit
    that row either are one "+N changed" chip that opens the menu, each hidden one named on its
    hover."""
    page, size = sized
    open_lesson(page, GRAPH_BREAK)
    page.click(".options-menu summary")
    page.select_option("#opt-mode", "max-autotune")
    page.check("#opt-training")
    config = '{"max_autotune_gemm_backends": "TRITON,ATEN", "coordinate_descent_tuning": true}'
    page.fill("#opt-inductor_config", config)
    page.select_option("#opt-dynamic", "true")
    page.keyboard.press("Escape")
    top_bar_is_whole(page, size)
    chips = page.locator("#option-chips .chip:visible")
    said = "\n".join(chips.evaluate_all("cs => cs.map(c => c.title)"))
    for name in ("mode = max-autotune", "training", "dynamic = true", f"inductor_config = {config}"):
        assert name in said, (name, said)
    for n in range(chips.count()):  # no chip wider than its room: a long value is cut at its end
        assert chips.nth(n).bounding_box()["width"] <= 16 * 11 + 14
    more = page.locator("#option-chips .chip.more")
    # the four fit one row of their own, under the bar's, at both sizes: each read by name
    assert chips.count() == 4 and not more.is_visible(), said
    boxes = [chips.nth(n).bounding_box() for n in range(4)]
    compile_button = page.locator("#compile").bounding_box()
    assert len({round(b["y"]) for b in boxes}) == 1 and boxes[0]["y"] >= compile_button["y"] + \
        compile_button["height"], (boxes, compile_button)
    if more.count() and more.is_visible():
        assert re.fullmatch(r"\+\d+ changed", more.inner_text())
        more.click()
        assert page.locator(".options-menu").get_attribute("open") is not None
        page.keyboard.press("Escape")


def top_bar_is_whole(page, size: str) -> None:
    """One row at 1500 px, two at 800 px; every control inside the bar and the window, uncovered,
    uncut, none over another."""
    width = page.viewport_size["width"]
    bar = page.locator(".topbar").bounding_box()
    controls = page.evaluate(BAR_CONTROLS)
    names = {c["name"] for c in controls}
    assert {"language", "options", "lesson-menu", "compile", "share", "share-url"} <= names, names
    for c in controls:
        assert 0 <= c["left"] and c["right"] <= width, c
        assert bar["y"] <= c["top"] and c["bottom"] <= bar["y"] + bar["height"], (c, bar)
        assert not c["covered"] and not c["cut"], c
        if c["tag"] == "SELECT":
            assert c["inner"] >= c["text"], c  # the option it shows is not cut off
    for a in controls:
        for b in controls:
            if a is not b and a["left"] < b["left"]:
                assert a["right"] <= b["left"] or a["bottom"] <= b["top"] or b["bottom"] <= a["top"], (a, b)
    rows = {round(c["top"] + (c["bottom"] - c["top"]) / 2) // 20 for c in controls if not c["chip"]}
    assert len(rows) == (1 if size == "wide" else 2), (rows, controls)
    # the changed options' chips sit beside the options, or in one row of their own under the bar's
    chips = [c for c in controls if c["chip"]]
    under = chips and min(c["top"] for c in chips) >= max(c["bottom"] for c in controls if not c["chip"])
    assert len({round(c["top"]) for c in chips}) <= 1, chips
    assert bar["height"] < (48 if size == "wide" else 80) + (24 if under else 0), bar


def test_the_fx_graph_drawing_reads_every_name_whole(watched):
    """The FX graph drawn by Graphviz: each node's lines (name, target, type) read whole, the
    underscores of torch._C._nn.linear included: no line's box runs into the next line's (an
    underscore set there read as a gap), and every line inside its node's box."""
    page = watched.page
    open_lesson(page, GRAPH_BREAK)
    open_stage(page, next(k for k in tab_keys(page) if k.startswith("dynamo.fx_graph_drawing:")))
    nodes = page.evaluate("""() => Array.from(document.querySelectorAll('#pane .graph-view g.node')).map(g => {
        const box = g.querySelector('polygon, ellipse, path').getBoundingClientRect();
        return {box: {left: box.left, top: box.top, right: box.right, bottom: box.bottom},
                lines: Array.from(g.querySelectorAll('text')).map(t => { const r = t.getBoundingClientRect();
                  return {text: t.textContent, left: r.left, top: r.top, right: r.right, bottom: r.bottom}; })}; })""")
    lines = [line["text"] for node in nodes for line in node["lines"]]
    assert "torch._C._nn.linear" in lines, lines
    for node in nodes:
        for above, below in zip(node["lines"], node["lines"][1:]):
            assert above["bottom"] <= below["top"], (above, below)
        for line in node["lines"]:
            assert node["box"]["left"] <= line["left"] and line["right"] <= node["box"]["right"], (line, node["box"])
            assert node["box"]["top"] <= line["top"] and line["bottom"] <= node["box"]["bottom"], (line, node["box"])


def test_the_profile_names_each_compiled_graph_in_words(watched):
    """The profile of one compiled call names each compiled graph's call by its compile id and the
    user's function, not by the hash the profiler gives it (that is on hover only)."""
    page = watched.page
    open_lesson(page, GRAPH_BREAK)
    open_stage(page, "run.kernels")
    table = page.locator("#pane table.profile-table")
    text = table.inner_text()
    assert "CompiledFxGraph" not in text, text
    labels = page.locator("#pane table.profile-table .profile-label")
    assert labels.count() >= 2 and labels.first.is_visible()
    words = labels.all_inner_texts()
    assert any(re.fullmatch(r"compiled graph \[0/0(_1)?\](, backward)?: forward\(\), line \d+", w)
               for w in words), words
    hover = labels.evaluate_all("ls => ls.map(l => l.title)")
    assert all(re.search(r"## Call CompiledFxGraph \w+ ##", t) for t in hover), hover


def test_gluon_kernels_are_under_their_own_language(watched):
    """Gluon's kernel stages and their table are under a GLUON heading (as CuTe's are under CuTe's),
    not Triton's: the user wrote Gluon."""
    page = watched.page
    open_lesson(page, lessons.by_slug(lessons.load(), "gluon-layouts"))
    headings = page.locator("#results .stage-tabs .group-name").all_inner_texts()
    group = page.locator('#results .stage-tabs .group:has([data-key^="triton.ptx:"], option[value^="triton.ptx:"])')
    assert group.locator(".group-name").inner_text() == "GLUON" and group.locator(".group-name").is_visible()
    assert "TRITON" not in headings, headings
    table = '#results .stage-tabs .group:has([data-key="kernels.resources"], option[value="kernels.resources"])'
    assert page.locator(table + " .group-name").inner_text() == "GLUON"


def test_one_triton_kernel_says_its_name_once_and_its_figures_with_no_stray_separator(sized):
    """One Triton kernel: its name said once before its tabs, each tab short ("TTIR", "PTX"), so the
    stage bar stays a few rows; the job bar's figures (no compile phase in a Triton job) start with
    a figure, not with a separator."""
    page, size = sized
    open_lesson(page, lessons.by_slug(lessons.load(), "triton-softmax-layouts"))
    group = page.locator('#results .stage-tabs .group:has([role=tab][data-key^="triton.ptx:"])')
    kernel = group.locator("[role=tab][data-key^='triton.ptx:']").get_attribute("data-key").split(":", 1)[1]
    assert group.locator(".kernel-select").count() == 0
    name = group.locator(".kernel-name")
    assert name.is_visible() and name.get_attribute("title") == kernel
    tabs = group.locator("[role=tab]").all_inner_texts()
    assert tabs and not any(kernel in t for t in tabs), tabs
    assert page.locator("#results .stage-tabs").bounding_box()["height"] < BAR_HEIGHT
    summary = page.locator("#results .timings summary").inner_text()
    assert not re.match(r"^\W*·", summary) and "the whole job" in summary, summary


def test_drawings_fit_their_pane_with_their_labels_readable(sized):
    """The profile timeline and XLA's schedule fit their pane's width (none scrolls sideways, their
    end in sight), their words still at a readable size, a label cut short whole on hover."""
    page, size = sized

    def fits(selector: str) -> None:
        pane = page.locator("#pane").bounding_box()
        svg = page.locator(selector).first
        box = svg.bounding_box()
        assert box["x"] >= pane["x"] and box["x"] + box["width"] <= pane["x"] + pane["width"] + 1, (box, pane)
        last = svg.locator("text").last.bounding_box()
        assert last["x"] + last["width"] <= pane["x"] + pane["width"] + 1, (last, pane)
        smallest = svg.evaluate("s => Math.min(...Array.from(s.querySelectorAll('text:not(.box-label)'))"
                                ".map(t => t.getBoundingClientRect().height))")
        assert smallest >= 9, smallest  # about 8 px text and taller: readable
        assert page.locator("#pane").evaluate("p => p.scrollWidth - p.clientWidth") <= 1
        cut = svg.evaluate("s => Array.from(s.querySelectorAll('text:not(.box-label)')).filter(t => "
                           "t.textContent.endsWith('…')).map(t => !!t.parentElement.querySelector('title'))")
        assert all(cut), "a label cut short says itself whole on hover"
    open_lesson(page, GRAPH_BREAK)
    open_stage(page, "run.kernels")
    fits("#pane svg.profile-timeline")
    open_lesson(page, lessons.by_slug(lessons.load(), "collective-schedule"))
    open_stage(page, "xla.schedule")
    fits("#pane svg.timeline")

"""The teaching pages in a real browser (Debian's Chromium through Playwright, the strict CSP, any
console error or CSP violation failing the test): the examples gallery opens every lesson at its
first stage, a comparison permalink, a stage+line permalink, three resizable panes, the dark theme,
embed mode, and source links that are not shown by colour alone.

The server is a real `irscope serve` on the store the session's `lesson_jobs` fixture compiled every
lesson into, so opening a lesson is answered from the store; the compiles are checked in
tests/test_examples.py, the pages here. The browser, page and CSP fixtures are tests/browser.py's.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from app import lessons
from tests.browser import BROWSER_MARKS, open_stage

LESSONS = lessons.load()

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def server_data(lesson_jobs):
    """tests/browser.py's `server` fixture serves this directory: the lessons' store."""
    return Path(lesson_jobs.data_dir)


def _lesson(slug: str) -> lessons.Lesson:
    return lessons.by_slug(LESSONS, slug)


def _open_key(page) -> str:
    return page.get_attribute("#pane .artifact", "data-key")


def _is_stage(key: str, wanted: str) -> bool:
    return key == wanted or key.startswith(wanted + ":")


def wait_open(page, wanted: str) -> str:
    """Wait until #pane shows the stage `wanted` (a key, or one without its qualifier)."""
    page.wait_for_function("""(w) => { const a = document.querySelector('#pane .artifact');
        return a && (a.dataset.key === w || a.dataset.key.startsWith(w + ':')); }""", arg=wanted)
    return _open_key(page)


def test_gallery_opens_every_lesson_at_its_first_stage(watched, shots):
    page = watched.page
    page.goto("/examples")
    assert page.locator("li.lesson").count() == len(LESSONS) >= 14
    assert page.locator("h1").inner_text() == f"Examples: {len(LESSONS)} lessons"
    page.screenshot(path=str(shots / "gallery.png"), full_page=False)
    for n, lesson in enumerate(LESSONS):
        if n == 0:  # the first from the gallery itself, by its link
            page.click(f'#lesson-{lesson.slug} a.open-lesson')
        elif n == 1:  # the second from the editor's menu
            page.goto("/")
            page.select_option("#lesson-menu", f"/examples/{lesson.slug}")
        else:
            page.goto(f"/examples/{lesson.slug}")
        page.wait_for_url(re.compile(r".*/z/\w+#stage="))
        key = wait_open(page, lesson.first_stage)
        # the address names the stage by its whole key once it is open, and its tab says it is open
        page.wait_for_function("(k) => decodeURIComponent(location.hash) === '#stage=' + k", arg=key)
        tab = page.locator(f'#results [role=tab][data-key="{key}"]')
        if tab.count():
            assert tab.get_attribute("aria-selected") == "true"
        else:
            assert page.locator("#results .stage-select.active").input_value() == key
        assert page.locator(".lesson-note #lesson-title").inner_text() == lesson.title
        assert page.locator("#results .status .state").get_attribute("data-status") == "done"
        assert page.locator("#pane .artifact-body").inner_text().strip(), lesson.slug
    print(f"opened {len(LESSONS)} lessons")


def test_stage_and_line_permalink_scrolls_to_and_marks_the_line(watched):
    page = watched.page
    lesson = _lesson("pointwise-fusion")
    page.goto(f"/examples/{lesson.slug}")
    page.wait_for_url(re.compile(r".*/z/\w+#stage="))
    permalink = page.url.split("#")[0]
    key = wait_open(page, "inductor.output_code")
    lines = page.locator("#pane pre.code .ln").count()
    line = lines - 5  # far down: the pane has to scroll to show it
    page.goto(f"{permalink}#stage={quote(key, safe='')}&line={line}")
    page.reload()  # a fresh load of the link, not a hash change
    wait_open(page, key)
    marked = page.locator("#pane pre.code .ln.picked")
    marked.wait_for()
    assert marked.get_attribute("data-line") == str(line) and marked.get_attribute("aria-current") == "location"
    assert marked.evaluate("""(el) => { const r = el.getBoundingClientRect(), p = el.closest('.results-pane')
        .getBoundingClientRect(); return r.top >= p.top && r.bottom <= p.bottom; }"""), "the marked line is not in view"
    # clicking another line's number picks it and writes the address; Share passes it on
    other = page.locator('#pane pre.code .ln[data-line="3"] .no')
    other.click()
    page.wait_for_function("() => location.hash.endsWith('&line=3')")
    assert page.locator("#pane .ln.picked").get_attribute("data-line") == "3"
    page.click("#share")
    # a permalink's page shows its short link already: wait for the one Share made
    page.wait_for_function("() => document.getElementById('share-url').value.includes('#stage=')")
    shared = page.input_value("#share-url")
    assert shared.endswith(f"#stage={quote(key, safe='')}&line=3"), shared
    # a lesson note's link opens the stage it names
    page.goto("/examples/graph-break")
    wait_open(page, "dynamo.graph_breaks")
    page.click('#results [role=tab][data-key="source"]')
    wait_open(page, "source")
    page.click(".lesson-note a.lesson-stage")
    wait_open(page, "dynamo.graph_breaks")


def test_comparison_permalink_diffs_any_stage_pair_and_keeps_it_in_the_address(watched, shots):
    page = watched.page
    lesson = _lesson("triton-matmul-autotune")
    page.goto(f"/examples/{lesson.slug}/compare")
    page.wait_for_url(re.compile(r".*/c/\w+$"))
    comparison = page.url
    page.wait_for_selector("#compare-pane .compare-diff")
    a_key = page.input_value("#stage-a")
    assert a_key.startswith(lesson.compare.stage) and page.input_value("#stage-b") == a_key
    shown = page.inner_text("#compare-pane")
    assert f"--- A: {a_key}" in shown and f"+++ B: {a_key}" in shown
    # the requests' difference and the timings side by side
    assert "cuda:sm_80" in page.inner_text(".compare-head") and "cuda:sm_90" in page.inner_text(".compare-head")
    # the option as asked and the target compiled for are two rows of two names (the eighth walk
    # read two rows called "target")
    heads = page.locator(".compare-head tbody th").all_inner_texts()
    assert len(heads) == len(set(heads)) and {"option target", "compiled for"} <= set(heads), heads
    assert page.locator(".compare-timings thead th").all_inner_texts() == ["measured", "A", "B", "B / A"]
    page.screenshot(path=str(shots / "compare.png"), full_page=False)
    # another pair: the PTX of A against the PTX of B; then side by side, with the keyboard
    ptx = next(v for v in page.eval_on_selector_all("#stage-a option", "os => os.map(o => o.value)")
               if v.startswith("triton.ptx:"))
    page.select_option("#stage-a", ptx)
    page.select_option("#stage-b", ptx)
    page.wait_for_function("(k) => { const d = document.querySelector('#compare-pane .compare-diff');"
                           " return d && d.dataset.a === k && d.dataset.b === k; }", arg=ptx)
    assert ".target sm_80" in page.inner_text("#compare-pane") and ".target sm_90a" in page.inner_text("#compare-pane")
    page.focus("#view-diff")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#compare-pane .compare-side")
    assert page.evaluate("() => document.activeElement.id") == "view-side"
    assert page.get_attribute("#view-side", "aria-selected") == "true"
    assert page.locator("#compare-pane .compare-side .artifact").count() == 2
    page.wait_for_function("() => location.hash.includes('view=side')")
    # the address is the permalink of this view: a fresh load shows the same pair, side by side
    link = page.url
    page.goto("/examples")
    page.goto(link)
    page.wait_for_selector("#compare-pane .compare-side")
    assert page.input_value("#stage-a") == ptx and page.input_value("#stage-b") == ptx
    assert page.url.split("#")[0] == comparison


def test_compare_with_from_the_editor_reaches_the_same_comparison(watched):
    """"compare with…" on a lesson's page, B's option set to the lesson variant's: the stored jobs
    answer, and the comparison is the lesson's own (its id comes from the two requests)."""
    page = watched.page
    lesson = _lesson("reduction-split")
    page.goto(f"/examples/{lesson.slug}/compare")
    page.wait_for_url(re.compile(r".*/c/\w+$"))
    lesson_comparison = page.url
    page.goto(f"/examples/{lesson.slug}")
    wait_open(page, lesson.first_stage)
    page.click("#compare-link")
    page.wait_for_selector("#compare-new-form")
    for name, value in lesson.compare.request.options.items():
        if value != lesson.request.options[name]:
            page.select_option(f"#opt-{name}", str(value))
    page.click("#compare-submit")
    page.wait_for_url(re.compile(r".*/c/\w+"))
    assert page.url.split("#")[0] == lesson_comparison
    page.wait_for_selector("#compare-pane .compare-diff")


def test_three_panes_side_by_side_resize_by_mouse_and_keyboard(watched):
    page = watched.page
    page.goto("/examples/pointwise-fusion")
    wait_open(page, "inductor.output_code")
    for key in ("dynamo.fx_graph:0/0", "inductor.post_grad_graph:0/0"):
        page.click("#pane .artifact .to-side")
        page.wait_for_function("(n) => document.querySelectorAll('.pane.side .artifact').length === n",
                               arg=1 if key.startswith("dynamo") else 2)
        open_stage(page, key)  # a tab, or an entry of its group's list
        wait_open(page, key)
    boxes = [page.locator(p).bounding_box() for p in ("#pane", "#pane2", "#pane3")]
    assert all(b and b["width"] > 100 for b in boxes), boxes
    assert boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"] and boxes[1]["x"] + boxes[1]["width"] <= boxes[2]["x"]
    assert page.get_attribute("#pane2 .artifact", "data-key") == "inductor.output_code:0/0"
    assert page.get_attribute("#pane3 .artifact", "data-key") == "dynamo.fx_graph:0/0"
    assert "kept beside" in page.get_attribute("#pane3", "aria-label")
    # drag the separator between the open stage and the first kept one
    splitter = page.locator("#pane-row > .splitter").first
    before = page.locator("#pane").bounding_box()["width"]
    handle = splitter.bounding_box()
    page.mouse.move(handle["x"] + 3, handle["y"] + 20)
    page.mouse.down()
    page.mouse.move(handle["x"] - 80, handle["y"] + 20, steps=5)
    page.mouse.up()
    after = page.locator("#pane").bounding_box()["width"]
    assert abs((before - after) - 83) <= 4, (before, after)
    # and with the keyboard: a WAI-ARIA separator
    splitter.focus()
    assert splitter.get_attribute("role") == "separator"
    page.keyboard.press("ArrowRight")
    assert abs(page.locator("#pane").bounding_box()["width"] - (after + 24)) <= 2
    assert 10 <= int(splitter.get_attribute("aria-valuenow")) <= 90
    # the editor's separator too
    editor_splitter = page.locator("#panes > .splitter")
    width = page.locator("#editor-pane").bounding_box()["width"]
    editor_splitter.focus()
    page.keyboard.press("Shift+ArrowLeft")
    assert abs(page.locator("#editor-pane").bounding_box()["width"] - (width - 120)) <= 2
    # closing the first kept stage moves the second into its place
    page.click("#pane2 .close-pane")
    assert page.get_attribute("#pane2 .artifact", "data-key") == "dynamo.fx_graph:0/0"
    assert page.locator("#pane3 .artifact").count() == 0 and not page.locator("#pane3").is_visible()
    assert page.evaluate("() => document.activeElement.id") == "pane"


def test_dark_theme_follows_the_system(watched, shots):
    page = watched.page
    page.emulate_media(color_scheme="dark")
    page.goto("/examples/graph-break")
    wait_open(page, "dynamo.graph_breaks")
    open_stage(page, "dynamo.fx_graph:1/0")
    colours = page.evaluate("""() => {
        const style = (sel) => getComputedStyle(document.querySelector(sel));
        const keyword = document.querySelector('#pane .highlight .k, #pane .highlight .kn');
        return {body: style('body').backgroundColor, text: style('body').color,
                editor: style('.CodeMirror').backgroundColor,
                keyword: keyword ? getComputedStyle(keyword).color : null}; }""")
    assert colours["body"] == "rgb(13, 17, 23)" and colours["editor"] == "rgb(13, 17, 23)", colours
    assert colours["text"] == "rgb(230, 237, 243)"
    assert colours["keyword"] == "rgb(255, 123, 114)", colours  # github-dark's keyword, from pygments-dark.css
    assert not page.evaluate("() => matchMedia('not all and (prefers-color-scheme: dark)').matches")
    page.screenshot(path=str(shots / "lesson-dark.png"), full_page=False)
    # a Graphviz drawing is drawn dark too (inverted, its hues kept), not a white block
    open_stage(page, "dynamo.fx_graph_drawing:1/0")
    assert "invert" in page.evaluate("() => getComputedStyle(document.querySelector('#pane .graph-view svg')).filter")
    page.emulate_media(color_scheme="light")
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"


def test_embed_mode_is_compact_and_read_only(watched):
    page = watched.page
    page.goto("/examples/guards?embed=1")
    page.wait_for_url(re.compile(r".*/z/\w+\?embed=1#stage="))
    wait_open(page, "dynamo.guards")
    assert not page.locator(".topbar").is_visible()
    assert page.locator(".embed-bar").is_visible() and "open in irscope" in page.inner_text(".embed-bar")
    assert page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getOption('readOnly')") is True
    before = page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getValue()")
    page.click(".CodeMirror-code")
    page.keyboard.type("typed")
    page.keyboard.press("Control+Enter")
    assert page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getValue()") == before
    assert page.locator("#spinner.htmx-request, form.htmx-request").count() == 0  # Ctrl+Enter compiled nothing
    # framable (by the setting's origins), unlike every other page
    headers = page.request.get(page.url.split("#")[0]).headers
    assert "frame-ancestors *" in headers["content-security-policy"] and "x-frame-options" not in headers
    assert page.request.get("/examples").headers["x-frame-options"] == "DENY"


def test_source_links_are_marked_by_text_not_by_colour_alone(watched):
    page = watched.page
    page.goto("/examples/pointwise-fusion")
    wait_open(page, "inductor.output_code")
    page.click('#results [role=tab][data-key="kernel:cpp_fused_add_cos_mul_relu_sin_0"]')
    wait_open(page, "kernel:cpp_fused_add_cos_mul_relu_sin_0")
    linked = page.locator("#pane .ln[data-src]")
    assert linked.count() > 0
    first = linked.first
    source = first.get_attribute("data-src")
    ref = first.locator(".src-ref")
    assert ref.inner_text().endswith(source) and "from source line" in ref.inner_text()  # read out in full
    assert ref.get_attribute("title").startswith("from source line")
    assert ref.evaluate("(el) => getComputedStyle(el).textDecorationLine") == "underline"
    # a line without a source has an empty column, so the code stays aligned
    unlinked = page.locator("#pane .ln:not([data-src]) .src-ref")
    if unlinked.count():
        assert unlinked.first.inner_text() == ""

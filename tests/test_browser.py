"""The IDE in a real browser: Debian's Chromium driven by Playwright against a real `irscope serve`
process, every page served under a strict Content-Security-Policy (no 'unsafe-inline', no
'unsafe-eval'), every console error and CSP violation failing the test that caused it.

One server serves the whole module (tests/browser.py has the fixtures and helpers); each language's
example is compiled once (the first test that needs it pays, the store answers every later request
for it from its cache). Nothing here waits a fixed time: every wait is for something the page shows.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from app.ide import MAX_TABS_PER_GROUP
from compiler import registry
from compiler.model import Request, Stage
from service.store import Store
from testbed.real_servers import ROOT
from tests.browser import (
    BROWSER_MARKS,
    COMPILED,
    CSP,
    DRAWN_FORMATS,
    JOB_TIMEOUT_MS,
    LANGUAGES,
    compile_in_page,
    editor_text,
    mark_no_reload,
    open_stage,
    raw_stage,
    set_editor,
    status,
    still_same_document,
    tab_keys,
    wait_finished,
)

pytestmark = BROWSER_MARKS

_WATCH_STREAM = """() => {
  window.__stream = {events: []};
  const t0 = performance.now();
  const seen = new Set();
  new MutationObserver(() => {
    const state = document.querySelector('#results .status .state');
    const status = state ? state.dataset.status : null;
    // every stage on offer: a tab, or an entry of the list a group of many stages is
    const tabs = Array.from(document.querySelectorAll(
      '#results .stage-tabs [role=tab], #results .stage-tabs .stage-select option[value]:not([value=""])'));
    for (const tab of tabs) {
      const key = tab.dataset.key || tab.value;
      if (seen.has(key)) continue;
      seen.add(key);
      window.__stream.events.push({key: key, status: status, ms: performance.now() - t0});
      if (key.startsWith('dynamo.fx_graph') && !window.__stream.picked) {
        // the user picks a stage the moment the graph shows: later tabs must leave it open and focused
        const source = document.querySelector('#results .stage-tabs [role=tab][data-key="source"]');
        source.focus(); source.click();
        window.__stream.picked = {status: status, tabs: tabs.length};
      }
    }
    if (status && status !== window.__stream.lastStatus) {
      window.__stream.lastStatus = status;
      window.__stream.events.push({status: status, ms: performance.now() - t0});
    }
  }).observe(document.getElementById('results'), {childList: true, subtree: true, attributes: true});
}"""


def test_dynamo_graph_tab_appears_while_the_job_runs(watched, shots):
    page = watched.page
    # The example, unless this server compiled it already (then the store would answer at once):
    # run first, this test pays the example's one real compile for the whole module.
    source = registry.get("pytorch").example
    if ("pytorch", source) in COMPILED:
        source += f"\n# streamed in the browser test at {time.time_ns()}\n"
    COMPILED.add(("pytorch", source))
    page.goto("/?language=pytorch")
    set_editor(page, source)
    mark_no_reload(page)
    page.evaluate(_WATCH_STREAM)
    page.click("#compile")
    page.wait_for_selector('#results [role=tab][data-key^="dynamo.fx_graph"], '
                           '#results .stage-select option[value^="dynamo.fx_graph"]', state="attached",
                           timeout=JOB_TIMEOUT_MS)
    page.screenshot(path=str(shots / "pytorch-streaming.png"))  # most likely still running; nothing depends on it
    assert wait_finished(page) == "done"
    assert still_same_document(page)
    stream = page.evaluate("() => window.__stream")
    events = stream["events"]
    fx = next(e for e in events if e.get("key", "").startswith("dynamo.fx_graph"))
    done = next(e for e in events if e.get("status") == "done" and "key" not in e)
    assert fx["status"] == "running", events
    assert fx["ms"] < done["ms"]
    # the status line named the phase while the job ran
    assert any(e.get("status") == "running" for e in events)
    # the stage the user picked stayed open and focused while more tabs arrived
    assert stream["picked"]["status"] == "running"
    keys = tab_keys(page)
    assert len(keys) > stream["picked"]["tabs"]
    page.wait_for_selector('#pane .artifact[data-key="source"]')
    assert page.evaluate("() => document.activeElement.dataset.key") == "source"
    assert page.get_attribute("#pane .artifact", "data-key") == "source"
    report = {"first_tab_ms": round(events[0]["ms"]), "fx_graph_tab_ms": round(fx["ms"]),
              "done_ms": round(done["ms"]), "stages": len(keys) - 1,
              "tabs_while_running": sum(1 for e in events if "key" in e and e["status"] == "running")}
    (shots / "streaming.json").write_text(json.dumps(report, indent=1))
    print("streaming:", report)
    # the bar built while the job ran is the bar a reload draws
    page.reload()
    assert tab_keys(page) == keys


def _add_stage(store: Store, job_id: str, position: int, key: str, group: str) -> None:
    text = f"{key}: line one\nline two\n"
    store.add_stage(job_id, position, Stage(key=key, title=key, group=group, format="text", size=len(text)), text)


def test_tabs_grow_in_place_as_stages_reach_the_store(watched, server_data):
    """Stages written to the store by someone else (as a worker on another machine would) reach an
    open job page: the queue position, the phase, new tabs and new list entries, each step waited
    for in the page, while the stage the user opened stays open and keeps the focus."""
    page = watched.page
    store = Store(f"sqlite:///{server_data}/irscope.db")
    stamp = str(time.time_ns())[-8:]
    ahead, job = "ahead" + stamp, "live" + stamp
    for job_id in (ahead, job):
        store.create_job(job_id, "synthetic-" + job_id, Request("pytorch", "x = 1\ny = 2\n", {}), {"irscope": "test"})
    page.goto(f"/j/{job}")
    mark_no_reload(page)
    page.wait_for_selector("#results .status .progress.queue:text('position 2 in the queue (1 ahead)')")
    store.set_running(ahead, "importing torch")
    page.wait_for_selector("#results .status .progress.queue:text('position 1 in the queue (next to start)')")
    store.set_running(job, "importing torch")
    page.wait_for_selector("#results .status .state[data-status=running]")
    page.wait_for_selector("#results .status .progress:text('importing torch')")

    _add_stage(store, job, 0, "source", "Source")
    page.click('#results [role=tab][data-key="source"]')
    page.wait_for_selector('#pane .artifact[data-key="source"]')
    for n in range(2):
        _add_stage(store, job, 1 + n, f"dynamo.graph:{n}", "Dynamo")
    store.set_progress(job, "compiling (Dynamo, AOTAutograd, Inductor)")
    page.wait_for_selector('#results [role=tab][data-key="dynamo.graph:1"]')
    page.wait_for_selector("#results .status .progress:text('compiling (Dynamo, AOTAutograd, Inductor)')")
    assert page.evaluate("() => document.activeElement.dataset.key") == "source"
    assert page.get_attribute("#pane .artifact", "data-key") == "source"

    # a group that grows past MAX_TABS_PER_GROUP stages becomes a list, and the focus goes with its stage
    most = MAX_TABS_PER_GROUP
    for n in range(most):
        _add_stage(store, job, 3 + n, f"kernel.k{n:02d}", "Kernels")
    picked = f"kernel.k{most - 1:02d}"  # the group's last tab
    page.wait_for_selector(f'#results [role=tab][data-key="{picked}"]')
    page.click(f'#results [role=tab][data-key="{picked}"]')
    page.wait_for_selector(f'#pane .artifact[data-key="{picked}"]')
    _add_stage(store, job, 3 + most, f"kernel.k{most:02d}", "Kernels")
    page.wait_for_selector(f"#grp-{job}-kernels-list")
    # the focus moves to the list once htmx has settled the swap (a moment after the list appears)
    page.wait_for_function("(k) => document.activeElement.matches('.stage-select') && "
                           "document.activeElement.value === k", arg=picked, timeout=5000)
    _add_stage(store, job, 4 + most, f"kernel.k{most + 1:02d}", "Kernels")
    page.wait_for_selector(f'#grp-{job}-kernels-list option[value="kernel.k{most + 1:02d}"]', state="attached")
    assert page.inner_text(f"#grp-{job}-kernels-count") == str(most + 2)
    assert page.get_attribute("#pane .artifact", "data-key") == picked
    assert page.evaluate("() => document.activeElement.value") == picked

    store.finish_job(job, None, {"job": {"wall_s": 1.0, "sandbox": "none"}})
    page.wait_for_selector("#results .status .state[data-status=done]")
    page.wait_for_selector('#results [role=tab][data-key="timings"]')
    assert page.locator(f"#poll-{job}[hx-trigger]").count() == 0  # a finished job is asked no more
    assert page.get_attribute("#pane .artifact", "data-key") == picked
    assert still_same_document(page)
    keys = tab_keys(page)
    kernels = [f"kernel.k{n:02d}" for n in range(most + 2)]
    assert keys == ["source", "dynamo.graph:0", "dynamo.graph:1", *kernels, "timings"]
    page.reload()
    assert tab_keys(page) == keys
    store.finish_job(ahead, None, {})


def test_page_runs_under_the_strict_policy_and_violations_are_caught(watched):
    page = watched.page
    response = page.goto("/")
    assert response.headers["content-security-policy"] == CSP
    assert page.evaluate("() => typeof htmx === 'object' && typeof CodeMirror === 'function'")
    assert page.locator(".CodeMirror").count() == 1  # ide.js ran: external scripts are allowed
    assert watched.problems() == []
    # the detector works: an inline style is refused and recorded
    page.evaluate("() => { const s = document.createElement('style'); s.textContent = 'b{}'; "
                  "document.head.appendChild(s); }")
    page.wait_for_function("() => window.__cspViolations.length > 0")
    assert "style-src" in page.evaluate("() => window.__cspViolations[0]")
    page.evaluate("() => { window.__cspViolations = []; }")
    watched.errors.clear()  # the refusal's console error was this test's own doing


@pytest.mark.parametrize("language", LANGUAGES)
def test_example_compiles_and_shows_stages_without_reload(watched, language, shots):
    page = watched.page
    page.goto(f"/?language={language}")
    assert editor_text(page) == registry.get(language).example
    COMPILED.add((language, registry.get(language).example))
    mark_no_reload(page)
    page.click("#compile")
    page.wait_for_selector("#results .status .state")  # the job bar replaced the hint
    assert wait_finished(page) == "done", page.inner_text("#results .job-error")
    assert still_same_document(page), "the page was reloaded"
    job_id = page.get_attribute("#job-bar", "data-job")
    assert page.url.split("#")[0].endswith(f"/j/{job_id}")  # the job's address was pushed, not loaded
    keys = tab_keys(page)
    api = page.request.get(f"/api/jobs/{job_id}").json()
    # every stage the job has with text, once each, plus the Timings summary (an empty one, such as
    # the output of a program that printed nothing, is no tab: app/ide.py _offered)
    assert len(set(keys)) == len(keys)
    assert sorted(keys) == sorted([s["key"] for s in api["stages"] if s["size"]] + ["timings"])
    assert page.locator("#results [role=tablist]").count() == 1
    # the first useful stage opened by itself, and its tab says so
    page.wait_for_selector("#pane .artifact")
    opened = page.get_attribute("#pane .artifact", "data-key")
    assert opened != "source" and opened in keys
    tab = page.locator(f'#results [role=tab][data-key="{opened}"]')
    if tab.count():
        assert tab.get_attribute("aria-selected") == "true"
    else:
        assert page.locator("#results .stage-select.active").input_value() == opened
    page.screenshot(path=str(shots / f"{language}.png"))
    # the bar built while the job ran is the bar a reload draws
    page.reload()
    assert tab_keys(page) == keys


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_stage_opens_with_its_content(watched, language):
    page = watched.page
    job_id = compile_in_page(page, language)
    assert status(page) == "done"
    keys = [k for k in tab_keys(page) if k != "timings"]
    assert len(keys) >= 5
    for key in keys:
        open_stage(page, key)
        stage = raw_stage(page, job_id, key)
        body = page.locator("#pane .artifact-body")
        if stage["format"] in DRAWN_FORMATS:
            assert body.locator("svg, table").count() >= 1, key
        else:
            assert stage["text"], f"{key}: an empty stage is offered (a done job's bar offers none)"
            shown = body.inner_text()
            first = next((line.strip() for line in stage["text"].splitlines() if line.strip()), "")
            assert first[:60] in shown, (key, first[:60], shown[:300])
            # one numbered line per line of the artifact (a final newline may or may not make one)
            count = len(stage["text"].split("\n"))
            lines = page.locator("#pane .artifact-body pre.code .ln").count()
            assert lines in (min(count, 20000), min(count - stage["text"].endswith("\n"), 20000)), key
    open_stage(page, "timings")
    assert page.locator("#pane .timings-view svg, #pane .timings-view table").count() >= 1
    print(f"{language}: opened {len(keys)} stages and the timings")


def test_open_beside_and_hover_links_lines_across_panes(watched):
    page = watched.page
    compile_in_page(page, "pytorch")
    open_stage(page, "inductor.output_code:0/0")
    page.click('#pane .artifact[data-key="inductor.output_code:0/0"] .to-side')
    page.wait_for_selector('#pane2 .artifact[data-key="inductor.output_code:0/0"]')
    open_stage(page, "dynamo.fx_graph:0/0")
    assert page.get_attribute("#pane .artifact", "data-key") == "dynamo.fx_graph:0/0"
    assert page.get_attribute("#pane2 .artifact", "data-key") == "inductor.output_code:0/0"
    # a graph line that came from a source line also present in the output code
    src = page.evaluate("""() => {
        const right = new Set(Array.from(document.querySelectorAll('#pane2 .ln[data-src]')).map(e => e.dataset.src));
        const left = Array.from(document.querySelectorAll('#pane .ln[data-src]')).find(e => right.has(e.dataset.src));
        return left ? left.dataset.src : null; }""")
    assert src is not None, "no source line shared by the FX graph and the output code"
    page.locator(f'#pane .ln[data-src="{src}"]').first.hover()
    for pane in ("#pane", "#pane2"):
        hot = page.eval_on_selector_all(f"{pane} .ln.hot", "els => els.map(e => e.dataset.srcs)")
        assert hot and all(src in srcs.split() for srcs in hot), (pane, src, hot)
    # and the editor lights the same source line
    assert page.evaluate("(n) => document.querySelector('.CodeMirror').CodeMirror.findMarksAt({line: n, ch: 0})"
                         ".some(m => m.className === 'hot-line')", int(src) - 1)


def test_diff_with_previous_pass(watched):
    page = watched.page
    job_id = compile_in_page(page, "hlo")
    api = page.request.get(f"/api/jobs/{job_id}").json()
    # a pass snapshot whose predecessor differs from it (many passes change nothing)
    candidate = None
    for s in api["stages"]:
        if s["format"] != "hlo":
            continue
        stage = raw_stage(page, job_id, s["key"])
        previous = stage["meta"].get("diff_with")
        if previous and raw_stage(page, job_id, previous)["text"] != stage["text"]:
            candidate = (s["key"], previous)
            break
    assert candidate, "no pass snapshot that changed the module"
    key, previous = candidate
    open_stage(page, key)
    page.click('#pane .artifact-head a:text("diff with previous")')
    page.wait_for_selector("#pane .artifact-body pre.code[data-lexer=diff]")
    shown = page.inner_text("#pane .artifact-body")
    assert f"--- {previous}" in shown and f"+++ {key}" in shown
    page.click('#pane .artifact-head a:text("show without diff")')
    page.wait_for_selector("#pane .artifact-body pre.code[data-lexer=hlo]")


def test_share_opens_a_permalink_with_the_same_stages(watched):
    page = watched.page
    job_id = compile_in_page(page, "jax")
    keys = tab_keys(page)
    source = editor_text(page)
    page.click("#share")
    page.wait_for_function("() => document.getElementById('share-url').value.includes('/z/')")
    url = page.input_value("#share-url")
    # the open stage goes along in the address (#stage=<key>)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/z/\w+#stage=[\w.%-]+", url), url
    page.goto(url)
    assert page.get_attribute("#job-bar", "data-job") == job_id
    assert tab_keys(page) == keys and editor_text(page) == source
    assert page.locator("#language").input_value() == "jax"
    page.wait_for_selector("#pane .artifact")  # a stage opens by itself on the permalink page too


def test_back_after_compile_loads_a_working_page(watched):
    page = watched.page
    compile_in_page(page, "stablehlo")
    page.go_back()
    page.wait_for_url("**/?language=stablehlo")
    page.wait_for_selector(".CodeMirror")
    assert page.locator(".CodeMirror").count() == 1
    assert editor_text(page) == registry.get("stablehlo").example
    page.go_forward()
    page.wait_for_url(re.compile(r".*/j/\w+(#.*)?$"))
    page.wait_for_selector("#pane .artifact")
    assert page.locator(".CodeMirror").count() == 1


def test_failing_job_marks_its_error_line_in_the_editor(watched):
    page = watched.page
    example = registry.get("hlo").example
    bad = example.replace("ROOT add = f32[] add(lhs, rhs)", "ROOT add = f32[] add(lhs, rhs")
    line = next(n for n, text in enumerate(bad.splitlines(), start=1) if "add(lhs, rhs" in text)
    compile_in_page(page, "hlo", bad)
    assert status(page) == "failed"
    box = page.inner_text("#results .error-box")
    assert "SyntaxError" in box and f"at line {line}" in box
    info = page.evaluate("(n) => { const i = document.querySelector('.CodeMirror').CodeMirror.lineInfo(n);"
                         " return {bg: i.bgClass || '', gutter: !!(i.gutterMarkers || {})['error-gutter']}; }",
                         line - 1)
    assert "error-line" in info["bg"] and info["gutter"]
    marked = page.evaluate("() => { const cm = document.querySelector('.CodeMirror').CodeMirror; const out = [];"
                           " for (let l = 0; l < cm.lineCount(); l++) {"
                           "   if ((cm.lineInfo(l).bgClass || '').includes('error-line')) out.push(l + 1); }"
                           " return out; }")
    assert marked == [line]
    # the line number in the error box puts the cursor on that line
    page.click("#results .error-box .goto-line")
    assert page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getCursor().line") == line - 1


def test_switching_language_swaps_the_example_and_options(watched):
    page = watched.page
    page.goto("/")
    for language in LANGUAGES:
        page.select_option("#language", language)
        page.wait_for_function("(want) => document.querySelector('.CodeMirror').CodeMirror.getValue() === want",
                               arg=registry.get(language).example)
        names = {o.name for o in registry.get(language).options}
        page.wait_for_function("(names) => names.every(n => document.getElementById('opt-' + n))",
                               arg=sorted(names))
    # a source the user wrote is kept when the language changes
    set_editor(page, "my own code\n")
    page.select_option("#language", "pytorch")
    page.wait_for_selector("#opt-backend", state="attached")
    assert editor_text(page) == "my own code\n"


def test_keyboard_alone_compiles_and_moves_between_stages(watched):
    page = watched.page
    page.goto("/?language=pytorch")
    mark_no_reload(page)
    for _ in range(12):  # Tab through the top bar into the editor
        page.keyboard.press("Tab")
        if page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.hasFocus()"):
            break
    else:
        raise AssertionError("Tab never reached the editor")
    page.keyboard.press("Control+Enter")
    assert wait_finished(page) == "done"
    assert still_same_document(page)
    page.wait_for_selector("#pane .artifact")
    opened = page.get_attribute("#pane .artifact", "data-key")
    # the hint under the editor is stressed while the editor has the focus, and only then: Esc then
    # Tab lands on the toggle beside the hint, and the hint is plain again
    hint = "() => Number(getComputedStyle(document.querySelector('#editor-keys .keys-hint')).fontWeight)"
    assert page.evaluate(hint) >= 600
    page.keyboard.press("Escape")  # leaves the editor (where Tab indents)
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "tab-moves-focus"
    assert page.is_visible("#editor-keys .keys-hint") and page.evaluate(hint) < 600
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("() => !!document.activeElement.closest('#results .stage-tabs')"):
            break
    else:
        raise AssertionError("Tab never reached the stage tabs")
    # the tab bar is one stop, and it lands on the open stage's tab (or the list of its group)
    assert page.evaluate("() => document.activeElement.dataset.key || document.activeElement.value") == opened
    assert page.get_attribute("#pane", "role") == "tabpanel"
    before = opened
    page.keyboard.press("ArrowRight")
    after = page.evaluate("() => document.activeElement.dataset.key || document.activeElement.value")
    assert after != before
    if page.evaluate("() => document.activeElement.getAttribute('role')") == "tab":
        page.wait_for_selector(f'#pane .artifact[data-key="{after}"]')
        assert page.evaluate("() => document.activeElement.getAttribute('aria-selected')") == "true"
    page.keyboard.press("Home")
    first = tab_keys(page)[0]
    page.wait_for_selector(f'#pane .artifact[data-key="{first}"]')
    assert page.evaluate("() => document.activeElement.dataset.key") == first
    page.keyboard.press("ArrowLeft")  # wraps to the end: the Timings tab
    page.wait_for_selector("#pane .timings-view")
    assert page.evaluate("() => document.activeElement.dataset.key") == "timings"
    # quick presses: the pane ends on the stage that has the focus, whatever order loads finish in
    # (a list passed on the way opens nothing)
    page.keyboard.press("Home")
    items = page.evaluate("() => Array.from(document.querySelectorAll('#results .stage-tabs [role=tab], "
                          "#results .stage-tabs .stage-select')).filter(i => !i.hidden).map(i => i.dataset.key || '')")
    fourth_tab = [n for n, key in enumerate(items) if key][3]
    for _ in range(fourth_tab):
        page.keyboard.press("ArrowRight")
    focused = page.evaluate("() => document.activeElement.dataset.key")
    assert focused == items[fourth_tab]
    page.wait_for_selector(f'#pane .artifact[data-key="{focused}"]')
    page.wait_for_load_state("networkidle")
    assert page.get_attribute("#pane .artifact", "data-key") == focused
    # only the focused tab is in the Tab order
    assert page.evaluate("() => Array.from(document.querySelectorAll('#results .stage-tabs [role=tab], "
                         "#results .stage-tabs .stage-select')).filter(e => e.tabIndex === 0).length") == 1


# A training step through a graph break: Dynamo restarts frame 0's analysis at the print (compile id
# 0/0_1) and compiles the rest as frame 1; Inductor compiles a forward and a backward graph of each.
TRAINED_BREAK = Path(ROOT, "tests", "fixtures", "torch", "graph_break_print.py").read_text()


def _compile_training(page, source: str) -> str:
    """The IDE's Compile with the `training` option ticked; the job's id once it ended."""
    page.goto("/?language=pytorch")
    set_editor(page, source)
    page.click(".options-menu summary")
    page.check("#opt-training")
    page.click(".options-menu summary")
    mark_no_reload(page)
    page.click("#compile")
    assert wait_finished(page) == "done", page.inner_text("#results .job-error")
    assert still_same_document(page)
    return page.get_attribute("#job-bar", "data-job")


def _opened(page) -> str:
    page.wait_for_selector("#pane .artifact")
    return page.get_attribute("#pane .artifact", "data-key")


def test_a_training_job_opens_one_stage_live_and_from_the_store_and_names_its_graphs_apart(watched):
    """Issue #39: a run watched live and its repeat answered from the store (and its page drawn
    whole) open the same stage, the one the job's status line names; a training step's forward and
    backward graphs have labels that say which is which; the Compiles index names each compile as
    the tabs do (0/0_1), and every compile id says frame, compile and attempt on hover."""
    page = watched.page
    source = TRAINED_BREAK.rstrip("\n") + f"\n# fresh in the browser test at {time.time_ns()}\n"  # not in the store
    COMPILED.add(("pytorch", source))
    job_id = _compile_training(page, source)
    live = _opened(page)
    assert live == page.get_attribute("#results .status .state", "data-open-stage")
    assert live.startswith("inductor.output_code:"), live
    # every label in the bar is its own, the two graphs Inductor compiled per compile id say which
    labels = page.evaluate("""() => Array.from(document.querySelectorAll('#results .stage-tabs [role=tab], '
        + '#results .stage-tabs .stage-select option[value]:not([value=""])'))
        .map(e => ({key: e.dataset.key || e.value, text: e.textContent.trim(), title: e.title}))""")
    texts = [f"{label['text']}" for label in labels]
    assert len(set(texts)) == len(texts), sorted(t for t in texts if texts.count(t) > 1)
    by_key = {label["key"]: label for label in labels}
    backward = [k for k in by_key if k.startswith("inductor.post_grad_graph:") and k.endswith(".backward")]
    assert backward, sorted(by_key)
    for key in backward:
        forward = key.removesuffix(".backward")
        cid = forward.split(":", 1)[1]
        assert by_key[key]["text"] == f"Post-grad graph (backward) [{cid}]"
        assert by_key[forward]["text"] == f"Post-grad graph (forward) [{cid}]"
    # the restarted compile is 0/0_1 in the tabs, in its title on hover, and in the Compiles index
    assert "dynamo.fx_graph:0/0_1" in by_key and "dynamo.fx_graph:0/0" not in by_key
    assert "frame 0, compile 0, attempt 1" in by_key["dynamo.fx_graph:0/0_1"]["title"]
    open_stage(page, backward[0])
    head = page.locator("#pane .artifact-head b").first
    assert head.is_visible() and "(backward)" in head.inner_text()
    assert "frame " in head.get_attribute("title") and ", attempt " in head.get_attribute("title")
    # the list showing it says so on hover too (the sixth walk hovered the bar's list and read nothing)
    shown_in = page.locator("#results .stage-tabs .stage-select.active")  # Inductor's list: 7 stages and more
    assert shown_in.count() == 1
    assert "frame " in shown_in.get_attribute("title") and ", attempt " in shown_in.get_attribute("title")
    open_stage(page, "dynamo.compiles")
    ids = page.locator("#pane .artifact-body abbr.compile-id")
    shown = [ids.nth(n).inner_text() for n in range(ids.count())]
    assert "[0/0_1]" in shown and "[0/0]" not in shown, shown
    first = ids.filter(has_text="[0/0_1]").first
    assert first.is_visible() and "frame 0, compile 0, attempt 1" in first.get_attribute("title")
    # the same request again: answered from the store, the whole bar drawn at once; then its page
    assert _compile_training(page, source) == job_id
    assert _opened(page) == live
    page.goto(f"/j/{job_id}")
    assert wait_finished(page) == "done" and _opened(page) == live


_XLA_FUSIONS = re.compile(r"^(?:[\w.\-]+: )?(\d+) fusions?, (\d+) instructions?$")
_HLO_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = ")


@pytest.mark.parametrize("language", ["hlo", "stablehlo", "jax", "cute"])
def test_xla_and_cute_jobs_say_what_their_compiler_made_at_a_glance(watched, language):
    """The one line above the results says what XLA or CuTe made, counted from the job's own stages,
    each item a link that opens its stage; and a CPU job shows only the versions that compiled it."""
    page = watched.page
    job_id = compile_in_page(page, language)
    assert status(page) == "done"
    glance = page.locator("#results .glance")
    box = glance.bounding_box()
    assert glance.is_visible() and box is not None and 0 <= box["y"] < page.viewport_size["height"], box
    items = page.evaluate("""() => Array.from(document.querySelectorAll('#results .glance a'))
        .map(a => ({text: a.textContent, stage: decodeURIComponent(a.getAttribute('href').replace('#stage=', ''))}))""")
    stages = [i["stage"] for i in items]
    if language == "cute":
        assert {"kernels.resources", "cute.launches"} <= set(stages), items
        rows = json.loads(raw_stage(page, job_id, "kernels.resources")["text"])["kernels"]
        kernels = next(i["text"] for i in items if i["stage"] == "kernels.resources")
        registers = sorted({r["registers"] for r in rows})
        assert kernels.startswith(f"{len(rows)} kernel") and f"{registers[0]}" in kernels and "register" in kernels
        calls = json.loads(raw_stage(page, job_id, "cute.launches")["text"])
        assert next(i["text"] for i in items if i["stage"] == "cute.launches").startswith(f"{len(calls)} call")
    else:
        assert {s.split(":")[0] for s in stages} >= {"xla.passes", "xla.memory"}, items
        fusions = next(i for i in items if _XLA_FUSIONS.match(i["text"]))
        optimized = raw_stage(page, job_id, fusions["stage"].replace("xla.fusions", "xla.optimized"))["text"]
        lines = [line for line in optimized.splitlines() if _HLO_INSTRUCTION.match(line)]
        counted = (sum(1 for line in lines if re.search(r"\sfusion\(", line)), len(lines))
        assert tuple(map(int, _XLA_FUSIONS.match(fusions["text"]).groups())) == counted, (fusions, counted)
        ran = next(i for i in items if i["stage"].split(":")[0] == "xla.passes")
        assert f"Every pass XLA ran ({ran['text'].split()[0]})" in raw_stage(page, job_id, ran["stage"])["text"]
        # XLA:CPU compiled it: jaxlib's versions, no CUDA plugin's
        tools = page.locator("#results .status .tool").all_inner_texts()
        assert any(t.startswith("jaxlib ") for t in tools) and not any("cuda" in t for t in tools), tools
    for n, item in enumerate(items):
        page.locator("#results .glance a").nth(n).click()
        if item["stage"] == "timings":
            page.wait_for_selector("#pane .timings-view")
        else:
            page.wait_for_selector(f'#pane .artifact[data-key="{item["stage"]}"]')

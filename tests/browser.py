"""The browser tests' shared side: Debian's Chromium driven by Playwright against a real `irscope
serve` process (testbed/real_servers.py), every page under a strict Content-Security-Policy (no
'unsafe-inline', no 'unsafe-eval'), every console error and CSP violation failing the test that
caused it; and the helpers that act on the IDE as a user does. Its fixtures reach every test
module through conftest.py (`pytest_plugins`): one browser per session, one server per data
directory (a module overrides `server_data` to serve another store), screenshots in a temporary directory,
or in docs/screenshots with IRSCOPE_TEST_SCREENSHOTS=1 (how the README's pictures are taken).

Nothing here waits a fixed time: every wait is for something the page shows.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from compiler import registry
from testbed.real_servers import ROOT, Serve
from tests.conftest import needs_bwrap, seed_kernel_toolchain_cache, seed_toolchain_cache

CHROMIUM = "/usr/bin/chromium"  # Debian's package; Playwright's own browser download is not used
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
CSP = "default-src 'self'; object-src 'none'; base-uri 'none'"
LANGUAGES = tuple(registry.offered())
JOB_TIMEOUT_MS = 420_000  # a cold example on a busy 2-core machine; a job that hangs fails here
# Viewers that draw (SVG) or tabulate instead of showing the artifact's text line by line.
DRAWN_FORMATS = {"mesh", "memory", "timeline", "svg", "profile", "guards", "resources"}

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the test extra pins it; say so instead of failing to collect
    sync_playwright = None

# Every browser test module's marks: `pytestmark = BROWSER_MARKS`.
BROWSER_MARKS = [
    needs_bwrap, pytest.mark.slow, pytest.mark.browser,
    pytest.mark.skipif(sync_playwright is None, reason="the playwright package is not installed "
                                                       "(pip install -r requirements.lock)"),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}: install Debian's "
                                                            "`chromium` package (./run.sh does, as root)"),
]


# --- one browser, one server per data directory -----------------------------------------------------
@pytest.fixture(scope="session")
def server_data(tmp_path_factory, pytorch_toolchain_cache):
    """The server's data directory (its SQLite store is shared with the tests that write to it),
    seeded with the session's toolchain caches, as `./run.sh serve` warms them before it serves: its
    PyTorch and kernel-language jobs start warm (the cache changes nothing they compile:
    tests/test_pytorch_pipeline.py). One for the session: the modules that serve it share its
    server and the jobs it compiled, as a class shares one; a module overrides it to serve
    another store."""
    data = tmp_path_factory.mktemp("browser-data")
    seed_toolchain_cache(pytorch_toolchain_cache, str(data))
    seed_kernel_toolchain_cache(str(data))  # the kernel languages' virtual CUDA device
    return data


@pytest.fixture(scope="session")
def _servers():
    """The `irscope serve` process of each data directory a module served, until the session ends."""
    served: dict[str, Serve] = {}
    yield served
    for one in served.values():
        one.stop()


@pytest.fixture(scope="module")
def server(server_data, _servers):
    key = str(server_data)
    if key not in _servers:
        _servers[key] = Serve(key, {"languages": ",".join(LANGUAGES), "workers": 2, "spare_workers": 0,
                                    "warm_toolchain_cache": False, "poll_interval_ms": 250}).start()
    return _servers[key].base


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


# The pictures the README shows (docs/screenshots/<name>); the tests take others too.
README_SHOTS = {"newcomer-summary.png", "pytorch.png", "triton.png", "hlo.png", "ir-links.png", "guards.png",
                "memory.png", "gallery.png", "compare.png", "lesson-dark.png"}


class Shots:
    """Where a screenshot goes: `shots / "name.png"`. A temporary directory; with
    IRSCOPE_TEST_SCREENSHOTS=1, the README's pictures go to docs/screenshots (then commit them)."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.readme = os.environ.get("IRSCOPE_TEST_SCREENSHOTS") == "1"

    def __truediv__(self, name: str) -> Path:
        if self.readme and name in README_SHOTS:
            return Path(ROOT) / "docs" / "screenshots" / name
        return self.scratch / name


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Shots:
    return Shots(tmp_path_factory.mktemp("screenshots"))


class Watched:
    """A page and everything that went wrong in it: console errors, uncaught exceptions, CSP
    violations (reported by the page's own securitypolicyviolation events)."""

    def __init__(self, page):
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def problems(self) -> list[str]:
        violations = self.page.evaluate("() => window.__cspViolations || []")
        return self.errors + [f"CSP violation: {v}" for v in violations]


_RECORD_CSP = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " +
                              e.sourceFile + ":" + e.lineNumber);
});
"""


@pytest.fixture
def watched(browser, server):
    context = browser.new_context(base_url=server, viewport={"width": 1400, "height": 900})

    def with_csp(route):
        # The policy the page must work under, whatever headers the server sets itself.
        # Only GET documents are re-fetched: Playwright's fetch drops the file parts of a multipart
        # POST (the import form), and a POST's answer is a redirect to a GET that gets the policy.
        if route.request.resource_type != "document" or route.request.method != "GET":
            route.continue_()
            return
        # Redirects go back to the browser (it follows them, through this route, to the address
        # a user would see), instead of being followed here behind the first address.
        response = route.fetch(max_redirects=0)
        headers = dict(response.headers, **{"content-security-policy": CSP})
        route.fulfill(response=response, headers=headers)

    context.route("**/*", with_csp)
    context.add_init_script(_RECORD_CSP)
    page = context.new_page()
    page.set_default_timeout(30_000)
    w = Watched(page)
    yield w
    problems = w.problems() if not page.is_closed() else w.errors
    context.close()
    assert problems == [], problems


# --- helpers -------------------------------------------------------------------------------------
def editor_text(page) -> str:
    return page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getValue()")


def set_editor(page, text: str) -> None:
    page.evaluate("(t) => document.querySelector('.CodeMirror').CodeMirror.setValue(t)", text)


def status(page) -> str:
    return page.get_attribute("#results .status .state", "data-status")


def wait_finished(page) -> str:
    page.wait_for_selector("#results .status .state[data-status=done], #results .status .state[data-status=failed]",
                           timeout=JOB_TIMEOUT_MS)
    return status(page)


def tab_keys(page) -> list[str]:
    """Every stage the tab bar offers, tabs and list entries alike, in order."""
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '#results .stage-tabs [role=tab], #results .stage-tabs .stage-select option[value]:not([value=""])'))
        .map(e => e.dataset.key || e.value)""")


COMPILED: set[tuple[str, str]] = set()  # (language, source) a browser test's server has compiled


def mark_no_reload(page) -> None:
    page.evaluate("() => { window.__sameDocument = true; }")


def still_same_document(page) -> bool:
    return page.evaluate("() => window.__sameDocument === true")


def compile_in_page(page, language: str, source: str | None = None) -> str:
    """Open the IDE for `language`, press Compile, wait for the job to end without a reload;
    returns the job id (from the URL the page pushed)."""
    page.goto(f"/?language={language}")
    if source is not None:
        set_editor(page, source)
    COMPILED.add((language, editor_text(page)))
    mark_no_reload(page)
    page.click("#compile")
    assert wait_finished(page) in ("done", "failed")
    assert still_same_document(page), "the page was reloaded"
    return page.get_attribute("#job-bar", "data-job")


def open_stage(page, key: str, pane: str = "#pane") -> None:
    """Open one stage from the tab bar (its tab, or its entry in a group's list) and wait for it.
    A stage the page already opened (or is loading) by itself is not clicked again: a second click
    loads it a second time, which may replace the pane under what a test does next."""
    tab = page.locator(f'#results .stage-tabs [role=tab][data-key="{key}"]')
    if tab.count():
        if tab.get_attribute("aria-selected") == "true":
            page.wait_for_selector(f'{pane} .artifact[data-key="{key}"]')
            return
        kernel = tab.get_attribute("data-kernel")
        if kernel and not tab.is_visible():  # a kernel picker shows one kernel's tabs: pick its kernel
            page.locator(f'#results .stage-tabs .kernel-select:has(option[value="{kernel}"])').select_option(kernel)
        tab.click()
    else:
        select = page.locator(f'#results .stage-tabs .stage-select:has(option[value="{key}"])')
        select.select_option(key)
    page.wait_for_selector(f'{pane} .artifact[data-key="{key}"]')


def raw_stage(page, job_id: str, key: str) -> dict:
    response = page.request.get(f"/api/jobs/{job_id}/stages/{quote(key, safe='')}?format=json")
    assert response.ok, key
    return response.json()


# --- tests -----------------------------------------------------------------------------------------


# Each notice above a stage's text (.explain, .note: templates/_artifact.html; the IR links' line,
# viewers/code.py): its height and line height, the box of what shows when it is folded.
_NOTICES = """() => Array.from(document.querySelectorAll(
    '#pane .artifact > .explain, #pane .artifact > .note, #pane .ir-links-summary')).map(n => {
      const shown = n.tagName === 'DETAILS' ? n.querySelector('summary') : n;
      const r = shown.getBoundingClientRect(), s = getComputedStyle(shown);
      return {text: shown.textContent.trim().slice(0, 60), height: r.height, right: r.right,
              pane: document.querySelector('#pane').getBoundingClientRect().right,
              line: parseFloat(s.lineHeight) || 1.3 * parseFloat(s.fontSize),
              cls: n.className, folded: n.tagName === 'DETAILS', open: n.open}; })"""


def _focused_summary(page) -> dict:
    return page.evaluate("""() => { const e = document.activeElement, s = getComputedStyle(e);
        return {tag: e.tagName, text: e.textContent.trim().slice(0, 40),
                outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1}; }""")


def notices_are_one_line(page) -> list[dict]:
    """Every notice of the stage open in #pane is one line inside the pane, the longer ones folded
    (<details>, closed); the note's fold is reached by Tab from the stage's head, its focus
    drawn, and Enter opens it: the note is read whole, wrapped inside the pane."""
    notices = page.evaluate(_NOTICES)
    assert notices, "no notice"
    for n in notices:
        assert n["height"] < 1.6 * n["line"] and n["right"] <= n["pane"] + 1, n
    assert any(n["folded"] for n in notices) and not any(n["open"] for n in notices), notices
    fold = page.locator("#pane .artifact > details.note:not(.file-name)")
    if fold.count():
        on_fold = "() => document.activeElement.matches('#pane details.note:not(.file-name) > summary')"
        walked = []
        for _ in range(3):  # from the stage's "raw" link, again if the pane was swapped under the focus
            page.locator("#pane .artifact-head a").first.focus()
            walked.append([_focused_summary(page)])
            for _ in range(10):
                page.keyboard.press("Tab")
                walked[-1].append(_focused_summary(page))
                if page.evaluate("() => !document.activeElement.closest('#pane')"):
                    break  # the pane's stage was loaded again (a second request for it): start over
                if page.evaluate(on_fold):
                    break
            if page.evaluate(on_fold):
                break
        else:
            raise AssertionError(f"Tab did not reach the note's fold: {walked}")
        assert _focused_summary(page)["outline"], _focused_summary(page)
        page.keyboard.press("Enter")
        assert fold.get_attribute("open") is not None
        box = fold.bounding_box()
        assert box["height"] >= 2 * notices[0]["line"] and box["x"] + box["width"] <= notices[0]["pane"] + 1, box
        page.keyboard.press("Enter")  # folded again
    return notices

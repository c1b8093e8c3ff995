"""A failed job's page in a real browser (tests/browser.py), written to the store as a worker writes
it: no compile, so the module serves a store of its own (no toolchain cache to seed)."""
from __future__ import annotations

import time

import pytest

from compiler.model import JobError, Request, Stage
from service.store import Store
from tests.browser import BROWSER_MARKS, open_stage, tab_keys

pytestmark = BROWSER_MARKS

# /tmp/walk3/progs/shape_err.py: a Linear of 10 features fed 32 (line 13)
SHAPE_ERR = '''import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 32)
        self.head = nn.Linear(10, 4)  # oops: expects 10 features, gets 32

    def forward(self, x):
        h = torch.relu(self.proj(x))
        return self.head(h)


model = Net()
example_inputs = (torch.randn(4, 64),)
'''
POINT = "line 13: RuntimeError in linear: a and b must have same reduction dim, but got [4, 32] X [10, 4]."


@pytest.fixture(scope="module")
def server_data(tmp_path_factory):
    return tmp_path_factory.mktemp("failed-job-data")


def _add(store: Store, job_id: str, position: int, key: str, group: str, text: str) -> None:
    store.add_stage(job_id, position, Stage(key=key, title=key, group=group, format="text", size=len(text)), text)


def test_a_failed_compile_opens_nothing_beside_its_error_not_the_source_echoed(watched, server_data):
    """Before: the shape mismatch's page opened the Source stage beside the error, the editor's text
    again with every line tinted in both. Now nothing opens: the error box is the point, the pane
    says so in one line, no editor line is tinted but the error's; the stage bar still offers the
    source, which opens when picked."""
    page = watched.page
    store = Store(f"sqlite:///{server_data}/irscope.db")
    job = "failed" + str(time.time_ns())[-8:]
    store.create_job(job, "synthetic-" + job, Request("pytorch", SHAPE_ERR, {}), {"irscope": "test"})
    store.set_running(job, "running your source")
    # the stages the real job wrote (irscope compile /tmp/walk3/progs/shape_err.py)
    _add(store, job, 0, "source", "Source", SHAPE_ERR)
    _add(store, job, 1, "run.stdout", "Run", "")
    _add(store, job, 2, "dynamo.bytecode:0/0", "Dynamo", "  0 RESUME 0\n  2 LOAD_GLOBAL 1 (torch)\n")
    _add(store, job, 3, "worker.log", "Run", "Traceback (most recent call last):\n  ...\nRuntimeError\n")
    store.finish_job(job, JobError("CompileError", POINT, line=13), {})
    page.goto(f"/j/{job}")
    page.wait_for_selector("#results .status .state[data-status=failed]")
    box = page.locator("#results .error-box")
    assert box.is_visible() and "at line 13" in box.inner_text() and "[4, 32] X [10, 4]" in box.inner_text()
    assert box.get_attribute("data-open-stage") == ""
    assert page.get_attribute("#results .status .state", "data-open-stage") == ""
    hint = page.locator("#pane .hint.after-error")
    hint.wait_for()
    assert hint.inner_text() == ("The job failed: the error above says why, and nothing opens beside it; pick a "
                                 "stage above to read it.")
    assert page.locator("#pane .artifact").count() == 0
    assert page.locator('#results .stage-tabs [role=tab][aria-selected="true"]').count() == 0
    assert "source" in tab_keys(page)
    # the error's line is marked in the editor; no other line is tinted (no stage's colours)
    tints = page.evaluate("() => Array.from(document.querySelectorAll('.CodeMirror-linebackground'))"
                          ".map(e => e.className)")
    assert tints and all("error-line" in t for t in tints), tints
    # the pane is the stage bar's as ever: the source opens when picked, the hint goes
    open_stage(page, "source")
    assert page.locator("#pane .hint").count() == 0

"""The examples gallery: every lesson in examples/ is read and validated, opens as the permalink of
its request, and — compiled once per session by the real compilers in the real sandbox (conftest's
`lesson_jobs`) — really shows what it teaches. What each lesson teaches is data beside it: the
`[[check]]` tables of its lesson.toml, asserted here on the stored stages:

    why = "..."            what the check shows (the failure message)
    job = "a" | "b"        the lesson's job (default) or its compare variant's
    stage = "key"          a stage (a key without :qualifier is the first of its kind), with any of
      contains = [...]       substrings, found in this order
      regex = [...]          regular expressions (multi-line), found in this order
      absent = [...]         substrings that must not occur
      maps_to = [n, ...]     source lines the stage's source map reaches
      meta = {k = v}         entries of the stage's metadata
    stages = "prefix"      the stages whose key starts with it, with `count`, `at_least` or `keys`
    no_stage = "key"       the job has no such stage (nor one of that kind)
    differs = "key"        the stage's text differs between the two jobs
    same = "key"           the stage's text is the same in both jobs

So a new lesson (the xlagpu one, say) is a new directory and nothing else.
"""
from __future__ import annotations

import re
from urllib.parse import quote, unquote

import pytest
from markupsafe import escape

from app import lessons
from app.lessons import LessonError
from tests.conftest import ALL_LANGUAGES, make_app, needs_bwrap

LESSONS = lessons.load()
SLUGS = [lesson.slug for lesson in LESSONS]
CHECK_KINDS = ("stage", "stages", "no_stage", "differs", "same")
STAGE_TESTS = ("contains", "regex", "absent", "maps_to", "meta")


# --- the files --------------------------------------------------------------------------------------
def _sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text))


def test_the_gallery_has_the_lessons_the_issue_lists():
    assert len(LESSONS) >= 14
    assert len(set(SLUGS)) == len(SLUGS)
    languages = {lesson.language for lesson in LESSONS}
    assert {"pytorch", "triton", "jax", "hlo"} <= languages
    options = [lesson.request.options for lesson in LESSONS] + [l.compare.request.options for l in LESSONS if l.compare]
    # option sets the issue names: reduce-overhead, max-autotune (its device-free part on a virtual
    # GPU), sm_80 vs sm_90, training, export, cpp_wrapper
    assert any(o.get("mode") == "reduce-overhead" for o in options)
    assert any("max_autotune" in str(o.get("inductor_config")) or o.get("mode") == "max-autotune" for o in options)
    assert {"cuda:sm_80", "cuda:sm_90"} <= {o.get("target") for o in options}
    assert any(o.get("training") for o in options) and any(o.get("export") for o in options)
    assert any(o.get("cpp_wrapper") for o in options)
    assert any("jax.shard_map" in lesson.request.source for lesson in LESSONS)


@pytest.mark.parametrize("slug", SLUGS)
def test_lesson_file_is_complete(slug):
    lesson = lessons.by_slug(LESSONS, slug)
    assert 2 <= _sentences(lesson.explanation) <= 5, lesson.explanation  # "two to four" (a decimal point aside)
    assert lesson.title and lesson.topic and lesson.first_stage
    assert lesson.checks, "a lesson says what it teaches: at least one [[check]]"
    for check in lesson.checks:
        assert isinstance(check.get("why"), str) and check["why"], check
        kinds = [k for k in CHECK_KINDS if k in check]
        assert len(kinds) == 1, (check, "one of " + ", ".join(CHECK_KINDS))
        known = {"why", "job", *CHECK_KINDS, *STAGE_TESTS, "count", "at_least", "keys"}
        assert set(check) <= known, set(check) - known
        assert check.get("job", "a") in ("a", "b") and (check.get("job", "a") == "a" or lesson.compare)
        if kinds == ["stage"]:
            assert any(t in check for t in STAGE_TESTS), check
    # a check that only asks for a stage to exist teaches nothing: each lesson checks content
    assert any(any(t in c for t in ("contains", "regex", "maps_to", "meta", "keys", "count")) for c in lesson.checks)


def test_a_lesson_is_a_directory_of_data(tmp_path):
    """Adding a lesson is adding files: a copied lesson under a new slug appears on the gallery and
    its JSON twin with no code changed; a broken one is refused naming its file and field."""
    import shutil
    original = lessons.by_slug(LESSONS, "pointwise-fusion")
    shutil.copytree(original_dir := f"{lessons.DEFAULT_DIR}/{original.slug}", tmp_path / "my-new-lesson")
    toml = (tmp_path / "my-new-lesson" / "lesson.toml")
    toml.write_text(toml.read_text().replace(original.title, "A lesson added as data"))
    app = make_app(tmp_path, examples_dir=str(tmp_path), languages="fake,pytorch")
    try:
        listed = app.test_client().get("/examples.json").get_json()["lessons"]
        assert [(l["slug"], l["title"]) for l in listed] == [("my-new-lesson", "A lesson added as data")]
        assert listed[0]["source"] == open(f"{original_dir}/source.py").read()
        page = app.test_client().get("/examples").get_data(as_text=True)
        assert 'id="lesson-my-new-lesson"' in page and "A lesson added as data" in page
    finally:
        app.extensions["irscope"].runner.shutdown()
    toml.write_text(toml.read_text() + '\n[options]\nmode = "fastest"\n')
    with pytest.raises(LessonError, match=r"my-new-lesson/lesson.toml: option 'mode' must be one of"):
        lessons.read_lesson(str(tmp_path / "my-new-lesson"))
    toml.write_text('title = "x"\nlanguage = "cobol"\n')
    with pytest.raises(LessonError, match="unknown language 'cobol'"):
        lessons.read_lesson(str(tmp_path / "my-new-lesson"))


@pytest.fixture(scope="module")
def quiet_app(tmp_path_factory):
    """An app offering every language that compiles nothing: the gallery's pages only."""
    app = make_app(tmp_path_factory.mktemp("gallery"), languages=ALL_LANGUAGES)
    yield app
    app.extensions["irscope"].runner.shutdown()


def test_gallery_page_and_its_json_twin_list_every_lesson(quiet_app):
    client = quiet_app.test_client()
    body = client.get("/examples.json").get_json()
    assert [l["slug"] for l in body["lessons"]] == SLUGS
    for entry, lesson in zip(body["lessons"], LESSONS):
        assert entry["source"] == lesson.request.source and entry["options"] == lesson.request.options
        assert entry["first_stage"] == lesson.first_stage and entry["url"] == f"/examples/{lesson.slug}"
        assert (entry["compare"] is None) == (lesson.compare is None)
    page = client.get("/examples").get_data(as_text=True)
    for lesson in LESSONS:
        assert f'href="/examples/{lesson.slug}"' in page and str(escape(lesson.explanation)) in page
        if lesson.compare:
            assert f'href="/examples/{lesson.slug}/compare"' in page
    # the editor's menu offers every lesson too
    ide = client.get("/").get_data(as_text=True)
    assert all(f'value="/examples/{slug}"' in ide for slug in SLUGS)
    assert client.get("/examples/no-such-lesson").status_code == 404


# --- the compiled lessons --------------------------------------------------------------------------
def _stage(jobs, job_id: str, key: str):
    found = jobs.store.stage_text(job_id, key)
    assert found is not None, f"job {job_id} has no stage {key!r}: " + \
        ", ".join(s.key for s in jobs.store.get_job(job_id).stages)
    return found


def _in_order(text: str, needles: list[str], pattern: bool) -> None:
    at = 0
    for needle in needles:
        if pattern:
            found = re.compile(needle, re.M).search(text, at)
            assert found, f"no match for {needle!r} after offset {at}"
            at = found.end()
        else:
            index = text.find(needle, at)
            assert index >= 0, f"{needle!r} not found after offset {at}"
            at = index + len(needle)


def run_check(jobs, slug: str, check: dict) -> None:
    job_id = jobs.ids[(slug, check.get("job", "a"))]
    job = jobs.store.get_job(job_id)
    keys = [s.key for s in job.stages]
    if "stages" in check:
        matching = [k for k in keys if k.startswith(check["stages"])]
        if "count" in check:
            assert len(matching) == check["count"], matching
        if "at_least" in check:
            assert len(matching) >= check["at_least"], matching
        if "keys" in check:
            assert matching == check["keys"], matching
    elif "no_stage" in check:
        key = check["no_stage"]
        assert not [k for k in keys if k == key or k.startswith(key + ":")], keys
    elif "differs" in check or "same" in check:
        key = check.get("differs") or check["same"]
        texts = [_stage(jobs, jobs.ids[(slug, side)], key)[1] for side in "ab"]
        assert (texts[0] != texts[1]) == ("differs" in check), "the texts are " + \
            ("the same" if texts[0] == texts[1] else "different")
    else:
        stage, text = _stage(jobs, job_id, check["stage"])
        _in_order(text, check.get("contains", []), pattern=False)
        _in_order(text, check.get("regex", []), pattern=True)
        for needle in check.get("absent", []):
            assert needle not in text, needle
        reached = {source for _, source in stage.source_map}
        assert set(check.get("maps_to", [])) <= reached, sorted(reached)
        for name, value in check.get("meta", {}).items():
            assert stage.meta.get(name) == value, (name, stage.meta.get(name))


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("slug", SLUGS)
def test_lesson_shows_what_it_teaches(lesson_jobs, slug):
    lesson = lessons.by_slug(LESSONS, slug)
    for side in ("a", "b") if lesson.compare else ("a",):
        job = lesson_jobs.store.get_job(lesson_jobs.ids[(slug, side)])
        assert job.status == "done", (side, job.error)
    # the stage the lesson opens first exists
    _stage(lesson_jobs, lesson_jobs.ids[(slug, "a")], lesson.first_stage)
    failed = []
    for check in lesson.checks:
        try:
            run_check(lesson_jobs, slug, check)
        except AssertionError as e:
            failed.append(f"{check['why']}: {e}")
    assert failed == [], failed


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("slug", SLUGS)
def test_lesson_opens_as_the_permalink_of_its_request(lesson_jobs, slug):
    lesson = lessons.by_slug(LESSONS, slug)
    client = lesson_jobs.client
    response = client.get(f"/examples/{slug}")
    assert response.status_code == 303
    location = response.headers["Location"]
    link = re.fullmatch(r"/z/(\w+)#stage=(.+)", location)
    assert link and unquote(link.group(2)) == lesson.first_stage, location
    # the link is the lesson job's own permalink (the stored job, not a new compile)
    body = client.get(f"/z/{link.group(1)}.json").get_json()
    assert body["job"]["id"] == lesson_jobs.ids[(slug, "a")]
    page = client.get(f"/z/{link.group(1)}").get_data(as_text=True)
    assert 'class="lesson-note"' in page and str(escape(lesson.title)) in page  # the page says which lesson it is
    embed = client.get(f"/examples/{slug}?embed=1")
    assert embed.headers["Location"].startswith(f"/z/{link.group(1)}?embed=1#stage=")


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("slug", [lesson.slug for lesson in LESSONS if lesson.compare])
def test_lesson_comparison_diffs_the_stages_it_names(lesson_jobs, slug):
    lesson = lessons.by_slug(LESSONS, slug)
    client = lesson_jobs.client
    response = client.get(f"/examples/{slug}/compare")
    assert response.status_code == 303
    comparison = re.fullmatch(r"/c/(\w+)", response.headers["Location"]).group(1)
    body = client.get(f"/c/{comparison}.json").get_json()
    assert (body["a"]["id"], body["b"]["id"]) == (lesson_jobs.ids[(slug, "a")], lesson_jobs.ids[(slug, "b")])
    page = client.get(f"/c/{comparison}").get_data(as_text=True)
    assert lesson.compare.title in page
    # the stages the lesson names are the ones selected first, and their diff is not empty
    selected = re.findall(r'<option value="([^"]+)"[^>]* selected>', page)
    a_key = _stage(lesson_jobs, body["a"]["id"], lesson.compare.stage)[0].key
    b_key = _stage(lesson_jobs, body["b"]["id"], lesson.compare.stage_b)[0].key
    assert selected == [a_key, b_key]
    diff = client.get(f"/c/{comparison}/diff?a={quote(a_key, safe='')}&b={quote(b_key, safe='')}")
    text = diff.get_data(as_text=True)
    assert diff.status_code == 200
    if any(c.get("same") == lesson.compare.stage for c in lesson.checks):  # the lesson: nothing changes
        assert "identical" in text
    else:
        assert "data-lexer=\"diff\"" in text and "identical" not in text
        assert f"--- A: {a_key}" in text and f"+++ B: {b_key}" in text
    side = client.get(f"/c/{comparison}/diff?a={quote(a_key, safe='')}&b={quote(b_key, safe='')}&view=side")
    assert side.get_data(as_text=True).count('class="artifact"') == 2
    # the same pair always gives the same comparison
    again = client.post("/api/comparisons", json={"a": {"job": body["a"]["id"]}, "b": {"job": body["b"]["id"]}})
    assert again.status_code == 200 and again.get_json()["id"] == comparison


@needs_bwrap
@pytest.mark.slow
def test_every_opcode_of_the_lessons_ptx_and_sass_has_help(lesson_jobs):
    """Each instruction line of every PTX and SASS stage the lessons show: its opcode is found and
    the viewer links it to a description of its own and to the vendor's reference."""
    import viewers
    from viewers import isa
    missing: dict[str, set[str]] = {"ptx": set(), "sass": set()}
    seen = {"ptx": 0, "sass": 0}
    for (slug, _side), job_id in lesson_jobs.ids.items():
        for stage in lesson_jobs.store.get_job(job_id).stages:
            if stage.format not in missing:
                continue
            text = lesson_jobs.store.stage_text(job_id, stage.key)[1]
            for line in text.splitlines():
                found = isa.opcode(line, stage.format)
                if found is None:
                    continue
                seen[stage.format] += 1
                if isa.describe(found[2], stage.format) is None:
                    missing[stage.format].add(found[2].split(".")[0])
            markup = viewers.render(stage.format, text, {})
            assert 'class="isa-op"' in markup and "https://docs.nvidia.com/cuda/" in markup, (slug, stage.key)
    assert seen["ptx"] > 1000 and seen["sass"] > 1000, seen
    assert missing == {"ptx": set(), "sass": set()}


def test_stages_that_differ_by_language_or_content_are_explained_as_what_they_hold():
    """Joint, forward and backward graphs each have their own sentence; a kernel's source is said
    as the language that made it; XLA's module before its passes is not "after one of XLA's passes";
    a bytecode stage holding only the original bytecode does not claim Dynamo's generated code."""
    from viewers.explanations import explanation_for
    aot = [explanation_for(f"aot.{g}_graph:0/0") for g in ("joint", "forward", "backward")]
    assert len(set(aot)) == 3 and "joint" in aot[0] and "forward" in aot[1] and "backward" in aot[2]
    sources = {lang: explanation_for("triton.source:k.0", lang) for lang in ("triton", "gluon", "helion", "pytorch")}
    assert len(set(sources.values())) == 4
    assert "Gluon" in sources["gluon"] and "Helion" in sources["helion"] and "Inductor" in sources["pytorch"]
    assert "Inductor" not in sources["triton"] and "Inductor" not in sources["gluon"]
    for key in ("xla.pass:before_optimizations", "xla.pass:jit_f/before_optimizations"):
        assert "before any of its passes" in explanation_for(key, "jax"), key
    assert "after one of XLA's passes" in explanation_for("xla.pass:0007.spmd.after_sharding", "hlo")
    assert "generated" in explanation_for("dynamo.bytecode:0/0", "pytorch")
    only = explanation_for("dynamo.bytecode:0/0", "pytorch", {"explained_as": "original_only"})
    assert only.startswith("Only the frame's original bytecode") and "no bytecode to replace" in only


@needs_bwrap
@pytest.mark.slow
def test_every_stage_the_lessons_show_has_an_explanation_of_its_own(lesson_jobs):
    """Each stage of every lesson job (every language, host and virtual GPU targets) is explained
    by a sentence written for its kind; before, every XLA stage shared one generic sentence and
    Helion's, CuTe's and the distributed stages had none."""
    from viewers.explanations import EXPLANATIONS, explanation_for
    unexplained = set()
    for job_id in lesson_jobs.ids.values():
        for stage in lesson_jobs.store.get_job(job_id).stages:
            if stage.key == "worker.log" or explanation_for(stage.key):
                continue
            unexplained.add(stage.key.split(":")[0])
    assert unexplained == set()
    assert "xla." not in EXPLANATIONS  # no catch-all for a whole language

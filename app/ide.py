"""The IDE page and the htmx partials it swaps in."""
from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict

from flask import Blueprint, abort, render_template, request

import viewers
from app import diffs, services
from app.examples import offered
from app.http_policy import client_address, embeddable
from app.lessons import for_request
from app.refusals import renders_page
from compiler import formats, registry
from compiler.errors import Refused
from compiler.pipeline import DEFAULT_TOOLCHAIN, TOOLCHAIN_OPTION, OptionError, chosen_toolchain
from service import stage_reader, toolchain_envs
from service.glance import glance
from service.jobs import RequestError
from service.store import Job
from viewers import compile_ids
from viewers import timings as timings_viewer
from viewers.explanations import explanation_for

bp = Blueprint("ide", __name__)


def _languages() -> list:
    return [registry.get(key) for key in services().jobs.config.languages]


# A group with more stages than this (Dynamo's five, AOTAutograd's three, Inductor's seven, kernels) is
# one list, so the stage bar stays about two rows high and the open stage starts on the first
# screen, at 800 px wide too; a group of one GPU kernel's stages keeps up to MAX_KERNEL_TABS tabs
# (source to SASS, passes, metadata, resources), and one of several kernels is a kernel picker.
MAX_TABS_PER_GROUP = 2
MAX_KERNEL_TABS = 9


def _grouped(stages: list) -> "OrderedDict[str, list]":
    groups: "OrderedDict[str, list]" = OrderedDict()
    for stage in stages:
        groups.setdefault(stage.group, []).append(stage)
    return groups


def has_text(stage) -> bool:
    """Whether a stage has anything to read: text, and for a JSON stage more than an empty list or
    object (the `[]` of Launches when no kernel was launched). Any JSON text of two bytes or less is
    one of those, `""` or a one- or two-digit number: nothing to open either."""
    return stage.size > 2 or (bool(stage.size) and not formats.get(stage.format).json_any)


def _offered(job: Job) -> list:
    """The stages the stage bar offers: those with text (has_text). An empty one (the output of a
    program that printed nothing, a JSON stage holding `[]`) is no tab, unless the job failed and no
    stage has anything to read (_readable finds none): then what it did not print is all there is to
    read (_empty_stage says so); a JSON stage holding `[]` is still none."""
    if job.status == "failed" and not _readable(job.stages):
        return [s for s in job.stages if has_text(s) or not s.size]  # never an empty JSON `[]`
    return [s for s in job.stages if has_text(s)]


# A stage of one GPU kernel: `triton.ptx:<kernel>`, `cute.sass:<kernel>` (compiler/kernels/stages.py),
# `helion.config:<kernel>` (compiler/helion/pipeline.py).
_KERNEL_STAGE = re.compile(r"^(?:triton|cute|helion)\.[a-z_]+:(.+)$")


@bp.app_template_filter("kernels_of")
def kernels_of(stages: list) -> list[str]:
    """The GPU kernels whose stages a group holds, in order. A group of two or more shows a kernel
    picker and the tabs of one kernel at a time, whatever language compiled them (Triton, Helion,
    Gluon, CuTe, Inductor's Triton kernels)."""
    found = (_KERNEL_STAGE.match(s.key) for s in stages)
    return formats.configs_under_kernels(list(dict.fromkeys(m.group(1) for m in found if m)))


@bp.app_template_filter("kernel_count")
def kernel_count(qualifiers: list[str]) -> str:
    """Kernels told apart from their configs, for a picker's name: "2 kernels, 5 configs"."""
    kernels = len({formats.kernel_of(q) for q in qualifiers})
    said = f"{kernels} kernel{'' if kernels == 1 else 's'}"
    return said if kernels == len(qualifiers) else f"{said}, {len(qualifiers)} configs"


@bp.app_template_filter("elide_middle")
def elide_middle(name: str, most: int = 40) -> str:
    """A long name cut in its middle, so its end (a kernel's `.N` config) stays in sight."""
    if len(name) <= most:
        return name
    tail = most // 3
    return name[:most - tail - 1] + "…" + name[-tail:]


@bp.app_template_filter("kernel_of")
def kernel_of(key: str) -> str:
    """The kernel of one kernel stage's key ("" for any other stage)."""
    m = _KERNEL_STAGE.match(key)
    return m.group(1) if m else ""


@bp.app_template_filter("group_form")
def group_form(stages: list) -> str:
    """How the stage bar draws a group: "picker" (several GPU kernels: a kernel picker and one
    kernel's tabs), "tabs", or "list" (one select of every stage)."""
    kernels = len(kernels_of(stages))
    if kernels > 1:
        return "picker"
    return "tabs" if len(stages) <= (MAX_KERNEL_TABS if kernels else MAX_TABS_PER_GROUP) else "list"


# What a job writes of the source itself (the editor's text again: `source`, an HLO job's Input)
# or of its run, rather than what the compiler made of the source: never the stage opened beside
# an error while the compiler produced something else.
_RUN_STAGES = {"source", "xla.input", "worker.log", "run.stdout"}


def _readable(stages: list) -> list:
    """The stages with something to read, but Dynamo's bytecode: a frame that failed has only its
    original bytecode, which says nothing about the error."""
    return [s for s in stages if has_text(s) and not s.key.startswith("dynamo.bytecode")]


@bp.app_template_filter("stage_beside_error")
def stage_beside_error(stages: list) -> str:
    """The stage a failed job opens beside its error: the last stage the compiler produced before
    the failure (Dynamo's graph so far, the last IR of a kernel), else what the program printed,
    else any other stage the job wrote of its run; else none ("": the error box is what there is to
    read, the stage bar offers the rest). Never the source (the editor's text again, every line
    tinted in both), nor the worker's log (PyTorch's tracebacks, which the error's details fold),
    nor Dynamo's bytecode (_readable)."""
    written = _readable(stages)
    compiled = [s for s in written if s.key not in _RUN_STAGES and s.group not in ("Source", "Run")]
    printed = [s for s in written if s.key == "run.stdout"]
    others = [s for s in written if s.key not in _RUN_STAGES]
    for choice in (compiled[-1:], printed, others[-1:]):
        if choice:
            return choice[0].key
    return ""


# What a finished job opens by itself, the most useful first: Inductor's output code, a kernel's
# PTX, XLA's optimized module, Dynamo's graph, the fake language's lines (a key or its `key:` kind).
_OPENS_FIRST = ("inductor.output_code", "triton.ptx", "xla.optimized", "dynamo.fx_graph", "fake.lines")


@bp.app_template_filter("stage_to_open")
def stage_to_open(job: Job) -> str:
    """The one rule for the stage a job's page opens by itself, decided once the job has ended
    ("" while it runs), so a run watched live and its repeat answered from the store (or its
    permalink) open the same one: a failed job's stage beside its error, none where there is none
    (stage_beside_error: never its source, its worker's log or an empty output); a job that ended
    done: the first of _OPENS_FIRST it wrote, in the stage bar's order; else the first other stage
    with text (the worker's log last); else its empty output (_offered)."""
    if not job.finished:
        return ""
    if job.status == "failed":  # never an empty stage beside the error: the error is what there is to read
        return stage_beside_error(job.stages)
    written = [s for group in _grouped(job.stages).values() for s in group if has_text(s) and s.key != "source"]
    for kind in _OPENS_FIRST:
        found = next((s for s in written if s.key == kind or s.key.startswith(kind + ":")), None)
        if found is not None:
            return found.key
    others = [s for s in written if s.key != "worker.log"] or written or _offered(job)
    return others[0].key if others else ""


@bp.app_template_filter("speed_verdict")
def _speed_verdict(run: dict) -> tuple[str, str] | None:
    """Compiled against eager in words and which way ("faster", "slower", "noise"): the one verdict
    the summary line, the job bar and the Timings tab all say (compiler/formats: speed_verdict)."""
    return formats.speed_verdict(run)


@bp.app_template_filter("slug")
def _slug(group: str) -> str:
    """An id-safe name for a stage group (ids of the tab bar's OOB swap targets)."""
    return re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-") or "group"


@bp.app_template_filter("compile_id_help")
def _compile_id_help(title: str) -> str:
    """What a stage title's Dynamo compile id means (frame, compile, attempt), in words for hover
    text; "" for a title without one."""
    return compile_ids.explain(title)


@bp.app_template_filter("compile_figure_help")
def _compile_figure_help(label: str) -> str:
    """What a compile figure of the job bar's timing line measures, for hover text."""
    return timings_viewer.compile_figure_help(label)


_SENTENCE_END = re.compile(r"(?<=[.:;])\s+(?=[A-Z(`'\"])")


@bp.app_template_filter("first_sentence")
def _first_sentence(text: str) -> tuple[str, str]:
    """An explanation split after its first sentence: (what a folded line shows, the rest)."""
    text = str(text).strip()
    parts = _SENTENCE_END.split(text, maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 and len(parts[0]) < len(text) else (text, "")


# A notice of one sentence longer than this is folded too: its lead cut at a clause (or a word)
# before it, the rest under it; a longer first sentence of several is one line with an ellipsis (CSS).
NOTICE_LEAD = 100
# where a long sentence may be cut, the stronger first: after a semicolon, colon or before a dash;
# after a comma; before a parenthesis
_CLAUSE_ENDS = (re.compile(r"[;:](?=\s)| (?=— )"), re.compile(r",(?=\s)"), re.compile(r" (?=\()"))


@bp.app_template_filter("notice_parts")
def notice_parts(text: str) -> tuple[str, str]:
    """A stage pane's notice (its explanation, its note) as one line and the rest folded under it:
    its first sentence, or for one long sentence, its lead up to a clause before NOTICE_LEAD
    characters ("…" ending it) and the rest of the sentence."""
    first, rest = _first_sentence(text)
    if rest or len(first) <= NOTICE_LEAD:
        return first, rest
    cut = next((m.end() for clause in _CLAUSE_ENDS for m in reversed(list(clause.finditer(first, 0, NOTICE_LEAD)))
                if m.end() >= 30), None)
    if cut is None:
        cut = first.rfind(" ", 0, NOTICE_LEAD)
    if cut <= 0:
        return first, ""
    lead, rest = first[:cut].rstrip(" ,;:"), first[cut:].strip()
    return lead + "…", rest


def toolchain_choices(language: str, chosen: str = DEFAULT_TOOLCHAIN) -> list[dict]:
    """The installed toolchains that serve `language` (the default first), each with the versions
    of what compiles it, for a toolchain picker; `chosen` is listed even when it serves no more
    (a job's toolchain removed since), so its page shows what it ran in."""
    config = services().jobs.config
    rows = toolchain_envs.listing(config.toolchains_dir, config.languages)
    out = [{"name": r["name"], "label": toolchain_envs.main_versions(r, language), "default": r["default"]}
           for r in rows if language in r["languages"]]
    if chosen not in {t["name"] for t in out}:
        out.append({"name": chosen, "label": "not installed on this server now", "default": False})
    return out


def _bar_context(job: Job) -> dict:
    """What _job_bar.html and its parts need besides the job."""
    svc = services()
    position = svc.store.queue_position(job.id) if job.status == "queued" else None
    reproducible = job.finished and registry.get(job.request.language).reproducer(job.request, job.toolchain,
                                                                                   job.id) is not None
    return {"job": job, "groups": _grouped(_offered(job)), "poll_ms": svc.web.poll_interval_ms,
            "queue_position": position, "version": _version(job, position),
            "reproducible": reproducible, "glance": glance(svc.store, job),
            "other_toolchains": [t["name"] for t in toolchain_choices(job.request.language)
                                 if t["name"] != chosen_toolchain(job.request.options)]}


def _version(job: Job, position: int | None) -> str:
    """A short digest of what the status line shows and how many stages exist: the page sends it
    back with each poll, and an unchanged job is answered with 204 No Content."""
    state = json.dumps([job.status, job.progress, position, len(job.stages), bool(job.timings), job.worker])
    return hashlib.sha256(state.encode()).hexdigest()[:12]


def render_ide(job: Job | None = None, link_id: str | None = None, language: str | None = None, **extra):
    langs = _languages()
    current = registry.get(job.request.language if job else (language or langs[0].key))
    options = dict(job.request.options) if job else {o.name: o.default for o in current.options}
    bar = _bar_context(job) if job else {"job": None}
    chosen = chosen_toolchain(job.request.options) if job else DEFAULT_TOOLCHAIN
    lessons = offered()
    lesson, side = (for_request(lessons, job.request) if job else None) or (None, None)
    # only a job's page (and a permalink's) is framable: never the editor, never the import form
    embed = request.args.get("embed") == "1" and job is not None and "import_form" not in extra
    page = render_template("ide.html", languages=langs, current=current, options=options,
                           source=job.request.source if job else current.example, link_id=link_id,
                           refusal=services().refusal, examples={p.key: p.example for p in langs},
                           lessons=lessons, lesson=lesson, lesson_side=side, embed=embed,
                           toolchains=toolchain_choices(current.key, chosen), chosen_toolchain=chosen, **bar, **extra)
    return embeddable(page) if embed else page


@bp.get("/")
def index():
    language = request.args.get("language")
    if language and language not in services().jobs.config.languages:
        abort(404, f"unknown language {language!r}")
    return render_ide(language=language)


@bp.get("/j/<job_id>")
def job_page(job_id: str):
    svc = services()
    job = svc.store.get_job(job_id)
    if job is None:
        abort(404, f"no job {job_id!r}")
    svc.store.touch(job.id)  # viewed: kept from the collection of old jobs a while longer
    return render_ide(job)


def form_options(language: str) -> dict:
    """Options from the IDE form: fields named opt.<name>; checkboxes send true when ticked; the
    toolchain picker's `toolchain`."""
    pipeline = registry.get(language)
    out = {TOOLCHAIN_OPTION: request.form[TOOLCHAIN_OPTION]} if request.form.get(TOOLCHAIN_OPTION) else {}
    for option in pipeline.options:
        field = "opt." + option.name
        if option.kind == "bool":
            out[option.name] = field in request.form
        elif field in request.form and request.form[field] != "":
            try:
                out[option.name] = option.from_text(request.form[field])
            except OptionError as e:  # a field's text that is not of its option's kind: a sentence, 400
                raise RequestError(str(e)) from None
    return out


@bp.post("/compile")
def compile_form():
    svc = services()
    svc.admission.check_open()
    language = request.form.get("language", "")
    req = svc.jobs.parse({"language": language, "source": request.form.get("source", ""),
                          "options": form_options(language) if language in svc.jobs.config.languages else {}})
    (job, _), = svc.admission.submit([req], client_address())
    job = svc.store.get_job(job.id) or job
    response = render_template("_results.html", form_error=None, **_bar_context(job))
    return response, 200, {"HX-Push-Url": f"/j/{job.id}"}


@renders_page("ide.compile_form", "scans.create_from_form")
def _refused(refused: Refused) -> str:
    """The results pane with the sentence in it (the form stays as the user left it)."""
    return render_template("_results.html", job=None, form_error=refused.message)


@bp.get("/j/<job_id>/updates")
def job_updates(job_id: str):
    """What changed since the page last asked: the status line, the tabs of stages the page does
    not have yet (appended out of band, so open panes, focus and the tabs already there stay as
    they are) and, once the job ends, its error and timings. `since` is how many stages the page
    has; `v` the version it last saw. The main answer is the next poller (none once finished)."""
    job = services().store.get_job(job_id)
    if job is None:
        abort(404, f"no job {job_id!r}")
    try:
        since = min(max(int(request.args.get("since", "0")), 0), len(job.stages))
    except ValueError:
        abort(400, "since must be a number of stages")
    # nothing changed: answered before the bar's context (its summary reads the stages) is built
    position = services().store.queue_position(job.id) if job.status == "queued" else None
    if since == len(job.stages) and request.args.get("v") == _version(job, position):
        return "", 204
    context = _bar_context(job)
    # the page's bar: its first `since` stages, those with text (a running job's offer, _offered)
    shown = [s for s in job.stages[:since] if has_text(s)]
    before, shown_keys = _grouped(shown), {s.key for s in shown}
    changes = []  # (kind, group name, all stages of the group, stages new to the page)
    for group, new in _grouped([s for s in _offered(job) if s.key not in shown_keys]).items():
        every = context["groups"][group]
        form = group_form(every)
        if group not in before:
            kind = "group"
        elif form == "picker" or kernels_of(every) or form != group_form(before[group]):
            # a kernel picker with its new kernels and tabs, one kernel's short tabs under its name,
            # or a group that became a list
            kind = "regroup"
        elif form == "list":
            kind = "options"
        else:
            kind = "tabs"
        changes.append((kind, group, every, new))
    return render_template("_job_updates.html", changes=changes, **context)


@bp.get("/j/<job_id>/stage/<path:key>")
def stage_pane(job_id: str, key: str):
    """One stage drawn by its viewer. A code stage longer than `stage_page_lines` is shown a page
    at a time (`?page=N`, from 1), read from the store's chunks that hold that page only."""
    svc = services()
    other = request.args.get("diff")
    if other:
        return _diff_pane(job_id, key, other)
    per_page = svc.web.stage_page_lines
    try:
        page = max(int(request.args.get("page", "1")), 1)
    except ValueError:
        abort(400, "page must be a number")
    stage, lines = stage_reader.head(svc.store, job_id, key)
    pages = None
    if lines <= per_page or _is_code(stage.format):
        read = stage_reader.page(svc.store, job_id, stage.key, page, per_page, (stage, lines))
        stage, text = read.stage, read.text
        if not read.whole:
            pages = {"page": page, "count": -(-lines // per_page), "lines": lines, "first": read.first,
                     "last": read.last}
    else:  # a drawing or a table is drawn whole
        stage, text = svc.store.stage_text(job_id, stage.key)
    job = svc.store.get_job(job_id)
    meta = {"source_map": stage.source_map, **stage.meta}
    if pages:
        meta["first_line"] = pages["first"]
    body = viewers.render(stage.format, text, meta) if text or stage.size else _empty_stage(stage.key)
    return _artifact(job, stage, body, diff_with=None, pages=pages)


def _artifact(job, stage, body: str, diff_with: str | None, pages: dict | None):
    """The pane of one stage of `job` (or of its diff with stage `diff_with`): `body` drawn by its
    viewer, the stages of its group and format to compare it with, its explanation and source map."""
    siblings = [s.key for s in job.stages if s.group == stage.group and s.format == stage.format and s.key != stage.key]
    return render_template("_artifact.html", job_id=job.id, stage=stage, body=body, diff_with=diff_with,
                           siblings=siblings,
                           explanation=explanation_for(stage.key, job.request.language, stage.meta),
                           source_map_json=json.dumps(stage.source_map), pages=pages)


def _empty_stage(key: str) -> str:
    """What an empty stage's pane says instead of an empty box (a program that printed nothing
    still has its output stage, so a reader can tell "nothing printed" from "not captured"): the bar
    offers it only where it is all a failed job has (_offered); its address and the API still reach it."""
    words = {"run.stdout": "The program printed nothing.", "worker.log": "The worker logged nothing."}.get(
        key, "This stage is empty: the compiler wrote nothing to it.")
    return f'<p class="hint empty-stage">{words}</p>'


def _diff_pane(job_id: str, key: str, other: str):
    """Stage `key` diffed against stage `other` of the same job: refused from the stages' sizes
    (before their texts are read) when they are too long to diff here (app/stage_diffs.py)."""
    svc = services()
    heads = [svc.store.stage_page(job_id, k, 0, 0) for k in (other, key)]
    for k, head in zip((other, key), heads):
        if head is None:
            abort(404, f"job {job_id!r} has no stage {k!r}")
    (against, against_lines, _), (stage, lines, _) = heads
    body = diffs().refusal([(against.key, against_lines, against.size), (stage.key, lines, stage.size)])
    if body is None:
        before, after = svc.store.stage_text(job_id, against.key)[1], svc.store.stage_text(job_id, stage.key)[1]
        body = diffs().render(("stage", job_id, against.key, stage.key), before, after, against.key, stage.key)
    return _artifact(svc.store.get_job(job_id), stage, body, diff_with=other, pages=None)


def _is_code(fmt: str) -> bool:
    """Formats shown line by line (their viewer is a lexer), which can be paged."""
    known = formats.FORMATS.get(fmt)
    return known is not None and known.lexer is not None


@bp.get("/j/<job_id>/timings")
def timings_pane(job_id: str):
    job = services().store.get_job(job_id)
    if job is None:
        abort(404)
    return f'<div class="artifact timings-view" data-key="timings">{timings_viewer.render(job.timings)}</div>'


@bp.get("/options/")
def options_form():
    language = request.args.get("language", "")
    if language not in services().jobs.config.languages:
        abort(404)
    p = registry.get(language)
    # the toolchain picker follows the language (swapped out of band)
    return render_template("_options.html", current=p, options={o.name: o.default for o in p.options}) + \
        render_template("_toolchain_picker.html", toolchains=toolchain_choices(language),
                        chosen_toolchain=DEFAULT_TOOLCHAIN, oob=True)

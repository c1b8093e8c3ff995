"""Two jobs side by side: the same source with two option sets, or two sources. A comparison is
stored (/c/<id>, immutable like /z/<id>); its page diffs any stage of job A against any stage of
job B with the diff viewer, shows both renderings side by side, and puts the timings next to each
other."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, jsonify, redirect, render_template, request

import viewers
from app import diffs, services
from app import lessons as lesson_files
from app.api import not_found
from app.examples import changed_options, offered
from app.http_policy import client_address, embeddable
from app.ide import form_options, toolchain_choices
from compiler.model import Request
from compiler.pipeline import DEFAULT_TOOLCHAIN, TOOLCHAIN_OPTION, chosen_toolchain
from service import job_diff
from service.jobs import RequestError
from service.store import Job
from viewers import compare as compare_viewer

bp = Blueprint("compare", __name__)

# The stage a comparison opens first when no lesson names one: the first of these both jobs have.
PREFERRED = ("inductor.output_code", "aoti.wrapper", "triton.ttgir", "triton.ptx", "xla.optimized", "xla.spmd",
             "dynamo.fx_graph", "fake.lines")


def _jobs(comparison_id: str) -> tuple[Job, Job]:
    svc = services()
    ids = svc.store.comparison_jobs(comparison_id)
    a = svc.store.get_job(ids[0]) if ids else None
    b = svc.store.get_job(ids[1]) if ids else None
    if a is None or b is None:
        abort(404, f"no comparison {comparison_id!r}")
    return a, b


def _resolve(job: Job, key: str) -> str | None:
    """A stage key of `job`: `key` itself, or the first stage of its kind when it has no qualifier."""
    keys = [s.key for s in job.stages]
    if key in keys:
        return key
    return next((k for k in keys if ":" not in key and k.startswith(key + ":")), None)


def default_stages(a: Job, b: Job, lesson: lesson_files.Lesson | None) -> tuple[str | None, str | None]:
    """The pair of stages a comparison shows first: the lesson's, else the first kind both have."""
    if lesson is not None and lesson.compare is not None:
        found = _resolve(a, lesson.compare.stage), _resolve(b, lesson.compare.stage_b)
        if all(found):
            return found
    for kind in PREFERRED:
        found = _resolve(a, kind), _resolve(b, kind)
        if all(found):
            return found
    common = [s.key for s in a.stages if s.key in {t.key for t in b.stages} and s.key != "source"]
    if common:
        return common[0], common[0]
    return (a.stages[0].key if a.stages else None), (b.stages[0].key if b.stages else None)


def differences(a: Request, b: Request) -> list[tuple[str, Any, Any]]:
    """What the two requests set differently: language, source, each option."""
    out = []
    if a.language != b.language:
        out.append(("language", a.language, b.language))
    if a.source != b.source:
        out.append(("source", f"{a.source.count(chr(10)) + 1} lines", f"{b.source.count(chr(10)) + 1} lines"))
    for name in dict.fromkeys([*a.options, *b.options]):
        left_out = DEFAULT_TOOLCHAIN if name == TOOLCHAIN_OPTION else None  # a default job leaves it out
        if a.options.get(name, left_out) != b.options.get(name, left_out):
            out.append((name, a.options.get(name, left_out), b.options.get(name, left_out)))
    return out


def _context(comparison_id: str, with_sources: bool = True) -> dict[str, Any]:
    """What the comparison's page shows; the status poll leaves out the sources' diff (the page has
    it, and a poll every few hundred ms must cost nothing)."""
    a, b = _jobs(comparison_id)
    lesson = lesson_files.for_pair(offered(), a.request, b.request)
    stage_a, stage_b = default_stages(a, b, lesson)
    finished = a.finished and b.finished
    # the page shows the sources' diff once both jobs ended (see compare.html)
    source_diff = diffs().render(("sources", a.id, b.id), a.request.source, b.request.source, "A: source",
                                 "B: source") if with_sources and finished and a.request.source != b.request.source \
        else ""
    # every stage paired and what changed, counted (service/job_diff.py): the page's, not the poll's
    changed = job_diff.compare(services().store, a, b) if with_sources and finished else None
    return {"cid": comparison_id, "a": a, "b": b, "lesson": lesson, "stage_a": stage_a, "stage_b": stage_b,
            "job_diff": changed,
            "differences": differences(a.request, b.request), "finished": finished,
            "poll_ms": services().web.poll_interval_ms, "source_diff": source_diff,
            "timings": compare_viewer.timings(a.timings, b.timings)}


def _submit_pair(side_a: Request | Job, side_b: Request | Job) -> str:
    """Both sides admitted as jobs (a stored job stays as it is), and the comparison of the two."""
    (a, _), (b, _) = services().admission.submit([side_a, side_b], client_address())
    return services().jobs.comparison(a, b)


# --- the page ---------------------------------------------------------------------------------------
@bp.get("/compare")
def new_form():
    """"Compare with…": job A as it is, and a form for job B (A's source and options to change)."""
    job = services().store.get_job(request.args.get("job", ""))
    if job is None:
        abort(404, f"no job {request.args.get('job')!r}")
    from compiler import registry
    # "compare with… another version" names B's toolchain; otherwise B starts in A's
    chosen = request.args.get("toolchain") or chosen_toolchain(job.request.options)
    return render_template("compare_new.html", job=job, current=registry.get(job.request.language),
                           options=dict(job.request.options), changed=changed_options(job.request),
                           toolchains=toolchain_choices(job.request.language, chosen), chosen_toolchain=chosen)


@bp.post("/compare")
def create_from_form():
    svc = services()
    svc.admission.check_open()
    a = svc.store.get_job(request.form.get("job", ""))
    if a is None:
        abort(404, f"no job {request.form.get('job')!r}")
    language = a.request.language
    source = request.form.get("source")
    req_b = svc.jobs.parse({"language": language, "source": a.request.source if source is None else source,
                            "options": form_options(language)})
    return redirect(f"/c/{_submit_pair(a, req_b)}", code=303)


@bp.get("/c/<comparison_id>")
def page(comparison_id: str):
    embed = request.args.get("embed") == "1"
    body = render_template("compare.html", embed=embed, **_context(comparison_id))
    return embeddable(body) if embed else body


@bp.get("/c/<comparison_id>.json")
def as_json(comparison_id: str):
    a, b = _jobs(comparison_id)
    body = {"id": comparison_id, "a": a.to_json(), "b": b.to_json()}
    if a.finished and b.finished:  # every stage paired, and what changed (service/job_diff.py)
        body.update(job_diff.compare(services().store, a, b).to_json())
    return jsonify(body)


@bp.get("/c/<comparison_id>/status")
def status(comparison_id: str):
    """Asked while either job runs: both status lines; once both ended, the page loads again
    (with the stage pickers and timings of the finished jobs)."""
    context = _context(comparison_id, with_sources=False)
    headers = {"HX-Refresh": "true"} if context["finished"] else {}
    return render_template("_compare_status.html", **context), 200, headers


@bp.get("/c/<comparison_id>/diff")
def diff(comparison_id: str):
    """Stage `a` of job A against stage `b` of job B: a unified diff (`view=diff`) or both
    rendered next to each other (`view=side`)."""
    job_a, job_b = _jobs(comparison_id)
    store = services().store
    head_a = store.stage_page(job_a.id, request.args.get("a", ""), 0, 0)
    head_b = store.stage_page(job_b.id, request.args.get("b", ""), 0, 0)
    if head_a is None or head_b is None:
        missing = ("A", request.args.get("a")) if head_a is None else ("B", request.args.get("b"))
        abort(404, f"job {missing[0]} has no stage {missing[1]!r}")
    view = request.args.get("view", "diff")
    if view != "side":
        refused = diffs().refusal([(f"A: {head_a[0].key}", head_a[1], head_a[0].size),
                                   (f"B: {head_b[0].key}", head_b[1], head_b[0].size)])
        if refused:
            return render_template("_compare_diff.html", stage_a=head_a[0], stage_b=head_b[0], body=refused,
                                   same=False)
    (stage_a, text_a), (stage_b, text_b) = (store.stage_text(job_a.id, head_a[0].key),
                                            store.stage_text(job_b.id, head_b[0].key))
    if view == "side":
        bodies = [viewers.render(s.format, t, {"source_map": s.source_map, **s.meta})
                  for s, t in ((stage_a, text_a), (stage_b, text_b))]
        return render_template("_compare_side.html", stages=(stage_a, stage_b), bodies=bodies,
                               jobs=(job_a, job_b))
    body = diffs().render(("pair", job_a.id, stage_a.key, job_b.id, stage_b.key), text_a, text_b, f"A: {stage_a.key}",
                          f"B: {stage_b.key}")
    return render_template("_compare_diff.html", stage_a=stage_a, stage_b=stage_b, body=body,
                           same=text_a == text_b)


# --- the JSON API -----------------------------------------------------------------------------------
@bp.post("/api/comparisons")
def api_create():
    """Body `{"a": side, "b": side}`, each side a request (`language`, `source`, `options`) or
    `{"job": id}` of a stored job."""
    svc = services()
    svc.admission.check_open()
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("a"), dict) or not isinstance(body.get("b"), dict):
        raise RequestError("the body must be {\"a\": ..., \"b\": ...}, each a request or {\"job\": id}")
    sides: list[Request | Job] = []
    for name in ("a", "b"):
        side = body[name]
        if "job" in side:
            job = svc.store.get_job(str(side["job"]))
            if job is None:
                raise not_found(f"{name}: no job {side['job']!r}")
            sides.append(job)
        else:
            try:
                sides.append(svc.jobs.parse(side))
            except RequestError as e:
                raise RequestError(f"{name}: {e.message}") from None
    comparison_id = _submit_pair(*sides)
    a, b = _jobs(comparison_id)
    return jsonify({"id": comparison_id, "url": f"/c/{comparison_id}", "a": a.id, "b": b.id,
                    "status": [a.status, b.status]}), (200 if a.finished and b.finished else 202)

"""The IDE page and the htmx partials it swaps in."""
from __future__ import annotations

import json
from collections import OrderedDict

from flask import Blueprint, abort, render_template, request

import viewers
from app import services
from app.http_policy import client_address, rate_limit
from compiler import registry
from compiler.jobs import QueueFull, RequestError
from compiler.store import Job
from viewers import diff as diff_viewer
from viewers import timings as timings_viewer
from viewers.explanations import explanation_for

bp = Blueprint("ide", __name__)


def _languages() -> list:
    return [registry.get(key) for key in services().jobs.config.languages]


def _grouped(job: Job) -> "OrderedDict[str, list]":
    groups: "OrderedDict[str, list]" = OrderedDict()
    for stage in job.stages:
        groups.setdefault(stage.group, []).append(stage)
    return groups


def render_ide(job: Job | None = None, link_id: str | None = None, language: str | None = None):
    langs = _languages()
    current = registry.get(job.request.language if job else (language or langs[0].key))
    options = dict(job.request.options) if job else {o.name: o.default for o in current.options}
    return render_template("ide.html", languages=langs, current=current, options=options,
                           source=job.request.source if job else current.example, job=job,
                           groups=_grouped(job) if job else None, link_id=link_id,
                           poll_ms=services().settings["poll_interval_ms"], refusal=services().refusal,
                           examples={p.key: p.example for p in langs})


@bp.get("/")
def index():
    language = request.args.get("language")
    if language and language not in services().jobs.config.languages:
        abort(404, f"unknown language {language!r}")
    return render_ide(language=language)


@bp.get("/j/<job_id>")
def job_page(job_id: str):
    job = services().store.get_job(job_id)
    if job is None:
        abort(404, f"no job {job_id!r}")
    return render_ide(job)


def _form_options(language: str) -> dict:
    """Options from the IDE form: fields named opt.<name>; checkboxes send true when ticked."""
    pipeline = registry.get(language)
    out = {}
    for option in pipeline.options:
        field = "opt." + option.name
        if option.kind == "bool":
            out[option.name] = field in request.form
        elif field in request.form and request.form[field] != "":
            out[option.name] = request.form[field]
    return out


@bp.post("/compile")
def compile_form():
    svc = services()
    if svc.refusal:
        return render_template("_results.html", job=None, form_error=svc.refusal, groups=None,
                               poll_ms=svc.settings["poll_interval_ms"])
    limited = rate_limit().refuse(client_address())
    if limited:
        return _refused(limited[0])
    language = request.form.get("language", "")
    try:
        req = svc.jobs.parse({"language": language, "source": request.form.get("source", ""),
                              "options": _form_options(language) if language in svc.jobs.config.languages else {}})
    except RequestError as e:
        return render_template("_results.html", job=None, form_error=str(e), groups=None,
                               poll_ms=svc.settings["poll_interval_ms"])
    try:
        job, _ = svc.jobs.submit(req)
    except QueueFull as e:
        return _refused(str(e))
    job = svc.store.get_job(job.id) or job
    response = render_template("_results.html", job=job, groups=_grouped(job), form_error=None,
                               poll_ms=svc.settings["poll_interval_ms"])
    return response, 200, {"HX-Push-Url": f"/j/{job.id}"}


def _refused(sentence: str):
    """429 with the sentence; htmx swaps only 2xx answers, so the page's own request gets 200."""
    body = render_template("_results.html", job=None, form_error=sentence, groups=None,
                           poll_ms=services().settings["poll_interval_ms"])
    return body, (200 if request.headers.get("HX-Request") else 429)


@bp.get("/j/<job_id>/bar")
def job_bar(job_id: str):
    """The status line and stage tabs; polled while the job runs."""
    job = services().store.get_job(job_id)
    if job is None:
        abort(404)
    return render_template("_job_bar.html", job=job, groups=_grouped(job), poll_ms=services().settings["poll_interval_ms"])


@bp.get("/j/<job_id>/stage/<path:key>")
def stage_pane(job_id: str, key: str):
    found = services().store.stage_text(job_id, key)
    if found is None:
        abort(404, f"job {job_id!r} has no stage {key!r}")
    stage, text = found
    job = services().store.get_job(job_id)
    other = request.args.get("diff")
    if other:
        against = services().store.stage_text(job_id, other)
        if against is None:
            abort(404, f"job {job_id!r} has no stage {other!r}")
        body = diff_viewer.render(against[1], text, against[0].key, stage.key)
    else:
        body = viewers.render(stage.format, text, {"source_map": stage.source_map, **stage.meta})
    siblings = [s.key for s in job.stages if s.group == stage.group and s.format == stage.format and s.key != key]
    return render_template("_artifact.html", job_id=job_id, stage=stage, body=body, diff_with=other,
                           siblings=siblings, explanation=explanation_for(stage.key),
                           source_map_json=json.dumps(stage.source_map))


@bp.get("/j/<job_id>/timings")
def timings_pane(job_id: str):
    job = services().store.get_job(job_id)
    if job is None:
        abort(404)
    return f'<div class="artifact timings-view">{timings_viewer.render(job.timings)}</div>'


@bp.get("/options/")
def options_form():
    language = request.args.get("language", "")
    if language not in services().jobs.config.languages:
        abort(404)
    p = registry.get(language)
    return render_template("_options.html", current=p, options={o.name: o.default for o in p.options})

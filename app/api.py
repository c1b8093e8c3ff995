"""The JSON API (documented in docs/api.md)."""
from __future__ import annotations

from flask import Blueprint, Response, jsonify, request, url_for

from app import services
from app.http_policy import RAW_TEXT_POLICY, client_address, rate_limit
from compiler import registry
from compiler.jobs import QueueFull, RequestError

bp = Blueprint("api", __name__, url_prefix="/api")


def _error(status: int, message: str, kind: str = "RequestError"):
    return jsonify({"error": {"kind": kind, "message": message, "line": None}}), status


@bp.post("/compile")
def compile_():
    svc = services()
    if svc.refusal:
        return _error(503, svc.refusal, "SandboxUnavailable")
    limited = rate_limit().refuse(client_address())
    if limited:
        response, status = _error(429, limited[0], "RateLimited")
        response.headers["Retry-After"] = str(limited[1])
        return response, status
    try:
        req = svc.jobs.parse(request.get_json(silent=True))
    except RequestError as e:
        return _error(400, str(e))
    try:
        job, known = svc.jobs.submit(req)
    except QueueFull as e:
        response, status = _error(429, str(e), "QueueFull")
        response.headers["Retry-After"] = "60"
        return response, status
    body = {"job": job.id, "url": url_for("ide.job_page", job_id=job.id), "status": job.status, "cached": known}
    return jsonify(body), (200 if known and job.finished else 202)


@bp.get("/jobs/<job_id>")
def job(job_id: str):
    found = services().store.get_job(job_id)
    if found is None:
        return _error(404, f"no job {job_id!r}", "NotFound")
    return jsonify(found.to_json())


@bp.get("/jobs/<job_id>/stages/<path:key>")
def stage(job_id: str, key: str):
    found = services().store.stage_text(job_id, key)
    if found is None:
        return _error(404, f"job {job_id!r} has no stage {key!r}", "NotFound")
    stage_, text = found
    if request.args.get("format") == "json":
        return jsonify({"key": stage_.key, "title": stage_.title, "group": stage_.group, "text": text,
                        "format": stage_.format, "source_map": stage_.source_map, "meta": stage_.meta})
    # Plain text the browser must not sniff into HTML, in a sandbox if it tried.
    filename = "".join(c if c.isalnum() or c in "._-" else "_" for c in stage_.key)[:100] + ".txt"
    return Response(text, content_type="text/plain; charset=utf-8",
                    headers={"Content-Disposition": f'inline; filename="{filename}"',
                             "Content-Security-Policy": RAW_TEXT_POLICY, "X-Content-Type-Options": "nosniff"})


@bp.post("/shortlinks")
def shortlink():
    svc = services()
    body = request.get_json(silent=True) or {}
    job_ = svc.store.get_job(str(body.get("job", "")))
    if job_ is None:
        return _error(404, f"no job {body.get('job')!r}", "NotFound")
    link_id = svc.jobs.shortlink(job_)
    return jsonify({"id": link_id, "url": url_for("permalinks.page", link_id=link_id)})


@bp.get("/languages")
def languages():
    """Every offered language with its option schema, so clients can build requests."""
    out = []
    for key in services().jobs.config.languages:
        p = registry.get(key)
        out.append({"key": key, "title": p.title, "options": [
            {"name": o.name, "kind": o.kind, "default": o.default, "help": o.help, "choices": list(o.choices)}
            for o in p.options]})
    return jsonify({"languages": out})

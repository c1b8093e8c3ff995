"""Importing a compiler log made elsewhere: the form at /import and POST /api/imports.

The web process only checks the upload's size and keeps it in the store; unpacking and reading it
happen in the sandbox (the `import` language, compiler/imports/). The job is an ordinary job:
same page, same permalink, answered from the store when the same file is uploaded again.
"""
from __future__ import annotations

from flask import Blueprint, jsonify, redirect, render_template, request, url_for
from werkzeug.exceptions import RequestEntityTooLarge

from app import services
from app.http_policy import client_address, rate_limit
from compiler import registry
from compiler.jobs import QueueFull, RequestError

bp = Blueprint("imports", __name__)

LANGUAGE = "import"


def _max_upload_bytes() -> int:
    return int(services().settings["import_max_upload_mb"]) * 2**20


@bp.before_request
def _allow_the_upload_size():
    # These routes take an archive: their body cap is import_max_upload_mb, not max_request_kb.
    if request.endpoint in ("imports.import_form", "imports.api_import"):
        request.max_content_length = _max_upload_bytes() + (64 << 10)  # the form fields around the file


def _too_large_sentence() -> str:
    return (f"the upload is larger than {services().settings['import_max_upload_mb']} MiB "
            "(setting import_max_upload_mb)")


def _submit() -> tuple[dict | None, str | None, int]:
    """(the job's JSON, None, status) or (None, the sentence saying why not, status)."""
    svc = services()
    if svc.refusal:
        return None, svc.refusal, 503
    if not svc.settings["imports"]:
        return None, "this server does not import logs (setting imports)", 404
    limited = rate_limit().refuse(client_address())
    if limited:
        return None, limited[0], 429
    upload = request.files.get("archive")
    if upload is None or not upload.filename:
        return None, "no file: send the archive in the multipart field `archive`", 400
    data = upload.stream.read(_max_upload_bytes() + 1)
    if len(data) > _max_upload_bytes():
        return None, _too_large_sentence(), 413
    if not data:
        return None, f"{upload.filename}: the file is empty", 400
    kind = request.form.get("kind") or "auto"
    try:
        job, known = svc.jobs.submit_upload(LANGUAGE, upload.filename, data, {"kind": kind})
    except RequestError as e:
        return None, str(e), 400
    except QueueFull as e:
        return None, str(e), 429
    return ({"job": job.id, "url": url_for("ide.job_page", job_id=job.id), "status": job.status, "cached": known},
            None, 200 if known and job.finished else 202)


@bp.errorhandler(RequestEntityTooLarge)
def _too_large(_e):
    if request.path.startswith("/api/"):
        return jsonify({"error": {"kind": "RequestTooLarge", "message": _too_large_sentence(), "line": None}}), 413
    return _form(_too_large_sentence()), 413


def _form(error: str | None = None) -> str:
    """The IDE page with the import form over it."""
    from app.ide import render_ide
    pipeline = registry.get(LANGUAGE)
    form = render_template("_import.html", error=error, kinds=next(o for o in pipeline.options if o.name == "kind"),
                           max_mb=services().settings["import_max_upload_mb"],
                           max_unpacked_mb=services().settings["import_max_unpacked_mb"],
                           max_files=services().settings["import_max_files"])
    return render_ide(import_form=form)


@bp.get("/import")
def import_page():
    return _form()


@bp.post("/import")
def import_form():
    body, error, status = _submit()
    if body is None:
        return _form(error), status
    return redirect(body["url"], code=303)


@bp.post("/api/imports")
def api_import():
    body, error, status = _submit()
    if body is None:
        kind = {400: "RequestError", 404: "NotFound", 413: "RequestTooLarge", 429: "RateLimited",
                503: "SandboxUnavailable"}.get(status, "RequestError")
        return jsonify({"error": {"kind": kind, "message": error, "line": None}}), status
    return jsonify(body), status

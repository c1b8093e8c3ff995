"""Importing a compiler log made elsewhere: the form at /import and POST /api/imports.

The web process only checks the upload's size and keeps it in the store; unpacking and reading it
happen in the sandbox (the `import` language, compiler/imports/). The job is an ordinary job:
same page, same permalink, answered from the store when the same file is uploaded again.
"""
from __future__ import annotations

from flask import Blueprint, jsonify, redirect, render_template, request, url_for
from werkzeug.exceptions import RequestEntityTooLarge

from app import services
from app.http_policy import client_address
from app.refusals import answer, renders_page
from compiler import registry
from compiler.errors import ErrorKind, Refused
from service.jobs import RequestError

bp = Blueprint("imports", __name__)

LANGUAGE = "import"


def _max_upload_bytes() -> int:
    return services().web.import_max_upload_bytes


@bp.before_request
def _allow_the_upload_size():
    # These routes take an archive: their body cap is import_max_upload_mb, not max_request_kb.
    if request.endpoint in ("imports.import_form", "imports.api_import"):
        request.max_content_length = _max_upload_bytes() + (64 << 10)  # the form fields around the file


def _too_large_sentence() -> str:
    return (f"the upload is larger than {services().web.import_max_upload_mb} MiB "
            "(setting import_max_upload_mb)")


def _submit() -> tuple[dict, int]:
    """The job's JSON and status; a refusal is raised (app/refusals.py answers it)."""
    svc = services()
    svc.admission.check_open()
    if not svc.web.imports:
        raise Refused(ErrorKind.NotFound, "this server does not import logs (setting imports)")
    upload = request.files.get("archive")
    if upload is None or not upload.filename:
        raise RequestError("no file: send the archive in the multipart field `archive`")
    data = upload.stream.read(_max_upload_bytes() + 1)
    if len(data) > _max_upload_bytes():
        raise Refused(ErrorKind.RequestTooLarge, _too_large_sentence())
    if not data:
        raise RequestError(f"{upload.filename}: the file is empty")
    kind = request.form.get("kind") or "auto"
    job, known = svc.admission.submit_upload(LANGUAGE, upload.filename, data, {"kind": kind}, client_address())
    return ({"job": job.id, "url": url_for("ide.job_page", job_id=job.id), "status": job.status, "cached": known},
            200 if known and job.finished else 202)


@bp.errorhandler(RequestEntityTooLarge)
def _too_large(_e):
    return answer(Refused(ErrorKind.RequestTooLarge, _too_large_sentence()))


@renders_page("imports.import_form")
def _refused(refused: Refused) -> str:
    return _form(refused.message)


def _form(error: str | None = None) -> str:
    """The IDE page with the import form over it."""
    from app.ide import render_ide
    pipeline = registry.get(LANGUAGE)
    form = render_template("_import.html", error=error, kinds=next(o for o in pipeline.options if o.name == "kind"),
                           max_mb=services().web.import_max_upload_mb,
                           max_unpacked_mb=services().web.import_max_unpacked_mb,
                           max_files=services().web.import_max_files)
    return render_ide(import_form=form)


@bp.get("/import")
def import_page():
    return _form()


@bp.post("/import")
def import_form():
    body, _ = _submit()
    return redirect(body["url"], code=303)


@bp.post("/api/imports")
def api_import():
    body, status = _submit()
    return jsonify(body), status

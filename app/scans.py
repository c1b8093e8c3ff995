"""Version scans (service/scans.py): `POST /api/scan` and `GET /api/scans/<id>`, the page
`/scan/<id>` (the toolchains in version order, each job's status live, the changes with links to
their diffs on the comparison page `/c/<id>`), and `POST /scan`, the IDE's "scan versions" button
(the editor's source and options, as Compile sends them)."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, jsonify, redirect, render_template, request

from app import services
from app.api import not_found
from app.http_policy import client_address
from app.ide import form_options
from service.scans import Report, stage_choices, stage_from_form

bp = Blueprint("scans", __name__)


def _report(scan_id: str) -> Report:
    found = services().scans.report(scan_id)
    if found is None:
        raise not_found(f"no scan {scan_id!r}")
    return found


def _start(payload: Any):
    svc = services()
    svc.admission.check_open()
    return svc.scans.start(payload, client_address())


@bp.post("/api/scan")
def api_create():
    scan, submitted = _start(request.get_json(silent=True))
    waiting = len(scan.jobs) - len(submitted)
    finished = not waiting and all(job.finished for job, _ in submitted)
    return jsonify({"scan": scan.id, "url": f"/scan/{scan.id}", "jobs": len(scan.jobs), "waiting": waiting,
                    "cached": sum(1 for _, known in submitted if known)}), (200 if finished else 202)


@bp.get("/api/scans/<scan_id>")
def api_get(scan_id: str):
    return jsonify(services().scans.to_json(_report(scan_id)))


@bp.post("/scan")
def create_from_form():
    """The IDE's "scan versions" (a submit button of the compile form, `formaction=/scan`): the
    editor's source and options; htmx is told to go to the scan's page."""
    language = request.form.get("language", "")
    languages = services().jobs.config.languages
    scan, _ = _start({"language": language, "source": request.form.get("source", ""),
                      "options": form_options(language) if language in languages else {},
                      "stage": request.form.get("stage") or None})
    if request.headers.get("HX-Request"):
        return "", 200, {"HX-Redirect": f"/scan/{scan.id}"}
    return redirect(f"/scan/{scan.id}", code=303)


def _context(scan_id: str) -> dict[str, Any]:
    report = _report(scan_id)
    return {"report": report, "changes": [(c, services().scans.diff_url(c)) for c in report.changes],
            "changed": {c.after.toolchain for c in report.changes}, "poll_ms": services().web.poll_interval_ms,
            "max_jobs_per_client": services().jobs.config.max_jobs_per_client}


@bp.get("/scan/<scan_id>")
def page(scan_id: str):
    if services().store.scan(scan_id) is None:
        abort(404, f"no scan {scan_id!r}")
    context = _context(scan_id)
    return render_template("scan.html", choices=stage_choices(context["report"]), **context)


@bp.post("/scan/<scan_id>/stage")
def another_stage(scan_id: str):
    """The scan page's stage picker: the same jobs, another stage compared (Scans.again)."""
    services().admission.check_open()
    found = services().scans.again(scan_id, stage_from_form(request.form), client_address())
    if found is None:
        abort(404, f"no scan {scan_id!r}, or none of its jobs is kept")
    return redirect(f"/scan/{found[0].id}", code=303)


@bp.get("/scan/<scan_id>/status")
def status(scan_id: str):
    """Asked while the scan runs: its jobs and the changes found so far; the answer polls again
    until every job ended."""
    if services().store.scan(scan_id) is None:
        abort(404, f"no scan {scan_id!r}")
    return render_template("_scan_status.html", **_context(scan_id))

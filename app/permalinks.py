"""Short links: /z/<id> opens the IDE with the stored source, options and results."""
from __future__ import annotations

from flask import Blueprint, abort, jsonify

from app import services
from app.ide import render_ide

bp = Blueprint("permalinks", __name__)


def _job_for(link_id: str):
    svc = services()
    job_id = svc.store.shortlink_job(link_id)
    job = svc.store.get_job(job_id) if job_id else None
    if job is None:
        abort(404, f"no short link {link_id!r}")
    return job


@bp.get("/z/<link_id>.json")
def as_json(link_id: str):
    job = _job_for(link_id)
    return jsonify({"id": link_id, "job": job.to_json()})


@bp.get("/z/<link_id>")
def page(link_id: str):
    job = _job_for(link_id)
    services().store.touch(job.id)
    return render_ide(job, link_id=link_id)

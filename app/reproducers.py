"""`GET /j/<id>/reproducer.py`: a standalone script re-running a job's compile with the compiler
alone, outside irscope (the language's `Pipeline.reproducer`, compiler/<package>/reproducer.py),
for a bug report upstream. Text made from the stored request; nothing runs here."""
from __future__ import annotations

from flask import Blueprint, Response

from app import services
from app.api import not_found
from app.http_policy import RAW_TEXT_POLICY
from compiler import registry

bp = Blueprint("reproducers", __name__)


def script(job_id: str) -> str:
    job = services().store.get_job(job_id)
    if job is None:
        raise not_found(f"no job {job_id!r}")
    text = registry.get(job.request.language).reproducer(job.request, job.toolchain, job.id)
    if text is None:
        raise not_found(f"irscope makes no reproducer for this job: {job.request.language} jobs have none, or "
                        "its options are refused now as a new job's would be")
    return text


@bp.get("/j/<job_id>/reproducer.py")
def download(job_id: str):
    return Response(script(job_id), content_type="text/x-python; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="reproducer-{job_id}.py"',
                             "Content-Security-Policy": RAW_TEXT_POLICY, "X-Content-Type-Options": "nosniff"})

"""The JSON API (documented in docs/api.md)."""
from __future__ import annotations

from flask import Blueprint, Response, jsonify, request, url_for

from app import services
from app.http_policy import RAW_TEXT_POLICY, client_address
from compiler import registry
from compiler.errors import ErrorKind, Refused
from service import toolchain_envs
from service.glance import glance

bp = Blueprint("api", __name__, url_prefix="/api")


def not_found(message: str) -> Refused:
    return Refused(ErrorKind.NotFound, message)


@bp.post("/compile")
def compile_():
    svc = services()
    svc.admission.check_open()
    req = svc.jobs.parse(request.get_json(silent=True))
    (job, known), = svc.admission.submit([req], client_address())
    body = {"job": job.id, "url": url_for("ide.job_page", job_id=job.id), "status": job.status, "cached": known}
    return jsonify(body), (200 if known and job.finished else 202)


@bp.get("/jobs/<job_id>")
def job(job_id: str):
    found = services().store.get_job(job_id)
    if found is None:
        raise not_found(f"no job {job_id!r}")
    body = found.to_json()
    body["summary"] = [fact.to_json() for fact in glance(services().store, found)]
    # the job's reproducer script (app/reproducers.py), where its language has one
    reproducible = registry.get(found.request.language).reproducer(found.request, found.toolchain, found.id)
    body["reproducer"] = url_for("reproducers.download", job_id=found.id) if reproducible else None
    return jsonify(body)


@bp.get("/jobs/<job_id>/stages/<path:key>")
def stage(job_id: str, key: str):
    store = services().store
    if request.args.get("format") == "json":
        found = store.stage_text(job_id, key)
        if found is None:
            raise not_found(f"job {job_id!r} has no stage {key!r}")
        stage_, text = found
        return jsonify({"key": stage_.key, "title": stage_.title, "group": stage_.group, "text": text,
                        "format": stage_.format, "source_map": stage_.source_map, "meta": stage_.meta})
    head = store.stage_page(job_id, key, 0, 0)  # the stage, no text yet
    if head is None:
        raise not_found(f"job {job_id!r} has no stage {key!r}")
    stage_ = head[0]
    # Plain text the browser must not sniff into HTML, in a sandbox if it tried; streamed chunk by
    # chunk, so a large stage is never held whole.
    filename = "".join(c if c.isalnum() or c in "._-" else "_" for c in stage_.key)[:100] + ".txt"
    return Response(store.stage_chunks(job_id, stage_.key), content_type="text/plain; charset=utf-8",
                    headers={"Content-Disposition": f'inline; filename="{filename}"',
                             "Content-Security-Policy": RAW_TEXT_POLICY, "X-Content-Type-Options": "nosniff"})


@bp.post("/shortlinks")
def shortlink():
    svc = services()
    body = request.get_json(silent=True) or {}
    job_ = svc.store.get_job(str(body.get("job", "")))
    if job_ is None:
        raise not_found(f"no job {body.get('job')!r}")
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


@bp.get("/toolchains")
def toolchains():
    """The installed toolchains (the default first): versions, size, the offered languages each
    serves, what each supports; a job names one with option `toolchain`."""
    config = services().jobs.config
    return jsonify({"toolchains": toolchain_envs.listing(config.toolchains_dir, config.languages)})


@bp.get("/stats")
def stats():
    """What the store holds against its limits (service/retention.py)."""
    from service import retention  # the service's storage accounting: no host side of running jobs
    svc = services()
    return jsonify(retention.stats(svc.store, svc.storage))


@bp.get("/targets")
def targets():
    """Where jobs can run: each live queue (`cpu`, `cuda:sm_90`, ...) with its workers, and the GPU
    targets that compile on a virtual device because no live worker has them."""
    import socket

    from compiler.targets import TARGETS  # the target table imports no compiler
    svc = services()
    if not svc.web.broker_url:
        spares = getattr(svc.runner, "spares", None)
        workers = [{"name": "embedded", "host": socket.gethostname(), "concurrency": svc.web.workers,
                    "running": None, "device": False, "last_seen": None,
                    # per language: spares ready and starting, and the resident memory of each
                    "spares": spares.report() if spares is not None else {}}]
        return jsonify({"mode": "embedded", "targets": [{"name": "cpu", "workers": workers}],
                        "virtual": list(TARGETS)})
    live = svc.store.live_workers(svc.web.worker_lost_after_s)
    queues: dict[str, list] = {}
    for w in live:
        for queue in w.queues:
            has = w.capabilities.get("queues", {}).get(queue, {}).get("device", False)
            queues.setdefault(queue, []).append({
                "name": w.name, "host": w.host, "concurrency": w.concurrency, "running": w.running,
                "device": has, "gpus": [g for g in w.capabilities.get("gpus", []) if g.get("target") == queue],
                "cpu": w.capabilities.get("cpu", {}).get("model"),
                "last_seen": w.last_seen.isoformat(timespec="seconds") + "Z"})
    return jsonify({"mode": "worker tier", "targets": [{"name": q, "workers": ws} for q, ws in sorted(queues.items())],
                    "virtual": [t for t in TARGETS if t not in queues]})

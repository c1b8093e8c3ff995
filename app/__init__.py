"""irscope's web application: routes only. Work goes to compiler.jobs; markup comes from viewers."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from flask import Flask

from app import http_policy
from app import settings as settings_table
from compiler import cgroups, job_dir, registry, sandbox
from compiler.bundle_reader import BundleCaps
from compiler.jobs import Jobs, JobsConfig
from compiler.runner import LocalRunner, Runner, RunnerConfig
from compiler.store import Store

log = logging.getLogger(__name__)


@dataclass
class Services:
    """What the routes use, attached to the app once."""

    settings: dict[str, Any]
    store: Store
    jobs: Jobs
    runner: Runner
    sandboxed: bool
    refusal: str | None  # why compiling is refused (no sandbox available), or None


def limits_from(values: dict[str, Any]) -> sandbox.Limits:
    return sandbox.Limits(
        wall_s=float(values["wall_time_limit_s"]), cpu_s=int(values["cpu_time_limit_s"]),
        memory_bytes=int(values["memory_limit_mb"]) * 2**20, processes=int(values["process_limit"]),
        file_bytes=int(values["file_size_limit_mb"]) * 2**20, output_bytes=int(values["output_limit_kb"]) * 1024,
        tmp_bytes=int(values["tmp_size_mb"]) * 2**20, job_memory_bytes=int(values["job_memory_mb"]) * 2**20,
        cpus=float(values["job_cpus"]), shm_bytes=int(values["shm_size_mb"]) * 2**20)


def caps_from(values: dict[str, Any]) -> BundleCaps:
    return BundleCaps(manifest_bytes=int(values["max_manifest_kb"]) * 1024,
                      stage_bytes=int(values["max_stage_kb"]) * 1024, stages=int(values["max_stages"]),
                      job_bytes=(int(values["job_disk_mb"]) or 1 << 20) * 2**20,
                      meta_bytes=int(values["max_stage_meta_kb"]) * 1024)


def sandbox_refusal(values: dict[str, Any]) -> tuple[sandbox.SandboxUser | None, str | None]:
    """The host user jobs run as, and why this server must not run user code (None when it may):
    bubblewrap missing, no unprivileged sandbox user, or a limit it cannot enforce here."""
    if values["sandbox"] != "bwrap":
        return None, None
    user = None
    if os.geteuid() == 0:
        try:
            user = sandbox.sandbox_user(str(values["sandbox_user"]))
        except ValueError as e:
            return None, f"this server will not run user code: {e}."
    if not sandbox.bwrap_works(user):
        return user, ("this server will not run user code: bubblewrap (bwrap) is missing or cannot create its "
                      "namespaces here. Install it (apt-get install bubblewrap) or start the server with "
                      "`irscope serve --insecure-no-sandbox`.")
    missing = cgroups.missing_controllers(limits_from(values).cgroup())
    unenforced = [f"{cgroups.LIMIT_OF[c]} (the cgroup {c} controller: {why})" for c, why in missing.items()]
    if int(values["job_disk_mb"]) > 0:
        why = job_dir.can_mount_tmpfs(os.path.join(values["data_dir"], "jobs", ".mount-probe"))
        if why:
            unenforced.append(f"job_disk_mb (mounting a tmpfs for the job directory: {why}; set it to 0 to run "
                              "without a disk cap)")
    if unenforced:
        return user, ("this server will not run user code: it cannot enforce " + "; ".join(unenforced) +
                      ". Run it as root or in a cgroup delegated to it (systemd-run --scope -p Delegate=yes, "
                      "or a container with its own cgroup namespace), or start it with "
                      "`irscope serve --insecure-no-sandbox`.")
    return user, None


def runner_config(values: dict[str, Any], user: sandbox.SandboxUser | None, data_dir: str | None = None,
                  workers: int | None = None) -> RunnerConfig:
    """How jobs run on this machine (the embedded server's pool, or one `irscope worker`)."""
    use_bwrap = values["sandbox"] == "bwrap"
    return RunnerConfig(data_dir=data_dir or values["data_dir"],
                        workers=int(values["workers"]) if workers is None else workers,
                        limits=limits_from(values), use_bwrap=use_bwrap, keep_job_dirs=bool(values["keep_job_dirs"]),
                        spare_workers=int(values["spare_workers"]), max_stage_bytes=int(values["max_stage_kb"]) * 1024,
                        user=user, job_disk_bytes=int(values["job_disk_mb"]) * 2**20 if use_bwrap else 0,
                        caps=caps_from(values), measure_s=float(values["measure_s"]),
                        import_max_files=int(values["import_max_files"]),
                        import_max_unpacked_bytes=int(values["import_max_unpacked_mb"]) * 2**20,
                        run_memory_percent=int(values["run_memory_percent"]))


def open_store(values: dict[str, Any]) -> Store:
    return Store(values["database_url"], chunk_bytes=int(values["stage_chunk_kb"]) * 1024)


def offered_languages(values: dict[str, Any]) -> tuple[str, ...]:
    offered = [lang.strip() for lang in values["languages"].split(",") if lang.strip()]
    missing = [lang for lang in offered if lang not in registry.keys()]
    if missing:
        log.warning("languages %s are not registered pipelines; not offering them", ", ".join(missing))
    languages = tuple(lang for lang in offered if lang in registry.keys())
    if not languages:
        raise ValueError(f"no known language in the languages setting {values['languages']!r}")
    return languages


def web_processes(values: dict[str, Any]) -> int:
    """gunicorn processes: the setting, or 1 embedded and 2 per core (at most 8) with a broker."""
    if int(values["web_processes"]) > 0:
        return int(values["web_processes"])
    return min(8, 2 * (os.cpu_count() or 1)) if values["broker_url"] else 1


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """The application factory. `config` holds settings (see app/settings.py) by name."""
    values = settings_table.load(config)
    os.makedirs(values["data_dir"], exist_ok=True)
    languages = offered_languages(values)
    use_bwrap = values["sandbox"] == "bwrap"
    if values["sandbox"] not in ("bwrap", "none"):
        raise ValueError(f"sandbox must be 'bwrap' or 'none', not {values['sandbox']!r}")
    store = open_store(values)
    jobs_config = JobsConfig(languages=languages, max_source_bytes=int(values["max_source_kb"]) * 1024,
                             reuse_results=bool(values["reuse_results"]),
                             max_queued_jobs=int(values["max_queued_jobs"]),
                             max_jobs_per_client=int(values["max_jobs_per_client"]),
                             imports=bool(values["imports"]))
    runner: Runner
    if values["broker_url"]:
        # The worker tier: this process runs no job; `irscope worker` processes do, in their sandbox.
        from compiler.celery_runner import CeleryRunner
        runner = CeleryRunner(store, values["broker_url"], float(values["worker_lost_after_s"]))
        jobs = Jobs(store, runner, jobs_config, live_queues=runner.live_queues)
        refusal = None
    else:
        user, refusal = sandbox_refusal(values)
        runner = LocalRunner(store, runner_config(values, user))
        jobs = Jobs(store, runner, jobs_config)
        if refusal is None:
            jobs.resume_unfinished()
            runner.start_background(list(languages), warm=bool(values["warm_toolchain_cache"]))

    flask_app = Flask(__name__, template_folder="../templates", static_folder="../static")
    flask_app.config["JSON_SORT_KEYS"] = False
    flask_app.debug = False  # never the interactive debugger, whatever FLASK_DEBUG says
    http_policy.init_app(flask_app, values)
    flask_app.extensions["irscope"] = Services(settings=values, store=store, jobs=jobs, runner=runner,
                                               sandboxed=use_bwrap, refusal=refusal)

    from app import api, compare, examples, ide, imports, permalinks
    flask_app.register_blueprint(api.bp)
    flask_app.register_blueprint(ide.bp)
    flask_app.register_blueprint(permalinks.bp)
    flask_app.register_blueprint(imports.bp)
    flask_app.register_blueprint(examples.bp)
    flask_app.register_blueprint(compare.bp)
    return flask_app


def services() -> Services:
    from flask import current_app
    return current_app.extensions["irscope"]

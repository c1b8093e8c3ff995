"""irscope's web application: routes only. Work goes to compiler.jobs; markup comes from viewers."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from flask import Flask

from app import settings as settings_table
from compiler import registry, sandbox
from compiler.jobs import Jobs, JobsConfig
from compiler.runner import LocalRunner, RunnerConfig
from compiler.store import Store

log = logging.getLogger(__name__)


@dataclass
class Services:
    """What the routes use, attached to the app once."""

    settings: dict[str, Any]
    store: Store
    jobs: Jobs
    runner: LocalRunner
    sandboxed: bool
    refusal: str | None  # why compiling is refused (no sandbox available), or None


def limits_from(values: dict[str, Any]) -> sandbox.Limits:
    return sandbox.Limits(
        wall_s=float(values["wall_time_limit_s"]), cpu_s=int(values["cpu_time_limit_s"]),
        memory_bytes=int(values["memory_limit_mb"]) * 2**20, processes=int(values["process_limit"]),
        file_bytes=int(values["file_size_limit_mb"]) * 2**20, output_bytes=int(values["output_limit_kb"]) * 1024,
        tmp_bytes=int(values["tmp_size_mb"]) * 2**20)


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """The application factory. `config` holds settings (see app/settings.py) by name."""
    values = settings_table.load(config)
    os.makedirs(values["data_dir"], exist_ok=True)
    offered = [lang.strip() for lang in values["languages"].split(",") if lang.strip()]
    missing = [lang for lang in offered if lang not in registry.keys()]
    if missing:
        log.warning("languages %s are not registered pipelines; not offering them", ", ".join(missing))
    languages = tuple(lang for lang in offered if lang in registry.keys())
    if not languages:
        raise ValueError(f"no known language in the languages setting {values['languages']!r}")

    refusal = None
    use_bwrap = values["sandbox"] == "bwrap"
    if values["sandbox"] not in ("bwrap", "none"):
        raise ValueError(f"sandbox must be 'bwrap' or 'none', not {values['sandbox']!r}")
    if use_bwrap and not sandbox.bwrap_works():
        refusal = ("this server will not run user code: bubblewrap (bwrap) is missing or cannot create its "
                   "namespaces here. Install it (apt-get install bubblewrap) or start the server with "
                   "`irscope serve --insecure-no-sandbox`.")

    store = Store(values["database_url"])
    runner = LocalRunner(store, RunnerConfig(data_dir=values["data_dir"], workers=int(values["workers"]),
                                             limits=limits_from(values), use_bwrap=use_bwrap,
                                             keep_job_dirs=bool(values["keep_job_dirs"]),
                                             spare_workers=int(values["spare_workers"]),
                                             max_stage_bytes=int(values["max_stage_kb"]) * 1024))
    jobs = Jobs(store, runner, JobsConfig(languages=languages, max_source_bytes=int(values["max_source_kb"]) * 1024,
                                          reuse_results=bool(values["reuse_results"])))
    if refusal is None:
        jobs.resume_unfinished()
        runner.start_background(list(languages), warm=bool(values["warm_toolchain_cache"]))

    flask_app = Flask(__name__, template_folder="../templates", static_folder="../static")
    flask_app.config["JSON_SORT_KEYS"] = False
    flask_app.extensions["irscope"] = Services(settings=values, store=store, jobs=jobs, runner=runner,
                                               sandboxed=use_bwrap, refusal=refusal)

    from app import api, ide, permalinks
    flask_app.register_blueprint(api.bp)
    flask_app.register_blueprint(ide.bp)
    flask_app.register_blueprint(permalinks.bp)
    return flask_app


def services() -> Services:
    from flask import current_app
    return current_app.extensions["irscope"]

"""irscope's web application: routes and rendering only. The service (service/configure.py) does
the work; markup comes from viewers/ and templates/."""
from __future__ import annotations

from typing import Any

from flask import Flask

from app import http_policy, stage_diffs
from app.stage_diffs import Diffs
from service import configure
from service import settings as settings_table
from service.configure import Service


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """The application factory. `config` holds settings (see service/settings.py) by name."""
    values = settings_table.load(config)
    service = configure.start(values)

    flask_app = Flask(__name__, template_folder="../templates", static_folder="../static")
    flask_app.config["JSON_SORT_KEYS"] = False
    flask_app.debug = False  # never the interactive debugger, whatever FLASK_DEBUG says
    http_policy.init_app(flask_app, service.web)
    flask_app.extensions["irscope"] = service
    flask_app.extensions["irscope.diffs"] = stage_diffs.from_settings(service.web)

    from app import api, compare, examples, ide, imports, mcp_server, permalinks, refusals, reproducers, scans
    refusals.init_app(flask_app)
    flask_app.register_blueprint(api.bp)
    flask_app.register_blueprint(ide.bp)
    flask_app.register_blueprint(permalinks.bp)
    flask_app.register_blueprint(imports.bp)
    flask_app.register_blueprint(examples.bp)
    flask_app.register_blueprint(compare.bp)
    flask_app.register_blueprint(reproducers.bp)
    flask_app.register_blueprint(mcp_server.bp)
    flask_app.register_blueprint(scans.bp)
    return flask_app


def services() -> Service:
    from flask import current_app
    return current_app.extensions["irscope"]


def diffs() -> Diffs:
    from flask import current_app
    return current_app.extensions["irscope.diffs"]

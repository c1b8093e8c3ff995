"""`irscope serve`'s HTTP server: gunicorn, embedded, with the gthread worker (several threads per
process; one process in the embedded mode, several in the worker tier). The app is created inside
each gunicorn worker process, after the fork, so its worker pool (or broker connection) and store
live where requests are answered; the master only supervises."""
from __future__ import annotations

from typing import Any, Callable

from gunicorn.app.base import BaseApplication


class EmbeddedServer(BaseApplication):
    def __init__(self, make_app: Callable[[], Any], options: dict[str, Any]):
        self.make_app = make_app
        self.options = options
        self.flask_app = None
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        self.flask_app = self.make_app()
        return self.flask_app


def _stop_runner(_server, worker) -> None:
    app = getattr(worker, "wsgi", None)
    svc = getattr(app, "extensions", {}).get("irscope") if app is not None else None
    if svc is not None:
        svc.shutdown()


def serve(make_app: Callable[[], Any], host: str, port: int, threads: int, processes: int) -> None:
    """Serve until stopped (SIGTERM or SIGINT)."""
    options = {
        "bind": f"{host}:{port}",
        "workers": processes,
        "worker_class": "gthread",
        "threads": threads,
        "timeout": 120,  # the worker's heartbeat; requests are short (compiles run in the pool)
        "graceful_timeout": 10,
        "keepalive": 5,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "proc_name": "irscope",
        "worker_exit": _stop_runner,
    }
    EmbeddedServer(make_app, options).run()

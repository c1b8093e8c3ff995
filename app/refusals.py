"""One answer to a refused request (compiler/errors.py `Refused`), whichever route refused it: the
kind's HTTP status and `Retry-After` everywhere; under /api/ the JSON error body
`{"error": {"kind", "message", "line"}}`; on a page, the page's own place for the sentence (a
blueprint that has one registers its renderer here), else the refused page."""
from __future__ import annotations

from typing import Callable

from flask import Flask, jsonify, render_template, request

from compiler.errors import Refused

# endpoint -> a function rendering the page that endpoint answers with the sentence in it
_PAGES: dict[str, Callable[[Refused], str]] = {}


def renders_page(*endpoints: str) -> Callable[[Callable[[Refused], str]], Callable[[Refused], str]]:
    """Decorator: the refusals of these endpoints are drawn by the decorated function (a page)."""
    def register(render: Callable[[Refused], str]) -> Callable[[Refused], str]:
        for endpoint in endpoints:
            _PAGES[endpoint] = render
        return render
    return register


def answer(refused: Refused):
    status = refused.kind.status or 400
    headers = {"Retry-After": str(refused.retry_after)} if refused.retry_after else {}
    if request.path.startswith("/api/"):
        return jsonify({"error": refused.to_json()}), status, headers
    render = _PAGES.get(request.endpoint or "")
    body = render(refused) if render else render_template("refused.html", sentence=refused.message)
    # htmx swaps only 2xx answers: the page's own request gets the sentence with 200
    return body, (200 if request.headers.get("HX-Request") else status), headers


def init_app(app: Flask) -> None:
    app.register_error_handler(Refused, answer)

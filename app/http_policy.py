"""What every HTTP response carries and what every request must keep to: security headers and the
request-size cap; who the client is (the per-client rate limit and caps are the service's:
service/admission.py)."""
from __future__ import annotations

from typing import Any

from flask import Flask, Response, jsonify, make_response, request

from compiler.errors import ErrorKind, Refused

# No inline script or style, nothing from elsewhere, no plugins, no <base>, not framed.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
                           "form-action 'self'; frame-ancestors 'none'")
# Raw stage text: shown as text, never as a document that could run anything.
RAW_TEXT_POLICY = "default-src 'none'; sandbox"


def client_address() -> str:
    # The peer address; behind a reverse proxy that is the proxy (see docs/security.md).
    return request.remote_addr or "unknown"


def init_app(app: Flask, values: dict[str, Any]) -> None:
    app.config["MAX_CONTENT_LENGTH"] = int(values["max_request_kb"]) * 1024

    ancestors = str(values["embed_frame_ancestors"]).strip() or "'none'"
    if any(c in ancestors for c in ";,\r\n"):
        raise ValueError(f"embed_frame_ancestors must be one CSP source list, not {ancestors!r}")
    app.config["IRSCOPE_EMBED_FRAME_ANCESTORS"] = ancestors

    @app.after_request
    def headers(response):
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers.setdefault("Referrer-Policy", "same-origin")
        if "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]:
            response.headers.setdefault("X-Frame-Options", "DENY")
        return response

    @app.errorhandler(413)
    def too_large(_e):
        message = (f"the request body is larger than {values['max_request_kb']} KiB (setting max_request_kb)")
        return jsonify({"error": Refused(ErrorKind.RequestTooLarge, message).to_json()}), 413


def embeddable(body: str) -> Response:
    """A `?embed=1` page (slides): the same policy, except that the origins of the setting
    embed_frame_ancestors may show it in a frame. It is read-only: no top bar, no compile."""
    from flask import current_app
    ancestors = current_app.config["IRSCOPE_EMBED_FRAME_ANCESTORS"]
    response = make_response(body)
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY.replace(
        "frame-ancestors 'none'", f"frame-ancestors {ancestors}")
    return response

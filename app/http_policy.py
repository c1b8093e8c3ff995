"""What every HTTP response carries and what every request must keep to: security headers, the
request-size cap, and the per-client rate limit on compiling (the `limits` library)."""
from __future__ import annotations

import logging
import math
import time
from typing import Any

from flask import Flask, Response, jsonify, make_response, request
from limits import parse
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

log = logging.getLogger(__name__)

# No inline script or style, nothing from elsewhere, no plugins, no <base>, not framed.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
                           "form-action 'self'; frame-ancestors 'none'")
# Raw stage text: shown as text, never as a document that could run anything.
RAW_TEXT_POLICY = "default-src 'none'; sandbox"


class CompileRateLimit:
    """At most `rate` compile requests per client address (a moving window). The embedded server
    is one process and counts in memory; the web processes of the worker tier count together in
    the broker's Redis."""

    def __init__(self, rate: str, shared_storage_url: str = ""):
        self.item = parse(rate) if rate.strip() else None
        self.rate = rate.strip()
        storage = storage_from_string(shared_storage_url) if shared_storage_url else MemoryStorage()
        self._limiter = MovingWindowRateLimiter(storage)

    def refuse(self, client: str) -> tuple[str, int] | None:
        """None when the client may compile now, else (the sentence saying why not, seconds to wait)."""
        if self.item is None:
            return None
        try:
            if self._limiter.hit(self.item, "compile", client):
                return None
        except Exception:  # noqa: BLE001 - Redis is down: no job can be queued either, and says so
            log.warning("the rate limit's storage (the broker's Redis) cannot be reached; not counting")
            return None
        reset = self._limiter.get_window_stats(self.item, "compile", client).reset_time
        wait = max(1, math.ceil(reset - time.time()))
        return (f"too many compile requests from your address: the limit is {self.rate} "
                f"(setting rate_limit); try again in {wait} s", wait)


def client_address() -> str:
    # The peer address; behind a reverse proxy that is the proxy (see docs/security.md).
    return request.remote_addr or "unknown"


def init_app(app: Flask, values: dict[str, Any]) -> None:
    app.config["MAX_CONTENT_LENGTH"] = int(values["max_request_kb"]) * 1024
    app.extensions["irscope.rate_limit"] = CompileRateLimit(str(values["rate_limit"]), values["broker_url"])

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
        return jsonify({"error": {"kind": "RequestTooLarge", "message": message, "line": None}}), 413


def embeddable(body: str) -> Response:
    """A `?embed=1` page (slides): the same policy, except that the origins of the setting
    embed_frame_ancestors may show it in a frame. It is read-only: no top bar, no compile."""
    from flask import current_app
    ancestors = current_app.config["IRSCOPE_EMBED_FRAME_ANCESTORS"]
    response = make_response(body)
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY.replace(
        "frame-ancestors 'none'", f"frame-ancestors {ancestors}")
    return response


def rate_limit() -> CompileRateLimit:
    from flask import current_app
    return current_app.extensions["irscope.rate_limit"]

"""What every HTTP response carries and what every request must keep to: security headers, the
request-size cap, a Host this server answers to (setting trusted_hosts: no DNS rebinding), no
cross-site form posts (a browser says where a request comes from: Sec-Fetch-Site, Origin), and who
the client is (its own address, or the one a trusted proxy saw: setting trusted_proxies). The
per-client rate limit and caps are the service's (service/admission.py)."""
from __future__ import annotations

from typing import Any

from flask import Flask, Response, jsonify, make_response, request
from werkzeug.exceptions import SecurityError
from werkzeug.middleware.proxy_fix import ProxyFix

from compiler.errors import ErrorKind, Refused
from service.configure import WebSettings

# Requests that change something: a browser must have sent them from one of this server's pages.
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# No inline script or style, nothing from elsewhere, no plugins, no <base>, not framed.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
                           "form-action 'self'; frame-ancestors 'none'")
# Raw stage text: shown as text, never as a document that could run anything.
RAW_TEXT_POLICY = "default-src 'none'; sandbox"


def client_address() -> str:
    """The client's address: the peer's, or with `trusted_proxies` set the one the trusted
    proxies saw (their X-Forwarded-For, which ProxyFix reads; a client cannot forge it)."""
    return request.remote_addr or "unknown"


def cross_site(req: Any) -> bool:
    """True when a browser says this request comes from another site: Sec-Fetch-Site (sent by
    every current browser) other than same-origin or none (typed, bookmarked), or else an Origin
    that is not this server's. A request with neither (curl, an MCP client) is not a browser's."""
    site = req.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = req.headers.get("Origin")
    return origin is not None and origin != f"{req.scheme}://{req.host}"


def init_app(app: Flask, web: WebSettings) -> None:
    app.config["MAX_CONTENT_LENGTH"] = web.max_request_bytes
    hosts = list(web.trusted_hosts)
    if hosts and "*" not in hosts:
        app.config["TRUSTED_HOSTS"] = hosts  # Flask refuses any other Host with 400
    proxies = web.trusted_proxies
    if proxies > 0:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)  # type: ignore[method-assign]

    @app.before_request
    def same_site_only():
        if request.method in _UNSAFE and cross_site(request):
            raise Refused(ErrorKind.CrossSiteRequest, "this server takes no requests posted from another site's page "
                                                      "(Sec-Fetch-Site / Origin): open irscope's own page to compile")

    @app.errorhandler(SecurityError)
    def untrusted_host(_e):
        message = ("this server does not answer to that host name (setting trusted_hosts); use the address it "
                   "serves on")
        return jsonify({"error": Refused(ErrorKind.RequestError, message).to_json()}), 400

    ancestors = web.embed_frame_ancestors.strip() or "'none'"
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
        message = f"the request body is larger than {web.max_request_bytes >> 10} KiB (setting max_request_kb)"
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

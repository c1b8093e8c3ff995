"""`POST /mcp`: irscope's MCP tools (app/mcp_tools.py) over streamable HTTP, in every web process.

The SDK serves MCP as an ASGI application; irscope's web server is WSGI (gunicorn's gthread
worker, Flask). The request is therefore a Flask route like any other, so everything the HTTP
policy does applies to it unchanged (the request-size cap, trusted hosts, no cross-site posts, the
security headers, the client's address through trusted proxies). The route hands the request's
method, headers and body, already read and capped, to the SDK's session manager, stateless and
answering in JSON (one JSON-RPC response per POST: no session to keep between web processes, no
stream held open), running on one event loop thread per web process, and waits for the answer with
a bound (setting mcp_compile_wait_s, plus a minute). The client's address and this server's URL
reach the tools through context variables set for that one call.
"""
from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

from flask import Blueprint, Response, abort, current_app, request

from app import diffs, services
from app.http_policy import client_address
from app.mcp_tools import Backend, build

bp = Blueprint("mcp", __name__)

_CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("irscope_mcp_client", default="unknown")
_BASE_URL: contextvars.ContextVar[str] = contextvars.ContextVar("irscope_mcp_base_url", default="")
# Headers of the SDK's answer that are the HTTP server's to set, not the application's.
_HOP_BY_HOP = {"content-length", "transfer-encoding", "connection"}


class McpBridge:
    """The SDK's stateless streamable-HTTP manager on an event loop thread of its own (started on
    the first MCP request of this process), and the call of one request into it."""

    def __init__(self, backend: Backend):
        from mcp.server.transport_security import TransportSecuritySettings
        self.server = build(backend)
        # The Host and Origin checks are the HTTP policy's (trusted_hosts, cross_site), done
        # before the route runs; the request body was capped by max_request_kb.
        self.server.streamable_http_app(json_response=True, stateless_http=True,
                                        transport_security=TransportSecuritySettings(
                                            enable_dns_rebinding_protection=False))
        self.manager = self.server.session_manager
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                async def serve() -> None:
                    async with self.manager.run():
                        ready.set()
                        await asyncio.Event().wait()  # until the process ends (a daemon thread)

                threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True,
                                 name="irscope-mcp").start()
                if not ready.wait(30):
                    raise RuntimeError("the MCP event loop did not start")
                self._loop = loop
            return self._loop

    def call(self, scope: dict[str, Any], body: bytes, client: str, base_url: str,
             timeout_s: float) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One HTTP request through the SDK: (status, headers, body)."""
        future = asyncio.run_coroutine_threadsafe(self._call(scope, body, client, base_url), self._started())
        try:
            return future.result(timeout=timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    async def _call(self, scope: dict[str, Any], body: bytes, client: str,
                    base_url: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        _CLIENT.set(client)  # this task's context: the tasks the SDK starts for it inherit it
        _BASE_URL.set(base_url)
        answer: dict[str, Any] = {"status": 500, "headers": [], "body": b""}
        finished = asyncio.Event()
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await finished.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answer["status"], answer["headers"] = message["status"], list(message.get("headers") or [])
            elif message["type"] == "http.response.body":
                answer["body"] += message.get("body", b"")

        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            finished.set()
        return answer["status"], answer["headers"], answer["body"]


def _bridge() -> McpBridge:
    bridge = current_app.extensions.get("irscope.mcp")
    if bridge is None:
        backend = Backend(services(), diffs(), client=_CLIENT.get, base_url=_BASE_URL.get)
        bridge = current_app.extensions.setdefault("irscope.mcp", McpBridge(backend))
    return bridge


@bp.post("/mcp")
def endpoint():
    """One MCP message (JSON-RPC) in, its answer out (docs/agents.md)."""
    svc = services()
    if not svc.web.mcp.enabled:
        abort(404, "this server does not serve MCP (setting mcp)")
    body = request.get_data(cache=False)  # capped at max_request_kb by the HTTP policy
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()
               if k.lower() != "content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": request.scheme, "path": "/mcp", "raw_path": b"/mcp", "root_path": "",
             "query_string": request.query_string, "headers": headers,
             "client": (client_address(), 0), "server": (request.host.split(":")[0], 0)}
    timeout_s = svc.web.mcp.compile_wait_s + 60
    try:
        status, answer_headers, answer = _bridge().call(scope, body, client_address(), request.host_url, timeout_s)
    except TimeoutError:
        abort(503, f"the MCP call did not finish within {timeout_s:g} s (setting mcp_compile_wait_s)")
    response = Response(answer, status=status)
    for name, value in answer_headers:
        key = name.decode("latin-1")
        if key.lower() not in _HOP_BY_HOP:
            response.headers[key] = value.decode("latin-1")
    return response

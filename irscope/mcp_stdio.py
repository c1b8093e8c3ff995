"""`irscope mcp`: irscope's MCP tools over stdio, for a local MCP client (an editor's agent, a
coding assistant) that starts the command itself (docs/agents.md).

Either from an embedded service, as `irscope compile` runs jobs (the same sandbox, store and
admission; the client is "stdio" for the per-client limits), or, with `--server URL`, forwarded
to that server's `/mcp` (every call a request of its own, answered under that server's admission
and limits; its refusals come back as the same MCP errors). Nothing but MCP messages is written to
stdout.
"""
from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator


def serve_embedded(values: dict[str, Any]) -> int:
    """The tools of app/mcp_tools.py over stdio, on a service of this process."""
    import anyio

    from app import mcp_tools, stage_diffs
    from service import configure
    service = configure.start(values)
    diffs = stage_diffs.from_settings(service.web)
    try:
        server = mcp_tools.build(mcp_tools.Backend(service, diffs, client=lambda: "stdio"))
        anyio.run(server.run_stdio_async)
    finally:
        diffs.close()
        service.shutdown()
    return 0


def serve_forwarded(url: str) -> int:
    """A stdio MCP server whose tools are those of the irscope server at `url` (its /mcp)."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    from app.mcp_tools import INSTRUCTIONS
    endpoint = url.rstrip("/") + ("" if url.rstrip("/").endswith("/mcp") else "/mcp")

    @contextlib.asynccontextmanager
    async def remote() -> AsyncIterator[ClientSession]:
        async with streamable_http_client(endpoint) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                yield session

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        async with remote() as session:
            return await session.list_tools()

    async def call_tool(_ctx: Any, params: Any) -> Any:
        async with remote() as session:
            return await session.call_tool(params.name, params.arguments or {})  # its MCP errors pass through

    server = Server("irscope", instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
    return 0

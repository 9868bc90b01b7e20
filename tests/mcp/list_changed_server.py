"""An MCP server (official SDK, ``MCPServer``) whose tool list changes, announced the
way each revision delivers it.

    python tests/mcp/list_changed_server.py                  # stdio
    python tests/mcp/list_changed_server.py http PORT        # streamable HTTP
    python tests/mcp/list_changed_server.py http PORT no-get  # GET answered with 405
    python tests/mcp/list_changed_server.py http PORT json   # JSON answers, not SSE

``grow`` adds a tool ``extra`` and says so twice, once per revision: under the
initialize handshake with ``ctx.session.send_tool_list_changed()`` (over HTTP the SDK
sends it on the standalone GET stream, which a client must open: it is related to no
request), and under 2026-07-28 with ``ctx.notify_tools_changed()`` (on the stream of
each ``subscriptions/listen`` request that asked for tool list changes; the SDK drops
the first form at that revision). ``shrink`` removes ``extra`` the same way.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("list-changed", log_level="ERROR")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _changed(ctx: Context) -> None:
    await ctx.session.send_tool_list_changed()  # 2025-11-25 and earlier
    await ctx.notify_tools_changed()  # 2026-07-28: subscriptions/listen streams


@app.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named ``extra`` (the server says its tools changed)."""
    if "extra" not in [t.name for t in await app.list_tools()]:
        app.add_tool(lambda: "extra!", name="extra", description="added later")
        await _changed(ctx)
    return "grown"


@app.tool()
async def shrink(ctx: Context) -> str:
    """Remove the tool ``extra`` (the server says its tools changed)."""
    if "extra" in [t.name for t in await app.list_tools()]:
        app.remove_tool("extra")
        await _changed(ctx)
    return "shrunk"


def without_get(inner: Any) -> Any:
    """An ASGI app that answers every GET with 405 (a server offering no standalone
    stream, as the transport allows) and passes the rest to ``inner``."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            head = [(b"allow", b"POST, DELETE"), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 405, "headers": head})
            await send({"type": "http.response.body", "body": b""})
            return
        await inner(scope, receive, send)

    return asgi


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        mode = sys.argv[3:4]
        if mode == ["no-get"]:
            import uvicorn

            inner = app.streamable_http_app(host="127.0.0.1")
            uvicorn.run(
                without_get(inner),
                host="127.0.0.1",
                port=int(sys.argv[2]),
                log_level="error",
            )
            sys.exit()
        app.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            json_response=mode == ["json"],
        )
    else:
        app.run()

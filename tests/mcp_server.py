"""An MCP server written with the official SDK, for the tests and bench/bench_mcp.py.

    python tests/mcp_server.py            # stdio
    python tests/mcp_server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp
    python tests/mcp_server.py http PORT json  # the same, answering in JSON, not SSE
    python tests/mcp_server.py http PORT echo  # a careless server: it echoes what it got

In ``echo`` mode the tools ``reject``, ``rpc_error`` and ``headers`` answer with the
request's headers and URL echoed: in a 403 body, in a JSON-RPC error's message and in
a tool result, as a server that repeats what it was sent would.

(``MCPServer`` is what mcp 1.x called ``FastMCP``.)
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Any

import orjson
from mcp.server.mcpserver import Image, MCPServer
from PIL import Image as PILImage

app = MCPServer("navi-test", log_level="ERROR")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def square(width: int = 8) -> Image:
    """A red square PNG of the given width."""
    buf = io.BytesIO()
    PILImage.new("RGB", (width, width), (255, 0, 0)).save(buf, format="PNG")
    return Image(data=buf.getvalue(), format="png")


@app.tool()
def stats(values: list[float]) -> dict[str, Any]:
    """Count and sum of values (a structured result)."""
    return {"count": len(values), "total": sum(values)}


@app.tool()
def fail(reason: str) -> str:
    """Raise an error with the reason."""
    raise ValueError(reason)


@app.tool()
def crash() -> str:
    """End the server process mid-call."""
    sys.stderr.write("crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@app.tool()
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
def env(name: str) -> str:
    """The value of an environment variable, or "(unset)"."""
    return os.environ.get(name, "(unset)")


@app.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


ECHOED = ("reject", "rpc_error", "headers")


def echoing(inner: Any) -> Any:
    """An ASGI app that answers the ``ECHOED`` tools' calls itself, echoing the
    request's headers and URL; every other request goes to ``inner``."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = orjson.loads(body)
            name = (
                request["params"]["name"] if request["method"] == "tools/call" else ""
            )
        except (orjson.JSONDecodeError, KeyError, TypeError):
            name = ""
        if name not in ECHOED:
            replayed = False

            async def again() -> dict[str, Any]:
                nonlocal replayed
                if replayed:
                    message: dict[str, Any] = await receive()
                    return message
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            await inner(scope, again, send)
            return
        echo = " ".join(f"{k.decode()}: {v.decode()}" for k, v in scope["headers"])
        echo += f" url: {scope['path']}?{scope['query_string'].decode()}"
        if name == "reject":
            status, kind, out = 403, b"text/plain", f"denied; you sent {echo}".encode()
        else:
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
            if name == "rpc_error":
                answer["error"] = {"code": -32000, "message": f"refused: {echo}"}
            else:
                text = {"type": "text", "text": f"you sent {echo}"}
                answer["result"] = {"content": [text], "structuredContent": None}
            status, kind, out = 200, b"application/json", orjson.dumps(answer)
        head = [(b"content-type", kind), (b"content-length", str(len(out)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": out})

    return asgi


def serve_echoing(port: int) -> None:
    import uvicorn

    for name in ECHOED:
        app.add_tool(lambda: "not reached", name=name, description=f"echoes ({name})")
    inner = app.streamable_http_app(host="127.0.0.1")
    uvicorn.run(echoing(inner), host="127.0.0.1", port=port, log_level="error")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        if sys.argv[3:4] == ["echo"]:
            serve_echoing(int(sys.argv[2]))
            sys.exit()
        json_response = sys.argv[3:4] == ["json"]
        app.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            json_response=json_response,
        )
    else:
        app.run()

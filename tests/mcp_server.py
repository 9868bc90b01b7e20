"""An MCP server written with the official SDK, for the tests and bench/bench_mcp.py.

    python tests/mcp_server.py            # stdio
    python tests/mcp_server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp
    python tests/mcp_server.py http PORT json  # the same, answering in JSON, not SSE

(``MCPServer`` is what mcp 1.x called ``FastMCP``.)
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Any

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


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        json_response = sys.argv[3:4] == ["json"]
        app.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            json_response=json_response,
        )
    else:
        app.run()

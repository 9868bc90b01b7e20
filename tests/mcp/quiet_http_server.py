"""An MCP server (official SDK) over streamable HTTP whose one tool says nothing until
it is done: no progress, so under 2026-07-28 the answer's headers come only with the
result.

    python tests/mcp/quiet_http_server.py PORT

``quiet(mark)`` sleeps an hour; once cancelled (the client closed its connection) it
writes "cancelled" to the file ``mark``.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer

app = MCPServer("quiet", log_level="ERROR")


@app.tool()
async def quiet(mark: str) -> str:
    """Sleep an hour without a word; write "cancelled" to ``mark`` when cancelled."""
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        with open(mark + ".part", "w") as f:  # whole or not at all
            f.write("cancelled")
        os.replace(mark + ".part", mark)
        raise
    return "never"


if __name__ == "__main__":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))

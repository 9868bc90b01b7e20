"""A careless stdio MCP server: its one tool fails, quoting how the server was started.

    python tests/mcp/echo_argv_server.py ARGS...   # stdio, the initialize handshake

``whoami`` answers with an ``isError`` result whose text holds the server's arguments
and the variables named in ``ECHO_VARS`` (comma-separated), and prints the same to
stderr, as a server that reports its configuration when a call fails would.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

VERSION = "2025-06-18"
TOOLS = [
    {
        "name": "whoami",
        "description": "Fail, saying how the server was started.",
        "inputSchema": {"type": "object", "properties": {}},
    }
]


def started() -> str:
    names = [n for n in os.environ.get("ECHO_VARS", "").split(",") if n]
    env = {n: os.environ.get(n) for n in names}
    return f"cannot run: argv={sys.argv[1:]} env={env}"


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    rid, method = message.get("id"), message.get("method")
    if rid is None:  # a notification
        return None
    if method == "initialize":
        info = {"name": "echo-argv", "version": "1"}
        value: Any = {"protocolVersion": VERSION, "capabilities": {"tools": {}},
                      "serverInfo": info}  # fmt: skip
    elif method == "tools/list":
        value = {"tools": TOOLS}
    elif method == "tools/call":
        print(started(), file=sys.stderr, flush=True)
        value = {"content": [{"type": "text", "text": started()}], "isError": True}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": rid, "error": error}
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def main() -> None:
    for line in sys.stdin:
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

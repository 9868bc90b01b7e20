"""A hand-written MCP server that knows only the initialize handshake (2025-06-18):
no ``server/discover``, which it refuses as an unknown method (stdio) or a request
without a session (HTTP 400), as servers written before 2026-07-28 do.

    python tests/mcp/legacy_server.py            # stdio
    python tests/mcp/legacy_server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp

Tools: ``add``; ``ask`` asks the client for a colour (``elicitation/create`` sent in
the middle of the call: on stdio as a line, over HTTP as an event of the call's answer,
answered by a POST).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

VERSION = "2025-06-18"
TOOLS = [
    {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
    {
        "name": "ask",
        "description": "Ask for a colour.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
ELICIT = {
    # a careless server: it repeats its API_TOKEN in the question
    "message": "Which colour?"
    + (f" (sent with {os.environ['API_TOKEN']})" if "API_TOKEN" in os.environ else ""),
    "requestedSchema": {
        "type": "object",
        "properties": {"colour": {"type": "string"}},
        "required": ["colour"],
    },
}


def result(rid: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def error(rid: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": text}}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def colour(answer: dict[str, Any]) -> str:
    got = answer.get("result") or {}
    if got.get("action") == "accept":
        return f"colour: {got['content']['colour']}"
    return f"no colour ({got.get('action')})"


def plain(message: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to a request that needs nothing of the client (None: a notification)."""
    rid, method = message.get("id"), message.get("method")
    params = message.get("params") or {}
    if rid is None:
        return None
    if method == "initialize":
        info = {"name": "legacy", "version": "1"}
        caps = {"tools": {"listChanged": False}}
        return result(
            rid, {"protocolVersion": VERSION, "capabilities": caps, "serverInfo": info}
        )
    if method == "tools/list":
        return result(rid, {"tools": TOOLS})
    if method == "tools/call" and params.get("name") == "add":
        args = params.get("arguments") or {}
        return result(rid, text(str(args["a"] + args["b"])))
    return error(rid, -32601, f"Method not found: {method}")


def stdio() -> None:
    def send(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    asked: dict[str, Any] = {}  # our elicitation id -> the call waiting for it
    for line in sys.stdin:
        message = json.loads(line)
        if "method" not in message:  # the client's answer to our elicitation
            rid = asked.pop(message.get("id"), None)
            if rid is not None:
                send(result(rid, text(colour(message))))
            continue
        params = message.get("params") or {}
        if message.get("method") == "tools/call" and params.get("name") == "ask":
            asked[f"e{message['id']}"] = message["id"]
            request = {"jsonrpc": "2.0", "id": f"e{message['id']}"}
            send({**request, "method": "elicitation/create", "params": ELICIT})
            continue
        answer = plain(message)
        if answer is not None:
            send(answer)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: ClassVar[dict[str, dict[str, Any]]] = {}
    arrived = threading.Condition()

    def log_message(self, *args: Any) -> None:
        pass

    def reply(
        self, status: int, body: bytes, kind: str, headers: dict[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self) -> None:
        self.reply(200, b"", "text/plain", {})

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        method = message.get("method")
        if method != "initialize" and self.headers.get("mcp-session-id") != "s1":
            self.reply(
                400, b"Bad Request: No valid session ID provided", "text/plain", {}
            )
            return
        if "method" not in message:  # the client's answer to our elicitation
            with self.arrived:
                self.answers[str(message.get("id"))] = message
                self.arrived.notify_all()
            self.reply(202, b"", "text/plain", {})
            return
        params = message.get("params") or {}
        if method == "tools/call" and params.get("name") == "ask":
            self.ask(message["id"])
            return
        answer = plain(message)
        if answer is None:
            self.reply(202, b"", "text/plain", {})
            return
        session = {"mcp-session-id": "s1"} if method == "initialize" else {}
        self.reply(200, json.dumps(answer).encode(), "application/json", session)

    def ask(self, rid: Any) -> None:
        """Answer in an event stream: our elicitation first, the result once the
        client's answer came in its own POST."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        key = f"e{rid}"
        request = {"jsonrpc": "2.0", "id": key, "method": "elicitation/create"}
        self.event({**request, "params": ELICIT})
        with self.arrived:
            self.arrived.wait_for(lambda: key in self.answers, timeout=30)
            answer = self.answers.pop(key, {})
        self.event(result(rid, text(colour(answer))))
        self.close_connection = True

    def event(self, message: dict[str, Any]) -> None:
        self.wfile.write(f"event: message\ndata: {json.dumps(message)}\n\n".encode())
        self.wfile.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
    else:
        stdio()

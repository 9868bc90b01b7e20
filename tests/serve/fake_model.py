"""A fast OpenAI-compatible chat-completions server on 127.0.0.1, in a thread.

It answers from the request itself, so any number of turns from any number of
workers can share it:

- the last message is a tool result: ``tool said: <its first 40 characters>``;
- the prompt is ``slow`` or ``slow N``: 100 (N) chunks of ``tick `` 50 ms apart;
- the prompt is ``silent N``: nothing for N seconds after the headers, then a word;
- the prompt is ``lines N``: N lines (``line 0`` ...), a chunk each, 20 ms apart;
- the prompt holds ``narrate tool``: the text ``Looking first.``, then a ``list_dir``
  call on ``.`` in the same response;
- the prompt holds ``use tool``: a ``list_dir`` call on ``.``;
- anything else: ``echo: <prompt>`` in pieces of a few characters.

``requests`` counts the requests, ``closed_early`` the responses whose client left
before the end.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

__all__ = ["FakeModel"]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _usage() -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake-model",
        "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):  # prompts merged into one message: the newest
        return (
            content.rpartition("\n\n")[2] if message.get("role") == "user" else content
        )
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = orjson.loads(self.rfile.read(length))
        with self.server.lock:
            self.server.requests += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for piece, pause in self._script(request["messages"]):
                if pause:
                    time.sleep(pause)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            with self.server.lock:
                self.server.closed_early += 1
            self.close_connection = True

    def _script(self, messages: list[dict[str, Any]]) -> list[tuple[bytes, float]]:
        last = messages[-1]
        prompt = _text(last)
        out: list[tuple[bytes, float]] = []
        if last.get("role") == "tool":
            out += [(_chunk({"content": "tool said: " + prompt[:40]}), 0.0)]
            finish = "stop"
        elif prompt.startswith("silent"):
            out += [(_chunk({"content": "finally"}), float(prompt.split()[1]))]
            finish = "stop"
        elif prompt.startswith("slow"):
            ticks = int(prompt.split()[1]) if " " in prompt else 100
            out += [(_chunk({"content": "tick "}), 0.05) for _ in range(ticks)]
            finish = "stop"
        elif prompt.startswith("lines"):
            count = int(prompt.split()[1])
            out += [(_chunk({"content": f"line {n}\n\n"}), 0.02) for n in range(count)]
            finish = "stop"
        elif "use tool" in prompt or "narrate tool" in prompt:
            if "narrate tool" in prompt:
                out += [(_chunk({"content": "Looking first."}), 0.0)]
            call = {
                "index": 0,
                "id": f"call_{len(messages)}",
                "type": "function",
                "function": {"name": "list_dir", "arguments": '{"path": "."}'},
            }
            out += [(_chunk({"tool_calls": [call]}), 0.0)]
            finish = "tool_calls"
        else:
            text = "echo: " + prompt
            out += [
                (_chunk({"content": text[i : i + 5]}), 0.0)
                for i in range(0, len(text), 5)
            ]
            finish = "stop"
        out += [(_chunk({}, finish), 0.0), (_usage(), 0.0), (b"data: [DONE]\n\n", 0.0)]
        return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: int
    closed_early: int
    lock: threading.Lock


class FakeModel:
    """The server; ``url`` is the OpenAI-style base (ending in ``/v1``)."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.requests = 0
        self._server.closed_early = 0
        self._server.lock = threading.Lock()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        return self._server.requests

    @property
    def closed_early(self) -> int:
        return self._server.closed_early

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

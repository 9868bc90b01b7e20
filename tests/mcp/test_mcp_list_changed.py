"""A server's ``notifications/tools/list_changed`` reaches the client in each revision
and transport that carries it, and the next request once it came declares the new
list. Over stdio it comes before the call's answer; over HTTP it comes on a stream of
its own, which the protocol does not order with the answer, so these tests wait for
the list to change (a bounded poll) instead of expecting it at once.

- 2025-11-25 (the initialize handshake) over stdio: on the pipe, as ever.
- 2025-11-25 over streamable HTTP: the SDK sends it on the standalone GET stream (it
  is related to no request), which the client opens after the handshake; a server
  that answers the GET with 405 has no such stream, and nothing is retried.
- 2026-07-28 (stdio and HTTP): only on the stream of a ``subscriptions/listen``
  request that asked for ``toolsListChanged`` (the revision removed the GET stream and
  forbids unrequested change notifications), which the client sends when the server
  declares ``tools.listChanged``.

The servers are the official SDK's (``list_changed_server.py``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("mcp")

from faultkit import openai_stream
from loopback import LoopbackServer, Reply
from mcp_servers import http_script

from navi_core import Agent, OpenAIChat, ToolFinished
from navi_core.mcp import MCPTools, _listen as listen
from navi_core.tools import ToolCall

SERVER = str(Path(__file__).parent / "list_changed_server.py")
STDIO = [sys.executable, SERVER]
REVISIONS = ("2026-07-28", "2025-11-25")
TRANSPORTS = ("stdio", "http")


@contextlib.contextmanager
def reach(transport: str, *mode: str) -> Iterator[dict[str, Any]]:
    """``MCPTools`` keyword arguments reaching the server over ``transport``."""
    if transport == "stdio":
        yield {"command": STDIO}
        return
    with contextlib.contextmanager(http_script)(SERVER, "http", "{port}", *mode) as url:
        yield {"url": url}


def _names(tools: MCPTools) -> set[str]:
    return {s.name for s in tools.tools()}


def _eventually(tools: MCPTools, name: str, present: bool = True) -> bool:
    """Whether ``name`` is (or is not) among the tools within 10 seconds."""
    deadline = time.monotonic() + 10
    while (name in _names(tools)) != present:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _listeners() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == listen.THREAD_NAME]


def _no_listener_within(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _listeners() and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _listeners()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_call_that_changes_the_tools_is_followed_by_the_new_list(
    revision: str, transport: str
) -> None:
    with reach(transport) as at, MCPTools(**at, protocol=revision) as tools:
        assert tools.protocol_version == revision
        assert "extra" not in _names(tools)
        assert tools.call_batch([ToolCall("1", "grow", {})]) == ["grown"]
        assert _eventually(tools, "extra")
        assert tools.call_batch([ToolCall("2", "extra", {})]) == ["extra!"]
        assert tools.call_batch([ToolCall("3", "shrink", {})]) == ["shrunk"]
        assert _eventually(tools, "extra", present=False)
        assert "grow" in _names(tools)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("revision", REVISIONS)
def test_the_request_after_the_change_declares_the_new_tool(
    loopback: LoopbackServer, revision: str, transport: str
) -> None:
    loopback.add(
        Reply.sse(openai_stream("", tool_calls=[("c1", "grow", "{}")])),
        Reply.sse(openai_stream("Grown.")),
        Reply.sse(openai_stream("", tool_calls=[("c2", "extra", "{}")])),
        Reply.sse(openai_stream("Used it.")),
    )
    with (
        reach(transport) as at,
        MCPTools(**at, protocol=revision) as server,
        OpenAIChat("m", loopback.url + "/v1", "k") as provider,
        Agent(provider, tools=[server]) as agent,
    ):
        finished = [
            (e.name, e.is_error)
            for e in agent.run("grow")
            if isinstance(e, ToolFinished)
        ]
        assert _eventually(server, "extra")  # the notice came: the list was taken
        finished += [
            (e.name, e.is_error)
            for e in agent.run("use the new tool")
            if isinstance(e, ToolFinished)
        ]
    declared = [
        {t["function"]["name"] for t in r.json["tools"]} for r in loopback.requests
    ]
    assert "extra" not in declared[0] and "extra" in declared[2]
    assert finished == [("grow", False), ("extra", False)]


@pytest.mark.parametrize("revision", REVISIONS)
def test_http_listening_runs_on_a_daemon_thread_that_close_ends_at_once(
    revision: str,
) -> None:
    with reach("http") as at:
        tools = MCPTools(**at, protocol=revision)
        deadline = time.monotonic() + 5
        while not tools.transport.listening and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.02)
        assert tools.transport.listening  # type: ignore[attr-defined]
        (thread,) = _listeners()
        assert thread.daemon
        started = time.monotonic()
        tools.close()
        assert time.monotonic() - started < 1.5
        assert _no_listener_within(1.0)


def test_a_server_without_the_get_stream_405_is_left_alone() -> None:
    """A server that answers the GET with 405 has no such stream: it is not tried
    again, and calls work as before (a change it makes is seen only when something
    lists again)."""
    with reach("http", "no-get") as at, MCPTools(**at, protocol="2025-11-25") as tools:
        assert tools.call_batch([ToolCall("1", "add", {"a": 1, "b": 2})]) == ["3"]
        assert _no_listener_within(2.0)
        assert not tools.transport.listening  # type: ignore[attr-defined]
        assert tools.call_batch([ToolCall("2", "grow", {})]) == ["grown"]


def test_json_answers_still_hear_the_get_stream() -> None:
    with reach("http", "json") as at, MCPTools(**at, protocol="2025-11-25") as tools:
        assert tools.call_batch([ToolCall("1", "grow", {})]) == ["grown"]
        assert _eventually(tools, "extra")


def test_stdio_2026_listens_again_on_the_restarted_server() -> None:
    """A stdio server that died is started again for the next batch; its
    subscription went with it and is sent again (the server holds none)."""
    with MCPTools(STDIO, protocol="2026-07-28") as tools:
        first = tools.transport
        first.close()  # as if it died
        assert tools.call_batch([ToolCall("1", "grow", {})]) == ["grown"]
        assert tools.transport is not first
        assert _eventually(tools, "extra")


# -- a server whose GET stream keeps failing: the reconnects are bounded -------------


class _Flaky(BaseHTTPRequestHandler):
    """An MCP endpoint (handshake only) whose GET fails: ``MODE`` 503 answers an
    error, ``drop`` opens the stream and ends it at once."""

    protocol_version = "HTTP/1.1"
    gets: ClassVar[list[float]] = []
    mode: ClassVar[str] = "503"

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in {"content-length": str(len(body)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self) -> None:
        self._reply(200, b"", {})

    def do_GET(self) -> None:
        self.gets.append(time.monotonic())
        if self.mode == "503":
            self._reply(503, b"busy", {"content-type": "text/plain"})
        else:
            self._reply(200, b": hello\n\n", {"content-type": "text/event-stream"})

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        rid = message.get("id")
        if rid is None:
            self._reply(202, b"", {})
            return
        if message["method"] == "initialize":
            value: Any = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "flaky", "version": "1"},
            }
        else:
            value = {"tools": []}
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": value}).encode()
        headers = {"content-type": "application/json", "mcp-session-id": "s1"}
        self._reply(200, body, headers)


@pytest.mark.parametrize("mode", ["503", "drop"])
def test_reconnects_of_a_failing_get_stream_are_bounded(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listen, "FIRST_WAIT", 0.01)
    _Flaky.gets = []
    _Flaky.mode = mode
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
        with MCPTools(url=url, protocol="2025-11-25") as tools:
            assert _no_listener_within(10.0)  # it gave up
            assert len(_Flaky.gets) == listen.ATTEMPTS
            assert tools.tools() == ()
    finally:
        httpd.shutdown()
        httpd.server_close()

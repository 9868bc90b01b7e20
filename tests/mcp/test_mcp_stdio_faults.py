"""A stdio MCP server that misbehaves cannot hang or wedge ``MCPTools``: one that stops
reading its input (or closes it and runs on), answers with an id that is not an id (or with no JSON-RPC at all),
or prints a 64 MiB line. Each server is a small real Python process written here; a
batch returns error results within its timeout, ``close()`` returns in bounded time,
and the next batch runs on a fresh server process."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply

from navi_core.mcp import MCPError, MCPTools
from navi_core.mcp._http import HTTPTransport
from navi_core.tools import ToolCall

#: a hand-written stdio server; each tool misbehaves in its own way
SERVER = r"""
import json, os, sys, time

TOOLS = ["echo", "pid", "deaf", "shut", "ignore", "chatty", "reply", "huge"]


def send(raw):
    sys.stdout.buffer.write(raw + b"\n")
    sys.stdout.buffer.flush()


def answer(rid, result):
    send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())


for line in sys.stdin.buffer:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        answer(rid, {"protocolVersion": "2025-11-25", "capabilities": {},
                     "serverInfo": {"name": "faulty"}})
    elif method == "tools/list":
        answer(rid, {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                               for n in TOOLS]})
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"]["arguments"]
        if name == "echo":
            answer(rid, {"content": [{"type": "text", "text": args["text"][:20]}]})
        elif name == "pid":
            answer(rid, {"content": [{"type": "text", "text": str(os.getpid())}]})
        elif name == "deaf":  # never reads its input again
            time.sleep(3600)
        elif name == "shut":  # closes its input, answers, and runs on (closed
            os.close(0)         # first: no request sent after the answer is read)
            answer(rid, {"content": [{"type": "text", "text": "closed"}]})
            time.sleep(3600)
        elif name == "ignore":  # never answers, reads on
            pass
        elif name == "chatty":  # a log line on stdout, then the answer
            send(b"starting the work...")
            answer(rid, {"content": [{"type": "text", "text": "worked"}]})
        elif name == "reply":  # exactly the line it is told to send
            send(args["raw"].replace("ID", str(rid)).encode())
        elif name == "huge":  # one 64 MiB line
            head = b'{"jsonrpc": "2.0", "id": %d, "result": {"content": [' % rid
            sys.stdout.buffer.write(head + b'{"type": "text", "text": "')
            for _ in range(64):
                sys.stdout.buffer.write(b"x" * (1 << 20))
            send(b'"}]}}')
"""
#: the revision the scripted servers here speak (they know no ``server/discover``)
LEGACY = "2025-11-25"
#: seconds a batch may overrun its timeout (a loaded 2-core machine)
SLACK = 3.0


@pytest.fixture
def command(tmp_path: Path) -> list[str]:
    script = tmp_path / "faulty_server.py"
    script.write_text(SERVER)
    return [sys.executable, str(script)]


@pytest.fixture
def tools(command: list[str]) -> Iterator[MCPTools]:
    source = MCPTools(command, timeout=2.0, startup_timeout=20.0, protocol=LEGACY)
    try:
        yield source
    finally:
        closed = bounded(source.close, 15.0)
        assert closed, "close() did not return"


def bounded(fn: Callable[[], Any], seconds: float) -> list[Any]:
    """``[fn()]`` run on a thread, or ``[]`` when it has not returned in ``seconds``
    (the thread is left behind: the test fails instead of hanging)."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    return out


def server_pid(tools: MCPTools) -> int:
    (pid,) = tools.call_batch([ToolCall("p", "pid", {})])
    assert isinstance(pid, str), pid
    return int(pid)


def test_a_server_that_stops_reading_cannot_hold_a_batch_past_its_timeout(
    tools: MCPTools,
) -> None:
    before = server_pid(tools)
    big = "y" * (4 << 20)  # far more than a pipe holds
    calls = [
        ToolCall("1", "deaf", {}),
        ToolCall("2", "echo", {"text": big}),
        ToolCall("3", "echo", {"text": "small"}),
    ]
    start = time.monotonic()
    done = bounded(lambda: tools.call_batch(calls), tools.timeout + 20)
    elapsed = time.monotonic() - start
    assert done, "call_batch ignored its timeout"
    assert elapsed < tools.timeout + SLACK
    (results,) = done
    assert all(isinstance(r, MCPError) for r in results), results
    assert any("stopped reading its input" in str(r) for r in results)
    # the next batch runs on a fresh server
    assert server_pid(tools) != before
    assert tools.call_batch([ToolCall("e", "echo", {"text": "again"})]) == ["again"]


def test_a_server_that_closes_its_input_and_runs_on_is_given_up(
    command: list[str],
) -> None:
    """The next request cannot be written; the server has not exited, so no exit
    status will come: the call fails soon (not at its timeout), and the next batch
    runs on a fresh server."""
    tools = MCPTools(command, timeout=30.0, startup_timeout=20.0, protocol=LEGACY)
    try:
        before = server_pid(tools)
        assert tools.call_batch([ToolCall("s", "shut", {})]) == ["closed"]
        start = time.monotonic()
        (result,) = tools.call_batch([ToolCall("e", "echo", {"text": "hi"})])
        assert isinstance(result, MCPError), result
        assert "stopped reading its input" in str(result)
        assert time.monotonic() - start < 2.0 + SLACK
        assert server_pid(tools) != before
    finally:
        assert bounded(tools.close, 15.0), "close() did not return"


def test_close_returns_while_a_batch_is_stuck_on_a_full_pipe(
    command: list[str],
) -> None:
    tools = MCPTools(command, timeout=600.0, startup_timeout=20.0, protocol=LEGACY)
    pid = server_pid(tools)
    calls = [
        ToolCall("1", "deaf", {}),
        ToolCall("2", "echo", {"text": "z" * (4 << 20)}),
    ]
    batch: list[Any] = []
    worker = threading.Thread(
        target=lambda: batch.append(tools.call_batch(calls)), daemon=True
    )
    worker.start()
    time.sleep(0.5)  # the batch is waiting, its request half on the pipe
    start = time.monotonic()
    assert bounded(tools.close, 15.0), "close() hung"
    assert time.monotonic() - start < 10.0
    worker.join(10.0)
    assert batch, "the batch did not end when the source was closed"
    assert all(isinstance(r, MCPError) and "closed" in str(r) for r in batch[0])
    assert not _running(pid)


@pytest.mark.parametrize(
    "raw,fault",
    [
        ('{"jsonrpc": "2.0", "id": [ID], "result": {}}', "whose id is a list"),
        ('{"jsonrpc": "2.0", "id": {"n": ID}, "result": {}}', "whose id is an object"),
        ('{"jsonrpc": "2.0", "id": null, "error": {"code": -32700}}', "id is null"),
        ('{"jsonrpc": "2.0", "id": ID}', "neither or both of result and error"),
        ("[1, 2]", "a JSON-RPC message that is a number"),
        ('{"jsonrpc": "2.0", "id": ID, "result": {"cont', "invalid JSON"),
    ],
    ids=["list-id", "object-id", "null-id", "no-result", "not-objects", "cut-off"],
)
def test_an_invalid_answer_fails_the_calls_and_the_server_is_restarted(
    tools: MCPTools, raw: str, fault: str
) -> None:
    before = server_pid(tools)
    start = time.monotonic()
    results = tools.call_batch([ToolCall("1", "reply", {"raw": raw})])
    assert time.monotonic() - start < tools.timeout  # failed at once, not timed out
    (error,) = results
    assert isinstance(error, MCPError), error
    assert "broke the protocol" in str(error) and fault in str(error)
    assert "restarted" in str(error)
    assert server_pid(tools) != before
    assert tools.call_batch([ToolCall("e", "echo", {"text": "fine"})]) == ["fine"]


def test_other_calls_in_flight_fail_too_and_plain_text_lines_are_skipped(
    tools: MCPTools,
) -> None:
    assert tools.call_batch([ToolCall("c", "chatty", {})]) == ["worked"]
    raw = '{"jsonrpc": "2.0", "id": [ID], "result": {}}'
    start = time.monotonic()
    results = tools.call_batch(
        [ToolCall("1", "ignore", {}), ToolCall("2", "reply", {"raw": raw})]
    )
    # the ignored call would only have timed out; the broken answer fails both now
    assert time.monotonic() - start < tools.timeout
    assert [type(r) for r in results] == [MCPError, MCPError]
    assert all("broke the protocol" in str(r) for r in results)


def test_a_64_mib_line_fails_the_call_and_the_server_is_restarted(
    tools: MCPTools,
) -> None:
    before = server_pid(tools)
    start = time.monotonic()
    results = tools.call_batch([ToolCall("1", "huge", {}), ToolCall("2", "deaf", {})])
    assert time.monotonic() - start < tools.timeout + SLACK
    for error in results:
        assert isinstance(error, MCPError), error
        assert f"larger than {16 << 20} bytes (max_message_bytes)" in str(error)
    assert server_pid(tools) != before


def test_the_line_limit_is_configurable(command: list[str]) -> None:
    with MCPTools(command, max_message_bytes=1000, protocol=LEGACY) as tools:
        results = tools.call_batch(
            [
                ToolCall("1", "echo", {"text": "short"}),
                ToolCall(
                    "2", "reply", {"raw": '{"id": ID, "result": "%s"}' % ("w" * 2000)}
                ),
            ]
        )
        assert results[0] == "short"
        assert isinstance(results[1], MCPError)
        assert "larger than 1000 bytes" in str(results[1])


# -- the same limit over HTTP ------------------------------------------------------------


def _rpc(request_id: int, result: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback answers in order, whatever the method: the standalone GET stream
    the client opens under the handshake would take an answer scripted for a POST."""
    monkeypatch.setattr(HTTPTransport, "listen", lambda self, *args: None)


@pytest.mark.parametrize("events", [False, True], ids=["json", "event-stream"])
@pytest.mark.usefixtures("scripted")
def test_an_http_answer_past_the_limit_fails_its_call(
    loopback: LoopbackServer, events: bool
) -> None:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {}}
    tool = {"name": "big", "inputSchema": {"type": "object"}}
    text = {"content": [{"type": "text", "text": "v" * 300_000}]}
    huge = _rpc(3, text)
    if events:
        reply = Reply.sse(b"event: message\ndata: " + huge + b"\n\n", chunk=65536)
    else:
        reply = Reply(body=(huge,), headers=[("content-type", "application/json")])
    loopback.add(
        Reply.json(200, orjson.loads(_rpc(1, init)), [("mcp-session-id", "s1")]),
        Reply(status=202, body=(), headers=[], chunked=False),
        Reply.json(200, orjson.loads(_rpc(2, {"tools": [tool]}))),
        reply,
    )
    with MCPTools(
        url=loopback.url + "/mcp", max_message_bytes=100_000, protocol=LEGACY
    ) as tools:
        (error,) = tools.call_batch([ToolCall("1", "big", {})])
    assert isinstance(error, MCPError)
    assert "sent an answer larger than 100000 bytes" in str(error)


@pytest.mark.usefixtures("scripted")
def test_a_compressed_http_answer_is_measured_as_it_is_decoded(
    loopback: LoopbackServer,
) -> None:
    """A 300 kB answer gzipped to 1 kB is 300 kB past the limit; a small one works."""
    import gzip

    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {}}
    tool = {"name": "big", "inputSchema": {"type": "object"}}
    zipped = [("content-type", "application/json"), ("content-encoding", "gzip")]
    small = {"content": [{"type": "text", "text": "small"}]}
    large = {"content": [{"type": "text", "text": "v" * 300_000}]}
    loopback.add(
        Reply.json(200, orjson.loads(_rpc(1, init)), [("mcp-session-id", "s1")]),
        Reply(status=202, body=(), headers=[], chunked=False),
        Reply.json(200, orjson.loads(_rpc(2, {"tools": [tool]}))),
        Reply(body=(gzip.compress(_rpc(3, small)),), headers=zipped),
        Reply(body=(gzip.compress(_rpc(4, large)),), headers=zipped),
    )
    with MCPTools(
        url=loopback.url + "/mcp", max_message_bytes=100_000, protocol=LEGACY
    ) as tools:
        assert tools.call_batch([ToolCall("1", "big", {})]) == ["small"]
        (error,) = tools.call_batch([ToolCall("2", "big", {})])
    assert isinstance(error, MCPError)
    assert "larger than 100000 bytes" in str(error)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state not in ("Z", "X")

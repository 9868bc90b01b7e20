"""MCPTools against real servers written with the official ``mcp`` package, over stdio
and streamable HTTP on loopback: tool lists, calls in agent turns, images, structured
results, errors, crashes, hangs, close."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

pytest.importorskip("mcp")

from mcp_servers import STDIO, http_server

from navi_core import (
    Agent,
    AnyEvent,
    MediaPart,
    Scripted,
    Text,
    ToolFinished,
    ToolResult,
    ToolUse,
    TurnComplete,
)
from navi_core.mcp import MCPError, MCPTools
from navi_core.tools import ToolCall


def call(name: str, **arguments: object) -> ToolUse:
    return ToolUse(
        f"id-{name}-{len(arguments)}", name, orjson.dumps(arguments).decode()
    )


def turn(source: MCPTools, *uses: ToolUse) -> tuple[list[ToolResult], list[AnyEvent]]:
    """One real agent turn in which the model calls ``uses`` in one response."""
    agent = Agent(Scripted([list(uses), [Text("done")]]), tools=[source])
    events: list[AnyEvent] = []
    with agent.run("go") as stream:
        while (ev := stream.next()) is not None:
            events.append(ev)
    assert isinstance(events[-1], TurnComplete)
    return list(agent.conversation.messages[2].tool_results), events


@pytest.fixture(scope="module")
def stdio() -> Iterator[MCPTools]:
    with MCPTools(STDIO) as tools:
        yield tools


@pytest.fixture
def http_url() -> Iterator[str]:
    yield from http_server()


@pytest.fixture
def http_json_url() -> Iterator[str]:
    yield from http_server("json")


# -- stdio -------------------------------------------------------------------------------


def test_stdio_lists_the_servers_tools_with_their_schemas(stdio: MCPTools) -> None:
    specs = {s.name: s for s in stdio.tools()}
    assert {"add", "square", "stats", "fail", "crash", "nap"} <= set(specs)
    assert specs["add"].description == "Add two integers."
    schema = specs["add"].parameters
    assert schema["type"] == "object" and schema["required"] == ["a", "b"]
    assert schema["properties"]["a"]["type"] == "integer"
    assert stdio.protocol_version == "2026-07-28"  # the SDK server speaks it
    assert stdio.server_info["name"] == "navi-test"


def test_stdio_calls_in_one_turn_map_text_images_and_structured_results(
    stdio: MCPTools,
) -> None:
    results, events = turn(
        stdio,
        call("add", a=2, b=40),
        call("square", width=4),
        call("stats", values=[1, 2.5]),
    )
    add, square, stats = results
    assert (add.text, add.is_error) == ("42", False)
    (image,) = square.parts
    assert isinstance(image, MediaPart) and image.media_type == "image/png"
    assert orjson.loads(stats.text) == {"count": 2, "total": 3.5}
    assert [e.is_error for e in events if isinstance(e, ToolFinished)] == [False] * 3


def test_stdio_is_error_becomes_an_error_result(stdio: MCPTools) -> None:
    (result,), events = turn(stdio, call("fail", reason="bad input"))
    assert result.is_error and "Tool 'fail' failed" in result.text
    assert "Error executing tool fail" in result.text
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.is_error and finished.error and "fail" in finished.error


def test_stdio_arguments_are_checked_against_the_input_schema(stdio: MCPTools) -> None:
    (result,), _ = turn(stdio, call("add", a=1, b="two"))
    assert result.is_error
    assert result.text.startswith("Tool 'add' was not run: invalid arguments:")
    assert "`b`: expected integer, got string" in result.text


def test_stdio_a_batch_is_in_flight_at_once(stdio: MCPTools) -> None:
    start = time.monotonic()
    out = stdio.call_batch(
        [ToolCall(str(i), "nap", {"seconds": 1.0}) for i in range(4)]
    )
    elapsed = time.monotonic() - start
    assert out == ["slept 1.0"] * 4
    assert elapsed < 3.0  # four 1 s naps overlap (one after another would be 4 s)


def test_stdio_crash_mid_call_gives_clear_errors_and_the_next_batch_restarts() -> None:
    with MCPTools(STDIO) as tools:
        before = tools.call_batch([ToolCall("p", "pid", {})])[0]
        results, _ = turn(tools, call("crash"), call("nap", seconds=0.3))
        for r in results:
            assert r.is_error
            assert "exited with status 3" in r.text and "crashing on purpose" in r.text
        after = tools.call_batch([ToolCall("p", "pid", {})])[0]
        assert after != before  # a new server process
        assert tools.call_batch([ToolCall("a", "add", {"a": 1, "b": 1})]) == ["2"]


def test_stdio_hung_call_times_out_and_the_others_still_answer() -> None:
    with MCPTools(STDIO, timeout=0.5) as tools:
        start = time.monotonic()
        results, _ = turn(tools, call("nap", seconds=30), call("add", a=1, b=2))
        assert time.monotonic() - start < 5
        hung, add = results
        assert hung.is_error and "did not answer in time" in hung.text
        assert (add.text, add.is_error) == ("3", False)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_quick_call_finishes_while_a_slow_one_of_its_batch_runs(
    transport: str, http_url: str
) -> None:
    """The batch's calls report as they answer: ``add`` (second in the model's
    order) finishes before ``nap`` (first) ends; the results keep the model's order."""
    tools = MCPTools(STDIO) if transport == "stdio" else MCPTools(url=http_url)
    with tools:
        results, events = turn(tools, call("nap", seconds=1.5), call("add", a=1, b=2))
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.name for e in finished] == ["add", "nap"]
    add, nap = finished
    assert add.seconds < 1.0 <= nap.seconds
    assert [r.text for r in results] == ["slept 1.5", "3"]


def test_close_ends_the_server_process_and_later_calls_are_errors() -> None:
    tools = MCPTools(STDIO)
    pid = tools.call_batch([ToolCall("p", "pid", {})])[0]
    tools.close()
    tools.close()  # idempotent
    deadline = time.monotonic() + 5
    while _running(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(int(pid))
    (err,) = tools.call_batch([ToolCall("a", "add", {"a": 1, "b": 1})])
    assert isinstance(err, MCPError) and "closed" in str(err)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers; it is gone for our purpose once it is not running
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_the_server_gets_env_but_not_this_processs_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAVI_TEST_SECRET_KEY", "sk-do-not-leak")
    with MCPTools(STDIO, env={"NAVI_MCP_GIVEN": "given"}, prefix="srv") as tools:
        names = [s.name for s in tools.tools()]
        assert "srv_env" in names and "srv_add" in names
        got = tools.call_batch(
            [
                ToolCall("1", "srv_env", {"name": "NAVI_MCP_GIVEN"}),
                ToolCall("2", "srv_env", {"name": "NAVI_TEST_SECRET_KEY"}),
                ToolCall("3", "env", {"name": "x"}),
            ]
        )
        assert got[:2] == ["given", "(unset)"]
        assert isinstance(got[2], MCPError) and "no tool 'env'" in str(got[2])


def test_a_server_that_cannot_start_or_exits_at_once_is_a_clear_error() -> None:
    with pytest.raises(MCPError, match="cannot start the MCP server"):
        MCPTools(["/nonexistent/mcp-server"])
    quits = [
        sys.executable,
        "-c",
        "import sys; sys.stderr.write('no config\\n'); sys.exit(2)",
    ]
    with pytest.raises(
        MCPError, match=r"exited with status 2; its last output: no config"
    ):
        MCPTools(quits)


def test_a_server_that_exits_before_it_reads_says_how_it_ended() -> None:
    """A server gone before the first request is written: the write fails, and the
    error is still its exit status and its last output, every time (the reader
    thread waits for the stderr thread, which is started first)."""
    for _ in range(20):
        with pytest.raises(
            MCPError, match=r"'sh -c' exited with status 4; its last output: no config"
        ):
            MCPTools(["sh", "-c", "echo 'no config' >&2; exit 4"])
        with pytest.raises(MCPError, match=r"'false' exited with status 1$"):
            MCPTools(["false"])


def test_a_silent_server_fails_the_handshake_in_time() -> None:
    silent = [sys.executable, "-c", "import sys, time; time.sleep(60)"]
    start = time.monotonic()
    with pytest.raises(MCPError, match="did not answer in time"):
        MCPTools(silent, startup_timeout=0.5)
    assert time.monotonic() - start < 5


def test_neither_or_both_transports_is_refused() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        MCPTools()
    with pytest.raises(ValueError, match="exactly one"):
        MCPTools(STDIO, url="http://127.0.0.1:1/mcp")


# -- streamable HTTP ---------------------------------------------------------------------


def test_http_lists_and_calls_tools_in_a_turn(http_url: str) -> None:
    headers = {"authorization": "Bearer sk-http-secret"}
    with MCPTools(url=http_url, headers=headers, prefix="web") as tools:
        assert "sk-http-secret" not in repr(tools)
        specs = {s.name: s for s in tools.tools()}
        assert specs["web_add"].parameters["properties"]["b"]["type"] == "integer"
        results, _ = turn(
            tools,
            call("web_add", a=1, b=2),
            call("web_square", width=3),
            call("web_fail", reason="x"),
        )
        add, square, fail = results
        assert (add.text, add.is_error) == ("3", False)
        assert isinstance(square.parts[0], MediaPart)
        assert fail.is_error and "Error executing tool fail" in fail.text


def test_http_server_answering_in_json_instead_of_events(http_json_url: str) -> None:
    with MCPTools(url=http_json_url) as tools:
        results, _ = turn(tools, call("add", a=20, b=22), call("square", width=2))
        assert results[0].text == "42"
        assert isinstance(results[1].parts[0], MediaPart)


def test_one_source_shared_by_threads(stdio: MCPTools) -> None:
    out: dict[int, object] = {}

    def worker(n: int) -> None:
        out[n] = stdio.call_batch([ToolCall(str(n), "add", {"a": n, "b": n})])[0]

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert out == {n: str(2 * n) for n in range(8)}


def test_http_calls_of_a_batch_overlap_and_a_hung_one_times_out(http_url: str) -> None:
    with MCPTools(url=http_url, timeout=1.0) as tools:
        start = time.monotonic()
        out = tools.call_batch(
            [
                ToolCall("1", "nap", {"seconds": 30}),
                ToolCall("2", "nap", {"seconds": 0.3}),
                ToolCall("3", "nap", {"seconds": 0.3}),
            ]
        )
        assert time.monotonic() - start < 5
        assert isinstance(out[0], MCPError) and "did not answer in time" in str(out[0])
        assert out[1:] == ["slept 0.3", "slept 0.3"]


def test_http_server_crash_mid_call_is_an_error_result(http_url: str) -> None:
    tools = MCPTools(url=http_url)
    try:
        (result,), _ = turn(tools, call("crash"))
        assert result.is_error and "the server may have crashed" in result.text
        (after,) = tools.call_batch([ToolCall("a", "add", {"a": 1, "b": 1})])
        assert isinstance(after, MCPError) and "is the server running?" in str(after)
    finally:
        tools.close()


def test_http_through_a_dead_proxy_names_the_proxy(
    http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server runs; the proxy the environment names does not: the error says so
    (not "is the server running?"), without the proxy's password."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://me:proxy-pw-5@127.0.0.1:{port}")
    with pytest.raises(MCPError) as caught:
        MCPTools(url=http_url).close()
    message = str(caught.value)
    assert f"cannot connect to the proxy http://127.0.0.1:{port} (for {http_url}" in (
        message
    )
    assert "NO_PROXY" in message and "proxy-pw-5" not in message


def test_http_close_ends_the_session(http_url: str) -> None:
    tools = MCPTools(url=http_url, protocol="2025-11-25")  # sessions: the handshake
    session = tools.call_batch([ToolCall("p", "pid", {})])
    assert isinstance(session[0], str)
    session_id = _session_id(tools)
    tools.close()
    reply = httpx.post(
        http_url,
        json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
        headers={
            "mcp-session-id": session_id,
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-11-25",
        },
    )
    assert reply.status_code == 404  # the server forgot the session


def _session_id(tools: MCPTools) -> str:
    transport = tools.transport
    sid = getattr(transport, "session_id", None)
    assert isinstance(sid, str) and sid
    return sid

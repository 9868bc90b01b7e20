"""Local servers over real HTTP: a tool call the model writes as text runs like a
native one, reasoning in tags is thinking, a stream without usage is estimated, and
the tool loop's second request is one a server that refuses ``content: null`` takes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import openai_chunk

from navi_core import (
    Agent,
    Config,
    RetryPolicy,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
    TurnComplete,
    tool,
)
from navi_core.providers.openai_chat import TEXT_CALL_ID_PREFIX, OpenAIChat

FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=20, jitter=False))


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def local_body(*texts: str, usage: bool = False) -> bytes:
    """A chat-completions stream as llama-cpp-python's server sends it: content
    deltas, ``finish_reason`` "stop", and no usage unless asked for."""
    out = [openai_chunk({"role": "assistant", "content": ""}, model="local")]
    out += [openai_chunk({"content": t}, model="local") for t in texts]
    out.append(openai_chunk({}, finish_reason="stop", model="local"))
    if usage:
        out.append(
            openai_chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 4})
        )
    return b"".join(out) + b"data: [DONE]\n\n"


HERMES = ('<tool_call>\n{"name": "add", ', '"arguments": {"a": 2, "b": 40}}\n</tool', "_call>")  # fmt: skip


def test_a_call_written_as_text_runs_and_the_turn_answers(
    loopback: LoopbackServer,
) -> None:
    loopback.add(Reply.sse(local_body("Let me add. ", *HERMES), chunk=11))
    loopback.add(Reply.sse(local_body("<think>42 it is</think>\n\nThe sum is 42.")))
    with OpenAIChat("local", loopback.url + "/v1") as provider:
        agent = Agent(provider, tools=[add], config=FAST)
        with agent.run("2 + 40?") as stream:
            events = list(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, done.tool_calls) == ("The sum is 42.", 1)
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "<tool_call>" not in shown and "Let me add. " in shown
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "42 it is"
    (start,) = [e for e in events if isinstance(e, ToolCallStart)]
    assert start.id.startswith(TEXT_CALL_ID_PREFIX)
    (result,) = agent.conversation.messages[2].tool_results
    assert (result.text, result.is_error) == ("42", False)
    # the next request sends the call as a tool call, not as markup
    sent = loopback.requests[1].json["messages"][1]
    assert sent["role"] == "assistant" and sent["content"] == "Let me add. "
    assert json.loads(sent["tool_calls"][0]["function"]["arguments"]) == {
        "a": 2,
        "b": 40,
    }
    assert "<tool_call>" not in json.dumps(loopback.requests[1].json)
    # no usage in either stream: both estimated, and marked so
    assert done.usage.estimated and done.usage.output > 0 and done.usage.input > 0


def test_malformed_arguments_get_the_invalid_arguments_result(
    loopback: LoopbackServer,
) -> None:
    bad = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": }}</tool_call>'
    loopback.add(Reply.sse(local_body(bad)), Reply.sse(local_body("Sorry.")))
    with OpenAIChat("local", loopback.url) as provider:
        agent = Agent(provider, tools=[add], config=FAST)
        done = agent.run("2 + ?").result()
    assert done.tool_calls == 1
    (result,) = agent.conversation.messages[2].tool_results
    assert result.is_error


def test_reported_usage_is_not_estimated_and_off_leaves_markup_as_text(
    loopback: LoopbackServer,
) -> None:
    text = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>'
    loopback.add(Reply.sse(local_body(text, usage=True)))
    with OpenAIChat("local", loopback.url, text_tool_calls="off") as provider:
        agent = Agent(provider, tools=[add], config=FAST)
        done = agent.run("1 + 1?").result()
    assert (done.tool_calls, done.response) == (0, text)
    assert not done.usage.estimated and done.usage.output == 4


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="text_tool_calls"):
        OpenAIChat("m", "http://127.0.0.1:9", text_tool_calls="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reasoning_tags"):
        OpenAIChat("m", "http://127.0.0.1:9", reasoning_tags=("<think>",))  # type: ignore[arg-type]


class _RefusesNull(BaseHTTPRequestHandler):
    """What llama-cpp-python's server does with ``content: null`` beside tool calls:
    HTTP 500. Otherwise it streams the next scripted body."""

    bodies: ClassVar[list[bytes]] = []
    seen: ClassVar[list[Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.seen.append(body)
        if any(
            m.get("tool_calls") and m.get("content") is None for m in body["messages"]
        ):
            payload = b'{"error": {"message": "can only concatenate str (not \\"NoneType\\")"}}'
            self.send_response(500)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        data = self.bodies.pop(0)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refuses_null() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusesNull)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_second_request_of_a_tool_loop_is_accepted(refuses_null: str) -> None:
    _RefusesNull.seen = []
    _RefusesNull.bodies = [
        local_body('{"name": "add", "parameters": {"a": 20, "b": 22}}'),
        local_body("42."),
    ]
    with OpenAIChat("local", refuses_null, text_tool_calls="llama") as provider:
        agent = Agent(
            provider, tools=[add], config=Config(retry=RetryPolicy(max_attempts=1))
        )
        done = agent.run("20 + 22?").result()
    assert (done.response, done.tool_calls) == ("42.", 1)
    assistant = _RefusesNull.seen[1]["messages"][1]
    assert assistant["content"] == "" and assistant["tool_calls"]


def test_a_call_cut_off_before_its_finish_reason_is_retried_not_run(
    loopback: LoopbackServer,
) -> None:
    calls: list[int] = []

    @tool
    def record(a: int) -> str:
        """Record a number."""
        calls.append(a)
        return "ok"

    cut = [openai_chunk({"role": "assistant", "content": ""}, model="local")]
    cut += [openai_chunk({"content": '<tool_call>{"name": "record", "arguments": {"a'})]
    loopback.add(Reply.sse(b"".join(cut) + b"data: [DONE]\n\n"))  # no finish_reason
    whole = '<tool_call>{"name": "record", "arguments": {"a": 7}}</tool_call>'
    loopback.add(Reply.sse(local_body(whole)))
    loopback.add(Reply.sse(local_body("Recorded.")))
    with OpenAIChat("local", loopback.url + "/v1") as provider:
        done = Agent(provider, tools=[record], config=FAST).ask("record 7")
    assert calls == [7] and done.response == "Recorded."
    # the cut-off response was sent again, not answered with an error result
    second = loopback.requests[1].json["messages"]
    assert [m["role"] for m in second] == ["user"]

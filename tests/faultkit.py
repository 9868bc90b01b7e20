"""Helpers of the fault suite: real chat-completions streams and turns driven to the end.

Every fault test runs the real path: ``OpenAIChat`` over a loopback HTTP server
(``tests/loopback.py``), real SQLite files, the CI PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from loopback import LoopbackServer, Reply

from navi_core import Agent, Event, Stream, TurnComplete

__all__ = [
    "OVERFLOW_BODY",
    "WindowedServer",
    "chunk",
    "drive",
    "openai_stream",
    "run_turn",
]


def chunk(obj: dict[str, Any]) -> bytes:
    """One ``data:`` event of a chat-completions stream."""
    base: dict[str, Any] = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "model": "fault-model",
        "choices": [],
    }
    return b"data: " + orjson.dumps({**base, **obj}) + b"\n\n"


def openai_stream(
    text: str = "done",
    *,
    usage: dict[str, Any] | None = None,
    tool_calls: Iterable[tuple[str, str, str]] = (),
) -> bytes:
    """A complete chat-completions stream: text, tool calls (id, name, args), usage."""
    out = [chunk({"choices": [{"index": 0, "delta": {"content": text}}]})]
    calls = list(tool_calls)
    for index, (call_id, name, args) in enumerate(calls):
        call = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": args},
        }
        out.append(chunk({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    reason = "tool_calls" if calls else "stop"
    out.append(chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
    usage = usage or {"prompt_tokens": 10, "completion_tokens": 2}
    out.append(chunk({"usage": usage}))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def drive(stream: Stream) -> tuple[list[Event], TurnComplete]:
    """Pull every event of ``stream``; the last one is its ``TurnComplete``."""
    events: list[Event] = []
    with stream:
        while (ev := stream.next()) is not None:
            events.append(ev)
    last = events[-1]
    assert isinstance(last, TurnComplete)
    return events, last


def run_turn(agent: Agent, prompt: str) -> tuple[list[Event], TurnComplete]:
    """Run one turn of ``agent`` to its end."""
    return drive(agent.run(prompt))


OVERFLOW_BODY: dict[str, Any] = {
    "error": {
        "message": "This model's maximum context length is 100000 tokens. However, "
        "your messages resulted in more tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}


class WindowedServer(LoopbackServer):
    """A loopback server with a context window: a request body larger than
    ``window`` bytes gets a context-length error, the others the next scripted reply."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window
        self.overflows = 0

    def _take_reply_locked(self) -> Reply:
        if len(self.requests[-1].body) > self.window:
            self.overflows += 1
            return Reply.json(400, OVERFLOW_BODY)
        return super()._take_reply_locked()

"""Builders of provider response bodies in each API's exact wire format, and a driver.

The builders write what the servers write: OpenAI ``chat.completion.chunk`` objects
ending with a usage chunk and ``data: [DONE]``; Anthropic's named events from
``message_start`` to ``message_stop``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from navi_core.config import Config
from navi_core.conversation import Message, UserMessage
from navi_core.events import Event, MessageComplete
from navi_core.providers.base import Provider, ProviderRequest
from navi_core.tools import ToolSpec

__all__ = [
    "FIXTURES",
    "anthropic_body",
    "drain",
    "fixture",
    "openai_body",
    "openai_chunk",
    "request",
    "responses_body",
]

FIXTURES = Path("/work/shared/fixtures")


def fixture(name: str) -> bytes:
    """A recorded stream from the shared fixtures (``group/file``)."""
    return (FIXTURES / name).read_bytes()


def request(
    *messages: Message | str,
    system: str | None = None,
    tools: Sequence[ToolSpec] = (),
    config: Config | None = None,
) -> ProviderRequest:
    """A ``ProviderRequest``; plain strings become user messages."""
    dialogue = tuple(UserMessage(m) if isinstance(m, str) else m for m in messages)
    return ProviderRequest(
        dialogue or (UserMessage("hi"),), system, tuple(tools), config or Config()
    )


def drain(provider: Provider, req: ProviderRequest) -> tuple[list[Event], Message]:
    """Open a response and produce until complete: (events, assistant message)."""
    stream = provider.open(req)
    queue: deque[Event] = deque()
    try:
        while not stream.produce(queue):
            pass
    finally:
        stream.close()
    events = list(queue)
    last = events[-1]
    assert isinstance(last, MessageComplete)
    return events, last.message


def _sse(obj: Any, event: str | None = None) -> bytes:
    head = b"event: %b\n" % event.encode() if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "gpt-test",
) -> bytes:
    """One ``data:`` event of a chat-completions stream (no choice when no delta)."""
    obj: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1727346178,
        "model": model,
        "choices": [],
    }
    if delta is not None or finish_reason is not None:
        choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
        obj["choices"] = [choice]
    if usage is not None:
        obj["usage"] = usage
    return _sse(obj)


def openai_body(
    texts: Iterable[str] = (),
    *,
    reasoning: Iterable[str] = (),
    tool_calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    done: bool = True,
) -> bytes:
    """A chat-completions stream; tool calls are (id, name, argument fragments).

    The fragments of all calls are interleaved round-robin, as parallel calls arrive.
    """
    out = [openai_chunk({"role": "assistant", "content": ""})]
    out += [openai_chunk({"reasoning_content": r}) for r in reasoning]
    out += [openai_chunk({"content": t}) for t in texts]
    for index, (call_id, name, _) in enumerate(tool_calls):
        start = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        out.append(openai_chunk({"tool_calls": [start]}))
    longest = max((len(f) for _, _, f in tool_calls), default=0)
    for step in range(longest):
        for index, (_, _, fragments) in enumerate(tool_calls):
            if step < len(fragments):
                call = {"index": index, "function": {"arguments": fragments[step]}}
                out.append(openai_chunk({"tool_calls": [call]}))
    reason = finish or ("tool_calls" if tool_calls else "stop")
    out.append(openai_chunk({}, finish_reason=reason))
    out.append(
        openai_chunk(
            None,
            usage=usage
            or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        )
    )
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def anthropic_body(
    blocks: Sequence[tuple[str, Any]],
    *,
    stop: str = "end_turn",
    usage: dict[str, Any] | None = None,
    output_tokens: int = 7,
    error: tuple[str, str] | None = None,
) -> bytes:
    """A Messages stream. Blocks: ("text", [pieces]), ("thinking", ([pieces], sig)),
    ("redacted", data), ("tool", (id, name, [json fragments])).

    ``error`` (type, message) replaces the end of the stream with an error event.
    """
    start_usage = usage or {"input_tokens": 20, "output_tokens": 1}
    out = [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
            "message_start",
        ),
        _sse({"type": "ping"}, "ping"),
    ]
    for index, (kind, value) in enumerate(blocks):

        def delta(d: dict[str, Any], i: int = index) -> bytes:
            return _sse(
                {"type": "content_block_delta", "index": i, "delta": d},
                "content_block_delta",
            )

        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [delta({"type": "text_delta", "text": t}) for t in value]
        elif kind == "thinking":
            pieces, signature = value
            block = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [delta({"type": "thinking_delta", "thinking": t}) for t in pieces]
            deltas.append(delta({"type": "signature_delta", "signature": signature}))
        elif kind == "redacted":
            block = {"type": "redacted_thinking", "data": value}
            deltas = []
        elif kind == "tool":
            call_id, name, fragments = value
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            deltas = [
                delta({"type": "input_json_delta", "partial_json": f})
                for f in ["", *fragments]
            ]
        else:
            raise ValueError(kind)
        out.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": block},
                "content_block_start",
            )
        )
        out += deltas
        out.append(
            _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        )
    if error is not None:
        out.append(
            _sse(
                {"type": "error", "error": {"type": error[0], "message": error[1]}},
                "error",
            )
        )
        return b"".join(out)
    out.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
            "message_delta",
        )
    )
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return b"".join(out)


def responses_body(
    texts: Iterable[str] = (),
    *,
    reasoning: Sequence[tuple[Sequence[str], str]] = (),
    tool_calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    usage: dict[str, Any] | None = None,
    model: str = "gpt-test",
    incomplete: str | None = None,
) -> bytes:
    """A Responses stream as the API writes it: reasoning items (summary pieces,
    encrypted content), one message of text pieces, then function calls (call_id,
    name, argument fragments), ``response.completed`` with usage (with
    ``incomplete``, ``response.incomplete`` with that ``incomplete_details.reason``)."""
    seq = iter(range(10**6))

    def ev(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    response: dict[str, Any] = {"id": "resp_test", "object": "response", "model": model,
                "status": "in_progress", "output": [], "usage": None}  # fmt: skip
    out = [ev("response.created", response=response)]
    index = 0
    for pieces, encrypted in reasoning:
        item_id = f"rs_{index}"
        item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        out.append(ev("response.output_item.added", output_index=index, item=item))
        for piece in pieces:
            out.append(
                ev("response.reasoning_summary_text.delta", item_id=item_id,
                   output_index=index, summary_index=0, delta=piece)
            )  # fmt: skip
        done = {**item, "encrypted_content": encrypted,
                "summary": [{"type": "summary_text", "text": "".join(pieces)}]}  # fmt: skip
        out.append(ev("response.output_item.done", output_index=index, item=done))
        index += 1
    texts = list(texts)
    if texts:
        message = {"id": "msg_1", "type": "message", "role": "assistant",
                   "status": "in_progress", "content": []}  # fmt: skip
        out.append(ev("response.output_item.added", output_index=index, item=message))
        for piece in texts:
            out.append(
                ev("response.output_text.delta", item_id="msg_1", output_index=index,
                   content_index=0, delta=piece, logprobs=[])
            )  # fmt: skip
        out.append(ev("response.output_text.done", item_id="msg_1",
                      output_index=index, content_index=0, text="".join(texts)))  # fmt: skip
        index += 1
    for call_id, name, fragments in tool_calls:
        call = {"id": f"fc_{index}", "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": call_id, "name": name}  # fmt: skip
        out.append(ev("response.output_item.added", output_index=index, item=call))
        for fragment in fragments:
            out.append(
                ev("response.function_call_arguments.delta", item_id=f"fc_{index}",
                   output_index=index, delta=fragment)
            )  # fmt: skip
        done = {**call, "status": "completed", "arguments": "".join(fragments)}
        out.append(ev("response.output_item.done", output_index=index, item=done))
        index += 1
    final = {**response, "status": "completed",
             "usage": usage or {"input_tokens": 10, "output_tokens": 5,
                                "input_tokens_details": {"cached_tokens": 0},
                                "output_tokens_details": {"reasoning_tokens": 0}}}  # fmt: skip
    if incomplete is not None:
        final.update(status="incomplete", incomplete_details={"reason": incomplete})
        out.append(ev("response.incomplete", response=final))
        return b"".join(out)
    out.append(ev("response.completed", response=final))
    return b"".join(out)

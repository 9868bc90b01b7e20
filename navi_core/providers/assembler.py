"""Turns core delta tuples into events and, at the end, the assistant ``Message``.

Every provider (HTTP or scripted) goes through this one class, so text, thinking and
tool-call assembly behave the same whatever produced the deltas.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Sequence
from typing import Any

from .. import deltas as D
from ..conversation import (
    Block,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolUse,
    Usage,
    WireIdentity,
)
from ..errors import MalformedStream
from ..events import (
    Event,
    ModelInfo,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)
from .errormap import error_for_stream

__all__ = ["ResponseAssembler", "normalize_stop_reason"]

_STOP_REASONS = {
    "stop": "end_turn",
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "eos": "end_turn",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "tool_use": "tool_use",
    "content_filter": "refusal",
    "refusal": "refusal",
}


def normalize_stop_reason(raw: str | None, has_tool_calls: bool) -> str:
    """Map OpenAI ``finish_reason`` / Anthropic ``stop_reason`` to one vocabulary."""
    if raw is None:
        return "tool_use" if has_tool_calls else "end_turn"
    return _STOP_REASONS.get(raw, raw)


# Open-block kinds; a block is a list [kind, parts, extra].
_TEXT, _THINKING, _SEALED_THINKING, _REDACTED, _TOOL = range(5)
_RUN = 256


class _Pieces(list):  # type: ignore[type-arg]
    """The text pieces of one block; every ``_RUN`` new pieces are joined into one.

    A long response arrives as hundreds of thousands of tiny deltas, and each str
    costs about 50 bytes beyond its characters: joining runs keeps a block's memory
    close to the size of its text.
    """

    __slots__ = ("joined",)

    def __init__(self) -> None:
        super().__init__()
        self.joined = 0  # leading items that are joined runs

    def compact(self) -> None:
        start = self.joined
        self[start:] = ["".join(self[start:])]
        self.joined = start + 1


class ResponseAssembler:
    """Accumulates one response; ``feed`` pushes events, ``finish`` builds the message."""

    __slots__ = (
        "_blocks",
        "_cur",
        "_tools",
        "done",
        "finish_reason",
        "model",
        "usage",
        "wire",
    )

    def __init__(self, wire: WireIdentity) -> None:
        self.wire = wire
        self._blocks: list[list[Any]] = []
        self._cur: list[Any] | None = None
        self._tools: dict[int, list[Any]] = {}
        self.done = False
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.usage: Usage | None = None

    def _open(self, kind: int, extra: Any = None) -> list[Any]:
        block: list[Any] = [kind, _Pieces(), extra]
        self._blocks.append(block)
        self._cur = block
        return block

    def feed(self, deltas: Sequence[tuple[Any, ...]], queue: deque[Event]) -> None:
        """Apply deltas in order, pushing one event per visible delta.

        Raises:
            ProviderError: an in-stream error object (mapped by kind).
            MalformedStream: arguments for a tool call that never started.
        """
        push = queue.append
        for d in deltas:
            kind = d[0]
            if kind == D.TEXT:
                text = d[1]
                if not text:
                    continue
                cur = self._cur
                if cur is None or cur[0] != _TEXT:
                    cur = self._open(_TEXT)
                parts = cur[1]
                parts.append(text)
                if len(parts) - parts.joined >= _RUN:
                    parts.compact()
                push(TextDelta(text))
            elif kind == D.TOOL_ARGS:
                index, fragment = d[1], d[2]
                tool = self._tools.get(index)
                if tool is None:
                    raise MalformedStream(
                        f"arguments for tool call {index} before it started"
                    )
                if fragment:
                    parts = tool[1]
                    parts.append(fragment)
                    if len(parts) - parts.joined >= _RUN:
                        parts.compact()
                    push(ToolCallDelta(index, fragment))
            elif kind == D.THINKING:
                text = d[1]
                if not text:
                    continue
                cur = self._cur
                if cur is None or cur[0] != _THINKING:
                    cur = self._open(_THINKING)
                parts = cur[1]
                parts.append(text)
                if len(parts) - parts.joined >= _RUN:
                    parts.compact()
                push(ThinkingDelta(text))
            elif kind == D.SIGNATURE:
                cur = self._cur
                if cur is None or cur[0] not in (_THINKING, _SEALED_THINKING):
                    cur = self._open(_THINKING)
                cur[0] = _SEALED_THINKING
                cur[2] = (cur[2] or "") + d[1]
            elif kind == D.REASONING_ITEM:
                cur = self._cur
                if cur is None or cur[0] != _THINKING:
                    cur = self._open(_THINKING)
                cur[0] = _SEALED_THINKING
                cur[2] = d[1]
                self._cur = None  # the next item's summary is a block of its own
            elif kind == D.TOOL_START:
                index, call_id, name = d[1], d[2], d[3]
                if index in self._tools:
                    continue
                # servers that send no id (some llama.cpp builds) still need unique ones
                call_id = call_id or f"call_{secrets.token_hex(6)}_{index}"
                self._tools[index] = self._open(_TOOL, (call_id, name))
                self._cur = None
                push(ToolCallStart(index, call_id, name))
            elif kind == D.REDACTED_THINKING:
                self._open(_REDACTED, d[1])
                self._cur = None
            elif kind == D.USAGE:
                self.usage = Usage(d[1], d[2], d[3], d[4], d[5])
            elif kind == D.FINISH:
                self.finish_reason = d[1]
            elif kind == D.MODEL:
                if d[1] != self.model:
                    self.model = d[1]
                    push(ModelInfo(d[1]))
            elif kind == D.ERROR:
                raise error_for_stream(d[1], d[2])
            elif kind == D.DONE:
                self.done = True

    def shown(self) -> tuple[int, int, int]:
        """What was pushed so far: characters of text and of thinking, tool calls."""
        text = thinking = 0
        for kind, parts, _ in self._blocks:
            if kind == _TEXT:
                text += sum(map(len, parts))
            elif kind in (_THINKING, _SEALED_THINKING):
                thinking += sum(map(len, parts))
        return text, thinking, len(self._tools)

    def finish(self) -> Message:
        """The assistant message built from everything fed so far."""
        content: list[Block] = []
        for kind, parts, extra in self._blocks:
            if kind == _TEXT:
                content.append(Text("".join(parts)))
            elif kind == _THINKING:
                content.append(Thinking("".join(parts)))
            elif kind == _SEALED_THINKING:
                content.append(Thinking("".join(parts), extra))
            elif kind == _REDACTED:
                content.append(RedactedThinking(extra))
            else:
                call_id, name = extra
                content.append(ToolUse(call_id, name, "".join(parts) or "{}"))
        stop = normalize_stop_reason(self.finish_reason, bool(self._tools))
        return Message(
            "assistant", tuple(content), self.usage or Usage(), stop, self.wire
        )

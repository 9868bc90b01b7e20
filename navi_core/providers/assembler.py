"""Turns core delta tuples into events and, at the end, the assistant ``Message``.

Every provider (HTTP or scripted) goes through this one class, so text, thinking and
tool-call assembly behave the same whatever produced the deltas.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from typing import Any

from .._deltas import (
    BLOCK_REDACTED,
    BLOCK_SEALED_THINKING,
    BLOCK_TEXT,
    BLOCK_THINKING,
    BLOCK_TOOL,
)
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
from ..core import Assembler, estimate_tokens
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


_EVENTS = (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ModelInfo)


class ResponseAssembler:
    """Accumulates one response; ``feed`` pushes events, ``finish`` builds the message.

    The per-delta work runs in the core's ``Assembler``; with ``coalesce``, adjacent
    deltas of one kind in one ``feed`` (one network read) become one event.
    """

    __slots__ = ("_core", "wire")

    def __init__(self, wire: WireIdentity, *, coalesce: bool = False) -> None:
        self.wire = wire
        self._core = Assembler(_EVENTS, error_for_stream, coalesce)

    @property
    def core(self) -> Assembler:
        """The core's ``Assembler`` doing the per-delta work: a caller feeding many
        batches calls its ``feed(deltas, push)`` directly (a ``ValueError`` there is
        a ``MalformedStream``) and reads its ``done``."""
        return self._core

    @property
    def done(self) -> bool:
        """True once the terminator delta arrived."""
        return self._core.done

    @property
    def finish_reason(self) -> str | None:
        """The raw ``finish_reason`` / ``stop_reason`` seen last."""
        reason: str | None = self._core.finish_reason
        return reason

    @property
    def model(self) -> str | None:
        """The model the response named last."""
        model: str | None = self._core.model
        return model

    @property
    def usage(self) -> Usage | None:
        """The usage the response reported last."""
        raw = self._core.usage
        return None if raw is None else Usage(*raw)

    def feed(self, deltas: Sequence[tuple[Any, ...]], queue: deque[Event]) -> None:
        """Apply deltas in order, pushing one event per visible delta.

        Raises:
            ProviderError: an in-stream error object (mapped by kind).
            MalformedStream: arguments for a tool call that never started.
        """
        try:
            self._core.feed(deltas, queue.append)
        except ValueError as exc:
            raise MalformedStream(str(exc)) from None

    def shown(self) -> tuple[int, int, int]:
        """What was pushed so far: characters of text and of thinking, tool calls."""
        return self._core.shown()

    def finish(self) -> Message:
        """The assistant message built from everything fed so far."""
        content: list[Block] = []
        blocks = self._core.blocks()
        calls = [i for i, (kind, _, _) in enumerate(blocks) if kind == BLOCK_TOOL]
        stop = normalize_stop_reason(self._core.finish_reason, bool(calls))
        # a call with no argument text is one with none ("{}"), unless it is what a
        # response cut at the token limit ended with: cut before its arguments came
        last = len(blocks) - 1
        cut = last if calls and calls[-1] == last and stop == "max_tokens" else -1
        for i, (kind, text, extra) in enumerate(blocks):
            if kind == BLOCK_TEXT:
                content.append(Text(text))
            elif kind == BLOCK_THINKING:
                content.append(Thinking(text))
            elif kind == BLOCK_SEALED_THINKING:
                content.append(Thinking(text, extra))
            elif kind == BLOCK_REDACTED:
                content.append(RedactedThinking(extra))
            else:
                call_id, name = extra
                content.append(
                    ToolUse(call_id, name, text or ("" if i == cut else "{}"))
                )
        usage = self.usage or Usage()
        if usage.estimated:  # the server reported none: the output from the message
            usage = dataclasses.replace(usage, output=_output_estimate(content))
        return Message("assistant", tuple(content), usage, stop, self.wire)


def _output_estimate(content: list[Block]) -> int:
    """The estimated output tokens of an answer: its text, thinking and calls."""
    total = 0
    for block in content:
        if isinstance(block, (Text, Thinking)):
            total += estimate_tokens(block.text)
        elif isinstance(block, ToolUse):
            total += estimate_tokens(block.name) + estimate_tokens(block.input)
    return total

"""The OpenAI Responses stream parser in pure Python: the twin of ``csrc/_responses.pxi``.

A Responses body is a series of typed events (``event: response.output_text.delta`` /
``data: {"type": "response.output_text.delta", ...}``); the payload's ``type`` decides.
Text, refusal and reasoning-summary deltas become ``TEXT`` / ``THINKING``; a
``function_call`` output item starts a tool call whose ordinal is the number of calls
before it, and its argument deltas are found by ``output_index``; a finished reasoning
item (with ``encrypted_content``) becomes one ``REASONING_ITEM`` carrying the item as
JSON, to be sent back unchanged; a message item after one that said something starts
with a paragraph break (models that comment before answering send two);
``response.completed`` / ``response.incomplete`` give usage (cached and reasoning
tokens) and end the stream; a completed response that streamed refusal pieces and no
function call ends with ``FINISH`` "refusal" (OpenAI refuses through that field, not
through a status); ``error`` and ``response.failed`` are ``ERROR`` deltas. A
chat-style ``data: [DONE]`` is no terminator: after a terminal event (some compatible
servers send one) it is never read, and before one it ends a stream the server cut
short, an ``IncompleteResponse``. The generic reader is shared by both twins; the
compiled one scans the delta events in C.
"""

from __future__ import annotations

from typing import Any, Final

import orjson
from orjson import JSONDecodeError, loads

from ._deltas import (
    DONE,
    ERROR,
    FINISH,
    MODEL,
    REASONING_ITEM,
    TEXT,
    THINKING,
    TOOL_ARGS,
    TOOL_START,
    USAGE,
)
from ._framing_py import DEFAULT_MAX_EVENT_BYTES
from ._payloads import Reader, Slot, count, string
from ._sse_py import Parser
from .errors import IncompleteResponse

__all__ = ["OpenAIResponsesParser", "ResponsesReader", "done_too_soon"]

_TEXT: Final = "response.output_text.delta"
_REFUSAL: Final = "response.refusal.delta"
_TEXT_EVENTS: Final = frozenset({_TEXT, _REFUSAL})
_THINKING_EVENTS: Final = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)
_ECHOES: Final = frozenset(
    {
        "response.output_text.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.function_call_arguments.done",
        "response.reasoning_text.done",
        "response.refusal.done",
    }
)  # events that repeat what the deltas said: nothing to read in them
_INCOMPLETE: Final = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


class ResponsesReader(Reader):
    """What a Responses stream event means, by its ``type``. ``calls`` and
    ``streamed`` are never rebound: the compiled parser's fast path shares them.
    Refusal deltas are read here only (no fast path), so ``refused`` is the reader's."""

    __slots__ = ("_spoke", "_tools", "calls", "finished", "model", "refused",
                 "streamed")  # fmt: skip

    def __init__(self) -> None:
        self.calls: dict[Any, int] = {}  # output_index -> tool ordinal
        self.streamed: set[int] = set()  # ordinals whose arguments arrived as deltas
        self.model = ""
        self.finished = False  # a terminal event was read: ignore the rest
        self._tools = 0
        self._spoke = False  # a message item with text has finished
        self.refused = False  # a non-empty refusal delta arrived

    def apply(self, obj: dict[str, Any], out: list[Any]) -> Slot | None:
        kind = obj.get("type")
        if type(kind) is not str:  # not an event this reader knows
            return None
        if kind in _TEXT_EVENTS:
            text = string(obj.get("delta"))
            if text:
                out.append((TEXT, text))
                if kind == _REFUSAL:
                    self.refused = True
                return obj, "delta"
        elif kind in _THINKING_EVENTS:
            text = string(obj.get("delta"))
            if text:
                out.append((THINKING, text))
                return obj, "delta"
        elif kind == "response.function_call_arguments.delta":
            ordinal = self.calls.get(obj.get("output_index"))
            text = string(obj.get("delta"))
            if ordinal is not None and text:
                self.streamed.add(ordinal)
                out.append((TOOL_ARGS, ordinal, text))
                return obj, "delta"
        elif kind == "response.output_item.added":
            item = obj["item"]
            kind = item.get("type")
            if kind == "function_call":
                self._start_call(obj.get("output_index"), item, out)
            elif kind == "message" and self._spoke:  # a new paragraph, not run-on text
                out.append((TEXT, "\n\n"))
        elif kind == "response.output_item.done":
            self._item_done(obj.get("output_index"), obj["item"], out)
        elif kind == "response.reasoning_summary_part.added":
            if count(obj.get("summary_index")) > 0:
                out.append((THINKING, "\n\n"))
        elif kind in ("response.created", "response.in_progress"):
            self._model(obj["response"], out)
        elif kind in ("response.completed", "response.incomplete"):
            self._finish(obj["response"], out)
        elif kind == "response.failed":
            response = obj["response"]
            error = response.get("error") or {}
            code = error.get("code") or error.get("type") or "server_error"
            out.append((ERROR, str(code), str(error.get("message") or "")))
            self.finished = True
        elif kind == "error":
            error = obj.get("error")
            if type(error) is not dict:
                error = obj
            code = error.get("code") or error.get("type") or "error"
            out.append((ERROR, str(code), str(error.get("message") or "")))
        return None

    def _start_call(self, index: Any, item: dict[str, Any], out: list[Any]) -> int:
        ordinal = self.calls.get(index)
        if ordinal is not None:
            return ordinal
        ordinal = self._tools
        self._tools += 1
        self.calls[index] = ordinal
        call_id = string(item.get("call_id") or item.get("id") or "")
        out.append((TOOL_START, ordinal, call_id, string(item.get("name") or "")))
        args = item.get("arguments")
        if args:
            self.streamed.add(ordinal)
            out.append((TOOL_ARGS, ordinal, string(args)))
        return ordinal

    def _item_done(self, index: Any, item: dict[str, Any], out: list[Any]) -> None:
        kind = item.get("type")
        if kind == "reasoning":
            out.append((REASONING_ITEM, orjson.dumps(item).decode()))
        elif kind == "message":
            for part in item.get("content") or ():
                if part.get("text"):
                    self._spoke = True
        elif kind == "function_call":
            ordinal = self._start_call(index, item, out)
            args = item.get("arguments")
            if args and ordinal not in self.streamed:
                self.streamed.add(ordinal)
                out.append((TOOL_ARGS, ordinal, string(args)))

    def _model(self, response: dict[str, Any], out: list[Any]) -> None:
        model = response.get("model")
        if model and model != self.model:
            self.model = string(model)
            out.append((MODEL, model))

    def _finish(self, response: dict[str, Any], out: list[Any]) -> None:
        self._model(response, out)
        if response.get("status") == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            reason = string(reason or "max_output_tokens")
            out.append((FINISH, _INCOMPLETE.get(reason, reason)))
        elif self.refused and not self._tools:  # a plain end of a refusal
            out.append((FINISH, "refusal"))
        usage = response.get("usage")
        if usage is not None:
            prompt = count(usage.get("input_tokens"))
            details = usage.get("input_tokens_details")
            cached = count(details.get("cached_tokens")) if details else 0
            details = usage.get("output_tokens_details")
            reasoning = count(details.get("reasoning_tokens")) if details else 0
            output = count(usage.get("output_tokens"))
            out.append((USAGE, max(prompt - cached, 0), output, cached, 0, reasoning))
        out.append((DONE,))
        self.finished = True


class OpenAIResponsesParser(Parser):
    """Responses API stream (typed ``response.*`` events) to deltas."""

    __slots__ = ("_calls", "_streamed")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(max_event_bytes)
        reader = ResponsesReader()
        self._reader = reader
        self._calls = reader.calls
        self._streamed = reader.streamed

    def _dispatch(self, data: bytes, out: list[Any]) -> None:
        # The fast path, inline (the compiled twin's is _fast): every event carries a
        # new sequence number, so no learned template fits; a delta event is read
        # straight from its object, anything else (a refusal delta too: the reader
        # remembers it) goes the generic way.
        try:
            obj = loads(data)
        except JSONDecodeError:
            obj = None
        if type(obj) is dict:
            kind = obj.get("type")
            delta = obj.get("delta")
            if type(delta) is str and type(kind) is str:
                if kind == _TEXT:
                    if delta:
                        out.append((TEXT, delta))
                    return
                if kind in _THINKING_EVENTS:
                    if delta:
                        out.append((THINKING, delta))
                    return
                index = obj.get("output_index")
                if kind == "response.function_call_arguments.delta" and (
                    type(index) is int
                ):
                    ordinal = self._calls.get(index)
                    if ordinal is not None and delta:
                        self._streamed.add(ordinal)
                        out.append((TOOL_ARGS, ordinal, delta))
                    return
            if type(kind) is str and kind in _ECHOES:
                return
        if not self._terminal(data, out):
            self._generic(data, out)

    def _terminal(self, data: bytes, out: list[Any]) -> bool:
        # Compatible servers that end with [DONE] send it after response.completed,
        # which stopped the parser: a [DONE] read here came before any terminal event.
        if data != b"[DONE]":
            return False
        raise done_too_soon(self._data_offset)


def done_too_soon(offset: int) -> IncompleteResponse:
    """The error for a ``[DONE]`` at ``offset`` before any terminal event (both twins):
    the stream was cut, the answer before it may be half of one."""
    return IncompleteResponse(
        f"[DONE] at byte {offset} before response.completed: the server cut the "
        "response short",
        offset=offset,
    )

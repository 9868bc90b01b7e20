"""SSE framing and the OpenAI / Anthropic delta parsers, in pure Python.

The reference twin of ``csrc/_sse.pxi``. Framing follows the WHATWG event-stream rules
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
on bytes, with three deliberate choices both twins share:

* ``close()`` ends the last line and dispatches a pending event that has data, because
  recorded streams and some servers omit the final blank line (WHATWG would drop it);
* a line, or the data of one event, larger than ``max_event_bytes`` raises
  ``MalformedStream``, so memory stays bounded however the input is chunked;
* an error found after some results of the same ``feed`` returns those results first
  and raises on the next call; a failed or closed object refuses further input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .deltas import (
    DONE,
    ERROR,
    FINISH,
    MODEL,
    REDACTED_THINKING,
    SIGNATURE,
    TEXT,
    THINKING,
    TOOL_ARGS,
    TOOL_START,
    USAGE,
)
from .errors import MalformedStream

__all__ = ["AnthropicParser", "OpenAIChatParser", "SSEDecoder", "SSEEvent"]

_BOM: Final = b"\xef\xbb\xbf"
_EOL: Final = re.compile(rb"\r\n|\r|\n")
_EXCERPT: Final = 80
DEFAULT_MAX_EVENT_BYTES: Final = 16 * 1024 * 1024

Buffer = bytes | bytearray | memoryview
Delta = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched server-sent event; ``retry`` only when its own block set one."""

    event: str
    data: str
    id: str
    retry: int | None


def _excerpt(data: bytes | bytearray) -> str:
    return repr(bytes(data[:_EXCERPT]).decode("utf-8", "replace"))


def _shape_error(data: bytes | bytearray, offset: int) -> MalformedStream:
    return MalformedStream(
        f"unexpected JSON structure in SSE event at byte {offset}: {_excerpt(data)}",
        offset=offset,
    )


def _loads(data: bytes | bytearray, offset: int) -> dict[str, Any]:
    """Parse one event payload as a JSON object; invalid UTF-8 decodes as U+FFFD."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            obj = orjson.loads(bytes(data).decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            raise MalformedStream(
                f"invalid JSON in SSE event at byte {offset}: {_excerpt(data)}",
                offset=offset,
            ) from None
    if type(obj) is not dict:
        raise MalformedStream(
            f"SSE event at byte {offset} is not a JSON object: {_excerpt(data)}",
            offset=offset,
        )
    return obj


class _Framer:
    """Splits bytes into SSE fields and hands each complete event to ``_dispatch``."""

    __slots__ = (
        "_bom",
        "_buf",
        "_closed",
        "_data_offset",
        "_error",
        "_event",
        "_id",
        "_max",
        "_offset",
        "_parts",
        "_retry",
        "_size",
        "_skip_lf",
        "_stopped",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        self._max = max_event_bytes
        self._buf = bytearray()
        self._offset = 0  # stream offset of _buf[0]
        self._bom = True  # a leading BOM may still be arriving
        self._skip_lf = False  # the last chunk ended in CR: drop a leading LF
        self._parts: list[bytes | bytearray] = []
        self._size = 0
        self._data_offset = 0
        self._event = b""
        self._id = ""
        self._retry: int | None = None
        self._closed = False
        self._stopped = False  # the parser saw its terminator: ignore the rest
        self._error: MalformedStream | None = None

    def feed(self, data: Buffer) -> list[Any]:
        """Consume a chunk of the body; return what it completed (maybe nothing).

        Raises:
            MalformedStream: the input breaks a limit or the payload format.
            ValueError: called after ``close()``.
        """
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError("feed() called after close()")
        out: list[Any] = []
        if self._stopped or not len(data):
            return out
        self._buf += data
        self._run(out, False)
        return out

    def close(self) -> list[Any]:
        """End of input: finish the last line and dispatch a pending event with data."""
        if self._error is not None:
            raise self._error
        out: list[Any] = []
        if not self._closed:
            self._closed = True
            if not self._stopped:
                self._run(out, True)
        return out

    def _run(self, out: list[Any], final: bool) -> None:
        buf = self._buf
        try:
            if self._bom:
                if not final and len(buf) < 3 and _BOM.startswith(buf):
                    return
                self._bom = False
                if buf.startswith(_BOM):
                    del buf[:3]
                    self._offset += 3
            if self._skip_lf and buf:
                self._skip_lf = False
                if buf[0] == 10:
                    del buf[:1]
                    self._offset += 1
            pos = self._lines(buf, out)
            if self._stopped:
                buf.clear()
                return
            rest = len(buf) - pos
            if rest > self._max:
                raise MalformedStream(
                    f"SSE line at byte {self._offset + pos} exceeds "
                    f"max_event_bytes ({self._max})",
                    offset=self._offset + pos,
                )
            if final:
                if rest:
                    self._line(buf[pos:], self._offset + pos, out)
                    pos = len(buf)
                if self._parts and not self._stopped:
                    self._flush(out)
            del buf[:pos]
            self._offset += pos
        except MalformedStream as exc:
            self._error = exc
            buf.clear()
            self._parts = []
            if not out:
                raise

    def _lines(self, buf: bytearray, out: list[Any]) -> int:
        """Apply each complete line; return where the unfinished one starts."""
        pos = 0
        base = self._offset
        if b"\r" not in buf:
            find = buf.find
            while (nl := find(b"\n", pos)) >= 0:
                self._line(buf[pos:nl], base + pos, out)
                pos = nl + 1
                if self._stopped:
                    break
            return pos
        end = len(buf)
        for m in _EOL.finditer(buf):
            self._line(buf[pos : m.start()], base + pos, out)
            pos = m.end()
            if self._stopped:
                break
            if pos == end and m.group() == b"\r":
                self._skip_lf = True
        return pos

    def _line(self, line: bytearray, offset: int, out: list[Any]) -> None:
        """Apply one line (without its terminator) to the pending event."""
        if not line:
            if self._parts:
                self._flush(out)
            else:
                self._event = b""
                self._retry = None
            return
        if len(line) > self._max:
            raise MalformedStream(
                f"SSE line at byte {offset} exceeds max_event_bytes ({self._max})",
                offset=offset,
            )
        if line[0] == 58:  # ":" starts a comment
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = (
                line[colon + 2 :]
                if line[colon + 1 : colon + 2] == b" "
                else line[colon + 1 :]
            )
        if name == b"data":
            parts = self._parts
            if parts:
                self._size += len(value) + 1
            else:
                self._size = len(value)
                self._data_offset = offset
            if self._size > self._max:
                raise MalformedStream(
                    f"SSE event data at byte {offset} exceeds "
                    f"max_event_bytes ({self._max})",
                    offset=offset,
                )
            parts.append(value)
        elif name == b"event":
            self._event = bytes(value)
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)

    def _flush(self, out: list[Any]) -> None:
        parts = self._parts
        data = parts[0] if len(parts) == 1 else b"\n".join(parts)
        self._parts = []
        self._dispatch(data, out)
        self._event = b""
        self._retry = None

    def _dispatch(self, data: bytes | bytearray, out: list[Any]) -> None:
        raise NotImplementedError


class SSEDecoder(_Framer):
    """Incremental ``text/event-stream`` decoder: bytes in, ``SSEEvent`` values out."""

    __slots__ = ()

    def feed(self, data: Buffer) -> list[SSEEvent]:
        """Consume a chunk; return the events it completed (maybe none)."""
        return super().feed(data)

    def close(self) -> list[SSEEvent]:
        """End of input: return the pending event if it has data."""
        return super().close()

    def _dispatch(self, data: bytes | bytearray, out: list[Any]) -> None:
        out.append(
            SSEEvent(
                self._event.decode("utf-8", "replace") or "message",
                data.decode("utf-8", "replace"),
                self._id,
                self._retry,
            )
        )


def _int(value: Any) -> int:
    """A token count: absent or null is 0."""
    if value is None:
        return 0
    if type(value) is not int:
        raise TypeError("token count is not an integer")
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise TypeError("expected a string")
    return value


class OpenAIChatParser(_Framer):
    """Chat-completions stream (``data: {chunk}`` ... ``data: [DONE]``) to deltas."""

    __slots__ = ("_model", "_tools")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(max_event_bytes)
        self._model = ""
        self._tools: set[int] = set()

    def feed(self, data: Buffer) -> list[Delta]:
        """Consume a chunk; return the deltas it completed (maybe none)."""
        return super().feed(data)

    def close(self) -> list[Delta]:
        """End of input: return the deltas of a pending unterminated event."""
        return super().close()

    def _dispatch(self, data: bytes | bytearray, out: list[Any]) -> None:
        if data == b"[DONE]":
            out.append((DONE,))
            self._stopped = True
            return
        offset = self._data_offset
        obj = _loads(data, offset)
        try:
            self._chunk(obj, out)
        except (AttributeError, KeyError, TypeError) as exc:
            raise _shape_error(data, offset) from exc

    def _chunk(self, obj: dict[str, Any], out: list[Any]) -> None:
        error = obj.get("error")
        if error is not None:
            if type(error) is str:
                out.append((ERROR, "error", error))
                return
            kind = error.get("type") or error.get("code") or "error"
            out.append((ERROR, str(kind), str(error.get("message") or "")))
            return
        model = obj.get("model")
        if model and model != self._model:
            self._model = _str(model)
            out.append((MODEL, model))
        choices = obj.get("choices")
        if choices:
            for choice in choices:
                index = choice.get("index")
                if index is None or index == 0:
                    self._choice(choice, out)
                    break
        usage = obj.get("usage")
        if usage is not None:
            prompt = _int(usage.get("prompt_tokens"))
            details = usage.get("prompt_tokens_details")
            cached = _int(details.get("cached_tokens")) if details else 0
            details = usage.get("completion_tokens_details")
            reasoning = _int(details.get("reasoning_tokens")) if details else 0
            output = _int(usage.get("completion_tokens"))
            out.append((USAGE, max(prompt - cached, 0), output, cached, 0, reasoning))

    def _choice(self, choice: dict[str, Any], out: list[Any]) -> None:
        delta = choice.get("delta")
        if delta:
            text = delta.get("reasoning_content") or delta.get("reasoning")
            if text:
                out.append((THINKING, _str(text)))
            text = delta.get("content")
            if text:
                out.append((TEXT, _str(text)))
            text = delta.get("refusal")
            if text:
                out.append((TEXT, _str(text)))
            calls = delta.get("tool_calls")
            if calls:
                self._tool_calls(calls, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            out.append((FINISH, _str(reason)))

    def _tool_calls(self, calls: list[Any], out: list[Any]) -> None:
        tools = self._tools
        for position, call in enumerate(calls):
            index = call.get("index")
            index = position if index is None else _int(index)
            function = call.get("function") or {}
            if index not in tools:
                tools.add(index)
                call_id = _str(call.get("id") or "")
                name = _str(function.get("name") or "")
                out.append((TOOL_START, index, call_id, name))
            args = function.get("arguments")
            if args:
                if type(args) is dict:  # some servers send the object itself
                    args = orjson.dumps(args).decode()
                out.append((TOOL_ARGS, index, _str(args)))


class AnthropicParser(_Framer):
    """Anthropic Messages stream to deltas, dispatching on each payload's ``type``."""

    __slots__ = ("_blocks", "_tools", "_usage")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(max_event_bytes)
        self._blocks: dict[Any, int] = {}  # content block index -> tool ordinal
        self._tools = 0
        self._usage = [0, 0, 0, 0]  # input, output, cache_read, cache_write

    def feed(self, data: Buffer) -> list[Delta]:
        """Consume a chunk; return the deltas it completed (maybe none)."""
        return super().feed(data)

    def close(self) -> list[Delta]:
        """End of input: return the deltas of a pending unterminated event."""
        return super().close()

    def _dispatch(self, data: bytes | bytearray, out: list[Any]) -> None:
        offset = self._data_offset
        obj = _loads(data, offset)
        try:
            self._message(obj, out)
        except (AttributeError, KeyError, TypeError) as exc:
            raise _shape_error(data, offset) from exc

    def _message(self, obj: dict[str, Any], out: list[Any]) -> None:
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj["delta"]
            kind = delta.get("type")
            if kind == "text_delta":
                text = _str(delta.get("text"))
                if text:
                    out.append((TEXT, text))
            elif kind == "input_json_delta":
                ordinal = self._blocks.get(obj.get("index"))
                text = _str(delta.get("partial_json"))
                if ordinal is not None and text:
                    out.append((TOOL_ARGS, ordinal, text))
            elif kind == "thinking_delta":
                text = _str(delta.get("thinking"))
                if text:
                    out.append((THINKING, text))
            elif kind == "signature_delta":
                out.append((SIGNATURE, _str(delta.get("signature"))))
        elif kind == "content_block_start":
            self._block_start(obj.get("index"), obj["content_block"], out)
        elif kind == "message_start":
            message = obj["message"]
            model = message.get("model")
            if model:
                out.append((MODEL, _str(model)))
            self._add_usage(message.get("usage") or {}, out)
        elif kind == "message_delta":
            reason = (obj.get("delta") or {}).get("stop_reason")
            if reason is not None:
                out.append((FINISH, _str(reason)))
            usage = obj.get("usage")
            if usage is not None:
                self._add_usage(usage, out)
        elif kind == "message_stop":
            out.append((DONE,))
        elif kind == "error":
            error = obj.get("error") or {}
            kind = error.get("type") or "error"
            out.append((ERROR, str(kind), str(error.get("message") or "")))

    def _block_start(self, index: Any, block: dict[str, Any], out: list[Any]) -> None:
        kind = block.get("type")
        if kind == "text":
            text = _str(block.get("text") or "")
            if text:
                out.append((TEXT, text))
        elif kind == "tool_use":
            ordinal = self._tools
            self._tools += 1
            self._blocks[index] = ordinal
            out.append((TOOL_START, ordinal, _str(block["id"]), _str(block["name"])))
            args = block.get("input")
            if args:
                if type(args) is not dict:
                    raise TypeError("tool_use input is not an object")
                out.append((TOOL_ARGS, ordinal, orjson.dumps(args).decode()))
        elif kind == "thinking":
            text = _str(block.get("thinking") or "")
            if text:
                out.append((THINKING, text))
            signature = _str(block.get("signature") or "")
            if signature:
                out.append((SIGNATURE, signature))
        elif kind == "redacted_thinking":
            out.append((REDACTED_THINKING, _str(block.get("data"))))

    def _add_usage(self, usage: dict[str, Any], out: list[Any]) -> None:
        totals = self._usage
        for slot, key in enumerate(_ANTHROPIC_USAGE):
            value = usage.get(key)
            if value is not None:
                totals[slot] = _int(value)
        out.append((USAGE, totals[0], totals[1], totals[2], totals[3], 0))


_ANTHROPIC_USAGE: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)

"""The OpenAI / Anthropic delta parsers in pure Python: the twin of ``csrc/_sse.pxi``.

A parser's ``_dispatch`` turns one event payload into ``navi_core._deltas`` tuples in
three steps: a fast path (the compiled twin's ``_fast``; inline here, a call per event
would cost), ``_terminal`` (OpenAI's ``[DONE]``), ``_generic``. The generic path is a
reader (``navi_core._payloads``: orjson, then what each member means): it exists once,
in Python, and the compiled parsers call it for every chunk their byte scanner does not
take; a reader that read the stream's last payload sets ``finished`` and the parser stops
there. This twin's fast path learns: consecutive chunks are usually byte-identical around one string
(``..."delta":{"content":"`` + text + ``"},...``), so ``_learn`` records the bytes
around the string a chunk emitted, proves with a probe that any string put there parses
alike, and later chunks with that head and tail only decode their string.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ._deltas import (
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
    token_count,
)
from ._framing_py import DEFAULT_MAX_EVENT_BYTES, Buffer, Delta, Framer
from ._payloads import Reader, Slot, count, string

__all__ = ["AnthropicParser", "AnthropicReader", "OpenAIChatParser", "OpenAIChatReader"]

_ANTHROPIC_USAGE: Final = ("input_tokens", "output_tokens", "cache_read_input_tokens",
                           "cache_creation_input_tokens")  # fmt: skip
_PROBE: Final = "\u2603 probe"
_PROBE_JSON: Final = orjson.dumps(_PROBE)[1:-1]


class OpenAIChatReader(Reader):
    """What a chat-completions chunk means. ``tools`` is never rebound: the compiled
    parser's fast path shares that dict (it takes the argument pieces of a call already
    open), reads and sets ``model``, sets ``refused`` and reports its finish reasons
    through ``finish``."""

    __slots__ = ("_next", "_ordinals", "finish_seen", "model", "refused", "tools")

    def __init__(self) -> None:
        self.model = ""
        # wire index -> the call open there, [ordinal, id, named, pieces]: pieces are
        # the arguments so far of a call with no id (None for one with an id)
        self.tools: dict[int, list[Any]] = {}
        self._ordinals: set[int] = set()  # the ordinals given to calls
        self._next = 0  # one past the highest ordinal given
        self.refused = False  # a non-empty ``refusal`` piece arrived
        self.finish_seen = False  # a finish reason came: the model's own end

    def finish(self, reason: str) -> str:
        """The finish reason to report for ``reason``: "refusal" for a plain "stop"
        of a response that refused (OpenAI's ``refusal`` field) and called no tool."""
        self.finish_seen = True
        if reason == "stop" and self.refused and not self.tools:
            return "refusal"
        return reason

    @staticmethod
    def _kind(error: dict[str, Any]) -> str:
        """An error object's kind: its ``code`` when that is an HTTP error status
        (vLLM and OpenRouter name the status there, beside a class name as
        ``type``), else its ``type`` or ``code``."""
        code = error.get("code")
        if type(code) is int and 400 <= code < 600:
            return str(code)
        return str(error.get("type") or code or "error")

    def apply(self, obj: dict[str, Any], out: list[Any]) -> Slot | None:
        slot = None
        error = obj.get("error")
        if error is None and obj.get("object") == "error":
            error = obj  # vLLM before 0.10: the error's fields at the top
        if error is not None:
            if type(error) is str:
                out.append((ERROR, "error", error))
                return None
            out.append((ERROR, self._kind(error), str(error.get("message") or "")))
            return None
        model = obj.get("model")
        if model and model != self.model:
            self.model = string(model)
            out.append((MODEL, model))
        choices = obj.get("choices")
        if choices:
            for choice in choices:
                index = choice.get("index")
                if index is None or index == 0:
                    delta = choice.get("delta")
                    if delta:
                        slot = self._delta(delta, out)
                    reason = choice.get("finish_reason")
                    if reason is not None:
                        out.append((FINISH, self.finish(string(reason))))
                    break
        usage = obj.get("usage")
        if type(usage) is dict:
            prompt = token_count(usage, "prompt_tokens")
            cached = token_count(usage, "prompt_tokens_details", "cached_tokens")
            reasoning = token_count(
                usage, "completion_tokens_details", "reasoning_tokens"
            )
            output = token_count(usage, "completion_tokens")
            out.append((USAGE, max(prompt - cached, 0), output, cached, 0, reasoning))
        return slot

    def _delta(self, delta: dict[str, Any], out: list[Any]) -> Slot | None:
        slot = None
        text = delta.get("reasoning_content") or delta.get("reasoning")
        if text:
            out.append((THINKING, string(text)))
        text = delta.get("content")
        if text:
            out.append((TEXT, string(text)))
            slot = (delta, "content")
        text = delta.get("refusal")
        if text:
            out.append((TEXT, string(text)))
            self.refused = True
        calls = delta.get("tool_calls")
        if calls:
            slot = self._tool_calls(calls, out)
        return slot

    def _tool_calls(self, calls: list[Any], out: list[Any]) -> Slot | None:
        slot = None
        tools = self.tools
        for position, call in enumerate(calls):
            index = call.get("index")
            index = position if index is None else count(index)
            function = call.get("function") or {}
            call_id = string(call.get("id") or "")
            name = string(function.get("name") or "")
            args = function.get("arguments")
            if args:
                if type(args) is dict:  # some servers send the object itself
                    args = orjson.dumps(args).decode()
                args = string(args)
            open_call = tools.get(index)
            if open_call is None or self._another(open_call, call_id, name, args):
                open_call = self._start(index, open_call is None, call_id, name)
                out.append((TOOL_START, open_call[0], call_id, name))
            if args:
                out.append((TOOL_ARGS, open_call[0], args))
                pieces = open_call[3]
                if pieces is None:
                    slot = (function, "arguments")
                else:  # kept for _another; no template learnt, it would skip this
                    pieces.append(args)
        return slot

    def _start(self, index: int, first: bool, call_id: str, name: str) -> list[Any]:
        """Open a call at wire ``index``. Its ordinal is that index for the first call
        there (OpenAI's own numbering, kept) unless taken, else one past the highest:
        Ollama sends each of its parallel calls at index 0."""
        ordinals = self._ordinals
        ordinal = index if first and index not in ordinals else self._next
        ordinals.add(ordinal)
        self._next = max(self._next, ordinal + 1)
        call = [ordinal, call_id, bool(name), None if call_id else []]
        self.tools[index] = call
        return call

    @staticmethod
    def _another(call: list[Any], call_id: str, name: str, args: Any) -> bool:
        """Whether a piece at the wire index of the open ``call`` starts another one.

        OpenAI sends id and name in a call's first piece only, then argument pieces;
        Ollama sends each parallel call whole, all at index 0 (or none), each with its
        own id. Only a piece with a name starts a call: Poolside sends another id in
        the argument pieces of one call. Without ids, the open call's name and whole
        arguments must have come: MiniMax on NVIDIA NIM repeats the name in every
        piece of one call, whose arguments are whole only at its end.
        """
        if not name:
            return False
        if call_id and call[1]:
            return bool(call_id != call[1])
        if call[1] or not (args and call[2]):
            return False
        try:
            orjson.loads("".join(call[3]))
        except orjson.JSONDecodeError:
            return False
        return True


class AnthropicReader(Reader):
    """What a Messages stream payload means, by its ``type``. ``blocks`` and
    ``bare`` are never rebound: the compiled parser's fast path shares them (and
    leaves the pieces of a bare thinking block to this reader)."""

    __slots__ = ("_tools", "_usage", "bare", "blocks")

    def __init__(self) -> None:
        self.blocks: dict[Any, int] = {}  # content block index -> tool ordinal
        # the index of the thinking block begun last while it has no thinking text:
        # its signature comes after an empty THINKING, so it seals a block of its own
        self.bare: list[Any] = []
        self._tools = 0
        self._usage = [0, 0, 0, 0]  # input, output, cache_read, cache_write

    def apply(self, obj: dict[str, Any], out: list[Any]) -> Slot | None:
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj["delta"]
            kind = delta.get("type")
            if kind == "text_delta":
                text = string(delta.get("text"))
                if text:
                    out.append((TEXT, text))
                    return delta, "text"
            elif kind == "input_json_delta":
                ordinal = self.blocks.get(obj.get("index"))
                text = string(delta.get("partial_json"))
                if ordinal is not None and text:
                    out.append((TOOL_ARGS, ordinal, text))
                    return delta, "partial_json"
            elif kind == "thinking_delta":
                text = string(delta.get("thinking"))
                if text:
                    self._was_bare(obj.get("index"))
                    out.append((THINKING, text))
                    return delta, "thinking"
            elif kind == "signature_delta":
                signature = string(delta.get("signature"))
                if self._was_bare(obj.get("index")):
                    out.append((THINKING, ""))
                out.append((SIGNATURE, signature))
        elif kind == "content_block_start":
            self._block_start(obj.get("index"), obj["content_block"], out)
        elif kind == "message_start":
            message = obj["message"]
            model = message.get("model")
            if model:
                out.append((MODEL, string(model)))
            self._add_usage(message.get("usage"), out)
        elif kind == "message_delta":
            reason = (obj.get("delta") or {}).get("stop_reason")
            if reason is not None:
                out.append((FINISH, string(reason)))
            usage = obj.get("usage")
            if usage is not None:
                self._add_usage(usage, out)
        elif kind == "message_stop":
            out.append((DONE,))
        elif kind == "error":
            error = obj.get("error") or {}
            kind = error.get("type") or "error"
            out.append((ERROR, str(kind), str(error.get("message") or "")))
        return None

    def _block_start(self, index: Any, block: dict[str, Any], out: list[Any]) -> None:
        self.bare.clear()  # the block before has ended
        kind = block.get("type")
        if kind == "text":
            text = string(block.get("text") or "")
            if text:
                out.append((TEXT, text))
        elif kind == "tool_use":
            ordinal = self._tools
            self._tools += 1
            self.blocks[index] = ordinal
            out.append(
                (TOOL_START, ordinal, string(block["id"]), string(block["name"]))
            )
            args = block.get("input")
            if args:
                if type(args) is not dict:
                    raise TypeError("tool_use input is not an object")
                out.append((TOOL_ARGS, ordinal, orjson.dumps(args).decode()))
        elif kind == "thinking":
            text = string(block.get("thinking") or "")
            signature = string(block.get("signature") or "")
            if text or signature:  # empty text: a block all the same (see ``bare``)
                out.append((THINKING, text))
            else:
                self.bare[:] = [index]
            if signature:
                out.append((SIGNATURE, signature))
        elif kind == "redacted_thinking":
            out.append((REDACTED_THINKING, string(block.get("data"))))

    def _was_bare(self, index: Any) -> bool:
        """Whether ``index`` is the bare thinking block; it is not from now on."""
        bare = self.bare
        if bare and bare[0] == index:
            bare.clear()
            return True
        return False

    def _add_usage(self, usage: Any, out: list[Any]) -> None:
        totals = self._usage
        for slot, key in enumerate(_ANTHROPIC_USAGE):
            if type(usage) is dict and usage.get(key) is not None:
                totals[slot] = token_count(usage, key)
        out.append((USAGE, totals[0], totals[1], totals[2], totals[3], 0))


class _Template:
    """The bytes around one JSON string value, and the delta that string makes."""

    __slots__ = ("delta", "head", "hi", "lo", "size", "tail")

    def __init__(self, head: bytes, tail: bytes, delta: tuple[Any, ...]) -> None:
        self.head = head
        self.tail = tail
        self.delta = delta
        self.lo = len(head) - 1  # keep the quotes: the slice is a JSON string
        self.hi = len(tail) - 1
        self.size = len(head) + len(tail)


def _learn(
    data: bytes, obj: dict[str, Any], slot: Slot, delta: tuple[Any, ...]
) -> _Template | None:
    """Record where ``slot``'s string sits in ``data``, if a probe proves it.

    The probe replaces the string in ``obj`` and in the bytes: if both still agree,
    the head leaves the JSON parser inside that very string and the tail closes it,
    so any string between them parses to ``obj`` with only that value changed.
    """
    container, key = slot
    raw = orjson.dumps(container[key])
    at = data.rfind(raw)
    if at < 0:
        return None
    head = bytes(data[: at + 1])
    tail = bytes(data[at + len(raw) - 1 :])
    container[key] = _PROBE
    try:
        proven = orjson.loads(head + _PROBE_JSON + tail) == obj
    except orjson.JSONDecodeError:
        return None
    return _Template(head, tail, delta) if proven else None


class Parser(Framer):
    """Turns each event payload into deltas: fast path, ``_terminal``, ``_generic``."""

    __slots__ = ("_hits", "_learned", "_reader", "_template")
    _names_events = False
    _reader: Reader

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(max_event_bytes)
        self._template: _Template | None = None
        self._learned = 0
        self._hits = 0

    def feed(self, data: Buffer) -> list[Delta]:
        """Consume a chunk; return the deltas it completed (maybe none)."""
        return super().feed(data)

    def close(self) -> list[Delta]:
        """End of input: return the deltas of a pending unterminated event."""
        return super().close()

    def _dispatch(self, data: bytes, out: list[Any]) -> None:
        # The fast path, inline (the compiled twin's is _fast): a chunk that fits the
        # learned template only decodes its string.
        t = self._template
        if (
            t is not None
            and len(data) >= t.size
            and data.startswith(t.head)
            and data.endswith(t.tail)
        ):
            try:
                text = orjson.loads(data[t.lo : len(data) - t.hi])
            except orjson.JSONDecodeError:
                pass  # not one string after all: the generic path decides
            else:
                self._hits += 1
                if text:
                    out.append((*t.delta, text))
                return
        if not self._terminal(data, out):
            self._generic(data, out)

    def _terminal(self, data: bytes, out: list[Any]) -> bool:
        """Handle the payload that ends the stream, if ``data`` is it."""
        return False

    def _generic(self, data: bytes, out: list[Any]) -> None:
        """The reader's deltas for ``data``; then learn a template from them."""
        start = len(out)
        reader = self._reader
        obj, slot = reader.read(data, self._data_offset, out)
        if reader.finished:
            self._stopped = True
        self._template = None
        if slot is None or self._learned > self._hits + 4:
            return
        made = out[start:]
        if made and made[0][0] == MODEL:
            made = made[1:]
        if len(made) == 1 and made[0][-1] is slot[0][slot[1]]:
            self._learned += 1
            self._template = _learn(data, obj, slot, made[0][:-1])


class OpenAIChatParser(Parser):
    """Chat-completions stream (``data: {chunk}`` ... ``data: [DONE]``) to deltas."""

    __slots__ = ()
    _reader: OpenAIChatReader

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(max_event_bytes)
        self._reader = OpenAIChatReader()

    def close(self) -> list[Delta]:
        """End of input. A body that ends at an event boundary after a finish reason
        ends with ``DONE`` too: the model had ended, some servers send no ``[DONE]``."""
        clean = not (self._closed or self._stopped or self._buf or self._parts)
        out = super().close()
        if clean and self._reader.finish_seen:
            out.append((DONE,))
        return out

    def _terminal(self, data: bytes, out: list[Any]) -> bool:
        if data != b"[DONE]":
            return False
        out.append((DONE,))
        self._stopped = True
        return True


class AnthropicParser(Parser):
    """Anthropic Messages stream to deltas, dispatching on each payload's ``type``."""

    __slots__ = ()

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(max_event_bytes)
        self._reader = AnthropicReader()

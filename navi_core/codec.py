"""Lossless ``Message`` <-> JSON, the one format every persistent store writes.

A message becomes one JSON object::

    {"v": 1, "role": "assistant",
     "content": [{"type": "text", "text": "..."}, {"type": "tool_use", ...}],
     "usage": {"input": 10, "output": 5, "cache_read": 0, "cache_write": 0,
               "reasoning": 0},
     "stop_reason": "tool_use",
     "wire": {"api_style": "openai_chat", "base_url": "...", "model": "..."}}

``usage``, ``stop_reason`` and ``wire`` are left out when None. ``v`` is the format
version: a reader refuses a newer version instead of guessing. Tool-call arguments
stay the model's raw JSON text, so a round trip is byte-exact. A base URL is stored
without user info, fragment, ``;params`` or secret-looking query parameters, and a URL
that does not parse cleanly is cut down rather than kept (``_secrets.public_url``):
no key ever reaches a store. Text that is not valid Unicode (a lone surrogate, as from
``os.listdir`` on a file name that is not UTF-8) is stored with U+FFFD in its place, so
no text makes a session unwritable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

import orjson

from ._secrets import public_url, public_wire
from .conversation import (
    Block,
    CompactionSummary,
    MediaPart,
    Message,
    Part,
    RedactedThinking,
    System,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
    WireIdentity,
    valid_text,
)

__all__ = [
    "FORMAT_VERSION",
    "CodecError",
    "StoredRow",
    "decode",
    "encode",
    "from_obj",
    "public_url",
    "public_wire",
    "stored_row",
    "to_obj",
    "valid_text",
]

#: the version written into every encoded message
FORMAT_VERSION: Final = 1

_ROLES: Final = frozenset({"system", "user", "assistant"})
_USAGE_FIELDS: Final = ("input", "output", "cache_read", "cache_write", "reasoning")


class CodecError(ValueError):
    """A message cannot be encoded, or stored data is not a message this code reads."""


def _public_wire(wire: WireIdentity | None) -> WireIdentity | None:
    return None if wire is None else public_wire(wire)


def _valid_obj(value: Any) -> Any:
    """A copy of JSON-ready ``value`` whose strings are all ``valid_text``."""
    if type(value) is str:
        return valid_text(value)
    if type(value) is dict:
        return {k: _valid_obj(v) for k, v in value.items()}
    if type(value) is list:
        return [_valid_obj(v) for v in value]
    return value


def _dumps(obj: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """``obj`` as JSON, and the object written: ``obj``, or its ``_valid_obj`` copy.

    orjson refuses lone surrogates; only then is the copy made, so valid text pays
    nothing.
    """
    try:
        return orjson.dumps(obj), obj
    except orjson.JSONEncodeError:
        pass
    valid = _valid_obj(obj)
    try:
        return orjson.dumps(valid), valid
    except orjson.JSONEncodeError as exc:
        raise CodecError(f"cannot encode {obj['role']} message: {exc}") from exc


def _part_obj(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, MediaPart):
        return {"type": "media", "media_type": part.media_type, "data": part.data}
    raise CodecError(f"not a tool-result part: {type(part).__name__}")


def _tool_result_obj(b: ToolResult) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": b.tool_use_id,
        "parts": [_part_obj(p) for p in b.parts],
        "is_error": b.is_error,
    }


_BLOCK_ENCODERS: Final[dict[type, Callable[[Any], dict[str, Any]]]] = {
    Text: lambda b: {"type": "text", "text": b.text},
    Thinking: lambda b: {"type": "thinking", "text": b.text, "signature": b.signature},
    RedactedThinking: lambda b: {"type": "redacted_thinking", "data": b.data},
    ToolUse: lambda b: {
        "type": "tool_use",
        "id": b.id,
        "name": b.name,
        "input": b.input,
    },
    ToolResult: _tool_result_obj,
    System: lambda b: {"type": "system", "text": b.text, "mode": b.mode},
    CompactionSummary: lambda b: {"type": "compaction_summary", "text": b.text},
    MediaPart: _part_obj,  # an image the user sent: the tool-result part's form
}


def to_obj(message: Message) -> dict[str, Any]:
    """``message`` as JSON-ready data (dicts, lists, str, int, bool, None)."""
    return _to_obj(message, _public_wire(message.wire))


def _to_obj(message: Message, wire: WireIdentity | None) -> dict[str, Any]:
    """``to_obj`` with the message's wire identity already made public."""
    content = []
    for block in message.content:
        encoder = _BLOCK_ENCODERS.get(type(block))
        if encoder is None:
            raise CodecError(f"cannot encode block type {type(block).__name__}")
        content.append(encoder(block))
    obj: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "role": message.role,
        "content": content,
    }
    if message.usage is not None:
        u = message.usage
        obj["usage"] = {
            "input": u.input,
            "output": u.output,
            "cache_read": u.cache_read,
            "cache_write": u.cache_write,
            "reasoning": u.reasoning,
        }
        if u.estimated:  # written only when set: older readers ignore it
            obj["usage"]["estimated"] = True
    if message.stop_reason is not None:
        obj["stop_reason"] = message.stop_reason
    if wire is not None:
        obj["wire"] = {
            "api_style": wire.api_style,
            "base_url": wire.base_url,
            "model": wire.model,
        }
    return obj


def encode(message: Message) -> bytes:
    """``message`` as compact UTF-8 JSON; a lone surrogate is written as U+FFFD.

    Raises:
        CodecError: a block of unknown type, or an integer beyond 64 bits.
    """
    return _dumps(to_obj(message))[0]


def _invalid(obj: dict[str, Any], where: str, *fields: tuple[str, type]) -> CodecError:
    """The error naming the first of ``fields`` that is missing or of the wrong type."""
    for key, kind in fields:
        value = obj.get(key)
        if type(value) is not kind:
            got = "missing" if key not in obj else type(value).__name__
            return CodecError(f"{where}: {key!r} must be {kind.__name__}, got {got}")
    return CodecError(f"{where}: invalid")  # pragma: no cover - callers checked a field


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and type(value) is not str:
        raise CodecError(f"{where}: {key!r} must be str or null")
    return value


# Each decoder checks its fields inline: loading a long session decodes many blocks.


def _text(o: dict[str, Any]) -> Text:
    text = o.get("text")
    if type(text) is str:
        return Text(text)
    raise _invalid(o, "text", ("text", str))


def _thinking(o: dict[str, Any]) -> Thinking:
    text = o.get("text")
    if type(text) is str:
        return Thinking(text, _opt_str(o, "signature", "thinking"))
    raise _invalid(o, "thinking", ("text", str))


def _redacted_thinking(o: dict[str, Any]) -> RedactedThinking:
    data = o.get("data")
    if type(data) is str:
        return RedactedThinking(data)
    raise _invalid(o, "redacted_thinking", ("data", str))


def _tool_use(o: dict[str, Any]) -> ToolUse:
    id_, name, input_ = o.get("id"), o.get("name"), o.get("input")
    if type(id_) is str and type(name) is str and type(input_) is str:
        return ToolUse(id_, name, input_)
    raise _invalid(o, "tool_use", ("id", str), ("name", str), ("input", str))


def _part(obj: Any) -> Part:
    if type(obj) is not dict:
        raise CodecError("tool-result part must be an object")
    kind = obj.get("type")
    if kind == "text":
        text = obj.get("text")
        if type(text) is str:
            return TextPart(text)
        raise _invalid(obj, "text part", ("text", str))
    if kind == "media":
        media_type, data = obj.get("media_type"), obj.get("data")
        if type(media_type) is str and type(data) is str:
            return MediaPart(media_type, data)
        raise _invalid(obj, "media part", ("media_type", str), ("data", str))
    raise CodecError(f"unknown tool-result part type {kind!r}")


def _tool_result(o: dict[str, Any]) -> ToolResult:
    tool_use_id, parts, is_error = (
        o.get("tool_use_id"),
        o.get("parts"),
        o.get("is_error"),
    )
    if type(tool_use_id) is str and type(parts) is list and type(is_error) is bool:
        return ToolResult(tool_use_id, tuple(_part(p) for p in parts), is_error)
    raise _invalid(
        o, "tool_result", ("tool_use_id", str), ("parts", list), ("is_error", bool)
    )


def _system(o: dict[str, Any]) -> System:
    mode = o.get("mode")
    if mode not in ("append", "replace"):
        raise CodecError(f"system: 'mode' must be 'append' or 'replace', got {mode!r}")
    text = o.get("text")
    if type(text) is str:
        return System(text, mode)
    raise _invalid(o, "system", ("text", str))


def _compaction_summary(o: dict[str, Any]) -> CompactionSummary:
    text = o.get("text")
    if type(text) is str:
        return CompactionSummary(text)
    raise _invalid(o, "compaction_summary", ("text", str))


def _media(o: dict[str, Any]) -> MediaPart:
    part = _part(o)
    assert isinstance(part, MediaPart)  # "media" is the type _part read
    return part


_BLOCK_DECODERS: Final[dict[str, Callable[[dict[str, Any]], Block]]] = {
    "media": _media,
    "text": _text,
    "thinking": _thinking,
    "redacted_thinking": _redacted_thinking,
    "tool_use": _tool_use,
    "tool_result": _tool_result,
    "system": _system,
    "compaction_summary": _compaction_summary,
}


def _block(obj: Any) -> Block:
    if type(obj) is not dict:
        raise CodecError("content block must be an object")
    decoder = _BLOCK_DECODERS.get(obj.get("type"))  # type: ignore[arg-type]
    if decoder is None:
        raise CodecError(f"unknown block type {obj.get('type')!r}")
    return decoder(obj)


def _usage(obj: Any) -> Usage | None:
    if obj is None:
        return None
    if type(obj) is not dict:
        raise CodecError("'usage' must be an object")
    ints: list[int] = [v for k in _USAGE_FIELDS if type(v := obj.get(k)) is int]
    if len(ints) == len(_USAGE_FIELDS):
        i, o, cr, cw, r = ints
        return Usage(i, o, cr, cw, r, obj.get("estimated") is True)
    raise _invalid(obj, "usage", *((k, int) for k in _USAGE_FIELDS))


def _wire(obj: Any) -> WireIdentity | None:
    if obj is None:
        return None
    if type(obj) is not dict:
        raise CodecError("'wire' must be an object")
    style, url, model = obj.get("api_style"), obj.get("base_url"), obj.get("model")
    if type(style) is str and type(url) is str and type(model) is str:
        return WireIdentity(style, url, model)
    raise _invalid(obj, "wire", ("api_style", str), ("base_url", str), ("model", str))


def from_obj(obj: Any) -> Message:
    """The ``Message`` that ``to_obj`` made ``obj`` from.

    Raises:
        CodecError: ``obj`` is not an encoded message, or is from a newer format.
    """
    if type(obj) is not dict:
        raise CodecError(
            f"an encoded message is a JSON object, not {type(obj).__name__}"
        )
    version = obj.get("v")
    if type(version) is not int or version < 1:
        raise CodecError(f"missing or invalid format version {version!r}")
    if version > FORMAT_VERSION:
        raise CodecError(
            f"message format v{version} is newer than this navi_core reads "
            f"(v{FORMAT_VERSION}); upgrade navi_core"
        )
    role = obj.get("role")
    if role not in _ROLES:
        raise CodecError(f"invalid role {role!r}")
    content = obj.get("content")
    if type(content) is not list:
        raise _invalid(obj, "message", ("content", list))
    return Message(
        role,
        tuple(_block(b) for b in content),
        _usage(obj.get("usage")),
        _opt_str(obj, "stop_reason", "message"),
        _wire(obj.get("wire")),
    )


class StoredRow(NamedTuple):
    """The columns a store writes for one message: wire identity beside the body."""

    role: str
    api_style: str | None
    base_url: str | None
    model: str | None
    body: bytes


def stored_row(message: Message) -> StoredRow:
    """``message`` encoded, with its (key-free) wire identity as separate columns.

    The columns hold what the body holds: valid text, the public base URL.
    """
    body, written = _dumps(_to_obj(message, _public_wire(message.wire)))
    wire = written.get("wire")
    if wire is None:
        return StoredRow(message.role, None, None, None, body)
    return StoredRow(
        message.role, wire["api_style"], wire["base_url"], wire["model"], body
    )


def decode(data: bytes | bytearray | memoryview | str) -> Message:
    """The ``Message`` encoded in ``data`` (JSON text or UTF-8 bytes).

    Raises:
        CodecError: not JSON, not an encoded message, or from a newer format.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"stored message is not valid JSON: {exc}") from exc
    return from_obj(obj)

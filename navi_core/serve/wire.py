"""Events as server-sent events, and back: the one encoding ``navi-core serve`` speaks.

Each navi_core event becomes one SSE event whose name is the event's class and whose
data is one line of JSON with a ``type`` tag holding the same name::

    event: TextDelta
    data: {"type":"TextDelta","text":"Hel"}

Fields keep their names. A ``Message`` is the stored format of ``navi_core.codec``
(``{"v":1,"role":...,"content":[{"type":"text",...},...]}``, every block type), a
``Usage`` an object of its five counts, a ``StopReason`` its value, a ``ToolUse`` the
codec's ``tool_use`` block, a ``HookFailure``, a ``TodoItem`` or a ``Cost`` an object of
its fields, and the event inside a ``SubagentEvent`` a nested tagged object.
``decode_event`` turns the JSON back into an equal event, except
``TurnComplete.output``, which stays plain JSON data.
A failed turn ends with ``event: error`` carrying ``{"type":"error","error":class,
"message":text}`` (``failures.describe``: a failure of the store or the server is
``internal_error`` with an error id the server log explains).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeAlias, get_args, get_type_hints

import orjson

from ..codec import from_obj, to_obj
from ..conversation import Message, ToolUse, Usage
from ..events import (
    AnyEvent,
    Cost,
    Event,
    HookFailure,
    StopReason,
    TextDelta,
    TodoItem,
)
from .failures import describe

__all__ = [
    "EVENT_TYPES",
    "WireError",
    "decode_event",
    "encode_event",
    "error_frame",
    "event_obj",
    "sse_frame",
]

#: event class name -> class, for every event a stream returns
EVENT_TYPES: Final[Mapping[str, type[Event]]] = MappingProxyType(
    {cls.__name__: cls for cls in get_args(AnyEvent)}
)


class WireError(ValueError):
    """JSON that is not an encoded event."""


def _usage_obj(u: Usage) -> dict[str, int | bool]:
    obj: dict[str, int | bool] = {
        "input": u.input,
        "output": u.output,
        "cache_read": u.cache_read,
        "cache_write": u.cache_write,
        "reasoning": u.reasoning,
    }
    if u.estimated:
        obj["estimated"] = True
    return obj


def _tool_use_obj(b: ToolUse) -> dict[str, Any]:
    return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}


def _value_obj(value: Any) -> Any:
    if isinstance(value, Message):
        return to_obj(value)
    if isinstance(value, Usage):
        return _usage_obj(value)
    if isinstance(value, StopReason):
        return value.value
    if isinstance(value, Event):
        return event_obj(value)
    if isinstance(value, ToolUse):
        return _tool_use_obj(value)
    if isinstance(value, HookFailure):
        return dataclasses.asdict(value)
    if isinstance(value, tuple):
        return [_value_obj(v) for v in value]
    return value


def event_obj(ev: Event) -> dict[str, Any]:
    """``ev`` as JSON-ready data tagged with its class name."""
    obj: dict[str, Any] = {"type": type(ev).__name__}
    for f in dataclasses.fields(ev):  # type: ignore[arg-type]
        obj[f.name] = _value_obj(getattr(ev, f.name))
    return obj


def sse_frame(name: str, data: bytes) -> bytes:
    """One SSE event; ``data`` is one line (compact JSON never holds a newline)."""
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def encode_event(ev: Event) -> bytes:
    """``ev`` as one SSE event, ready to write."""
    if type(ev) is TextDelta:  # the bulk of every stream: skip the generic walk
        data = orjson.dumps({"type": "TextDelta", "text": ev.text})
        return b"event: TextDelta\ndata: " + data + b"\n\n"
    # orjson turns any dataclass left in ``output`` into an object
    return sse_frame(type(ev).__name__, orjson.dumps(event_obj(ev)))


def error_frame(exc: BaseException) -> bytes:
    """The last SSE event of a failed turn: what the client may know of ``exc``."""
    error, message = describe(exc, "a turn")
    obj = {"type": "error", "error": error, "message": message}
    return sse_frame("error", orjson.dumps(obj))


def _tool_use(obj: Any) -> ToolUse:
    if not isinstance(obj, dict):
        raise WireError("a tool_use must be an object")
    return ToolUse(obj["id"], obj["name"], obj["input"])


def _hook_failure(obj: Any) -> HookFailure:
    if not isinstance(obj, dict):
        raise WireError("a hook failure must be an object")
    return HookFailure(**obj)


#: a field's JSON -> its value
_Decoder: TypeAlias = Callable[[Any], Any]
#: an event's fields, each with the decoder of its JSON (None: the JSON is the value)
_Fields: TypeAlias = tuple[tuple[str, _Decoder | None], ...]

#: field type -> decoder of its JSON; the types are the evaluated annotations
#: (``typing.get_type_hints``), not the strings the events module writes
_FIELD_DECODERS: Final[Mapping[object, _Decoder]] = MappingProxyType(
    {
        Message: from_obj,
        Usage: lambda o: Usage(**o),
        StopReason: StopReason,
        Event: lambda o: decode_event(o),
        tuple[ToolUse, ...]: lambda o: tuple(_tool_use(x) for x in o),
        tuple[HookFailure, ...]: lambda o: tuple(_hook_failure(x) for x in o),
        tuple[TodoItem, ...]: lambda o: tuple(TodoItem(**x) for x in o),
        Cost | None: lambda o: None if o is None else Cost(**o),
    }
)


def _fields(cls: type[Event]) -> _Fields:
    hints = get_type_hints(cls)
    return tuple(
        (f.name, _FIELD_DECODERS.get(hints[f.name]))
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    )


#: event class name -> the class and its fields
_DECODING: Final[Mapping[str, tuple[type[Event], _Fields]]] = MappingProxyType(
    {name: (cls, _fields(cls)) for name, cls in EVENT_TYPES.items()}
)


def decode_event(data: bytes | str | Mapping[str, Any]) -> Event:
    """The event that ``encode_event`` wrote as ``data`` (its JSON, or parsed JSON).

    Raises:
        WireError: not JSON, no known ``type``, or fields that do not fit the event.
    """
    if isinstance(data, bytes | str):
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise WireError(f"not JSON: {exc}") from exc
    else:
        obj = data
    if not isinstance(obj, Mapping):
        raise WireError("an event must be a JSON object")
    name = obj.get("type")
    known = _DECODING.get(name) if isinstance(name, str) else None
    if known is None:
        raise WireError(f"unknown event type {name!r}")
    cls, fields = known
    kwargs = {}
    try:
        for field, decoder in fields:
            if field not in obj:
                continue
            value = obj[field]
            kwargs[field] = value if decoder is None else decoder(value)
        return cls(**kwargs)
    except (TypeError, KeyError, ValueError) as exc:
        raise WireError(f"{name}: {exc}") from exc

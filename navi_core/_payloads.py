"""The generic reading of one event payload, shared by every delta parser of the core.

Both core twins call these readers (the compiled parsers for every payload their byte
scanner does not take), so a payload means the same whichever core reads it:
``Reader.read`` decodes it with orjson (invalid UTF-8 as U+FFFD) and hands the object
to the subclass's ``apply``; a payload that is not JSON, not an object, or has an
unexpected shape is a ``MalformedStream`` naming its offset and at most 80 bytes of it.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from .errors import MalformedStream

__all__ = ["Reader", "Slot", "count", "malformed", "string"]

_EXCERPT: Final = 80  # bytes of a payload quoted in an error message

Slot = tuple[dict[str, Any], str]  # the container and key of the emitted string


def malformed(what: str, data: bytes, offset: int) -> MalformedStream:
    """A ``MalformedStream`` for the payload at ``offset``, quoting its start."""
    excerpt = repr(bytes(data[:_EXCERPT]).decode("utf-8", "replace"))
    return MalformedStream(f"{what.format(offset=offset)}: {excerpt}", offset=offset)


def count(value: Any) -> int:
    """An integer member such as a token count: absent or null is 0."""
    if value is None:
        return 0
    if type(value) is not int:
        raise TypeError("token count is not an integer")
    return value


def string(value: Any) -> str:
    """A member that must be a string (TypeError otherwise: a bad shape)."""
    if type(value) is not str:
        raise TypeError("expected a string")
    return value


class Reader:
    """The generic path: one event payload through orjson, then read as an object."""

    __slots__ = ()

    #: set once the payload that ends the stream was read: the parser stops there
    finished: bool = False

    def read(
        self, data: bytes, offset: int, out: list[Any]
    ) -> tuple[dict[str, Any], Slot | None]:
        """Append the deltas of the payload ``data`` (at stream ``offset``) to ``out``;
        return the object and the slot of the one string it emitted, if it did one."""
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            try:  # invalid UTF-8 decodes as U+FFFD
                obj = orjson.loads(bytes(data).decode("utf-8", "replace"))
            except orjson.JSONDecodeError:
                what = "invalid JSON in SSE event at byte {offset}"
                raise malformed(what, data, offset) from None
        if type(obj) is not dict:
            what = "SSE event at byte {offset} is not a JSON object"
            raise malformed(what, data, offset)
        try:
            return obj, self.apply(obj, out)
        except (AttributeError, KeyError, TypeError) as exc:
            what = "unexpected JSON structure in SSE event at byte {offset}"
            raise malformed(what, data, offset) from exc

    def apply(self, obj: dict[str, Any], out: list[Any]) -> Slot | None:
        """Append the deltas of one decoded payload; KeyError etc. on a bad shape."""
        raise NotImplementedError

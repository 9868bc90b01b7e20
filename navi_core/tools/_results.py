"""What a tool returned, turned into the parts of its ``ToolResult``; the error
results navi_core writes itself (unknown, interrupted, cancelled calls)."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .. import media
from ..config import ImageLimits
from ..conversation import (
    MediaPart,
    Message,
    Part,
    TextPart,
    ToolResult,
    ToolUse,
    WireIdentity,
)
from ._validation import ArgumentError

__all__ = [
    "cancelled_before_start",
    "describe",
    "error_result",
    "failure_text",
    "interrupted_results",
    "short_error",
    "to_parts",
]


def to_parts(value: Any, limits: ImageLimits | None = None) -> tuple[Part, ...]:
    """Turn what a tool returned into result parts.

    str becomes text; bytes, ``Media`` and Pillow images become media parts (bad media
    becomes a short note); a list mixing text and media becomes several parts; any other
    JSON-able value becomes its JSON text.
    """
    if isinstance(value, str):
        return (TextPart(value),)
    if isinstance(value, (TextPart, MediaPart)):
        return (value,)
    if value is None:
        return (TextPart("(no output)"),)
    if isinstance(value, (int, float, dict)):
        return (TextPart(_json_text(value)),)
    lim = limits or ImageLimits()
    if media.is_media(value):
        return (media.to_part(value, lim),)
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, (TextPart, MediaPart)) or media.is_media(v) for v in value
    ):
        parts: list[Part] = []
        for item in value:
            if isinstance(item, (TextPart, MediaPart)):
                parts.append(item)
            elif isinstance(item, str):
                parts.append(TextPart(item))
            elif media.is_media(item):
                parts.append(media.to_part(item, lim))
            else:
                parts.append(TextPart(_json_text(item)))
        return tuple(parts)
    return (TextPart(_json_text(value)),)


def _json_text(value: Any) -> str:
    def fallback(obj: Any) -> Any:
        if isinstance(obj, enum.Enum):
            return obj.value
        if isinstance(obj, (set, frozenset)):
            return list(obj)
        return str(obj)

    return orjson.dumps(
        value,
        default=fallback,
        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
    ).decode()


def error_result(call_id: str, text: str) -> ToolResult:
    """An error result the model can read."""
    return ToolResult(call_id, (TextPart(text),), is_error=True)


def interrupted_results(
    uses: Sequence[ToolUse],
    wire: WireIdentity | None = None,
    known: Mapping[str, ToolResult] | None = None,
) -> Message:
    """Results for calls whose run was interrupted (crash, abort, close).

    Calls whose result is ``known`` keep it; the others get an error result saying
    they may or may not have run. They are never re-run by navi_core.
    """
    known = known or {}
    results = tuple(
        known.get(u.id)
        or error_result(
            u.id,
            f"Tool {u.name!r} was interrupted before it returned a result: it may or "
            "may not have taken effect, and it was not run again. Check before "
            "calling it again.",
        )
        for u in uses
    )
    return Message("user", results, wire=wire)


def cancelled_before_start(
    uses: Sequence[ToolUse], wire: WireIdentity | None = None
) -> Message:
    """Results for calls a cancel stopped before any of them ran."""
    return Message(
        "user",
        tuple(
            error_result(u.id, f"Tool {u.name!r} was cancelled before it started.")
            for u in uses
        ),
        wire=wire,
    )


def describe(exc: BaseException) -> str:
    """``Type: message`` (or just ``Type``), for error texts."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failure_text(name: str, exc: BaseException) -> str:
    """The error result of a call that raised (or whose source returned ``exc``)."""
    if isinstance(exc, ArgumentError):
        return f"Tool {name!r} was not run: {exc}. Fix the arguments and call it again."
    return f"Tool {name!r} failed: {describe(exc)}"


#: ``ToolFinished.error`` is cut to this many characters.
ERROR_TEXT_CHARS = 300


def short_error(parts: Sequence[Part]) -> str:
    """A result's text on one line, cut to ``ERROR_TEXT_CHARS`` (``ToolFinished.error``)."""
    text = " ".join(" ".join(p.text for p in parts if isinstance(p, TextPart)).split())
    text = text or "failed"
    cut = ERROR_TEXT_CHARS
    return text if len(text) <= cut else text[: cut - 3] + "..."

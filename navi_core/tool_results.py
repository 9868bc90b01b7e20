"""What a tool returned, turned into the parts of its ``ToolResult``."""

from __future__ import annotations

import enum
from typing import Any

import orjson

from . import media
from .config import ImageLimits
from .conversation import MediaPart, Part, TextPart

__all__ = ["to_parts"]


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

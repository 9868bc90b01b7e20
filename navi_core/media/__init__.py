"""Images in tool results and user messages: sniffing, fitting, base64."""

from __future__ import annotations

from ._parts import (
    ACCEPTED_TYPES,
    Media,
    UnusableImage,
    fit,
    is_media,
    sniff,
    to_part,
)

__all__ = [
    "ACCEPTED_TYPES",
    "Media",
    "UnusableImage",
    "fit",
    "is_media",
    "sniff",
    "to_part",
]

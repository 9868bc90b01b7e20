"""Images in tool results: a tool's image return value becomes a message part.

A tool may return image bytes, a ``Media`` or a Pillow image. ``to_part`` turns each
into a ``MediaPart``, or, when the image cannot be used, into a short ``TextPart`` that
says why, so one bad attachment never fails a turn. The image is brought within
``ImageLimits`` by ``fit`` (see ``navi_core.media._imaging``, re-exported here with ``sniff``,
``UnusableImage`` and ``ACCEPTED_TYPES``) and base64-encoded by the core.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from .. import core
from ..config import ImageLimits
from ..conversation import MediaPart, TextPart
from ._imaging import (
    ACCEPTED_TYPES,
    DEFAULT_LIMITS,
    UnusableImage,
    as_bytes,
    fit,
    fit_image,
    sniff,
)

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "ACCEPTED_TYPES",
    "Media",
    "UnusableImage",
    "fit",
    "is_media",
    "sniff",
    "to_part",
]


@dataclass(frozen=True, slots=True)
class Media:
    """Image bytes a tool returns; ``media_type`` is a hint, the magic number wins."""

    __module__ = "navi_core"  # its public path, in reprs, docs and pickles

    data: bytes
    media_type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.data, (bytes, bytearray, memoryview)):
            raise TypeError(f"Media data must be bytes, not {type(self.data).__name__}")
        if not isinstance(self.data, bytes):
            object.__setattr__(self, "data", as_bytes(self.data))

    def __repr__(self) -> str:
        return f"Media(media_type={self.media_type!r}, data=<{len(self.data)} bytes>)"


def is_media(value: object) -> bool:
    """Whether ``to_part`` takes ``value``: bytes-like, ``Media`` or a Pillow image."""
    if isinstance(value, (bytes, bytearray, memoryview, Media)):
        return True
    return _is_pil_image(value)


def to_part(
    value: object, limits: ImageLimits = DEFAULT_LIMITS
) -> TextPart | MediaPart:
    """A ``MediaPart`` for an image, or a ``TextPart`` saying why it was dropped.

    Bad media never raises (``MemoryError`` and ``KeyboardInterrupt`` do propagate); a
    value that is not media at all (see ``is_media``) raises ``TypeError``.
    """
    try:
        if isinstance(value, Media):
            data, media_type = fit(value.data, value.media_type, limits)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data, media_type = fit(value, None, limits)
        elif _is_pil_image(value):
            data, media_type = fit_image(cast("Image.Image", value), limits)
        else:
            raise TypeError(f"not an image: {type(value).__name__}")
    except UnusableImage as exc:
        return TextPart(f"[image dropped: {exc}]")
    return MediaPart(media_type, core.b64encode(data))


def _is_pil_image(value: object) -> bool:
    """Whether ``value`` is a Pillow image, without importing Pillow to find out."""
    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(value, pil.Image)

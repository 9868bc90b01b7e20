"""What a user sends: text, images, or both, checked before it joins a conversation.

``agent.run("text")``, ``agent.run(UserMessage([Text(...), MediaPart(...)]))`` and
``agent.run(["look at this", Media(png_bytes)])`` all arrive here. Images go through the
media pipeline (``navi_core.media``: sniffed, fitted to ``ImageLimits``, base64 by the
core). A message that no API could be sent or that no store could keep is refused with
a ``ValueError`` naming the problem, before it is appended or stored: a conversation
that took it would fail every later request.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from .. import codec, media
from ..config import ImageLimits
from ..conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    Text,
    TextPart,
    ToolResult,
)
from ..media._imaging import ACCEPTED_TYPES, sniff

__all__ = ["check_user_message", "user_message"]

_USER_BLOCKS = (Text, MediaPart, ToolResult, CompactionSummary)


def user_message(
    prompt: str | Message | Iterable[Any], limits: ImageLimits | None = None
) -> Message:
    """The checked user message for ``prompt``.

    A list may mix text (``str`` or ``Text``), images (``Media``, image bytes, a Pillow
    image, or a ready ``MediaPart``) and other user blocks, kept in its order.

    Raises:
        ValueError: the message cannot be sent or stored (see ``check_user_message``),
            or an image is unusable (not PNG, JPEG, GIF or WebP, corrupt, too large to
            decode).
        TypeError: an item is neither text, an image nor a user block.
    """
    if isinstance(prompt, str):
        return check_user_message(Message("user", (Text(prompt),)))
    if isinstance(prompt, Message):
        return check_user_message(prompt)
    blocks: list[Any] = []
    for position, item in enumerate(prompt):
        if isinstance(item, str):
            blocks.append(Text(item))
        elif isinstance(item, _USER_BLOCKS):
            blocks.append(item)
        elif media.is_media(item):
            part = media.to_part(item, limits or ImageLimits())
            if isinstance(part, TextPart):  # the pipeline's note on why it was dropped
                raise ValueError(f"image {position} of the prompt: {part.text[1:-1]}")
            blocks.append(part)
        else:
            raise TypeError(
                f"prompt item {position} is {type(item).__name__}: expected text, "
                "an image (Media, bytes, a Pillow image) or a user block"
            )
    return check_user_message(Message("user", tuple(blocks)))


def check_user_message(message: Message) -> Message:
    """``message`` itself if every API can be sent it and every store can keep it.

    Raises:
        ValueError: not a user message; a block a user message cannot hold (thinking,
            tool calls, system prompts); an image whose media type the APIs refuse or
            whose data is not base64 of that image; no content at all; or content
            the stores cannot encode.
    """
    if message.role != "user":
        raise ValueError(f"expected a user message, not a {message.role} message")
    if not message.content:
        raise ValueError("a user message needs at least one block")
    for position, block in enumerate(message.content):
        if not isinstance(block, _USER_BLOCKS):
            raise ValueError(
                f"block {position} of a user message is {type(block).__name__}: "
                "user messages hold text, images, tool results and summaries"
            )
        if isinstance(block, MediaPart):
            _check_image(block, f"image in block {position}")
        elif isinstance(block, ToolResult):
            for part in block.parts:
                if isinstance(part, MediaPart):
                    _check_image(part, f"image in the result of {block.tool_use_id}")
    try:
        codec.encode(message)
    except codec.CodecError as exc:
        raise ValueError(f"the message cannot be stored: {exc}") from exc
    return message


def _check_image(part: MediaPart, where: str) -> None:
    if part.media_type not in ACCEPTED_TYPES:
        accepted = ", ".join(sorted(ACCEPTED_TYPES))
        raise ValueError(
            f"{where}: media type {part.media_type!r} is not one the APIs take "
            f"({accepted}); pass the bytes as Media to have them converted"
        )
    try:
        head = base64.b64decode(part.data[:64], validate=True)
        base64.b64decode(part.data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{where}: data is not base64 ({exc})") from None
    found = sniff(head)
    if found != part.media_type:
        raise ValueError(
            f"{where}: data is {found or 'not a known image'}, not {part.media_type}"
        )

"""Token estimates of messages, built on the core's ``estimate_tokens``.

Compaction sizes the messages that carry no provider usage with these. Each text is
estimated with the core heuristic (about o200k_base, see ``navi_core._text_py``); the
framing a chat template adds is counted as a small fixed overhead:

* ``MESSAGE_OVERHEAD`` per message (role markers and separators);
* ``BLOCK_OVERHEAD`` per tool call and per tool result (ids and delimiters);
* ``IMAGE_TOKENS`` per image, whatever its size: Anthropic charges about
  width x height / 750 tokens, so an image at the default 1568-pixel limit, which
  the API scales to about 1.15 megapixels, costs about 1,600; OpenAI charges at most
  about 1,100 for a high-detail image. Images are not decoded to size them.

Encrypted reasoning (``RedactedThinking``) is estimated from its opaque text, and a
thinking signature is not counted, as providers do not bill it as reasoning.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .conversation import (
    Block,
    CompactionSummary,
    MediaPart,
    Message,
    RedactedThinking,
    System,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
)
from .core import estimate_tokens

__all__ = [
    "BLOCK_OVERHEAD",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "estimate_block_tokens",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "estimate_tokens",
]

MESSAGE_OVERHEAD: Final = 4
BLOCK_OVERHEAD: Final = 3
IMAGE_TOKENS: Final = 1600


def estimate_block_tokens(block: Block) -> int:
    """Estimated tokens of one content block, framing of tool blocks included.

    Raises:
        TypeError: ``block`` is not a conversation block.
    """
    if isinstance(block, Text | Thinking | System | CompactionSummary):
        return estimate_tokens(block.text)
    if isinstance(block, ToolUse):
        return (
            BLOCK_OVERHEAD
            + estimate_tokens(block.id)
            + estimate_tokens(block.name)
            + estimate_tokens(block.input)
        )
    if isinstance(block, ToolResult):
        size = BLOCK_OVERHEAD + estimate_tokens(block.tool_use_id)
        for part in block.parts:
            if isinstance(part, TextPart):
                size += estimate_tokens(part.text)
            elif isinstance(part, MediaPart):
                size += IMAGE_TOKENS
            else:
                raise TypeError(f"not a tool result part: {type(part).__name__}")
        return size
    if isinstance(block, RedactedThinking):
        return estimate_tokens(block.data)
    if isinstance(block, MediaPart):
        return IMAGE_TOKENS
    raise TypeError(f"not a conversation block: {type(block).__name__}")


def estimate_message_tokens(message: Message) -> int:
    """Estimated tokens ``message`` adds to a prompt: its blocks plus the message overhead.

    Raises:
        TypeError: a block or tool result part is of an unknown type.
    """
    return MESSAGE_OVERHEAD + sum(estimate_block_tokens(b) for b in message.content)


def estimate_messages_tokens(messages: Iterable[Message]) -> int:
    """Estimated tokens of several messages, as a prompt would hold them."""
    return sum(estimate_message_tokens(m) for m in messages)

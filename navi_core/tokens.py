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

Sizes for compaction and its threshold: each message is sized by
``estimate_message_tokens`` unless provider usage says better: an assistant message with usage costs its ``output - reasoning`` tokens (the
reasoning is not sent back: OpenAI drops it, Anthropic strips earlier thinking), and
between two assistant messages with usage the messages in between cost together
``next.prompt_total - prev.prompt_total - size(prev)`` tokens, spread over them in
proportion to their estimates. Differences of prompt totals cancel the system prompt
and tool declarations, so these sizes are dialogue-only and stay valid after a
compaction restates usage (``input`` = the sizes of the messages before it, summary
included; cache buckets zeroed; ``output`` and ``reasoning`` kept).

Messages are frozen values, so a ``SizeCache`` keeps each one's estimate between the
threshold checks made before every response instead of estimating the whole
conversation again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from .conversation import (
    Block,
    CompactionSummary,
    Conversation,
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

if TYPE_CHECKING:
    from .tools import ToolSpec

__all__ = [
    "BLOCK_OVERHEAD",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "estimate_block_tokens",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "estimate_tokens",
    "SizeCache",
    "estimate_request_tokens",
    "message_sizes",
    "request_tokens",
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


class SizeCache:
    """The token estimate of each message seen, kept between calls.

    Messages are frozen, so an estimate stays valid as long as its message lives.
    Entries are keyed by ``id(message)`` and hold the message itself, so an id cannot
    be reused while its entry exists. Entries of messages that left the conversation
    (after a compaction) are dropped once the cache holds over twice as many entries
    as the conversation has messages. One cache serves one conversation, from one
    thread at a time.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Message, int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def estimates(self, messages: Sequence[Message]) -> list[int]:
        """``estimate_message_tokens`` of each message, computed once per message."""
        entries = self._entries
        out: list[int] = []
        for m in messages:
            entry = entries.get(id(m))
            if entry is None or entry[0] is not m:
                entry = entries[id(m)] = (m, estimate_message_tokens(m))
            out.append(entry[1])
        if len(entries) > 2 * len(messages) + 64:
            self._entries = {id(m): entries[id(m)] for m in messages}
        return out


def message_sizes(
    messages: Sequence[Message], cache: SizeCache | None = None
) -> list[int]:
    """The token size of each message, from usage where it exists (module docstring).

    ``cache`` keeps the estimates for the next call on the same conversation.
    """
    if cache is None:
        sizes = [estimate_message_tokens(m) for m in messages]
    else:
        sizes = cache.estimates(messages)
    prev = -1
    for i, m in enumerate(messages):
        u = m.usage
        if m.role != "assistant" or u is None:
            continue
        sent_back = u.output - u.reasoning
        if sent_back > 0:
            sizes[i] = sent_back
        if u.prompt_total <= 0:
            continue
        if prev >= 0 and i - prev > 1:
            pu = messages[prev].usage
            assert pu is not None
            gap = u.prompt_total - pu.prompt_total - sizes[prev]
            if gap > 0:
                _spread(sizes, prev + 1, i, gap)
        prev = i
    return sizes


def _spread(sizes: list[int], start: int, stop: int, total: int) -> None:
    """Share ``total`` over ``sizes[start:stop]`` in proportion to their estimates."""
    weights = sizes[start:stop]
    if not any(weights):
        weights = [1] * len(weights)
    weight = sum(weights)
    given = 0
    for k, w in enumerate(weights[:-1], start):
        sizes[k] = total * w // weight
        given += sizes[k]
    sizes[stop - 1] = total - given


def estimate_request_tokens(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec] = (),
    cache: SizeCache | None = None,
) -> int:
    """The estimated prompt size of a request made of ``messages`` and ``tools``.

    The larger of two estimates, since the threshold check should rather compact early:
    the system prompt, tool declarations and dialogue sizes summed; and the latest
    response's prompt total (from usage) plus the sizes from that response onwards.
    """
    conversation = Conversation(list(messages))
    dialogue = conversation.dialogue()
    sizes = message_sizes(dialogue, cache)
    return request_tokens(conversation.system_prompt(), dialogue, sizes, tools)


#: declarations already estimated: an agent sends the same ones with every request
_TOOL_TOKENS: dict[ToolSpec, int] = {}
_TOOL_TOKENS_KEPT: Final = 1024


def _tool_tokens(spec: ToolSpec) -> int:
    """The estimated size of one tool declaration (its name, description, schema)."""
    size = _TOOL_TOKENS.get(spec)
    if size is None:
        schema = json.dumps(spec.parameters, separators=(",", ":"))
        size = estimate_tokens(f"{spec.name} {spec.description} {schema}")
        if len(_TOOL_TOKENS) >= _TOOL_TOKENS_KEPT:
            _TOOL_TOKENS.clear()
        _TOOL_TOKENS[spec] = size
    return size


def request_tokens(
    system: str | None,
    dialogue: Sequence[Message],
    sizes: Sequence[int],
    tools: Sequence[ToolSpec],
) -> int:
    """``estimate_request_tokens`` for a dialogue already sized by ``message_sizes``."""
    overhead = estimate_tokens(system) if system else 0
    for t in tools:
        overhead += _tool_tokens(t)
    summed = overhead + sum(sizes)
    for k in range(len(dialogue) - 1, -1, -1):
        u = dialogue[k].usage
        if dialogue[k].role == "assistant" and u is not None and u.prompt_total > 0:
            return max(summed, u.prompt_total + sum(sizes[k:]))
    return summed

"""Conversation messages as readable text, one rendering for every reader.

The compaction's summary request and ``navi-core sessions show`` both show messages
through ``render_block``: text as is, thinking and system prompts labelled, tool calls
with their arguments, tool results under the name of the call they answer, and media
as a placeholder with its exact decoded size (the base64 text is never shown).
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

from ..conversation import (
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

__all__ = [
    "heading",
    "is_summary",
    "media_placeholder",
    "media_size",
    "render_block",
    "render_transcript",
]


def is_summary(m: Message) -> bool:
    """Whether ``m`` holds a compaction summary."""
    return any(isinstance(b, CompactionSummary) for b in m.content)


def heading(m: Message) -> str:
    """What ``m`` is, for a reader: its role, "Tool results" or a summary."""
    if is_summary(m):
        return "Summary of the earlier conversation"
    if m.role == "user" and m.tool_results:
        return "Tool results"
    return m.role.capitalize()


def media_size(part: MediaPart) -> int:
    """The decoded byte size of ``part``'s base64 data, padding taken into account."""
    data = part.data
    return len(data.rstrip("=")) * 3 // 4


def media_placeholder(part: MediaPart) -> str:
    """A stand-in for ``part``, such as ``[image: image/png, 12 KB]``."""
    n = media_size(part)
    size = f"{n} bytes" if n < 1024 else f"{round(n / 1024)} KB"
    kind = part.media_type.partition("/")[0] or "media"
    return f"[{kind}: {part.media_type}, {size}]"


def render_block(block: Block, names: MutableMapping[str, str]) -> str:
    """One block as text, possibly several lines.

    ``names`` maps tool call ids to tool names: a ``ToolUse`` adds its own, and a
    ``ToolResult`` is labelled with the name of the call it answers.
    """
    if isinstance(block, (Text, CompactionSummary)):
        return block.text
    if isinstance(block, Thinking):
        return f"(thinking) {block.text}"
    if isinstance(block, RedactedThinking):
        return "(redacted thinking)"
    if isinstance(block, ToolUse):
        names[block.id] = block.name
        return f"[tool call {block.name} id={block.id}] {block.input}"
    if isinstance(block, ToolResult):
        name = names.get(block.tool_use_id, "unknown tool")
        error = " (error)" if block.is_error else ""
        lines = [f"[tool result {name} id={block.tool_use_id}{error}]"]
        lines.extend(
            p.text if isinstance(p, TextPart) else media_placeholder(p)
            for p in block.parts
        )
        return "\n".join(lines)
    if isinstance(block, MediaPart):
        return media_placeholder(block)
    if isinstance(block, System):
        if block.mode == "replace":
            return f"(replaces the system prompt before it) {block.text}"
        return block.text
    raise TypeError(f"not a conversation block: {type(block).__name__}")


def render_transcript(messages: Sequence[Message]) -> str:
    """The messages under ``## heading`` lines, separated by blank lines."""
    names: dict[str, str] = {}
    return "\n\n".join(
        "\n".join([f"## {heading(m)}", *(render_block(b, names) for b in m.content)])
        for m in messages
    )

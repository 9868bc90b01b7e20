"""The conversation model: messages made of immutable blocks, plus token usage.

Blocks and messages are frozen values, so an event or a store may keep them safely.
``Conversation`` is the one mutable holder: the live list an agent appends to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import orjson

from ._history import History, MessageList
from ._ids import publish

__all__ = [
    "Block",
    "CompactionSummary",
    "Conversation",
    "History",
    "MediaPart",
    "MessageList",
    "Message",
    "Part",
    "RedactedThinking",
    "Role",
    "System",
    "Text",
    "TextPart",
    "Thinking",
    "ToolResult",
    "ToolUse",
    "Usage",
    "UserMessage",
    "WireIdentity",
    "decode_arguments",
    "scrub_text",
    "valid_text",
]

Role: TypeAlias = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text written by the user or the model."""

    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    """Model reasoning; ``signature`` must be sent back unchanged (Anthropic)."""

    text: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class RedactedThinking:
    """Encrypted reasoning (Anthropic ``redacted_thinking``), kept opaque and sent back."""

    data: str


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A tool call: ``input`` is the raw JSON text of the arguments as the model sent it."""

    id: str
    name: str
    input: str


def decode_arguments(raw: str) -> dict[str, Any] | str:
    """Tool-call arguments as a dict, or the reason they are not one JSON object."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return f"invalid JSON ({exc})"
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    return value


@dataclass(frozen=True, slots=True)
class TextPart:
    """Text inside a tool result."""

    text: str


@dataclass(frozen=True, slots=True)
class MediaPart:
    """An image in a tool result or a user message; ``data`` is base64 text and
    ``media_type`` e.g. image/png."""

    media_type: str
    data: str

    def __repr__(self) -> str:
        return f"MediaPart(media_type={self.media_type!r}, data=<{len(self.data)} b64 chars>)"


Part: TypeAlias = TextPart | MediaPart


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The answer to one ``ToolUse``, paired by ``tool_use_id``."""

    tool_use_id: str
    parts: tuple[Part, ...]
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text parts joined by newlines (media parts are skipped)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class System:
    """A system prompt; ``mode`` "append" adds to earlier ones, "replace" discards them."""

    text: str
    mode: Literal["append", "replace"] = "append"


@dataclass(frozen=True, slots=True)
class CompactionSummary:
    """The summary that stands in for a compacted prefix of the conversation."""

    text: str


Block: TypeAlias = (
    Text
    | Thinking
    | RedactedThinking
    | ToolUse
    | ToolResult
    | System
    | CompactionSummary
    | MediaPart
)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one response.

    ``input`` excludes both cache buckets, so the prompt total is
    ``input + cache_read + cache_write``; ``reasoning`` is a part of ``output``.
    ``estimated``: the server reported no usage and the counts are the local estimate.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    estimated: bool = False

    @property
    def prompt_total(self) -> int:
        """Every token the prompt cost, cached or not."""
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        """Prompt plus output tokens."""
        return self.prompt_total + self.output

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.reasoning + other.reasoning,
            self.estimated or other.estimated,
        )


@dataclass(frozen=True, slots=True)
class WireIdentity:
    """Which API produced or will receive a message; never holds a key."""

    api_style: str
    base_url: str
    model: str


class _WeaklyReferable:
    """A base giving a slots dataclass weak references (``weakref_slot`` is 3.11+)."""

    __slots__ = ("__weakref__",)


@dataclass(frozen=True, slots=True)
class Message(_WeaklyReferable):
    """One conversation message.

    ``stop_reason`` (assistant only) is normalised: "end_turn", "tool_use",
    "max_tokens", "refusal", or the provider's own word for anything else.
    ``wire`` records the API identity the message was produced for or by.
    """

    role: Role
    content: tuple[Block, ...]
    usage: Usage | None = None
    stop_reason: str | None = None
    wire: WireIdentity | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))

    @property
    def text(self) -> str:
        """The concatenated ``Text`` blocks."""
        return "".join(b.text for b in self.content if isinstance(b, Text))

    @property
    def tool_uses(self) -> tuple[ToolUse, ...]:
        """The tool calls of an assistant message, in the model's order."""
        return tuple(b for b in self.content if isinstance(b, ToolUse))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        """The tool results carried by a user message."""
        return tuple(b for b in self.content if isinstance(b, ToolResult))

    def with_usage(self, usage: Usage | None) -> Message:
        """A copy with other usage (compaction restates it)."""
        return Message(self.role, self.content, usage, self.stop_reason, self.wire)

    def with_wire(self, wire: WireIdentity | None) -> Message:
        """A copy stamped with a wire identity."""
        return Message(self.role, self.content, self.usage, self.stop_reason, wire)


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD: what UTF-8 can hold.

    Text from ``os.listdir`` or ``sys.argv`` may hold lone surrogates, which no JSON
    encoder or store accepts. A surrogate pair written as two code points becomes the
    character it encodes. Valid text (nearly all) is returned as it is, checked cheaply.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _clean_block(block: Block) -> Block:
    """``block`` with its text made ``valid_text``: the same object when it is valid."""
    if isinstance(block, Text):
        text = valid_text(block.text)
        return block if text is block.text else Text(text)
    if isinstance(block, ToolResult):
        parts = block.parts
        for p in parts:
            if isinstance(p, TextPart) and valid_text(p.text) is not p.text:
                break
        else:
            return block
        cleaned = tuple(
            TextPart(valid_text(p.text)) if isinstance(p, TextPart) else p
            for p in parts
        )
        return ToolResult(block.tool_use_id, cleaned, block.is_error)
    if isinstance(block, System):
        text = valid_text(block.text)
        return block if text is block.text else System(text, block.mode)
    if isinstance(block, CompactionSummary):
        text = valid_text(block.text)
        return block if text is block.text else CompactionSummary(text)
    return block


def scrub_text(message: Message) -> Message:
    """The message with its text made ``valid_text``; the same object when already valid."""
    content = message.content
    for block in content:
        if _clean_block(block) is not block:
            break
    else:
        return message
    return Message(
        message.role,
        tuple(_clean_block(b) for b in content),
        message.usage,
        message.stop_reason,
        message.wire,
    )


def UserMessage(content: str | Iterable[Block]) -> Message:
    """Build a user message from text or from blocks."""
    if isinstance(content, str):
        return Message("user", (Text(content),))
    return Message("user", tuple(content))


class _Indexed:
    """Holds ``Conversation``'s index in a slot that is no dataclass field, so
    ``asdict``, ``astuple`` and ``fields`` show only the conversation's data."""

    __slots__ = ("_index",)
    _index: _Index | None

    def _keep(self, index: _Index | None) -> None:
        self._index = index


@dataclass(slots=True)
class Conversation(_Indexed):
    """The live, ordered list of messages of one session.

    ``system_prompt()`` and ``dialogue()`` keep what they found, and on the next call
    look only at messages appended since, so a request costs the same at message 30 as
    at 3,000. Any other edit of ``messages`` makes them look again from the start (a
    list assigned to ``messages`` later, not a ``MessageList``, is looked at whole).
    """

    messages: list[Message] = field(default_factory=MessageList[Message])
    session_id: str | None = None

    def __post_init__(self) -> None:
        self._keep(None)
        if type(self.messages) is not MessageList:
            self.messages = MessageList(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def system_prompt(self) -> str | None:
        """The effective system prompt: appended texts, reset by a "replace"."""
        parts = self._synced().system
        return "\n\n".join(parts) if parts else None

    def dialogue(self) -> list[Message]:
        """The messages a provider sees as turns (system messages excluded)."""
        return list(self._synced().dialogue)

    def history(self) -> History[Message]:
        """``dialogue()`` as an immutable view that copies nothing (what a request
        holds); it keeps showing these messages whatever is done to the conversation."""
        dialogue = self._synced().dialogue
        return History(dialogue, len(dialogue))

    def _synced(self) -> _Index:
        messages = self.messages
        index = getattr(self, "_index", None)  # unset in a pickle of an older version
        edits = getattr(messages, "edits", None)
        if (
            index is None
            or index.source is not messages
            or edits is None
            or edits != index.edits
        ):
            index = _Index(messages, edits)
            self._keep(index)
        if index.seen < len(messages):
            index.add(messages)
        return index


class _Index:
    """What ``Conversation`` found in ``source[:seen]``: its system texts and dialogue."""

    __slots__ = ("dialogue", "edits", "seen", "source", "system")

    def __init__(self, source: list[Message], edits: int | None) -> None:
        self.source = source
        self.edits = edits
        self.seen = 0
        self.system: list[str] = []
        self.dialogue: list[Message] = []

    def add(self, messages: list[Message]) -> None:
        for m in messages[self.seen :]:
            if m.role != "system":
                self.dialogue.append(m)
            for b in m.content:
                if isinstance(b, System):
                    if b.mode == "replace":
                        self.system = []
                    self.system.append(b.text)
        self.seen = len(messages)


publish(globals())

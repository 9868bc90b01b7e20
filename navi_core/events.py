"""Events a ``Stream`` returns, one per ``next()`` call.

Each event is a frozen, slotted dataclass holding immutable data only, so a caller may
keep it. Fields are positional, so ``case TextDelta(t)`` and ``case TextDelta(text=t)``
both match. Do not subclass them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias, final

from .conversation import Message, Usage

__all__ = [
    "AnyEvent",
    "Compacted",
    "CompactionStarted",
    "Event",
    "MessageComplete",
    "ModelInfo",
    "ProviderRetry",
    "StopReason",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolDispatchComplete",
    "ToolDispatchStart",
    "ToolFinished",
    "ToolStarted",
    "TurnComplete",
]


class StopReason(str, enum.Enum):
    """Why a turn ended."""

    #: the model finished and asked for no tool
    END_TURN = "end_turn"
    #: ``Config.max_iterations`` model responses were used up
    MAX_ITERATIONS = "max_iterations"
    #: the model ran out of output tokens
    MAX_TOKENS = "max_tokens"
    #: the host cancelled the turn
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


class Event:
    """Base of every event; holds no data itself."""

    __slots__ = ()


@final
@dataclass(frozen=True, slots=True)
class TextDelta(Event):
    """A piece of assistant text, in order."""

    text: str


@final
@dataclass(frozen=True, slots=True)
class ThinkingDelta(Event):
    """A piece of model reasoning, in order."""

    text: str


@final
@dataclass(frozen=True, slots=True)
class ToolCallStart(Event):
    """The model began tool call number ``index`` of this response."""

    index: int
    id: str
    name: str


@final
@dataclass(frozen=True, slots=True)
class ToolCallDelta(Event):
    """A fragment of the JSON arguments of tool call ``index``."""

    index: int
    arguments: str


@final
@dataclass(frozen=True, slots=True)
class ModelInfo(Event):
    """The model that serves the turn (once per turn, again only if it changes)."""

    model: str


@final
@dataclass(frozen=True, slots=True)
class MessageComplete(Event):
    """A response finished; ``message`` is now part of the conversation."""

    message: Message
    usage: Usage


@final
@dataclass(frozen=True, slots=True)
class ToolDispatchStart(Event):
    """``count`` tool calls are about to run."""

    count: int


@final
@dataclass(frozen=True, slots=True)
class ToolStarted(Event):
    """A tool call began running."""

    call_id: str
    name: str


@final
@dataclass(frozen=True, slots=True)
class ToolFinished(Event):
    """A tool call finished (in completion order, not the model's order)."""

    call_id: str
    name: str
    is_error: bool
    seconds: float


@final
@dataclass(frozen=True, slots=True)
class ToolDispatchComplete(Event):
    """All calls finished; ``message`` holds the results in the model's order."""

    message: Message


@final
@dataclass(frozen=True, slots=True)
class ProviderRetry(Event):
    """A provider attempt failed and will be retried after ``delay_ms``.

    ``error`` is the error class name (e.g. "RateLimited"), ``message`` its text,
    ``retry_after_ms`` the provider's own hint as sent (before capping), and
    ``compaction`` is True when the retry concerns compaction: the request is re-sent
    after compacting an overflowing context, or a failed summary request is retried.
    """

    attempt: int
    max_attempts: int
    delay_ms: int
    error: str
    status_code: int | None
    retry_after_ms: int | None
    message: str
    compaction: bool = False


@final
@dataclass(frozen=True, slots=True)
class CompactionStarted(Event):
    """The context is being summarised; ``reason`` is "threshold" or "overflow"."""

    reason: str
    messages_before: int
    estimated_tokens: int


@final
@dataclass(frozen=True, slots=True)
class Compacted(Event):
    """A compaction finished and the conversation now starts at its summary."""

    messages_before: int
    messages_after: int
    summarized_messages: int
    kept_turns: int


@final
@dataclass(frozen=True, slots=True)
class TurnComplete(Event):
    """The turn ended; ``response`` is the final assistant text."""

    stop_reason: StopReason
    response: str
    iterations: int
    tool_calls: int
    usage: Usage


AnyEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolCallStart
    | ToolCallDelta
    | ModelInfo
    | MessageComplete
    | ToolDispatchStart
    | ToolStarted
    | ToolFinished
    | ToolDispatchComplete
    | ProviderRetry
    | CompactionStarted
    | Compacted
    | TurnComplete
)

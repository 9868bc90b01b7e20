"""Events a ``Stream`` returns, one per ``next()`` call.

Each event is a frozen, slotted dataclass holding immutable data only, so a caller may
keep it. Fields are positional, so ``case TextDelta(t)`` and ``case TextDelta(text=t)``
both match. Do not subclass them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeVar, final

from ._ids import publish
from .conversation import Message, ToolUse, Usage

__all__ = [
    "PENDING",
    "AnyEvent",
    "Compacted",
    "CompactionStarted",
    "Cost",
    "Elicitation",
    "Event",
    "HookFailure",
    "Lagged",
    "MessageComplete",
    "ModelInfo",
    "Pending",
    "ProviderRetry",
    "ResponseDiscarded",
    "Steered",
    "StopReason",
    "SubagentEvent",
    "TextDelta",
    "ThinkingDelta",
    "TodoItem",
    "TodoStatus",
    "TodoUpdated",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolDispatchComplete",
    "ToolDispatchStart",
    "ToolFinished",
    "ToolProgress",
    "ToolStarted",
    "TurnComplete",
]


class StopReason(str, enum.Enum):
    """Why a turn ended. Members may be added; none is renamed."""

    #: the model finished and asked for no tool
    END_TURN = "end_turn"
    #: ``Config.max_iterations`` model responses were used up
    MAX_ITERATIONS = "max_iterations"
    #: the model ran out of output tokens: in its answer, or in the middle of a tool
    #: call (none of that response's calls runs)
    MAX_TOKENS = "max_tokens"
    #: the host cancelled the turn
    CANCELLED = "cancelled"
    #: ``Config.turn_timeout`` seconds of wall clock ran out
    TIMEOUT = "timeout"
    #: a tool call waits for a person's approval (``TurnComplete.pending_approvals``)
    APPROVAL_REQUIRED = "approval_required"
    #: the next request would pass ``Config.budget``; it was not sent
    BUDGET = "budget"
    #: the provider withheld or cut the answer: a content filter (chat completions
    #: ``finish_reason: "content_filter"``, Responses ``incomplete_details.reason:
    #: "content_filter"``) or a refusal (Anthropic ``stop_reason: "refusal"``; OpenAI's
    #: ``refusal`` field, chat ``delta.refusal`` or Responses
    #: ``response.refusal.delta``, in an answer that ends plainly with no tool call).
    #: What streamed is kept (stop reason ``"refusal"``), a tool call in it does not
    #: run, and a structured answer is not reviewed (``output`` is None)
    REFUSED = "refused"
    #: the provider paused a long turn of its own server-side tools (Anthropic
    #: ``stop_reason: "pause_turn"``); navi_core keeps no server-tool blocks, so it
    #: cannot send the turn back to continue it. What streamed is kept (stop reason
    #: ``"pause_turn"``)
    PAUSED = "paused"

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
    """A tool call began running (or was refused before it ran: its ``ToolFinished``,
    an error, says why)."""

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
    #: a short error text when ``is_error``
    error: str | None = None


@final
@dataclass(frozen=True, slots=True)
class ToolProgress(Event):
    """A running tool reported progress through ``ToolContext.emit``."""

    call_id: str
    text: str


@final
@dataclass(frozen=True, slots=True)
class Elicitation(Event):
    """A running tool call (an MCP server's) asks the user: answer it with
    ``Stream.answer(request_id, content)``, content matching ``schema`` (a JSON
    Schema object), or ``None`` to decline. The call waits until then."""

    call_id: str
    request_id: str
    message: str
    schema: dict[str, Any]


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
class Pending(Event):
    """No event was ready within ``next(timeout=...)``; the turn goes on.

    ``PENDING`` is its only instance. It is truthy, so ``while ev := stream.next(t)``
    keeps looping until the turn ends.
    """

    def __bool__(self) -> bool:
        return True


PENDING: Pending = Pending()


@final
@dataclass(frozen=True, slots=True)
class ResponseDiscarded(Event):
    """Attempt ``attempt`` failed after it returned deltas; a renderer removes them.

    Returned before the ``ProviderRetry`` of that failure, or, when no attempt is left,
    before ``next()`` raises it. The counts say how much of the attempt was returned:
    characters of text and thinking, tool calls started.
    """

    attempt: int
    text_chars: int
    thinking_chars: int
    tool_calls: int


@final
@dataclass(frozen=True, slots=True)
class Steered(Event):
    """A steering message joined the conversation."""

    message: Message


@final
@dataclass(frozen=True, slots=True)
class SubagentEvent(Event):
    """An event of the sub-agent run by tool call ``call_id``."""

    call_id: str
    event: Event


@final
@dataclass(frozen=True, slots=True)
class Lagged(Event):
    """A subscriber fell behind: ``dropped`` events were not delivered to it."""

    dropped: int


#: where a todo item stands
TodoStatus: TypeAlias = Literal["pending", "in_progress", "done"]


@dataclass(frozen=True, slots=True)
class TodoItem:
    """One item of the todo list the model keeps (``TodoList``): what to do, and
    where it stands."""

    text: str
    status: TodoStatus = "pending"


@final
@dataclass(frozen=True, slots=True)
class TodoUpdated(Event):
    """The model wrote its todo list (a ``TodoList`` call); ``items`` is the whole list
    now, in its order."""

    items: tuple[TodoItem, ...]


@dataclass(frozen=True, slots=True)
class Cost:
    """USD spent: ``usd`` is the whole, the sum of the three parts.

    ``input_usd`` prices the uncached prompt tokens, ``output_usd`` the output tokens
    (reasoning included), ``cache_usd`` the cache reads and writes.
    """

    usd: float
    input_usd: float
    output_usd: float
    cache_usd: float

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(
            self.usd + other.usd,
            self.input_usd + other.input_usd,
            self.output_usd + other.output_usd,
            self.cache_usd + other.cache_usd,
        )


@dataclass(frozen=True, slots=True)
class HookFailure:
    """A hook raised: which hook, in which stage, the error text, the call it concerned."""

    hook: str
    stage: str
    error: str
    call_id: str | None = None


#: the type of a turn's structured output (``run(..., output=T)``)
if TYPE_CHECKING:  # bare ``Stream`` / ``TurnComplete`` mean ``[Any]``
    from typing_extensions import TypeVar as _TypeVar

    T = _TypeVar("T", default=Any)
else:
    T = TypeVar("T")


@final
@dataclass(frozen=True, slots=True)
class TurnComplete(Event, Generic[T]):
    """The turn ended; ``response`` is the final assistant text (after a cancel, the
    text streamed so far)."""

    if not TYPE_CHECKING:

        def __class_getitem__(cls, params: object) -> type:
            # ``TurnComplete[T]`` is for type checkers; at run time it is the class
            # itself, so ``TurnComplete[int](...)`` makes a plain slotted instance
            return cls

    stop_reason: StopReason
    response: str
    iterations: int
    #: the tool calls the model made this turn, each answered by a result (calls a
    #: cancel kept from running too: the model is told they did not run)
    tool_calls: int
    usage: Usage
    #: the id of this turn (``Stream.turn_id``)
    turn_id: str = ""
    #: the validated structured output when ``run(..., output=T)`` asked for one
    output: T | None = None
    #: every exception a hook raised during the turn
    hook_failures: tuple[HookFailure, ...] = ()
    #: the calls waiting for ``Agent.approve``/``deny`` (``APPROVAL_REQUIRED``)
    pending_approvals: tuple[ToolUse, ...] = ()
    #: what ``usage`` cost, at the provider's price; None when no price is known
    cost: Cost | None = None


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
    | Pending
    | ResponseDiscarded
    | ToolProgress
    | Elicitation
    | Steered
    | SubagentEvent
    | Lagged
    | TodoUpdated
)


publish(globals())

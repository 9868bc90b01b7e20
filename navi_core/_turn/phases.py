"""The shape of a turn: its phases, what moves it between them, and its state records.

``TRANSITIONS`` is the whole table of moves; ``Stream`` (``navi_core.stream``) makes
each move through it and nowhere else. The moves (``render_transitions()`` prints
this from ``TRANSITIONS``)::

    TURN_START      --opened-->         STREAMING
    TURN_START      --finished-->       DONE
    TURN_START      --cancelled-->      DONE
    TURN_START      --failed-->         FAILED
    TURN_START      --approved-->       AFTER_RESPONSE
    STREAMING       --completed-->      AFTER_RESPONSE
    STREAMING       --stream failed-->  TURN_START
    STREAMING       --cancelled-->      DONE
    STREAMING       --failed-->         FAILED
    AFTER_RESPONSE  --tools done-->     TURN_START
    AFTER_RESPONSE  --steered-->        TURN_START
    AFTER_RESPONSE  --finished-->       DONE
    AFTER_RESPONSE  --cancelled-->      DONE
    AFTER_RESPONSE  --failed-->         FAILED
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from .._logs import get_logger
from ..compaction._compaction import PendingCompaction
from ..config import RetryPolicy
from ..errors import ProviderError
from ..events import ProviderRetry

__all__ = [
    "TRANSITIONS",
    "CompactionJob",
    "Phase",
    "RequestState",
    "Trigger",
    "render_transitions",
    "retry_notice",
    "transition_table",
]


class Phase(enum.Enum):
    """Where a turn stands."""

    #: about to open a provider response (after a retry wait, if any)
    TURN_START = "turn_start"
    #: pumping an open response into events
    STREAMING = "streaming"
    #: a response completed; ending the turn or dispatching its tool calls
    AFTER_RESPONSE = "after_response"
    #: the turn ended; ``TurnComplete`` was queued
    DONE = "done"
    #: the turn failed; ``next()`` raises
    FAILED = "failed"

    # members are singletons compared by identity: hash them so too (in C), as the
    # phase machine looks up (phase, trigger) and handlers on every step
    __hash__ = object.__hash__


class Trigger(enum.Enum):
    """What makes the phase change."""

    #: the provider accepted the request and the response is open
    OPENED = "opened"
    #: the response's ``MessageComplete`` arrived
    COMPLETED = "completed"
    #: a retryable failure mid-response: the request is made again from scratch
    STREAM_FAILED = "stream failed"
    #: every tool call of the response has its result
    TOOLS_DONE = "tools done"
    #: no tool call, but steering arrived meanwhile: answer it in this turn
    STEERED = "steered"
    #: the turn ended: an answer, the token or iteration limit, an idle resume
    FINISHED = "finished"
    #: ``cancel()`` was noticed
    CANCELLED = "cancelled"

    __hash__ = object.__hash__  # as Phase's
    #: an error ended the turn (also ``close()`` before the end)
    FAILED = "failed"
    #: ``resume()`` found a held batch whose calls are decided: run the approved ones
    APPROVED = "approved"


TRANSITIONS: Final[Mapping[tuple[Phase, Trigger], Phase]] = MappingProxyType(
    {
        (Phase.TURN_START, Trigger.OPENED): Phase.STREAMING,
        (Phase.TURN_START, Trigger.FINISHED): Phase.DONE,
        (Phase.TURN_START, Trigger.CANCELLED): Phase.DONE,
        (Phase.TURN_START, Trigger.FAILED): Phase.FAILED,
        (Phase.TURN_START, Trigger.APPROVED): Phase.AFTER_RESPONSE,
        (Phase.STREAMING, Trigger.COMPLETED): Phase.AFTER_RESPONSE,
        (Phase.STREAMING, Trigger.STREAM_FAILED): Phase.TURN_START,
        (Phase.STREAMING, Trigger.CANCELLED): Phase.DONE,
        (Phase.STREAMING, Trigger.FAILED): Phase.FAILED,
        (Phase.AFTER_RESPONSE, Trigger.TOOLS_DONE): Phase.TURN_START,
        (Phase.AFTER_RESPONSE, Trigger.STEERED): Phase.TURN_START,
        (Phase.AFTER_RESPONSE, Trigger.FINISHED): Phase.DONE,
        (Phase.AFTER_RESPONSE, Trigger.CANCELLED): Phase.DONE,
        (Phase.AFTER_RESPONSE, Trigger.FAILED): Phase.FAILED,
    }
)
"""Every legal move: ``(phase, trigger) -> next phase``. DONE and FAILED have none."""


def render_transitions() -> str:
    """``TRANSITIONS`` as the aligned lines of this module's docstring diagram."""
    rows = [(a.name, f"--{t.value}-->", b.name) for (a, t), b in TRANSITIONS.items()]
    w0 = max(len(r[0]) for r in rows) + 2
    w1 = max(len(r[1]) for r in rows) + 2
    return "\n".join(f"{a:<{w0}}{t:<{w1}}{b}".rstrip() for a, t, b in rows)


def transition_table() -> str:
    """``TRANSITIONS`` as the Markdown table of the README."""
    lines = ["| phase | trigger | next phase |", "|---|---|---|"]
    lines += [
        f"| {a.name} | {t.value} | {b.name} |" for (a, t), b in TRANSITIONS.items()
    ]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class RequestState:
    """Bookkeeping of the request being attempted; a completed response resets it."""

    #: opens of this request so far, the first included
    attempt: int = 1
    #: ``time.monotonic()`` before which the next open waits
    retry_at: float = 0.0
    #: the threshold compaction check ran (or a compaction ran) for this request
    checked: bool = False
    #: a context overflow of this request was already compacted once
    overflow_compacted: bool = False

    def checked_now(self) -> RequestState:
        """This state with ``checked`` set (built directly: it runs every request)."""
        return RequestState(self.attempt, self.retry_at, True, self.overflow_compacted)


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """A compaction announced with ``CompactionStarted`` and not yet run."""

    pending: PendingCompaction
    #: summary requests tried, the next one included
    attempt: int = 1
    #: the notice returned after ``Compacted`` (the overflow that caused it)
    notice: ProviderRetry | None = None


def retry_notice(
    exc: ProviderError,
    attempt: int,
    policy: RetryPolicy,
    delay_ms: int,
    *,
    compaction: bool = False,
) -> ProviderRetry:
    """The ``ProviderRetry`` event for ``exc`` ending attempt ``attempt`` (logged)."""
    get_logger("navi_core.retry").warning(
        "attempt %d/%d failed (%s%s): retrying in %d ms%s",
        attempt, policy.max_attempts, type(exc).__name__,
        f", HTTP {exc.status_code}" if exc.status_code else "", delay_ms,
        " after compacting" if compaction else "",
    )  # fmt: skip
    return ProviderRetry(
        attempt,
        policy.max_attempts,
        delay_ms,
        type(exc).__name__,
        exc.status_code,
        exc.retry_after_ms,
        exc.message,
        compaction,
    )

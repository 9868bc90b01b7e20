"""The ``SessionStore`` protocol every store implements, and its value types.

A session is an ordered log of messages split into windows: a compaction starts a new
window (summary + restated suffix) and ``load`` returns the latest one, while
``history`` keeps every window readable. ``append`` is atomic: all of the messages or
none. ``lock`` gives one driver at a time the right to append to a session.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from .._ids import publish
from ..conversation import Conversation, Message, ToolResult

__all__ = [
    "MAX_PAGE",
    "Approval",
    "ApprovalState",
    "HistoryPage",
    "SessionInfo",
    "SessionLock",
    "SessionStore",
    "check_page_limit",
    "parse_cursor",
    "same_call",
]

#: the most messages one ``history_page`` call returns
MAX_PAGE: Final = 256


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a listing shows of a session; times are Unix seconds."""

    id: str
    created_at: float
    modified_at: float
    message_count: int
    last_user_message: str | None
    model: str | None


class ApprovalState(str, enum.Enum):
    """Where a held tool call stands; only the moves below are made, each atomically.

    pending -> approved | denied; approved -> running (claimed by the resuming
    driver, just before the tool runs); running -> done (the result is stored).
    """

    #: waits for ``Agent.approve`` / ``Agent.deny``
    PENDING = "pending"
    #: a person approved it; the next ``resume()`` runs it
    APPROVED = "approved"
    #: a person denied it; the model reads the reason
    DENIED = "denied"
    #: claimed by a driver that is running it now (or crashed while it ran)
    RUNNING = "running"
    #: it has its result (calls of the batch that needed no approval start here)
    DONE = "done"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Approval:
    """One tool call of a batch held for approval, as the store keeps it.

    A record is bound to the call it holds, not only to the model's call id (models
    reuse ids across turns, and even within one response): ``ordinal``, ``turn_id``
    and ``digest`` name that one call, and a decision or a move must match all three.
    """

    call_id: str
    name: str
    state: ApprovalState
    #: the reason given with a denial (or by the hook that asked for approval)
    reason: str = ""
    #: the call's result once ``DONE``
    result: ToolResult | None = None
    #: the call's place among the calls of its response (0 first); a batch lists
    #: them in that order, so calls sharing an id stay apart
    ordinal: int = 0
    #: the turn that held the batch (its ``TurnComplete.turn_id``)
    turn_id: str = ""
    #: SHA-256 (hex) of the tool name and the canonical JSON of the arguments
    #: (``approvals.call_digest``); empty for a batch held before records had one
    digest: str = ""

    @property
    def key(self) -> str:
        """``ordinal:turn_id:digest``: this held call in one string, for a decision
        made elsewhere (``Agent.approve(key)``, a URL)."""
        return f"{self.ordinal}:{self.turn_id}:{self.digest}"


def same_call(a: Approval, b: Approval) -> bool:
    """Whether two records name the same held call (their states aside)."""
    return (a.ordinal, a.call_id, a.turn_id, a.digest) == (
        b.ordinal,
        b.call_id,
        b.turn_id,
        b.digest,
    )


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """One page of a session's messages, every window included, oldest first.

    ``next_cursor`` continues after the last message of this page; None at the end.
    """

    messages: tuple[Message, ...]
    next_cursor: str | None


def check_page_limit(limit: int) -> int:
    """``limit`` when it is 1..``MAX_PAGE``; a ValueError naming the bounds otherwise."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}, not {limit}")
    return limit


def parse_cursor(cursor: str | None) -> int:
    """The message offset a ``history_page`` cursor stands for (0 for None)."""
    if cursor is None:
        return 0
    if not cursor.isascii() or not cursor.isdigit() or len(cursor) > 12:
        raise ValueError(f"not a history_page cursor: {cursor[:40]!r}")
    return int(cursor)


@runtime_checkable
class SessionLock(Protocol):
    """Held by the one driver of a session; released on ``release()`` or holder death."""

    def release(self) -> None:
        """Give the session up (idempotent)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live. Every method is safe to call from any thread."""

    def create(self) -> SessionInfo:
        """Start an empty session."""
        ...

    def list(self) -> list[SessionInfo]:
        """Every session, most recently modified first."""
        ...

    def get(self, id_or_prefix: str) -> SessionInfo:
        """The session with that id or unique id prefix.

        Raises:
            SessionNotFound: no match. AmbiguousSession: the prefix matches several.
        """
        ...

    def latest(self) -> SessionInfo | None:
        """The most recently modified session, or None when there is none."""
        ...

    def load(self, session_id: str) -> Conversation:
        """The latest window of the session, in order."""
        ...

    def history(self, session_id: str) -> builtins.list[builtins.list[Message]]:
        """Every window of the session, oldest first."""
        ...

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add messages to the latest window, all or none."""
        ...

    def new_window(self, session_id: str, messages: Sequence[Message]) -> None:
        """Start a new window holding ``messages`` (a compaction), atomically."""
        ...

    def history_page(
        self, session_id: str, limit: int = 100, cursor: str | None = None
    ) -> HistoryPage:
        """Up to ``limit`` (at most ``MAX_PAGE``) messages of every window, oldest
        first, starting where ``cursor`` (a ``next_cursor``) points.

        Raises:
            ValueError: ``limit`` is out of bounds or ``cursor`` is not a cursor.
        """
        ...

    def save_approvals(self, session_id: str, approvals: Sequence[Approval]) -> None:
        """Replace the session's held batch with ``approvals`` (empty clears it).

        The batch lists every call of one response in the model's order: the call at
        index ``i`` is stored with ordinal ``i``, whatever its ``ordinal`` field says.
        """
        ...

    def approvals(self, session_id: str) -> builtins.list[Approval]:
        """The session's held batch, in the model's order of the calls."""
        ...

    def move_approval(
        self,
        session_id: str,
        held: Approval,
        expected: ApprovalState,
        new: ApprovalState,
        *,
        reason: str | None = None,
        result: ToolResult | None = None,
    ) -> bool:
        """Move the held call ``held`` names from ``expected`` to ``new`` atomically.

        The stored call must be the one ``held`` names: the same ``ordinal``,
        ``call_id``, ``turn_id`` and ``digest`` (its state and other fields are not
        compared). Returns False (changing nothing) when no such call is in
        ``expected``: this is how two drivers never both run an approved call, and how
        a decision never lands on another call of a newer batch. ``reason`` and
        ``result`` replace the stored ones when given.
        """
        ...

    def delete_session(self, session_id: str) -> None:
        """Remove the session with exactly this id: its messages of every window,
        its held approvals and the session itself, atomically.

        It does not wait for, or check, the session's driver: take ``lock`` first
        to refuse a session another agent drives.

        Raises:
            SessionNotFound: no session has this id (a prefix is not enough).
        """
        ...

    def lock(self, session_id: str) -> SessionLock:
        """Become the session's only driver.

        Raises:
            SessionBusy: another driver holds it.
        """
        ...

    def close(self) -> None:
        """Release connections and files (idempotent)."""
        ...


publish(globals())

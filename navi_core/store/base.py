"""The ``SessionStore`` protocol every store implements, and its value types.

A session is an ordered log of messages split into windows: a compaction starts a new
window (summary + restated suffix) and ``load`` returns the latest one, while
``history`` keeps every window readable. ``append`` is atomic: all of the messages or
none. ``lock`` gives one driver at a time the right to append to a session.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..conversation import Conversation, Message

__all__ = ["SessionInfo", "SessionLock", "SessionStore"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a listing shows of a session; times are Unix seconds."""

    id: str
    created_at: float
    modified_at: float
    message_count: int
    last_user_message: str | None
    model: str | None


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

    def lock(self, session_id: str) -> SessionLock:
        """Become the session's only driver.

        Raises:
            SessionBusy: another driver holds it.
        """
        ...

    def close(self) -> None:
        """Release connections and files (idempotent)."""
        ...

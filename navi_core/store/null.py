"""``NullStore``: keeps nothing; for hosts that persist conversations themselves."""

from __future__ import annotations

import builtins
import time
from collections.abc import Sequence

from .._ids import new_id, publish
from ..conversation import Conversation, Message, ToolResult
from ..errors import SessionNotFound
from .base import Approval, ApprovalState, HistoryPage, SessionInfo, check_page_limit
from .memory import ApprovalBook

__all__ = ["NullStore"]


class _NoLock:
    __slots__ = ()

    def release(self) -> None:
        pass


class NullStore:
    """A store that forgets: ``append`` drops messages, ``load`` finds nothing.

    Held approvals are kept in this object's memory only, so an agent can still
    approve and resume within the process; they do not survive it.
    """

    def __init__(self) -> None:
        self._approvals = ApprovalBook()

    def create(self) -> SessionInfo:
        now = time.time()
        return SessionInfo(new_id(), now, now, 0, None, None)

    def list(self) -> list[SessionInfo]:
        return []

    def get(self, id_or_prefix: str) -> SessionInfo:
        raise SessionNotFound(f"NullStore keeps no sessions ({id_or_prefix!r})")

    def latest(self) -> SessionInfo | None:
        return None

    def load(self, session_id: str) -> Conversation:
        raise SessionNotFound(f"NullStore keeps no sessions ({session_id!r})")

    def history(self, session_id: str) -> builtins.list[builtins.list[Message]]:
        raise SessionNotFound(f"NullStore keeps no sessions ({session_id!r})")

    def history_page(
        self, session_id: str, limit: int = 100, cursor: str | None = None
    ) -> HistoryPage:
        check_page_limit(limit)
        raise SessionNotFound(f"NullStore keeps no sessions ({session_id!r})")

    def save_approvals(self, session_id: str, approvals: Sequence[Approval]) -> None:
        self._approvals.save(session_id, approvals)

    def approvals(self, session_id: str) -> builtins.list[Approval]:
        return self._approvals.get(session_id)

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
        return self._approvals.move(session_id, held, expected, new, reason, result)

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        pass

    def new_window(self, session_id: str, messages: Sequence[Message]) -> None:
        pass

    def delete_session(self, session_id: str) -> None:
        raise SessionNotFound(f"NullStore keeps no sessions ({session_id!r})")

    def lock(self, session_id: str) -> _NoLock:
        return _NoLock()

    def close(self) -> None:
        pass


publish(globals())

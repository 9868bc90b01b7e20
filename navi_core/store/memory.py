"""``MemoryStore``: sessions in this process's memory, the default; ``NullStore`` keeps none."""

from __future__ import annotations

import builtins
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .._ids import new_id, publish
from ..conversation import Conversation, Message, ToolResult
from ..errors import AmbiguousSession, SessionBusy, SessionNotFound
from .base import (
    Approval,
    ApprovalState,
    HistoryPage,
    SessionInfo,
    check_page_limit,
    parse_cursor,
    same_call,
)

__all__ = ["ApprovalBook", "MemoryStore", "page_of", "session_summary"]


def page_of(
    windows: Sequence[Sequence[Message]], limit: int, cursor: str | None
) -> HistoryPage:
    """The ``history_page`` of ``windows`` (every window, oldest first)."""
    limit = check_page_limit(limit)
    start = parse_cursor(cursor)
    flat = [m for w in windows for m in w]
    messages = tuple(flat[start : start + limit])
    end = start + len(messages)
    return HistoryPage(messages, str(end) if end < len(flat) else None)


class ApprovalBook:
    """Held tool-call batches by session id, in memory; every move under one mutex."""

    __slots__ = ("_batches", "_mutex")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._batches: dict[str, list[Approval]] = {}

    def save(self, session_id: str, approvals: Sequence[Approval]) -> None:
        batch = [
            a if a.ordinal == i else replace(a, ordinal=i)
            for i, a in enumerate(approvals)
        ]
        with self._mutex:
            if batch:
                self._batches[session_id] = batch
            else:
                self._batches.pop(session_id, None)

    def get(self, session_id: str) -> list[Approval]:
        with self._mutex:
            return list(self._batches.get(session_id, ()))

    def move(
        self,
        session_id: str,
        held: Approval,
        expected: ApprovalState,
        new: ApprovalState,
        reason: str | None,
        result: ToolResult | None,
    ) -> bool:
        with self._mutex:
            batch = self._batches.get(session_id, [])
            if not 0 <= held.ordinal < len(batch):
                return False
            a = batch[held.ordinal]
            if a.state is not expected or not same_call(a, held):
                return False
            batch[held.ordinal] = replace(
                a,
                state=new,
                reason=a.reason if reason is None else reason,
                result=a.result if result is None else result,
            )
            return True


def session_summary(messages: Sequence[Message]) -> tuple[str | None, str | None]:
    """The last user prompt text and the last model name found in ``messages``."""
    last_user: str | None = None
    model: str | None = None
    for m in reversed(messages):
        if last_user is None and m.role == "user" and m.text:
            last_user = m.text
        if model is None and m.wire is not None:
            model = m.wire.model
        if last_user is not None and model is not None:
            break
    return last_user, model


@dataclass(slots=True)
class _Session:
    id: str
    created_at: float
    modified_at: float
    windows: list[list[Message]] = field(default_factory=lambda: [[]])
    locked: bool = False


def _unlock(mutex: threading.Lock, session: _Session) -> None:
    with mutex:
        session.locked = False


class _MemoryLock:
    """Freed by ``release()`` or, like a dead process's flock, when it is collected."""

    __slots__ = ("__weakref__", "_finalizer")

    def __init__(self, mutex: threading.Lock, session: _Session) -> None:
        """``mutex`` guards the store's sessions; ``session`` is the locked one."""
        self._finalizer = weakref.finalize(self, _unlock, mutex, session)

    def release(self) -> None:
        self._finalizer()


class MemoryStore:
    """Sessions kept in a dict, lost when the process ends; thread-safe."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._approvals = ApprovalBook()

    def create(self) -> SessionInfo:
        now = time.time()
        s = _Session(new_id(), now, now)
        with self._mutex:
            self._sessions[s.id] = s
        return self._info(s)

    def _info(self, s: _Session) -> SessionInfo:
        last_user = model = None
        for window in reversed(s.windows):  # a window of a summary alone has neither
            found_user, found_model = session_summary(window)
            last_user = last_user if last_user is not None else found_user
            model = model if model is not None else found_model
            if last_user is not None and model is not None:
                break
        count = sum(len(w) for w in s.windows)
        return SessionInfo(s.id, s.created_at, s.modified_at, count, last_user, model)

    def list(self) -> list[SessionInfo]:
        with self._mutex:
            sessions = sorted(
                self._sessions.values(),
                key=lambda s: (s.modified_at, s.id),
                reverse=True,
            )
            return [self._info(s) for s in sessions]

    def _find(self, id_or_prefix: str) -> _Session:
        s = self._sessions.get(id_or_prefix)
        if s is not None:
            return s
        matches = [v for k, v in self._sessions.items() if k.startswith(id_or_prefix)]
        if not matches or not id_or_prefix:
            raise SessionNotFound(f"no session matches {id_or_prefix!r}")
        if len(matches) > 1:
            raise AmbiguousSession(
                f"{id_or_prefix!r} matches {len(matches)} sessions; give more characters"
            )
        return matches[0]

    def get(self, id_or_prefix: str) -> SessionInfo:
        with self._mutex:
            return self._info(self._find(id_or_prefix))

    def latest(self) -> SessionInfo | None:
        listing = self.list()
        return listing[0] if listing else None

    def load(self, session_id: str) -> Conversation:
        with self._mutex:
            s = self._find(session_id)
            return Conversation(list(s.windows[-1]), s.id)

    def history(self, session_id: str) -> builtins.list[builtins.list[Message]]:
        with self._mutex:
            return [list(w) for w in self._find(session_id).windows]

    def history_page(
        self, session_id: str, limit: int = 100, cursor: str | None = None
    ) -> HistoryPage:
        with self._mutex:
            windows = [list(w) for w in self._find(session_id).windows]
        return page_of(windows, limit, cursor)

    def save_approvals(self, session_id: str, approvals: Sequence[Approval]) -> None:
        self._approvals.save(self.get(session_id).id, approvals)

    def approvals(self, session_id: str) -> builtins.list[Approval]:
        return self._approvals.get(self.get(session_id).id)

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
        sid = self.get(session_id).id
        return self._approvals.move(sid, held, expected, new, reason, result)

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        with self._mutex:
            s = self._find(session_id)
            s.windows[-1].extend(messages)
            s.modified_at = max(time.time(), s.modified_at)

    def new_window(self, session_id: str, messages: Sequence[Message]) -> None:
        with self._mutex:
            s = self._find(session_id)
            s.windows.append(list(messages))
            s.modified_at = max(time.time(), s.modified_at)

    def delete_session(self, session_id: str) -> None:
        with self._mutex:
            if self._sessions.pop(session_id, None) is None:
                raise SessionNotFound(f"no session {session_id!r}")
            self._approvals.save(session_id, ())

    def lock(self, session_id: str) -> _MemoryLock:
        with self._mutex:
            s = self._find(session_id)
            if s.locked:
                raise SessionBusy(f"session {s.id} is driven by another agent")
            s.locked = True
            return _MemoryLock(self._mutex, s)

    def close(self) -> None:
        pass


publish(globals())

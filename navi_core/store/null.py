"""``NullStore``: keeps nothing; for hosts that persist conversations themselves."""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Sequence

from ..conversation import Conversation, Message
from ..errors import SessionNotFound
from .base import SessionInfo

__all__ = ["NullStore"]


class _NoLock:
    __slots__ = ()

    def release(self) -> None:
        pass


class NullStore:
    """A store that forgets: ``append`` drops messages, ``load`` finds nothing."""

    def create(self) -> SessionInfo:
        now = time.time()
        return SessionInfo(uuid.uuid4().hex, now, now, 0, None, None)

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

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        pass

    def new_window(self, session_id: str, messages: Sequence[Message]) -> None:
        pass

    def lock(self, session_id: str) -> _NoLock:
        return _NoLock()

    def close(self) -> None:
        pass

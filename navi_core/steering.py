"""``SteeringQueue``: user messages waiting to join a running turn, safe across threads."""

from __future__ import annotations

import enum
import threading

from .conversation import Message

__all__ = ["SteerDisposition", "SteeringQueue"]


class SteerDisposition(str, enum.Enum):
    """What ``Agent.steer`` did with a message."""

    #: a turn is running: it applies the message before its next response
    QUEUED = "queued"
    #: no turn is running: the next ``run()``/``resume()`` applies it first
    NEXT_TURN = "next_turn"

    def __str__(self) -> str:
        return self.value


class SteeringQueue:
    """Messages queued by ``Agent.steer`` (any thread), taken by the turn that runs."""

    __slots__ = ("_messages", "_mutex")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._messages: list[Message] = []

    def put(self, message: Message, limit: int | None = None) -> bool:
        """Queue ``message`` behind the others; False (not queued) when ``limit``
        messages wait already."""
        with self._mutex:
            if limit is not None and len(self._messages) >= limit:
                return False
            self._messages.append(message)
            return True

    def take(self) -> list[Message]:
        """Remove and return every queued message, oldest first."""
        with self._mutex:
            messages, self._messages = self._messages, []
        return messages

    def __len__(self) -> int:
        with self._mutex:
            return len(self._messages)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __repr__(self) -> str:
        return f"<SteeringQueue waiting={len(self)}>"

"""``SteeringQueue``: user messages waiting to join a running turn, safe across threads."""

from __future__ import annotations

import threading

from .conversation import Message

__all__ = ["SteeringQueue"]


class SteeringQueue:
    """Messages queued by ``Agent.steer`` (any thread), taken by the turn that runs."""

    __slots__ = ("_messages", "_mutex")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._messages: list[Message] = []

    def put(self, message: Message) -> None:
        """Queue ``message`` behind the others."""
        with self._mutex:
            self._messages.append(message)

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

"""``SteeringQueue``: user messages waiting to join a running turn, safe across threads."""

from __future__ import annotations

import enum
import threading

from .._ids import publish
from ..conversation import Message

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
    """Messages queued by ``Agent.steer`` (any thread), taken by the turn that runs.

    The queue knows whether a turn accepts steering (``begin_turn``, ``end_turn``): the
    disposition ``put`` returns and a finishing turn's last look (``finish_unless_waiting``)
    are decided under one lock, so a message is never promised to a turn that ends
    without it.
    """

    __slots__ = ("_accepting", "_messages", "_mutex")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._messages: list[Message] = []
        self._accepting = False

    def put(
        self, message: Message, limit: int | None = None
    ) -> SteerDisposition | None:
        """Queue ``message`` behind the others and say who applies it; None (not
        queued) when ``limit`` messages wait already."""
        with self._mutex:
            if limit is not None and len(self._messages) >= limit:
                return None
            self._messages.append(message)
            if self._accepting:
                return SteerDisposition.QUEUED
            return SteerDisposition.NEXT_TURN

    def begin_turn(self) -> None:
        """A turn starts: messages put from now on are QUEUED for it."""
        with self._mutex:
            self._accepting = True

    def end_turn(self) -> None:
        """The turn ended: later messages wait for the NEXT_TURN."""
        with self._mutex:
            self._accepting = False

    def finish_unless_waiting(self) -> bool:
        """A turn is about to end: True when messages wait (it answers them instead);
        else it stops accepting, atomically, and False."""
        with self._mutex:
            if self._messages:
                return True
            self._accepting = False
            return False

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


publish(globals())

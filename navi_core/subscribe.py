"""Observers: every event of an agent's turns, delivered to other threads.

``Agent.subscribe(maxsize)`` returns a ``Subscription``, an iterator of
``(turn_id, event)``. The driver only appends to each subscription's bounded buffer
and never waits: when a consumer falls ``maxsize`` events behind, the oldest are
dropped and the consumer next reads ``Lagged(dropped)`` (under the turn id of the
newest dropped event), then the events that were kept.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from types import TracebackType

from ._ids import publish
from .events import Event, Lagged

__all__ = ["Observers", "Subscription"]


class Subscription:
    """A bounded, thread-safe buffer of ``(turn_id, event)`` from an agent's turns.

    Iterate it (blocking until the next event; iteration ends after ``close()``), or
    call ``get(timeout)``. Close it when done so the agent stops buffering for it.
    """

    __slots__ = (
        "__weakref__",
        "_buffer",
        "_closed",
        "_dropped",
        "_dropped_turn",
        "_observers",
        "_ready",
        "_waiting",
        "maxsize",
    )

    def __init__(self, observers: Observers, maxsize: int = 1024) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        self.maxsize = maxsize
        self._observers = observers
        self._buffer: deque[tuple[str, Event]] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._waiting = 0  # readers inside wait(): put() notifies only then
        self._dropped = 0
        self._dropped_turn = ""
        self._closed = False

    def put(self, turn_id: str, event: Event) -> None:
        """Buffer one event, dropping the oldest when full; never blocks for long."""
        with self._ready:
            if self._closed:
                return
            buffer = self._buffer
            if len(buffer) >= self.maxsize:
                self._dropped_turn = buffer.popleft()[0]
                self._dropped += 1
            buffer.append((turn_id, event))
            if self._waiting:
                self._ready.notify()

    def get(self, timeout: float | None = None) -> tuple[str, Event] | None:
        """The next ``(turn_id, event)``; None when closed or ``timeout`` ran out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            while True:
                if self._dropped:
                    lagged = (self._dropped_turn, Lagged(self._dropped))
                    self._dropped = 0
                    return lagged
                if self._buffer:
                    return self._buffer.popleft()
                if self._closed:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._waiting += 1
                try:
                    self._ready.wait(left)
                finally:
                    self._waiting -= 1

    @property
    def closed(self) -> bool:
        """True after ``close()`` (what was buffered can still be read)."""
        return self._closed

    def close(self) -> None:
        """Stop receiving; a blocked reader wakes up. Idempotent."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        self._observers.remove(self)

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        return self

    def __next__(self) -> tuple[str, Event]:
        item = self.get()
        if item is None:
            raise StopIteration
        return item

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Subscription {state} buffered={len(self._buffer)}/{self.maxsize}>"


class Observers:
    """The subscriptions of one agent; ``publish`` is what a turn calls per event.

    The set is copied on change, so ``publish`` reads one tuple without a lock.
    """

    __slots__ = ("_mutex", "subscriptions")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self.subscriptions: tuple[Subscription, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.subscriptions)

    def subscribe(self, maxsize: int = 1024) -> Subscription:
        """A new subscription receiving every later event."""
        sub = Subscription(self, maxsize)
        with self._mutex:
            self.subscriptions = (*self.subscriptions, sub)
        return sub

    def remove(self, sub: Subscription) -> None:
        """Stop delivering to ``sub`` (no error when it is not subscribed)."""
        with self._mutex:
            self.subscriptions = tuple(s for s in self.subscriptions if s is not sub)

    def publish(self, turn_id: str, event: Event) -> None:
        """Hand ``event`` to every subscription."""
        for sub in self.subscriptions:
            sub.put(turn_id, event)

    def close(self) -> None:
        """Close every subscription (their readers see the end)."""
        for sub in self.subscriptions:
            sub.close()


publish(globals())

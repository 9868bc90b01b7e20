"""The hot path of ``Stream.next()``: hand out an event that is already queued.

Pure twin of ``csrc/_pump.pxi``. ``stream.Stream`` takes these functions as its
``next`` and ``__next__`` methods; they read the stream's ``_queue`` and
``_observers`` and call its ``_advance(timeout)``, the phase machine, for everything
else: an empty queue, a ``ModelInfo`` (which the stream deduplicates) or a turn with
subscribers (which see every event as it is handed out).
"""

from __future__ import annotations

from typing import Any

from .events import ModelInfo

__all__ = ["next_event", "next_or_stop"]


def next_event(self: Any, timeout: float | None = None) -> Any:
    """Advance the turn until it has an event, and return it.

    Args:
        timeout: seconds to wait at most; None blocks until there is an event.
    Returns:
        The next event; ``PENDING`` when ``timeout`` passed first; None only
        after ``TurnComplete`` was returned.
    Raises:
        NaviError: the turn failed (after any events queued before the failure);
        StreamPoisoned on every later call, with the failure as ``__cause__``.
    """
    queue = self._queue
    if queue and not self._observers.subscriptions and type(queue[0]) is not ModelInfo:
        return queue.popleft()
    return self._advance(timeout)


def next_or_stop(self: Any) -> Any:
    """``next()`` for iteration: StopIteration after ``TurnComplete``."""
    queue = self._queue
    if queue and not self._observers.subscriptions and type(queue[0]) is not ModelInfo:
        return queue.popleft()
    ev = self._advance(None)
    if ev is None:
        raise StopIteration
    return ev

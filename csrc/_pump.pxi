# The hot path of Stream.next(): the compiled twin of navi_core/_pump_py.py, which
# documents it. Both are plain functions that Stream takes as methods, so a Stream
# stays a plain Python object (an instance of a subclass of an extension type would
# make every attribute access of the phase machine slower).

from navi_core.events import ModelInfo as _ModelInfo


def next_event(self, timeout=None):
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
    cdef object queue = self._queue
    if queue and not self._observers.subscriptions and type(queue[0]) is not _ModelInfo:
        return queue.popleft()
    return self._advance(timeout)


def next_or_stop(self):
    """``next()`` for iteration: StopIteration after ``TurnComplete``."""
    cdef object queue = self._queue
    if queue and not self._observers.subscriptions and type(queue[0]) is not _ModelInfo:
        return queue.popleft()
    cdef object ev = self._advance(None)
    if ev is None:
        raise StopIteration
    return ev

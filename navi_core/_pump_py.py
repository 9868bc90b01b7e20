"""The hot paths of ``Stream.next()`` and of a response's reads.

Pure twin of ``csrc/_pump.pxi``. ``stream.Stream`` takes ``next_event`` and
``next_or_stop`` as its ``next`` and ``__next__`` methods, and ``DeltaStream`` takes
``produce`` as its own:

* an event already queued is handed out at once (the stream deduplicates a
  ``ModelInfo``, and a turn with subscribers publishes each event: both go to
  ``Stream._advance``, the phase machine);
* with the queue empty, while the turn streams a response (``Stream._reader``, a
  ``Reader``) with nothing else due (no ``next(timeout)``, no stop asked for, no call
  waiting off-thread, no ``close()`` from another thread), the reader reads the
  response until it pushes an event. For a ``DeltaStream`` whose class keeps this
  ``produce``, it feeds the batches to the assembler itself, from fields it took
  once, with no attribute of the response read per batch. A response that completed
  or failed goes back to the stream through the ``on_ended`` it was given;
* everything else is ``Stream._advance``.

What the hot path reads is declared: a ``Reader`` is built from exactly what it needs
(the stream's queue, its ``TurnControl`` — ``stop``, ``op``, ``deadline``, ``wake`` —
its observers' ``subscriptions``, the response and ``on_ended``), and of a
``DeltaStream`` it reads the feed that class documents: ``batches``, ``core``,
``finish``, ``ended``, ``malformed``, ``scrubbed``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from threading import get_ident
from typing import Any

from ._assemble_py import Assembler
from .errors import ProviderError
from .events import ModelInfo

__all__ = ["Reader", "next_event", "next_or_stop", "produce"]

_LATER = object()  # _quick: the phase machine has to run


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
    ev = _quick(self, timeout is None)
    return self._advance(timeout) if ev is _LATER else ev


def next_or_stop(self: Any) -> Any:
    """``next()`` for iteration: StopIteration after ``TurnComplete``."""
    ev = _quick(self, True)
    if ev is _LATER:
        ev = self._advance(None)
    if ev is None:
        raise StopIteration
    return ev


def _quick(self: Any, read: bool) -> Any:
    """The event ``next()`` hands out without the phase machine (``read``: it may
    read the open response for one), else ``_LATER``."""
    queue = self._queue
    reader = self._reader
    if reader is not None:
        if queue:
            if reader.ready():
                return reader.take()
        elif read and reader.read(self):
            return reader.take()
    elif (
        queue and not self._observers.subscriptions and type(queue[0]) is not ModelInfo
    ):
        return queue.popleft()
    return _LATER


class Reader:
    """Reads one open response into a stream's queue (``Stream._reader``).

    Built from exactly what it reads: the stream's ``queue``, its ``TurnControl``
    (``ctl``), its ``Observers``, the open ``response``, and ``on_ended(response,
    error)``, called when a read completed the response (``error`` None) or failed.

    ``driver`` is the thread inside a read (0: none); ``closing`` and
    ``close_pending`` are ``Stream.close``'s: the handshake with a close from another
    thread, and a close asked for inside a read (by a hook), which runs after it.
    """

    __slots__ = (
        "_batches",
        "_core",
        "_ctl",
        "_direct",
        "_observers",
        "_on_ended",
        "_pop",
        "_push",
        "_queue",
        "_response",
        "close_pending",
        "closing",
        "driver",
    )

    def __init__(
        self,
        queue: deque[Any],
        ctl: Any,
        observers: Any,
        response: Any,
        on_ended: Callable[[Any, BaseException | None], None],
    ) -> None:
        self._response = response
        self._queue = queue
        self._ctl = ctl
        self._observers = observers
        self._on_ended = on_ended
        self._push = queue.append
        self._pop = queue.popleft
        self.closing = False
        self.close_pending = False
        self.driver = 0
        self._direct = (
            getattr(type(response), "produce", None) is produce
            and type(response.core) is Assembler
        )
        if self._direct:
            self._batches = response.batches
            self._core = response.core

    def read(self, stream: Any) -> bool:
        """One blocking read when nothing else is due; True when the queue's first
        event can be handed out as it is. ``driver`` is set before ``closing`` is
        read: the handshake ``Stream.close`` relies on (``stream.close()`` runs here
        when a hook asked for it inside the read)."""
        ctl = self._ctl
        if ctl.stop is not None or ctl.op is not None or ctl.deadline is not None:
            return False
        self.driver = get_ident()
        if self.closing:
            self.driver = 0
            return False
        try:
            if self.pump():
                self._on_ended(self._response, None)
        except BaseException as exc:  # the stream fails the turn or retries
            self._on_ended(self._response, exc)
        self.driver = 0
        if self.closing:
            ctl.wake()
        if self.close_pending:
            self.close_pending = False
            stream.close()
        return bool(self._queue) and self.ready()

    def take(self) -> Any:
        """The first queued event, taken off the queue."""
        return self._pop()

    def ready(self) -> bool:
        """Whether the first queued event can be handed out as it is: not a
        ``ModelInfo`` (deduplicated) and no subscriber (published) to see it."""
        return (
            type(self._queue[0]) is not ModelInfo and not self._observers.subscriptions
        )

    def pump(self) -> bool:
        """Read until the response pushes an event or a stop is asked for (False), or
        until it completes (True)."""
        response = self._response
        queue = self._queue
        ctl = self._ctl
        if not self._direct:
            while not response.produce(queue):
                if queue or ctl.stop is not None:
                    return False
            return True
        try:
            while not _read_batch(self._batches, self._core, self._push, response):
                if queue or ctl.stop is not None:
                    return False
        except ProviderError as exc:
            clean = response.scrubbed(exc)
            if clean is exc:
                raise
        else:
            response.finish(queue)
            return True
        # raised outside the handler: the unredacted original is not its context
        raise clean


def produce(self: Any, queue: deque[Any]) -> bool:
    """Push the events of the next batch; True once the message is complete.

    Raises:
        MalformedStream: the batches ran out before the terminator.
        ProviderError: whatever the batches raised, as the response's ``scrubbed``
            returns it (redacted and clipped for an HTTP response).
    """
    if self._complete:
        return True
    try:
        if _read_batch(self.batches, self.core, queue.append, self):
            self.finish(queue)
        return bool(self._complete)
    except ProviderError as exc:
        clean = self.scrubbed(exc)
        if clean is exc:
            raise
    # raised outside the handler: the unredacted original is not its context
    raise clean


def _read_batch(
    batches: Iterator[Any], core: Assembler, push: Callable[[Any], None], response: Any
) -> bool:
    try:
        batch = next(batches)
    except StopIteration:
        raise response.ended() from None
    if batch:
        try:
            core.feed(batch, push)
        except ValueError as exc:
            raise response.malformed(exc) from None
    return bool(core.done)

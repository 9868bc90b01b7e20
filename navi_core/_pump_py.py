"""The hot paths of ``Stream.next()`` and of a response's reads.

Pure twin of ``csrc/_pump.pxi``. ``stream.Stream`` takes ``next_event`` and
``next_or_stop`` as its ``next`` and ``__next__`` methods, and ``DeltaStream`` takes
``produce`` as its own:

* an event already queued is handed out at once (the stream deduplicates a
  ``ModelInfo``, and a turn with subscribers publishes each event: both go to
  ``Stream._advance``, the phase machine);
* with the queue empty, while the turn streams a response (armed in
  ``Stream._reader``, a ``Reader``) with nothing else due (no ``next(timeout)``, no stop asked for, no call
  waiting off-thread, no ``close()`` from another thread), the reader reads the
  response until it pushes an event. For a ``DeltaStream`` whose class keeps this
  ``produce``, it feeds the batches to the assembler itself, from fields it took
  once, with no attribute of the response read per batch. A response that completed
  or failed goes back to the stream through the ``on_ended`` it was given;
* everything else is ``Stream._advance``.

What the hot path reads is declared: a ``Reader`` is built from exactly what it needs
(the stream's queue, its ``TurnControl`` — ``stop``, ``op``, ``deadline``, ``wake`` —
its observers' ``subscriptions`` and ``on_ended``; the response when armed), and of a
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
_BUSY = (
    "Stream.next() is running on another thread: drive a stream from one thread at "
    "a time (cancel() and close() may come from any thread)"
)


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
    if reader.driver and reader.driver != get_ident():
        raise RuntimeError(_BUSY)
    if reader.response is not None:
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
    """A turn's reader of its open response (``Stream._reader``), and the turn's close
    handshake.

    Built once per turn from exactly what it reads: the stream's ``queue``, its
    ``TurnControl`` (``ctl``: ``stop``, ``op``, ``deadline``, ``wake``), its
    ``Observers`` (``subscriptions``), and ``on_ended(response, error)``, called when a
    read completed the response (``error`` None) or failed. ``arm(response)`` when the
    turn starts streaming a response, ``disarm()`` when it stops; ``response`` is the
    armed one (None: nothing to read). ``release()`` when the turn ended.

    The handshake with ``Stream.close``: ``driver`` is the thread inside ``next()`` or a
    read (0: none), set by ``enter`` before it looks at ``closing``; a close from
    another thread sets ``closing`` before it looks at ``driver`` and waits while it
    is set; ``close_pending`` is a close asked for by that thread itself (a hook),
    run when it leaves.
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
        "close_pending",
        "closing",
        "driver",
        "response",
    )

    def __init__(
        self,
        queue: deque[Any],
        ctl: Any,
        observers: Any,
        on_ended: Callable[[Any, BaseException | None], None],
    ) -> None:
        self._queue = queue
        self._ctl = ctl
        self._observers = observers
        self._on_ended: Callable[[Any, BaseException | None], None] | None = on_ended
        self._push = queue.append
        self._pop = queue.popleft
        self.closing = False
        self.close_pending = False
        self.driver = 0
        self.response: Any = None
        self._direct = False
        self._batches: Any = None
        self._core: Any = None

    def arm(self, response: Any) -> None:
        """Read ``response`` from now on. A ``DeltaStream`` whose class keeps this
        module's ``produce`` is fed batch by batch from its ``batches`` and ``core``,
        taken here once."""
        self.response = response
        self._direct = (
            getattr(type(response), "produce", None) is produce
            and type(response.core) is Assembler
        )
        if self._direct:
            self._batches = response.batches
            self._core = response.core

    def disarm(self) -> None:
        """Nothing to read any more (the response completed, failed or was dropped)."""
        self.response = self._batches = self._core = None
        self._direct = False

    def release(self) -> None:
        """The turn ended: let go of ``on_ended`` (the stream it calls back holds this
        reader: a cycle)."""
        self.disarm()
        self._on_ended = None

    def enter(self) -> bool:
        """The calling thread drives the turn from now on; False (and it does not)
        when a close from another thread runs.

        Raises:
            RuntimeError: another thread is inside ``next()`` (the turn goes on).
        """
        me = get_ident()
        if self.driver and self.driver != me:
            raise RuntimeError(_BUSY)
        self.driver = me
        if self.closing:
            self.driver = 0
            return False
        return True

    def leave(self, stream: Any) -> None:
        """The driving thread leaves: wake a close that waits for it, and run one it
        asked for itself meanwhile (``stream.close()``)."""
        self.driver = 0
        if self.closing:
            self._ctl.wake()
        if self.close_pending:
            self.close_pending = False
            stream.close()

    def read(self, stream: Any) -> bool:
        """One blocking read when nothing else is due; True when the queue's first
        event can be handed out as it is."""
        ctl = self._ctl
        if ctl.stop is not None or ctl.op is not None or ctl.deadline is not None:
            return False
        if not self.enter():
            return False
        response = self.response
        on_ended = self._on_ended
        assert on_ended is not None  # armed: the turn has not ended
        try:
            if self.pump():
                on_ended(response, None)
        except BaseException as exc:  # the stream fails the turn or retries
            on_ended(response, exc)
        self.leave(stream)
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
        response = self.response
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

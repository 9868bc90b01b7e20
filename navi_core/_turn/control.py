"""``TurnControl``: how a ``Stream`` is bounded and stopped from other threads.

It holds what the phase machine needs to honour ``next(timeout)``, ``cancel()``,
``close()`` from another thread and ``Config.turn_timeout``, and nothing of the turn
itself:

* the condition ``cv`` that wakes every wait at once (an op done, a stop, a close);
* the deadline of the current ``next(timeout)``; calls that may block run on the
  stream's worker thread (``offload``) and are waited for only until then — past it,
  ``NotYet`` is raised and the next ``next()`` picks the call up (``resume``);
* the requested stop (``stop``: CANCELLED or TIMEOUT) with the interrupter that shuts
  blocked sockets down (``navi_core._interrupt``) and the condition that wakes every
  wait at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .._interrupt import THREAD, Interrupter
from ..events import StopReason
from .offload import Op, Worker

__all__ = ["NotYet", "TurnControl", "WorkerSlot", "abandoned"]

T = TypeVar("T")


class NotYet(Exception):
    """The deadline of ``next(timeout)`` passed before the turn had an event."""


class TurnControl:
    """Deadlines, stop requests and off-thread calls for one turn."""

    __slots__ = (
        "_release",
        "_then",
        "_timer",
        "cv",
        "deadline",
        "interrupter",
        "op",
        "stop",
        "workers",
    )

    def __init__(self) -> None:
        self.interrupter = Interrupter()
        self.cv = threading.Condition()
        self.deadline: float | None = None
        self.stop: StopReason | None = None
        self._timer: threading.Timer | None = None
        #: the worker, held apart from the turn so that a stream dropped without
        #: ``close()`` can still stop it (``abandoned``)
        self.workers = WorkerSlot()
        #: an off-thread call whose result was not picked up yet (see ``resume``)
        self.op: Op[Any] | None = None
        self._then: Callable[[Op[Any]], None] | None = None
        self._release: Callable[[Any], None] | None = None

    def start_timer(self, turn_timeout: float, on_timeout: Callable[[], None]) -> None:
        """Call ``on_timeout`` (on a timer thread) ``turn_timeout`` seconds from now
        (never, for ``math.inf`` or anything past ``threading.TIMEOUT_MAX``)."""
        if self._timer is None and turn_timeout < threading.TIMEOUT_MAX:
            timer = threading.Timer(turn_timeout, on_timeout)
            timer.daemon = True
            self._timer = timer
            timer.start()

    def wake(self) -> None:
        """Wake every thread waiting on ``cv``."""
        with self.cv:
            self.cv.notify_all()

    def guarded(self, fn: Callable[[], T]) -> Callable[[], T]:
        """``fn`` run with this turn's interrupter active on the calling thread, so a
        stop interrupts a connect or a read it blocks in."""
        interrupter = self.interrupter

        def call() -> T:
            previous = THREAD.__dict__.get("interrupter")
            THREAD.interrupter = interrupter
            try:
                return fn()
            finally:
                THREAD.interrupter = previous

        return call

    def request_stop(self, reason: StopReason) -> bool:
        """Record the stop, interrupt blocked reads, wake every wait; False when a
        stop was requested already."""
        if self.stop is not None:
            return False
        self.stop = reason
        self.interrupter.fire()
        with self.cv:
            self.cv.notify_all()
        return True

    def remaining(self) -> float | None:
        """Seconds left until the ``next(timeout)`` deadline (None: no deadline)."""
        deadline = self.deadline
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def offload(
        self,
        fn: Callable[[], Any],
        then: Callable[[Op[Any]], None],
        release: Callable[[Any], None] | None = None,
        *,
        detached: bool = False,
    ) -> None:
        """Run ``fn`` and hand its op to ``then``: inline without a deadline, else on
        the worker. ``release`` frees the value of an op the turn abandoned.
        ``detached`` runs it on the worker in any case, for a call that nothing
        interrupts (a hook): a stop then ends the wait for it.

        Raises:
            NotYet: the deadline passed first (``resume`` picks the op up later).
        """
        op: Op[Any] = Op(fn, self.cv)
        if self.deadline is None and not detached:
            op.run()
            then(op)
            return
        worker = self.workers.worker
        if worker is None:
            worker = self.workers.worker = Worker(self.interrupter)
        self.op, self._then, self._release = worker.submit(op), then, release
        self.resume()

    def resume(self) -> None:
        """Wait for the pending op (until the deadline or a stop) and run its
        continuation; after a stop, return and leave the op to ``settle``."""
        op, then = self.op, self._then
        assert op is not None and then is not None
        if not op.done:
            with self.cv:
                self.cv.wait_for(
                    lambda: op.done or self.stop is not None, self.remaining()
                )
            if not op.done:
                if self.stop is not None:
                    return
                raise NotYet
        self.op = self._then = self._release = None
        then(op)

    def pause(self, until: float) -> None:
        """Sleep until ``until`` (monotonic); a stop ends the sleep early.

        Raises:
            NotYet: the ``next(timeout)`` deadline came first.
        """
        deadline = self.deadline
        end = until if deadline is None else min(until, deadline)
        with self.cv:
            self.cv.wait_for(
                lambda: self.stop is not None, max(0.0, end - time.monotonic())
            )
        if self.stop is None and time.monotonic() < until:
            raise NotYet

    def settle(self, response: Any = None) -> None:
        """Give an interrupted op 50 ms to return, then abandon it: its value and
        ``response`` (which it may still be reading) are closed when it returns."""
        op, release = self.op, self._release
        self.op = self._then = self._release = None
        if op is None:
            _close(response)
            return
        if not op.done:  # at most 50 ms, and never past the next(timeout) deadline
            grace = (
                0.05 if self.deadline is None else min(0.05, self.remaining() or 0.0)
            )
            with self.cv:
                self.cv.wait_for(lambda: op.done, grace)

        def cleanup(done: Op[Any]) -> None:
            if release is not None and done.error is None:
                release(done.value)
            _close(response)

        op.abandon(cleanup)

    def end(self) -> None:
        """The turn ended: stop the timer and let the worker thread finish."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self.workers.stop()


class WorkerSlot:
    """Where a ``TurnControl`` keeps its worker: it refers to nothing of the turn, so
    a ``weakref.finalize`` of the stream may hold it without keeping the stream
    alive."""

    __slots__ = ("worker",)

    def __init__(self) -> None:
        self.worker: Worker | None = None

    def stop(self) -> None:
        """Let the worker thread finish (once the op it runs returns)."""
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.stop()


def abandoned(interrupter: Interrupter, workers: WorkerSlot) -> None:
    """A stream was freed before its turn ended (no ``close()``): interrupt the read
    its worker is blocked in and let the worker thread end, so neither the thread
    nor the connection outlives the stream.

    The collector that freed the stream may run this on any thread, the worker
    itself among them while it holds the interrupter's lock: the stop is made on a
    thread of its own, which waits for that lock as any other thread does."""
    if workers.worker is None:
        return
    try:
        threading.Thread(
            target=_stop_abandoned, args=(interrupter, workers), daemon=True
        ).start()
    except RuntimeError:  # the interpreter is shutting down: no new threads
        _stop_abandoned(interrupter, workers)


def _stop_abandoned(interrupter: Interrupter, workers: WorkerSlot) -> None:
    interrupter.fire()
    workers.stop()


def _close(response: Any) -> None:
    """Close a response; a failure to close it is not the turn's failure."""
    if response is not None:
        with contextlib.suppress(Exception):
            response.close()

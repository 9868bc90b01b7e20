"""``Stream``: the driver of one agent turn, pulled one event per ``next()``.

The phase machine it drives, with its rules and its table of moves, is
``navi_core._turn.machine``; this file holds what the host calls: ``next()`` (the
core's ``next_event``, which hands out a queued event or reads the open response
without a frame of this file), ``_advance`` (runs the turn's steps until one queues
an event), ``cancel()``, ``close()`` and the context manager.

The close handshake lives in the turn's ``Reader`` (``navi_core.core``): the thread
inside ``next()`` sets ``reader.driver`` before it looks at ``reader.closing``; a
``close()`` from another thread sets ``reader.closing`` before it looks at
``reader.driver``, and waits while it is set. A ``close()`` from inside ``next()`` (a
hook) sets ``reader.close_pending``, and the stream is closed when that thread leaves.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from threading import get_ident
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._ids import publish
from ._turn.control import NotYet, TurnControl, abandoned
from ._turn.extras import TurnExtras
from ._turn.machine import TRANSITIONS, Phase, Trigger, Turn, TurnHost
from .conversation import Message, Usage
from .core import Reader, next_event, next_or_stop
from .errors import Cancelled, ProviderError
from .events import (
    PENDING,
    AnyEvent,
    Cost,
    ModelInfo,
    Steered,
    StopReason,
    TurnComplete,
)
from .output import OutputCheck, OutputSpec
from .tools._answers import deliver

__all__ = ["TRANSITIONS", "Phase", "Stream", "Trigger", "TurnHost"]

#: the type of the turn's structured output (``run(..., output=T)``)
if TYPE_CHECKING:  # bare ``Stream`` / ``TurnComplete`` mean ``[Any]``
    from typing_extensions import TypeVar as _TypeVar

    T = _TypeVar("T", default=Any)
else:
    T = TypeVar("T")


class Stream(Generic[T]):
    """One turn, advanced one event per ``next()``; ``result()`` runs it to its end.

    Obtain it from ``Agent.run`` or ``Agent.resume``. It is an iterator and a context
    manager; ``close()`` releases the open response and persists what was committed.
    Drive it from one thread at a time; ``cancel()`` and ``close()`` may be called from
    any thread, also while another thread is inside ``next()``.
    """

    def __init__(
        self,
        host: TurnHost,
        *,
        resume: bool = False,
        rng: random.Random | None = None,
        steered: Sequence[Message] = (),
        output: OutputSpec | None = None,
        extras: TurnExtras | None = None,
    ) -> None:
        x = extras if extras is not None else TurnExtras(host.session)
        # typed as the union so next() returns it unchanged; providers and dispatch
        # push into it through their ``deque[Event]`` / ``list[Event]`` signatures
        self._queue: deque[AnyEvent] = deque(Steered(m) for m in steered)
        self._observers = x.observers
        self._ctl = ctl = TurnControl()
        # dropped mid-turn without close(): the worker thread of next(timeout) and
        # the read it is blocked in must not outlive the stream
        weakref.finalize(self, abandoned, ctl.interrupter, ctl.workers)
        # next()'s hot path and the close handshake; armed while a response streams
        self._reader = Reader(self._queue, ctl, self._observers, self._read_ended)
        self._model: str | None = None  # the last ModelInfo handed out
        self._closed = False
        self._close_lock = threading.Lock()
        self._turn = Turn(
            host,
            x,
            OutputCheck(output),  # run(..., output=T); inert without T
            self._queue,
            ctl,
            self._reader,
            rng=rng,
            resume=resume,
        )

    # -- public API -----------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """The current phase."""
        return self._turn.phase

    @property
    def usage(self) -> Usage:
        """What the turn has used so far, counted as ``TurnComplete.usage`` counts
        it: its responses, its plan and summary requests, its sub-agents' turns; also
        after it failed (what it used up to the failure)."""
        turn = self._turn
        return turn.x.total(turn.usage)

    @property
    def cost(self) -> Cost | None:
        """What ``usage`` cost, priced as ``TurnComplete.cost`` is (each sub-agent's
        turn at its own model's price); None when no price is known. Once the turn
        completed, its ``TurnComplete.cost``."""
        turn = self._turn
        if turn.complete is not None:
            return turn.complete.cost
        pricing = turn.pricing()
        return None if pricing is None else turn.x.cost_of(turn.usage, pricing)

    @property
    def turn_id(self) -> str:
        """This turn's id (also in ``TurnComplete.turn_id``)."""
        return self._turn.x.turn_id

    @property
    def running(self) -> bool:
        """True until the turn ended (DONE, FAILED) or the stream was closed."""
        return not self._closed and self._turn.step is not None

    if TYPE_CHECKING:

        def next(self, timeout: float | None = None) -> AnyEvent | None: ...
        def __next__(self) -> AnyEvent: ...
    else:  # the core's: a queued event is handed out there, the rest runs _advance
        next = next_event
        __next__ = next_or_stop

    def result(self, timeout: float | None = None) -> TurnComplete[T]:
        """Drive the turn to its end and return its ``TurnComplete`` (also when it
        was already handed out by ``next()``); the events before it are dropped.

        ``timeout`` bounds the whole wait, in seconds. When it runs out the turn is
        left as it is, running: call ``result()`` again to go on waiting, or
        ``cancel()`` it.

        Raises:
            TimeoutError: ``timeout`` seconds passed before the turn ended.
            Exception: what the turn raised (as ``next()`` raises it).
        """
        if timeout is not None and timeout != timeout:
            raise ValueError("result(timeout=...) is NaN: give seconds, or None")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                ev = self.next()
            else:  # polled at least once, so a turn that has ended is returned
                ev = self.next(max(0.0, deadline - time.monotonic()))
                if ev is PENDING and time.monotonic() >= deadline:
                    raise TimeoutError(f"the turn did not end within {timeout} s")
            if ev is None or type(ev) is TurnComplete:
                break
        done = self._turn.complete
        assert done is not None  # next() returns None only after TurnComplete
        return done

    def _advance(self, timeout: float | None) -> AnyEvent | None:
        """``next()`` past the queue (args, returns and raises: ``core.next_event``):
        run the turn's steps until it has an event."""
        if timeout is not None and not timeout < threading.TIMEOUT_MAX:
            if timeout != timeout:
                raise ValueError("next(timeout=...) is NaN: give seconds, or None")
            # as good as no limit (math.inf): block as without a timeout, rather
            # than fail the turn with the OverflowError of a wait that long
            timeout = None
        queue = self._queue
        turn = self._turn
        reader = self._reader
        ctl = self._ctl
        while True:
            if queue:
                ev = queue.popleft()
                if type(ev) is ModelInfo:
                    if ev.model == self._model:
                        continue
                    self._model = ev.model
                if self._observers.subscriptions:
                    self._observers.publish(turn.x.turn_id, ev)
                return ev
            if turn.step is None:
                if turn.phase is Phase.FAILED:
                    turn.raise_failure()
                return None
            if not reader.enter():  # a close() on another thread: stand back
                self._wait_closed()
                continue
            try:
                ctl.deadline = None if timeout is None else time.monotonic() + timeout
                if not turn.timed:
                    turn.start_clock()
                while not queue and (step := turn.step) is not None:
                    try:
                        if ctl.stop is not None:
                            turn.stop_turn(ctl.stop)
                        elif ctl.op is not None:
                            ctl.resume()
                        else:
                            step(turn)
                    except NotYet:
                        return PENDING
                    except ProviderError as exc:
                        if ctl.stop is None:  # else: the read a stop interrupted
                            turn.fail(exc)
                    except BaseException as exc:
                        turn.fail(exc)
            finally:
                reader.leave(self)

    def _read_ended(self, response: object, exc: BaseException | None) -> None:
        """The ``Reader``'s ``on_ended``: a read completed or failed the response."""
        self._turn.read_ended(response, exc)  # type: ignore[arg-type]

    def answer(self, request_id: str, content: Mapping[str, Any] | None) -> None:
        """Answer the ``Elicitation`` with ``request_id`` (any thread): ``content``
        for the call that asked, or ``None`` to decline.

        Raises:
            KeyError: no call waits for that request (answered, or its call ended).
        """
        if not deliver(request_id, content):
            raise KeyError(f"no tool call waits for an answer to {request_id!r}")

    def cancel(self) -> None:
        """End the turn with ``StopReason.CANCELLED`` as soon as possible (any thread).

        A blocked read is interrupted; the driving thread ends the turn within
        milliseconds. What finished stays committed. A no-op once the turn ended.
        """
        self._turn.request_stop(StopReason.CANCELLED)

    def close(self) -> None:
        """Release the response and persist what the turn committed (idempotent).

        Closing a turn that has not ended ends it as ``cancel()`` does: the answer
        streamed so far and the results of finished calls are kept, and ``next()``
        returns ``TurnComplete(CANCELLED)`` (then None). From another thread, while
        a thread is inside ``next()``: that thread's ``next()`` returns it, within
        milliseconds, then the stream is closed.
        """
        if self._closed:
            return
        reader = self._reader
        if reader.driver == get_ident():  # from a hook inside next() or a read
            reader.close_pending = True  # closed when that thread leaves
            return
        reader.closing = True
        turn = self._turn
        turn.request_stop(StopReason.CANCELLED)
        ctl = self._ctl
        with ctl.cv:  # another thread inside next(): it returns within milliseconds
            while reader.driver:
                ctl.cv.wait(0.05)
        with self._close_lock:
            if self._closed:
                return
            try:
                if turn.step is not None:
                    # no thread drives it now (one that did stood back): end it here
                    # as a cancel, so next() returns TurnComplete(CANCELLED) and the
                    # answer so far is kept
                    self._stop_for(turn)
                # what a failure left running is stored, the turn's resources freed
                turn.abandon(Cancelled("the stream was closed before the turn ended"))
            finally:
                self._closed = True
                ctl.wake()

    def _stop_for(self, turn: Turn) -> None:
        """End ``turn`` for the stop asked for, on the closing thread, as ``_advance``
        would on the driving one."""
        try:
            turn.stop_turn(self._ctl.stop or StopReason.CANCELLED)
        except BaseException as exc:
            turn.fail(exc)

    def _wait_closed(self) -> None:
        """Wait for a close() another thread is running to finish."""
        with self._ctl.cv:
            while not self._closed:
                self._ctl.cv.wait(0.05)

    def __iter__(self) -> Iterator[AnyEvent]:
        return self

    def __enter__(self) -> Stream[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        # The error in flight matters more than a failure to persist on the way out;
        # unsaved messages stay buffered in the session for its next flush.
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        turn = self._turn
        return (
            f"<Stream phase={turn.phase.name} iterations={turn.iterations} "
            f"tool_calls={turn.tool_calls} queued={len(self._queue)}>"
        )


publish(globals())

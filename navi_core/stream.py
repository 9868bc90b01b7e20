"""``Stream``: one agent turn as an explicit, pull-driven phase machine.

Rules of this file:

* Only ``_move(trigger)`` changes the phase, to ``TRANSITIONS[(phase, trigger)]``; a
  pair missing from the table is a bug and raises. Providers, tools and stores report
  through return values and queued events; they never touch the phase.
* ``next()`` returns queued events first; when the queue is empty it runs the handler
  of the current phase until that handler has queued something (or the turn ended).
  ``next(timeout)`` runs every call that may block (an open, a chunk read, a summary
  request) off this thread and waits for it only until the deadline, then returns
  ``PENDING``; its continuation runs in a later ``next()`` (``TurnControl.offload``).
  Without a timeout those calls run inline, as fast as before.
* ``cancel()``, ``close()`` from another thread and ``Config.turn_timeout`` only
  *request* the stop (``TurnControl.stop``) and interrupt blocked reads; the driving
  thread then ends the turn in ``_stop_turn``: what finished stays committed, a running
  tool batch commits the results it has, a final answer already committed ends as
  END_TURN.
* The conversation changes only when a response completes (``MessageComplete``) or a
  tool batch completes (``ToolDispatchComplete``), through ``Session.commit``, which
  persists at once. A failure mid-response therefore re-opens from scratch without
  doubling anything.
* Any exception in a handler moves the stream to FAILED first; only then is the open
  response released (a failure to release cannot hide the error). Events queued before
  it are still handed out; then the error is raised once; afterwards every ``next()``
  raises ``StreamPoisoned`` whose ``__cause__`` is that error.
* The stream reaches its agent only through ``TurnHost`` (declared below) and the
  conversation only through the public methods of ``Session``.

State beside the phase, each in one field:

* ``_request`` (``RequestState``): the request being attempted — attempt number, when
  the next open may start, whether its compaction check ran, whether an overflow was
  compacted. Replaced whole when a response completes.
* ``_compaction`` (``CompactionJob | None``): a compaction announced with
  ``CompactionStarted`` and not yet run — its plan, the summary attempt and the retry
  notice to return after it.
* ``_dispatch`` (``Dispatch | None``): the tool batch running in AFTER_RESPONSE.
* ``_response``: the open provider response, in STREAMING only; ``_reader``
  (``core.Reader``) reads it in ``next()``'s hot path, with no frame of this file.
* ``_ctl`` (``TurnControl``): the ``next(timeout)`` deadline, the requested stop, and
  a blocking call waiting off-thread with its continuation.
* ``_driver`` / ``_closing``: the handshake with a ``close()`` from another thread —
  the driver marks itself before it looks at ``_closing``, the closer sets
  ``_closing`` before it looks at ``_driver`` and waits while it is set. A read of
  the hot path marks ``_reader.driver`` and looks at ``_reader.closing`` instead;
  the closer sets both after ``_closing``, and a new reader takes ``_closing``.
* ``_x`` (``TurnExtras``): hooks, observers, planning, a resumed or held approval
  batch and the usage of sub-agents; called at publish, open, dispatch and finish.

TURN_START runs these sub-steps in order; the first one that queues an event or moves
the phase ends the step:

1. take the config snapshot (``TurnHost.config``);
2. the iteration limit reached: finished (``StopReason.MAX_ITERATIONS``);
3. wait until ``_request.retry_at`` (a ``cancel()`` ends the wait);
4. run the announced compaction, if any (``Compacted``, or a retry notice);
5. apply the queued steering messages (``Steered``);
6. once per request, the threshold check: announce a compaction (``CompactionStarted``);
7. once per turn, the planning request of ``Config.planning`` (its ``MessageComplete``);
8. open the provider response: opened, or a provider error (retry notice, overflow
   compaction, or failed).

The legal moves are ``TRANSITIONS`` in ``navi_core._turn.phases`` (its docstring draws them).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from threading import get_ident
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Protocol

from ._turn.control import NotYet, TurnControl
from ._turn.extras import TurnExtras
from ._turn.offload import Op
from ._turn.phases import (
    TRANSITIONS,
    CompactionJob,
    Phase,
    RequestState,
    Trigger,
    retry_notice,
)
from ._turn.steering import SteeringQueue
from .compaction._compaction import (
    PendingCompaction,
    apply_pending,
    plan_compaction,
    summarise_pending,
)
from .config import Config
from .conversation import Message, ToolUse, Usage
from .core import Reader, next_event, next_or_stop
from .errors import (
    Cancelled,
    ContextOverflow,
    EmptyAssistantResponse,
    ProviderError,
    StreamPoisoned,
)
from .events import (
    PENDING,
    AnyEvent,
    MessageComplete,
    ModelInfo,
    ProviderRetry,
    ResponseDiscarded,
    Steered,
    StopReason,
    ToolDispatchComplete,
    ToolDispatchStart,
)
from .output import OutputCheck, OutputSpec
from .providers.base import Provider, ProviderRequest, ProviderStream
from .session import Session
from .tools._dispatch import Dispatch, cancelled_before_start, describe
from .tools._tool import ToolSpec

__all__ = ["TRANSITIONS", "Phase", "Stream", "Trigger", "TurnHost"]


class TurnHost(Protocol):
    """What a ``Stream`` needs from its agent; ``Agent`` provides it."""

    @property
    def config(self) -> Config:
        """The current config snapshot."""
        ...

    @property
    def provider(self) -> Provider:
        """The provider responses are opened on."""
        ...

    @property
    def session(self) -> Session:
        """The conversation and its store."""
        ...

    @property
    def steering(self) -> SteeringQueue:
        """User messages waiting to join the turn."""
        ...

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The tool declarations sent to the model."""
        ...

    def start_tools(self, uses: Sequence[ToolUse], config: Config) -> Dispatch:
        """Start running a response's tool calls."""
        ...

    def turn_ended(self, stream: Stream) -> None:
        """``stream`` reached DONE or FAILED: the host lets go of it (breaks a cycle)."""
        ...


class Stream:
    """One turn, advanced one event per ``next()``.

    Obtain it from ``Agent.run`` or ``Agent.resume``. It is an iterator and a context
    manager; ``close()`` releases the open response and persists what was committed.
    Drive it from one thread at a time; ``cancel()`` and ``close()`` may be called from
    any thread, also while another thread is inside ``next()``.

    ``next()`` is the core's ``next_event``: it hands out an event already queued or
    reads the open response (``_reader``); ``_advance``, the phase machine, does the rest.
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
        self._host = host
        self._output = OutputCheck(output)  # run(..., output=T); inert without T
        self._x = extras if extras is not None else TurnExtras(host.session)
        # typed as the union so next() returns it unchanged; providers and dispatch
        # push into it through their ``deque[Event]`` / ``list[Event]`` signatures
        self._queue: deque[AnyEvent] = deque(Steered(m) for m in steered)
        self._observers = self._x.observers
        self._phase = Phase.TURN_START
        # the live phase's handler, None once terminal (a function: a bound method is a cycle)
        self._step: Callable[[Stream], None] | None = self._HANDLERS[Phase.TURN_START]
        self._reader: Reader | None = None  # in STREAMING: next()'s hot path
        self._config: Config = host.config
        self._rng = rng  # made at the first retry: seeding one reads the OS's entropy
        self._request = RequestState()
        self._compaction: CompactionJob | None = None
        self._response: ProviderStream | None = None
        self._dispatch: Dispatch | None = None
        self._last: Message | None = None
        self._iterations = 0
        self._tool_calls = 0
        self._usage = Usage()
        self._model: str | None = None
        self._error: BaseException | None = None
        self._error_raised = False
        self._closed = False
        self._turn_id = self._x.turn_id
        self._ctl = TurnControl()
        self._timed = False
        self._driver: int | None = None  # the thread inside next(), if any
        self._close_pending = False
        self._closing = False
        self._close_lock = threading.Lock()
        if resume:
            last = host.session.last_dialogue_message()
            if self._x.resume_plan is not None:  # a held batch: run what was decided
                self._last = last
                if self._x.hold_again():
                    self._finish(StopReason.APPROVAL_REQUIRED)
                else:
                    self._move(Trigger.APPROVED)
            elif last is None or last.role == "assistant":
                # the last turn finished: nothing to answer
                self._last = last
                self._finish(StopReason.END_TURN)

    # -- public API -----------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """The current phase."""
        return self._phase

    @property
    def usage(self) -> Usage:
        """Usage summed over the responses completed so far in this turn."""
        return self._usage

    @property
    def turn_id(self) -> str:
        """This turn's id (also in ``TurnComplete.turn_id``)."""
        return self._turn_id

    @property
    def running(self) -> bool:
        """True until the turn ended (DONE, FAILED) or the stream was closed."""
        return not self._closed and self._step is not None

    if TYPE_CHECKING:

        def next(self, timeout: float | None = None) -> AnyEvent | None: ...
        def __next__(self) -> AnyEvent: ...
    else:  # the core's: a queued event is handed out there, the rest runs _advance
        next = next_event
        __next__ = next_or_stop

    def _advance(self, timeout: float | None) -> AnyEvent | None:
        """``next()`` past the queue (args, returns and raises: ``core.next_event``):
        run the phase machine until it has an event."""
        queue = self._queue
        while True:
            if queue:
                ev = queue.popleft()
                if type(ev) is ModelInfo:
                    if ev.model == self._model:
                        continue
                    self._model = ev.model
                if self._observers.subscriptions:
                    self._observers.publish(self._turn_id, ev)
                return ev
            if self._step is None:
                if self._phase is Phase.FAILED:
                    self._raise_failure()
                return None
            ctl = self._ctl
            # run steps until one queues an event (or the turn ends); _driver tells a
            # close() on another thread to wait, _closing tells this one to stand back
            self._driver = get_ident()
            if self._closing:
                self._driver = None
                self._wait_closed()
                continue
            try:
                ctl.deadline = None if timeout is None else time.monotonic() + timeout
                if not self._timed:
                    self._start_clock()
                while not queue and (step := self._step) is not None:
                    try:
                        if ctl.stop is not None:
                            self._stop_turn(ctl.stop)
                        elif ctl.op is not None:
                            ctl.resume()
                        else:
                            step(self)
                    except NotYet:
                        return PENDING
                    except ProviderError as exc:
                        if ctl.stop is None:  # else: the read a stop interrupted
                            self._fail(exc)
                    except BaseException as exc:
                        self._fail(exc)
            finally:
                self._let_go()

    def _let_go(self) -> None:
        """The driving thread leaves ``next()``: wake a close() that waits for it, and
        run one a hook asked for meanwhile."""
        self._driver = None
        if self._closing:
            self._ctl.wake()
        if self._close_pending:
            self._close_pending = False
            self.close()

    def cancel(self) -> None:
        """End the turn with ``StopReason.CANCELLED`` as soon as possible (any thread).

        A blocked read is interrupted; the driving thread ends the turn within
        milliseconds. What finished stays committed. A no-op once the turn ended.
        """
        self._request_stop(StopReason.CANCELLED)

    def close(self) -> None:
        """Release the response and persist what the turn committed (idempotent).

        Closing a turn that has not ended fails it with ``Cancelled``. From another
        thread, while a thread is inside ``next()``: that thread's turn is stopped
        first — its ``next()`` returns ``TurnComplete(CANCELLED)`` or raises
        ``Cancelled`` within milliseconds — then the stream is closed.
        """
        if self._closed:
            return
        if self._driver == get_ident():  # from a hook inside next()
            self._close_pending = True  # closed when the step returns
            return
        if (reader := self._reader) is not None and reader.driver == get_ident():
            reader.close_pending = True  # the same, inside a read of the hot path
            return
        self._closing = True
        if (reader := self._reader) is not None:  # read again, now _closing is set
            reader.closing = True
        self._request_stop(StopReason.CANCELLED)
        ctl = self._ctl
        with ctl.cv:  # another thread inside next(): it returns within milliseconds
            while self._driver is not None or (reader is not None and reader.driver):
                ctl.cv.wait(0.05)
        with self._close_lock:
            if self._closed:
                return
            try:
                if self._step is not None:
                    # a thread calling next() later learns why: Cancelled, then poisoned
                    self._error = Cancelled(
                        "the stream was closed before the turn ended"
                    )
                    self._move(Trigger.FAILED)
                self._settle()
                self._commit_abandoned_batch()
                self._keep_finished_results()
                ctl.end()
                self._host.session.flush()
            finally:
                self._closed = True
                ctl.wake()

    def _wait_closed(self) -> None:
        """Wait for a close() another thread is running to finish."""
        with self._ctl.cv:
            while not self._closed:
                self._ctl.cv.wait(0.05)

    def __iter__(self) -> Iterator[AnyEvent]:
        return self

    def __enter__(self) -> Stream:
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
        return (
            f"<Stream phase={self._phase.name} iterations={self._iterations} "
            f"tool_calls={self._tool_calls} queued={len(self._queue)}>"
        )

    # -- driving ----------------------------------------------------------------------

    def _start_clock(self) -> None:
        """The turn's clock starts at its first ``next()`` (``Config.turn_timeout``)."""
        self._timed = True
        if self._config.turn_timeout is not None:
            self._ctl.start_timer(self._config.turn_timeout, self._time_out)

    def _request_stop(self, reason: StopReason) -> None:
        """Ask the driving thread to end the turn; wake it wherever it waits."""
        if self._step is not None and self._ctl.request_stop(reason):
            dispatch = self._dispatch
            if dispatch is not None:
                dispatch.wake()

    def _time_out(self) -> None:
        self._request_stop(StopReason.TIMEOUT)

    def _settle(self) -> None:
        """Abandon a pending off-thread call and close the response (it may be the
        call's to close, when it returns)."""
        response, self._response = self._response, None
        self._ctl.settle(response)

    # -- phase bookkeeping ------------------------------------------------------------

    def _move(self, trigger: Trigger) -> None:
        to = TRANSITIONS.get((self._phase, trigger))
        if to is None:
            raise RuntimeError(f"no move from {self._phase.name} on {trigger.value!r}")
        self._phase = to
        self._step = self._HANDLERS.get(to)
        self._reader = None
        if to is Phase.STREAMING:  # _closing is read once it is set: see close()
            self._reader = reader = Reader(
                self._queue,
                self._ctl,
                self._observers,
                self._response,
                self._read_ended,
            )
            reader.closing = self._closing
        if self._step is None:  # the turn ended: later steering waits for the next
            self._host.steering.end_turn()
            self._ctl.end()
            self._host.turn_ended(self)

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._move(Trigger.FAILED)
        self._settle()
        self._keep_finished_results()
        # persist what was committed; a store failure here must not hide ``exc``
        with contextlib.suppress(Exception):
            self._host.session.flush()

    def _commit_abandoned_batch(self) -> None:
        """Store a running batch as a cancel would (finished calls keep their results);
        when the store refuses, the session keeps the results for the next turn."""
        dispatch = self._dispatch
        if dispatch is None:
            return
        dispatch.cancel()
        results = dispatch.message() if dispatch.done else dispatch.cancelled_message()
        with contextlib.suppress(Exception):
            self._commit(results)
            self._dispatch = None

    def _keep_finished_results(self) -> None:
        """Hand the results of calls that finished to the session when a batch is
        abandoned: it answers the abandoned calls with them before the next turn."""
        dispatch, self._dispatch = self._dispatch, None
        if dispatch is not None:
            self._queue.extend(dispatch.cancel())  # type: ignore[arg-type]
            self._host.session.keep_results(dispatch.finished_results())

    def _raise_failure(self) -> None:
        err = self._error
        assert err is not None
        if not self._error_raised:
            self._error_raised = True
            raise err
        raise StreamPoisoned(f"the turn failed earlier: {describe(err)}") from err

    def _finish(self, reason: StopReason) -> None:
        self._release_response()
        response = self._last.text if self._last is not None else ""
        counts = (self._iterations, self._tool_calls, self._usage)
        done = self._x.complete(
            reason, response, *counts, self._turn_id, self._output.value
        )
        self._queue.append(done)
        normal = reason not in (StopReason.CANCELLED, StopReason.TIMEOUT)
        self._move(Trigger.FINISHED if normal else Trigger.CANCELLED)

    def _stop_turn(self, reason: StopReason) -> None:
        """End the turn for a cancel or the turn timeout, keeping what finished."""
        self._settle()
        dispatch, self._dispatch = self._dispatch, None
        if dispatch is not None:
            self._queue.extend(dispatch.cancel())  # type: ignore[arg-type]
            results = (
                dispatch.message() if dispatch.done else dispatch.cancelled_message()
            )
            self._tool_calls += len(results.content)
            self._commit(results)
            self._queue.append(ToolDispatchComplete(results))
        elif self._phase is Phase.AFTER_RESPONSE and self._last is not None:
            message = self._last
            if message.tool_uses:  # the calls never started: answer them
                results = cancelled_before_start(message.tool_uses, message.wire)
                self._tool_calls += len(results.content)
                self._commit(results)
            elif message.content:  # the final answer is committed: a normal end
                max_tokens = message.stop_reason == "max_tokens"
                reason = StopReason.MAX_TOKENS if max_tokens else StopReason.END_TURN
        self._finish(reason)

    def _release_response(self) -> None:
        """Close the open response; a failure to close it is not the turn's failure."""
        response, self._response = self._response, None
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()

    def _commit(self, message: Message) -> None:
        self._host.session.commit(message, self._host.provider.wire)

    # -- handlers ---------------------------------------------------------------------

    def _turn_start(self) -> None:
        """The sub-steps of TURN_START, in the order the module docstring lists."""
        host = self._host
        self._config = config = host.config
        if self._iterations >= config.max_iterations:
            self._finish(StopReason.MAX_ITERATIONS)
            return
        retry_at = self._request.retry_at
        if retry_at > time.monotonic():
            self._ctl.pause(retry_at)
            if self._ctl.stop is not None:
                return  # next() ends the turn
        if self._compaction is not None:
            self._compact(config, self._compaction)
            return
        for message in host.steering.take():
            self._commit(message)
            self._queue.append(Steered(message))
        if not self._request.checked:
            self._request = self._request.checked_now()
            pending = (  # no threshold without a context window: skip the sizing
                plan_compaction(
                    host.session, config, host.tool_specs(), reason="threshold"
                )
                if config.compaction.context_window is not None
                else None
            )
            if pending is not None:
                self._announce(pending)
                return
        if self._queue:
            return  # hand out the Steered events before the request opens
        if (plan := self._x.take_plan()) is not None:  # Config.planning, once
            planned = self._x.planned
            self._ctl.offload(
                self._ctl.guarded(plan.run),
                lambda op: self._queue.extend(planned(plan, op)),
            )
            return
        session = host.session
        request = ProviderRequest(
            session.conversation.history(),
            session.conversation.system_prompt(),
            host.tool_specs(),
            config,
            self._output.spec,
        )
        provider = host.provider
        opening = self._ctl.guarded(lambda: provider.open(request))
        self._ctl.offload(opening, self._opened, _close)

    def _opened(self, op: Op[ProviderStream]) -> None:
        try:
            response = op.result()
        except ProviderError as exc:
            if self._ctl.stop is None:
                self._provider_failed(exc)
            return
        if self._ctl.stop is not None:  # opened as the cancel came: drop it
            with contextlib.suppress(Exception):
                response.close()
            return
        hold = getattr(response, "hold_with", None)  # an HTTP response: a stop shuts
        if callable(hold):  # its socket down while the response is open
            hold(self._ctl.interrupter)
        self._response = self._x.watch(response, self._config)
        self._move(Trigger.OPENED)

    def _streaming(self) -> None:
        """Pump the response; commit the message once it is complete."""
        response, reader = self._response, self._reader
        assert response is not None and reader is not None
        if self._ctl.deadline is not None:
            self._ctl.offload(lambda: _read_some(response), self._streamed)
            return
        try:
            done = reader.pump()
        except ProviderError as exc:
            if self._ctl.stop is None:  # else: the read a stop interrupted
                self._stream_failed(response, exc)
            return
        if done:
            self._completed()

    def _read_ended(self, response: ProviderStream, exc: BaseException | None) -> None:
        """A read of ``next()``'s hot path completed the response (``exc`` None) or
        failed: handled as ``_streaming`` and ``_advance`` handle them, with ``_driver``
        set (the phase moves, and the reader a close() waits on goes with it)."""
        self._driver = get_ident()
        try:
            if exc is None:
                self._completed()
            elif not isinstance(exc, ProviderError):
                self._fail(exc)
            elif self._ctl.stop is None:  # else: the read a stop interrupted
                self._stream_failed(response, exc)
        except ProviderError as err:
            if self._ctl.stop is None:
                self._fail(err)
        except BaseException as err:
            self._fail(err)
        finally:
            self._let_go()

    def _streamed(
        self, op: Op[tuple[deque[AnyEvent], bool, ProviderError | None]]
    ) -> None:
        """The continuation of a chunk read on the worker."""
        response = self._response
        assert response is not None
        events, done, error = op.result()
        self._queue.extend(events)
        if error is not None:
            if self._ctl.stop is None:
                self._stream_failed(response, error)
        elif done:
            self._completed()

    def _stream_failed(self, response: ProviderStream, exc: ProviderError) -> None:
        """A response failed midway: say what of it to discard, then retry or fail."""
        shown = getattr(response, "shown", None)  # DeltaStream has it
        self._release_response()
        self._move(Trigger.STREAM_FAILED)
        counts = shown() if callable(shown) else (0, 0, 0)
        if any(counts):
            self._queue.append(ResponseDiscarded(self._request.attempt, *counts))
        self._provider_failed(exc)

    def _completed(self) -> None:
        """The response's ``MessageComplete`` is queued: commit its message."""
        self._release_response()
        queue = self._queue
        complete = queue[-1]
        assert isinstance(complete, MessageComplete)
        message = complete.message
        self._last = message
        self._request = RequestState()
        self._iterations += 1
        self._usage = self._usage + complete.usage
        if not message.content:
            queue.pop()
        else:
            self._commit(message)
        self._move(Trigger.COMPLETED)

    def _after_response(self) -> None:
        """End the turn, or dispatch the response's tool calls and report their progress."""
        message = self._last
        assert message is not None
        if not message.content:
            raise EmptyAssistantResponse(
                "the model completed a response with no text, thinking or tool call"
            )
        dispatch = self._dispatch
        retry = self._output.review(message, self._commit) if dispatch is None else None
        if retry is not None:  # run(..., output=T): a final answer, valid or not
            self._move(Trigger.STEERED) if retry else self._finish(StopReason.END_TURN)
            return
        if dispatch is None:
            uses = message.tool_uses
            if not uses:
                if self._host.steering.finish_unless_waiting():
                    self._move(Trigger.STEERED)  # answer what arrived meanwhile
                    return
                max_tokens = message.stop_reason == "max_tokens"
                self._finish(
                    StopReason.MAX_TOKENS if max_tokens else StopReason.END_TURN
                )
                return
            self._queue.append(ToolDispatchStart(len(uses)))
            self._dispatch = dispatch = self._host.start_tools(uses, self._config)
            self._queue.extend(self._x.polled(dispatch.begin(self._ctl.remaining())))  # type: ignore[arg-type]
            return
        try:
            self._queue.extend(self._x.polled(dispatch.poll(self._ctl.remaining())))  # type: ignore[arg-type]
        except TimeoutError:
            raise NotYet from None
        if dispatch.done:
            self._dispatch = None
            if self._x.held(dispatch):  # calls wait for approval: saved, turn ends
                self._finish(StopReason.APPROVAL_REQUIRED)
                return
            results = dispatch.message()
            self._tool_calls += len(results.content)
            self._commit(results)
            self._queue.append(ToolDispatchComplete(results))
            self._move(Trigger.TOOLS_DONE)

    # -- compaction and failures ------------------------------------------------------

    def _announce(
        self, pending: PendingCompaction, notice: ProviderRetry | None = None
    ) -> None:
        """Queue ``CompactionStarted``; the next TURN_START step runs the compaction."""
        self._compaction = CompactionJob(pending, 1, notice)
        self._queue.append(pending.started)

    def _compact(self, config: Config, job: CompactionJob) -> None:
        """Run an announced compaction; its summary request is retried like any other.

        When the summary keeps failing, a threshold compaction is skipped (the request
        still fits) and an overflow compaction fails the turn.
        """
        provider = self._host.provider
        self._ctl.offload(
            self._ctl.guarded(lambda: summarise_pending(provider, config, job.pending)),
            lambda op: self._summarised(config, job, op),
        )

    def _summarised(
        self, config: Config, job: CompactionJob, op: Op[tuple[str, int]]
    ) -> None:
        """The continuation of a summary request: install it, or retry, skip or fail."""
        host = self._host
        try:
            compacted = apply_pending(
                host.session, host.provider, job.pending, op.result()
            )
        except ProviderError as exc:
            if self._ctl.stop is not None:
                return
            if exc.retryable and job.attempt < config.retry.max_attempts:
                retry_at = self._notice_retry(exc, job.attempt, compaction=True)
                self._compaction = replace(job, attempt=job.attempt + 1)
                self._request = replace(self._request, retry_at=retry_at)
                return
            self._compaction = None
            if job.pending.started.reason == "overflow":
                raise
            self._request = self._request.checked_now()  # send it uncompacted
            return
        self._compaction = None
        self._request = self._request.checked_now()
        self._queue.append(compacted)
        if job.notice is not None:
            self._queue.append(job.notice)

    def _provider_failed(self, exc: ProviderError) -> None:
        """Compact once on overflow, back off on retryable errors, else fail the turn."""
        config = self._config
        state = self._request
        if isinstance(exc, ContextOverflow) and not state.overflow_compacted:
            if config.compaction.prompt is None:
                raise exc
            self._request = replace(state, overflow_compacted=True)
            pending = plan_compaction(
                self._host.session,
                config,
                self._host.tool_specs(),
                reason="overflow",
                force=True,
            )
            if pending is None:
                raise exc
            notice = retry_notice(exc, state.attempt, config.retry, 0, compaction=True)
            self._announce(pending, notice)
            return
        if not exc.retryable or state.attempt >= config.retry.max_attempts:
            raise exc
        retry_at = self._notice_retry(exc, state.attempt)
        self._request = replace(state, attempt=state.attempt + 1, retry_at=retry_at)

    def _notice_retry(
        self, exc: ProviderError, attempt: int, *, compaction: bool = False
    ) -> float:
        """Queue the ``ProviderRetry`` notice; return when the next attempt may start."""
        policy = self._config.retry
        if self._rng is None:
            self._rng = random.Random()
        delay = policy.delay_ms(attempt, exc.retry_after_ms, self._rng)
        self._queue.append(
            retry_notice(exc, attempt, policy, delay, compaction=compaction)
        )
        return time.monotonic() + delay / 1000.0

    #: The handler of each live phase (the terminal ones have none).
    _HANDLERS: ClassVar[Mapping[Phase, Callable[[Stream], None]]] = {
        Phase.TURN_START: _turn_start,
        Phase.STREAMING: _streaming,
        Phase.AFTER_RESPONSE: _after_response,
    }


def _read_some(
    response: ProviderStream,
) -> tuple[deque[AnyEvent], bool, ProviderError | None]:
    """Read until the response yields an event or completes (runs on the worker); a
    failure comes back with the events pushed before it, which were shown."""
    events: deque[AnyEvent] = deque()
    done = False
    try:
        while not events and not done:
            done = response.produce(events)  # type: ignore[arg-type]
    except ProviderError as exc:
        return events, False, exc
    return events, done, None


def _close(response: ProviderStream) -> None:
    """Close a response nobody will read (opened as the turn was cancelled)."""
    with contextlib.suppress(Exception):
        response.close()

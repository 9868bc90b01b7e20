"""``Stream``: one agent turn as an explicit, pull-driven phase machine.

Rules of this file:

* Only ``_move(trigger)`` changes the phase, to ``TRANSITIONS[(phase, trigger)]``; a
  pair missing from the table is a bug and raises. Providers, tools and stores report
  through return values and queued events; they never touch the phase.
* ``next()`` returns queued events first; when the queue is empty it runs the handler
  of the current phase until that handler has queued something (or the turn ended).
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
* ``_response``: the open provider response, in STREAMING only.

TURN_START runs these sub-steps in order; the first one that queues an event or moves
the phase ends the step:

1. take the config snapshot (``TurnHost.config``);
2. the iteration limit reached: finished (``StopReason.MAX_ITERATIONS``);
3. wait until ``_request.retry_at`` (a ``cancel()`` ends the wait);
4. run the announced compaction, if any (``Compacted``, or a retry notice);
5. apply the queued steering messages;
6. once per request, the threshold check: announce a compaction (``CompactionStarted``);
7. open the provider response: opened, or a provider error (retry notice, overflow
   compaction, or failed).

The legal moves are ``TRANSITIONS`` in ``navi_core.phases`` (its docstring draws them).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Final, Protocol

from .compaction import PendingCompaction, plan_compaction, run_compaction
from .config import Config
from .conversation import Message, ToolUse, Usage
from .dispatch import Dispatch, describe
from .errors import (
    Cancelled,
    ContextOverflow,
    EmptyAssistantResponse,
    ProviderError,
    StreamPoisoned,
)
from .events import (
    AnyEvent,
    MessageComplete,
    ModelInfo,
    ProviderRetry,
    StopReason,
    ToolDispatchComplete,
    ToolDispatchStart,
    TurnComplete,
)
from .output import OutputCheck, OutputSpec
from .phases import (
    TRANSITIONS,
    CompactionJob,
    Phase,
    RequestState,
    Trigger,
    retry_notice,
)
from .providers.base import Provider, ProviderRequest, ProviderStream
from .session import Session
from .steering import SteeringQueue
from .tools import ToolSpec

__all__ = ["TRANSITIONS", "Phase", "Stream", "Trigger", "TurnHost"]

_POLL_SECONDS: Final = 0.1


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


class Stream:
    """One turn, advanced one event per ``next()``.

    Obtain it from ``Agent.run`` or ``Agent.resume``. It is an iterator and a context
    manager; ``close()`` releases the open response and persists what was committed.
    Use it from one thread at a time; ``cancel()`` may be called from any thread.
    """

    def __init__(
        self,
        host: TurnHost,
        *,
        resume: bool = False,
        rng: random.Random | None = None,
        output: OutputSpec | None = None,
    ) -> None:
        self._host = host
        self._output = OutputCheck(output)  # run(..., output=T); inert without T
        self._phase = Phase.TURN_START
        # typed as the union so next() returns it unchanged; providers and dispatch
        # push into it through their ``deque[Event]`` / ``list[Event]`` signatures
        self._queue: deque[AnyEvent] = deque()
        self._handlers: dict[Phase, Callable[[], None]] = {
            Phase.TURN_START: self._turn_start,
            Phase.STREAMING: self._streaming,
            Phase.AFTER_RESPONSE: self._after_response,
        }
        # the live phase's handler, None once terminal (saves a lookup per event)
        self._step: Callable[[], None] | None = self._turn_start
        self._config: Config = host.config
        self._rng = rng or random.Random()
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
        self._cancelled = False
        self._closed = False
        if resume:
            last = host.session.last_dialogue_message()
            if last is None or last.role == "assistant":
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
    def running(self) -> bool:
        """True until the turn ended (DONE, FAILED) or the stream was closed."""
        return not self._closed and self._step is not None

    def next(self) -> AnyEvent | None:
        """Advance the turn until it has an event, and return it.

        Returns:
            The next event; None only after ``TurnComplete`` was returned.
        Raises:
            NaviError: the turn failed (after any events queued before the failure);
            StreamPoisoned on every later call, with the failure as ``__cause__``.
        """
        queue = self._queue
        while True:
            if queue:
                ev = queue.popleft()
                if type(ev) is ModelInfo:
                    if ev.model == self._model:
                        continue
                    self._model = ev.model
                return ev
            step = self._step
            if step is None:
                if self._phase is Phase.FAILED:
                    self._raise_failure()
                return None
            try:
                if self._cancelled:
                    self._cancel_turn()
                else:
                    step()
            except BaseException as exc:
                self._fail(exc)

    def cancel(self) -> None:
        """Ask the turn to stop at the next step; it ends with ``StopReason.CANCELLED``."""
        self._cancelled = True

    def close(self) -> None:
        """Release the response and persist what the turn committed (idempotent).

        Closing a turn that has not ended fails it with ``Cancelled``.
        """
        if self._closed:
            return
        self._closed = True
        if self._step is not None:
            self._error = Cancelled("the stream was closed before the turn ended")
            self._error_raised = True
            self._move(Trigger.FAILED)
        self._release_response()
        self._keep_finished_results()
        self._host.session.flush()

    def __iter__(self) -> Iterator[AnyEvent]:
        return self

    def __next__(self) -> AnyEvent:
        ev = self.next()
        if ev is None:
            raise StopIteration
        return ev

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

    # -- phase bookkeeping ------------------------------------------------------------

    def _move(self, trigger: Trigger) -> None:
        to = TRANSITIONS.get((self._phase, trigger))
        if to is None:
            raise RuntimeError(f"no move from {self._phase.name} on {trigger.value!r}")
        self._phase = to
        self._step = self._handlers.get(to)

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._move(Trigger.FAILED)
        self._release_response()
        self._keep_finished_results()
        # persist what was committed; a store failure here must not hide ``exc``
        with contextlib.suppress(Exception):
            self._host.session.flush()

    def _keep_finished_results(self) -> None:
        """Hand the results of calls that finished to the session when a batch is
        abandoned: it answers the abandoned calls with them before the next turn."""
        dispatch, self._dispatch = self._dispatch, None
        if dispatch is not None:
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
        output = self._output.value
        self._queue.append(TurnComplete(reason, response, *counts, output=output))
        cancelled = reason is StopReason.CANCELLED
        self._move(Trigger.CANCELLED if cancelled else Trigger.FINISHED)

    def _cancel_turn(self) -> None:
        dispatch, self._dispatch = self._dispatch, None
        if dispatch is not None:
            self._commit(dispatch.cancelled_message())
        self._finish(StopReason.CANCELLED)

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
        while (wait := self._request.retry_at - time.monotonic()) > 0:
            if self._cancelled:
                return  # next() ends the turn as cancelled
            time.sleep(min(wait, _POLL_SECONDS))
        if self._compaction is not None:
            self._compact(config, self._compaction)
            return
        for message in host.steering.take():
            self._commit(message)
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
        session = host.session
        request = ProviderRequest(
            tuple(session.conversation.dialogue()),
            session.conversation.system_prompt(),
            host.tool_specs(),
            config,
            self._output.spec,
        )
        try:
            self._response = host.provider.open(request)
        except ProviderError as exc:
            self._provider_failed(exc)
            return
        self._move(Trigger.OPENED)

    def _streaming(self) -> None:
        """Pump the response; commit the message once it is complete."""
        response = self._response
        assert response is not None
        queue = self._queue
        try:
            while not response.produce(queue):  # type: ignore[arg-type]
                if queue or self._cancelled:
                    return
        except ProviderError as exc:
            self._release_response()
            self._move(Trigger.STREAM_FAILED)
            self._provider_failed(exc)
            return
        self._release_response()
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
                if self._host.steering:
                    self._move(Trigger.STEERED)  # answer what arrived meanwhile
                    return
                max_tokens = message.stop_reason == "max_tokens"
                self._finish(
                    StopReason.MAX_TOKENS if max_tokens else StopReason.END_TURN
                )
                return
            self._queue.append(ToolDispatchStart(len(uses)))
            self._dispatch = self._host.start_tools(uses, self._config)
            return
        try:
            self._queue.extend(dispatch.poll(timeout=_POLL_SECONDS))  # type: ignore[arg-type]
        except TimeoutError:
            return  # lets next() notice a cancel() while tools run
        if dispatch.done:
            results = dispatch.message()
            self._dispatch = None
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
        host = self._host
        try:
            compacted = run_compaction(host.session, host.provider, config, job.pending)
        except ProviderError as exc:
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
        delay = policy.delay_ms(attempt, exc.retry_after_ms, self._rng)
        self._queue.append(
            retry_notice(exc, attempt, policy, delay, compaction=compaction)
        )
        return time.monotonic() + delay / 1000.0

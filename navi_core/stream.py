"""``Stream``: one agent turn as an explicit, pull-driven phase machine.

Rules of this file:

* Only this file changes ``Stream._phase``, and only through ``_enter``, which checks
  every move against ``TRANSITIONS``. Providers, tools and stores report through return
  values and queued events; they never touch the phase.
* ``next()`` returns queued events first; when the queue is empty it runs the handler of
  the current phase until that handler has queued something (or the turn ended).
* The conversation changes only when a response completes (``MessageComplete``) or a
  tool batch completes (``ToolDispatchComplete``); each change is persisted at once. A
  failure mid-response therefore re-opens from scratch without doubling anything.
* Any exception in a handler moves the stream to FAILED. Events queued before it are
  still handed out; then the error is raised once; afterwards every ``next()`` raises
  ``StreamPoisoned`` whose ``__cause__`` is that error.

Phases::

    TURN_START ──open──▶ STREAMING ──complete──▶ AFTER_RESPONSE ──tools done──▶ TURN_START
        │  ▲                 │                        │
        │  └──retry──────────┘                        └──no tool call──▶ DONE
        └──────────── any error ──────────────────────────────────────▶ FAILED
"""

from __future__ import annotations

import contextlib
import enum
import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Final

from .config import Config
from .conversation import Message, Usage
from .dispatch import Dispatch, describe
from .errors import (
    Cancelled,
    ContextOverflow,
    EmptyAssistantResponse,
    ProviderError,
    StreamPoisoned,
)
from .events import (
    Event,
    MessageComplete,
    ModelInfo,
    ProviderRetry,
    StopReason,
    ToolDispatchComplete,
    ToolDispatchStart,
    TurnComplete,
)
from .providers.base import ProviderRequest, ProviderStream

if TYPE_CHECKING:
    from .agent import Agent
    from .compaction import PendingCompaction

__all__ = ["TRANSITIONS", "Phase", "Stream"]

_POLL_SECONDS: Final = 0.1


class Phase(enum.Enum):
    """Where a turn stands."""

    #: about to open a provider response (after a retry wait, if any)
    TURN_START = "turn_start"
    #: pumping an open response into events
    STREAMING = "streaming"
    #: a response completed; ending the turn or dispatching its tool calls
    AFTER_RESPONSE = "after_response"
    #: the turn ended; ``TurnComplete`` was queued
    DONE = "done"
    #: the turn failed; ``next()`` raises
    FAILED = "failed"


TRANSITIONS: Final[Mapping[Phase, frozenset[Phase]]] = {
    Phase.TURN_START: frozenset({Phase.STREAMING, Phase.DONE, Phase.FAILED}),
    # STREAMING -> DONE only through cancel()
    Phase.STREAMING: frozenset(
        {Phase.AFTER_RESPONSE, Phase.TURN_START, Phase.DONE, Phase.FAILED}
    ),
    Phase.AFTER_RESPONSE: frozenset({Phase.TURN_START, Phase.DONE, Phase.FAILED}),
    Phase.DONE: frozenset(),
    Phase.FAILED: frozenset(),
}


class Stream:
    """One turn, advanced one event per ``next()``.

    Obtain it from ``Agent.run`` or ``Agent.resume``. It is an iterator and a context
    manager; ``close()`` releases the open response and persists what was committed.
    Use it from one thread at a time; ``cancel()`` may be called from any thread.
    """

    def __init__(self, agent: Agent, *, rng: random.Random | None = None) -> None:
        self._agent = agent
        self._phase = Phase.TURN_START
        self._queue: deque[Event] = deque()
        self._handlers: dict[Phase, Callable[[], None]] = {
            Phase.TURN_START: self._turn_start,
            Phase.STREAMING: self._streaming,
            Phase.AFTER_RESPONSE: self._after_response,
        }
        # the live phase's handler, None once terminal (saves a lookup per event)
        self._step: Callable[[], None] | None = self._turn_start
        self._config: Config = agent.config
        self._rng = rng or random.Random()
        self._response: ProviderStream | None = None
        self._dispatch: Dispatch | None = None
        self._last: Message | None = None
        self._attempt = 1
        self._retry_at = 0.0
        self._overflow_compacted = False
        self._compaction: PendingCompaction | None = None  # announced, not yet run
        self._compacted_for_request = False
        self._after_compaction: ProviderRetry | None = None
        self._summary_attempt = 1
        self._iterations = 0
        self._tool_calls = 0
        self._usage = Usage()
        self._model: str | None = None
        self._error: BaseException | None = None
        self._error_raised = False
        self._cancelled = False
        self._closed = False

    # -- public API -----------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """The current phase."""
        return self._phase

    @property
    def usage(self) -> Usage:
        """Usage summed over the responses completed so far in this turn."""
        return self._usage

    def next(self) -> Event | None:
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
        self._release_response()
        self._keep_finished_results()
        if self._phase not in (Phase.DONE, Phase.FAILED):
            self._error = Cancelled("the stream was closed before the turn ended")
            self._error_raised = True
            self._enter(Phase.FAILED)
        self._agent._stream_closed(self)

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
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
        # unsaved messages stay queued on the agent for its next flush.
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        return (
            f"<Stream phase={self._phase.name} iterations={self._iterations} "
            f"tool_calls={self._tool_calls} queued={len(self._queue)}>"
        )

    # -- phase bookkeeping ------------------------------------------------------------

    def _enter(self, to: Phase) -> None:
        if to not in TRANSITIONS[self._phase]:
            raise RuntimeError(f"illegal phase change {self._phase.name} -> {to.name}")
        self._phase = to
        self._step = self._handlers.get(to)

    def _fail(self, exc: BaseException) -> None:
        self._release_response()
        self._keep_finished_results()
        self._error = exc
        self._enter(Phase.FAILED)
        # persist what was committed; a store failure here must not hide ``exc``
        with contextlib.suppress(Exception):
            self._agent._flush()

    def _keep_finished_results(self) -> None:
        """Hand the results of calls that finished to the agent when a batch is abandoned.

        The turn appends nothing more; the agent uses them when it answers the
        abandoned calls before the next turn, so no finished call is reported lost.
        """
        dispatch, self._dispatch = self._dispatch, None
        if dispatch is not None:
            self._agent._keep_results(dispatch.finished_results())

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
        self._queue.append(
            TurnComplete(
                reason, response, self._iterations, self._tool_calls, self._usage
            )
        )
        self._enter(Phase.DONE)

    def _finish_idle(self) -> None:
        """End at once: a resumed session whose last turn already finished."""
        self._finish(StopReason.END_TURN)

    def _cancel_turn(self) -> None:
        dispatch, self._dispatch = self._dispatch, None
        if dispatch is not None:
            self._agent._commit(dispatch.cancelled_message())
        self._finish(StopReason.CANCELLED)

    def _release_response(self) -> None:
        response, self._response = self._response, None
        if response is not None:
            response.close()

    # -- handlers ---------------------------------------------------------------------

    def _turn_start(self) -> None:
        """Take the config snapshot, compact if needed, apply steering, open a response."""
        agent = self._agent
        self._config = config = agent.config
        if self._iterations >= config.max_iterations:
            self._finish(StopReason.MAX_ITERATIONS)
            return
        while (wait := self._retry_at - time.monotonic()) > 0:
            if self._cancelled:
                return  # next() ends the turn as cancelled
            time.sleep(min(wait, _POLL_SECONDS))
        if self._compaction is not None:
            self._compact(config, self._compaction)
            return
        agent._apply_steering()
        if self._attempt == 1 and not self._compacted_for_request:
            pending = agent._plan_compaction(config, reason="threshold")
            if pending is not None:
                self._compaction = pending
                self._queue.append(pending.started)
                return
        request = ProviderRequest(
            tuple(agent.conversation.dialogue()),
            agent.conversation.system_prompt(),
            agent.tool_specs(),
            config,
        )
        try:
            self._response = agent.provider.open(request)
        except ProviderError as exc:
            self._provider_failed(exc)
            return
        self._enter(Phase.STREAMING)

    def _compact(self, config: Config, pending: PendingCompaction) -> None:
        """Run an announced compaction; its summary request is retried like any other.

        When the summary keeps failing, a threshold compaction is skipped (the request
        still fits) and an overflow compaction fails the turn.
        """
        try:
            compacted = self._agent._run_compaction(config, pending)
        except ProviderError as exc:
            policy = config.retry
            if exc.retryable and self._summary_attempt < policy.max_attempts:
                self._schedule_retry(exc, self._summary_attempt, compaction=True)
                self._summary_attempt += 1
                return
            self._compaction = self._after_compaction = None
            self._summary_attempt = 1
            if pending.started.reason == "overflow":
                raise
            self._compacted_for_request = True  # send the request uncompacted
            return
        self._compaction = None
        self._summary_attempt = 1
        self._compacted_for_request = True
        self._queue.append(compacted)
        notice, self._after_compaction = self._after_compaction, None
        if notice is not None:
            self._queue.append(notice)

    def _streaming(self) -> None:
        """Pump the response; commit the message once it is complete."""
        response = self._response
        assert response is not None
        queue = self._queue
        try:
            while not response.produce(queue):
                if queue or self._cancelled:
                    return
        except ProviderError as exc:
            self._release_response()
            self._enter(Phase.TURN_START)
            self._provider_failed(exc)
            return
        self._release_response()
        complete = queue[-1]
        assert isinstance(complete, MessageComplete)
        message = complete.message
        self._last = message
        self._attempt = 1
        self._compacted_for_request = False
        self._overflow_compacted = False
        self._retry_at = 0.0
        self._iterations += 1
        self._usage = self._usage + complete.usage
        if not message.content:
            queue.pop()
        else:
            self._agent._commit(message)
        self._enter(Phase.AFTER_RESPONSE)

    def _after_response(self) -> None:
        """End the turn, or dispatch the response's tool calls and report their progress."""
        message = self._last
        assert message is not None
        if not message.content:
            raise EmptyAssistantResponse(
                "the model completed a response with no text, thinking or tool call"
            )
        dispatch = self._dispatch
        if dispatch is None:
            uses = message.tool_uses
            if not uses:
                if self._agent._has_steering():
                    self._enter(Phase.TURN_START)  # answer what arrived meanwhile
                    return
                max_tokens = message.stop_reason == "max_tokens"
                self._finish(
                    StopReason.MAX_TOKENS if max_tokens else StopReason.END_TURN
                )
                return
            self._queue.append(ToolDispatchStart(len(uses)))
            self._dispatch = self._agent._dispatch(uses, self._config)
            return
        try:
            self._queue.extend(dispatch.poll(timeout=_POLL_SECONDS))
        except TimeoutError:
            return  # lets next() notice a cancel() while tools run
        if dispatch.done:
            results = dispatch.message()
            self._dispatch = None
            self._tool_calls += len(results.content)
            self._agent._commit(results)
            self._queue.append(ToolDispatchComplete(results))
            self._enter(Phase.TURN_START)

    # -- failures ---------------------------------------------------------------------

    def _provider_failed(self, exc: ProviderError) -> None:
        """Compact once on overflow, back off on retryable errors, else fail the turn."""
        config = self._config
        if isinstance(exc, ContextOverflow) and not self._overflow_compacted:
            if config.compaction.prompt is None:
                raise exc
            self._overflow_compacted = True
            pending = self._agent._plan_compaction(
                config, reason="overflow", force=True
            )
            if pending is None:
                raise exc
            self._compaction = pending
            self._queue.append(pending.started)
            self._after_compaction = ProviderRetry(
                self._attempt,
                config.retry.max_attempts,
                0,
                type(exc).__name__,
                exc.status_code,
                exc.retry_after_ms,
                exc.message,
                compaction=True,
            )
            return
        policy = config.retry
        if not exc.retryable or self._attempt >= policy.max_attempts:
            raise exc
        self._schedule_retry(exc, self._attempt)
        self._attempt += 1

    def _schedule_retry(
        self, exc: ProviderError, attempt: int, *, compaction: bool = False
    ) -> None:
        """Queue the ``ProviderRetry`` notice and set when the next attempt may start."""
        policy = self._config.retry
        delay = policy.delay_ms(attempt, exc.retry_after_ms, self._rng)
        self._queue.append(
            ProviderRetry(
                attempt,
                policy.max_attempts,
                delay,
                type(exc).__name__,
                exc.status_code,
                exc.retry_after_ms,
                exc.message,
                compaction,
            )
        )
        self._retry_at = time.monotonic() + delay / 1000.0

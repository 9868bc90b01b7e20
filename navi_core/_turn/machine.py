"""The phase machine of one turn: its rules, its table of moves, and every handler.

``Stream`` (``navi_core.stream``) drives a ``Turn``; everything a turn does between two
events is here. The rules:

* Only ``_move(trigger)`` changes the phase, to ``TRANSITIONS[(phase, trigger)]``; a
  pair missing from the table is a bug and raises. Providers, tools and stores report
  through return values and queued events; they never touch the phase.
* The driver hands out queued events first; when the queue is empty it runs ``step``,
  the handler of the current phase, until that handler has queued something (or the
  turn ended). With ``next(timeout)`` every call that may block (an open, a chunk
  read, a summary request) runs off the driving thread and is waited for only until
  the deadline (``TurnControl.offload``); its continuation runs in a later step.
  Without a timeout those calls run inline.
* ``cancel()``, ``close()`` from another thread and ``Config.turn_timeout`` only
  *request* the stop (``TurnControl.stop``), interrupt blocked reads and cancel every
  sub-agent turn the tools run (``Lineage.stop``, also when the turn ends); the
  driving thread then ends the turn in ``stop_turn``: what finished stays committed, a
  running tool batch commits the results it has, a final answer already committed
  ends as its stop reason says (END_TURN, MAX_TOKENS, REFUSED, PAUSED); a response
  cancelled while it streamed commits the text it streamed as an assistant message
  (stop reason "cancelled"; no partial tool call).
* A response the provider stopped (stop reason "refusal" or "pause_turn",
  ``_PROVIDER_STOPS``) ends the turn REFUSED or PAUSED, even with nothing in it: no
  retry, no structured-answer review, and its calls do not run.
* The conversation changes only when a response completes (``MessageComplete``), a
  tool batch completes (``ToolDispatchComplete``) or a stop ends the turn, through
  ``Session.commit``, which persists at once. A failure mid-response therefore
  re-opens from scratch without doubling anything.
* Any exception in a handler moves the turn to FAILED first (``fail``); only then is
  the open response released (a failure to release cannot hide the error). Events
  queued before it are still handed out; then the error is raised once; afterwards
  every ``next()`` raises ``StreamPoisoned`` whose ``__cause__`` is that error.
* The turn reaches its agent only through ``TurnHost`` and the conversation only
  through the public methods of ``Session``.

What each phase carries (None in the others):

* TURN_START: ``request`` (``RequestState``: attempt number, when the next open may
  start, whether its compaction check ran, whether an overflow was compacted; replaced
  whole when a response completes) and ``compaction`` (``CompactionJob``: announced
  with ``CompactionStarted`` and not yet run);
* STREAMING: ``response``, armed in the ``Reader`` that ``next()``'s hot path reads
  it through (``navi_core.core``);
* AFTER_RESPONSE: ``last`` (the completed message) and ``dispatch`` (its tool batch).

TURN_START runs ``Turn.START_STEPS`` in order; the first one that queues an event, moves
the phase or starts an off-thread call ends the step:

1. once per turn, the start hooks (``on_session_start`` in the session's first turn,
   then ``on_turn_start``), always off the driving thread so a ``cancel()`` ends the
   wait; a hook still running when the turn ends is abandoned (``TurnExtras.greeting``,
   None without hooks);
2. once, what ``resume()`` found: a finished turn or a batch still held ends the turn,
   a decided held batch runs its approved calls (``approved``);
3. take the config snapshot (``TurnHost.config``);
4. the iteration limit reached: finished (``StopReason.MAX_ITERATIONS``);
5. wait until ``request.retry_at`` (a ``cancel()`` ends the wait);
6. run the announced compaction, if any (``Compacted``, or a retry notice);
7. apply the queued steering messages (``Steered``);
8. once per request, the threshold check: announce a compaction (``CompactionStarted``);
9. hand out the ``Steered`` events before the request opens;
10. ``Config.budget``: what the turn spent plus the request's estimated prompt meets
    or passes it: finished (``StopReason.BUDGET``), nothing sent;
11. once per turn, the planning request of ``Config.planning`` (its ``MessageComplete``);
12. open the provider response: opened, or a provider error (retry notice, overflow
    compaction, or failed).

The moves (``render_transitions()`` prints this from ``TRANSITIONS``)::

    TURN_START      --opened-->         STREAMING
    TURN_START      --finished-->       DONE
    TURN_START      --cancelled-->      DONE
    TURN_START      --failed-->         FAILED
    TURN_START      --approved-->       AFTER_RESPONSE
    STREAMING       --completed-->      AFTER_RESPONSE
    STREAMING       --stream failed-->  TURN_START
    STREAMING       --cancelled-->      DONE
    STREAMING       --failed-->         FAILED
    AFTER_RESPONSE  --tools done-->     TURN_START
    AFTER_RESPONSE  --steered-->        TURN_START
    AFTER_RESPONSE  --finished-->       DONE
    AFTER_RESPONSE  --cancelled-->      DONE
    AFTER_RESPONSE  --failed-->         FAILED
"""

from __future__ import annotations

import contextlib
import enum
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

from .._deltas import BLOCK_TEXT
from .._ids import publish
from .._logs import get_logger
from ..compaction._compaction import (
    PendingCompaction,
    apply_pending,
    plan_compaction,
    summarise_with_usage,
)
from ..config import Config, Pricing, RetryPolicy
from ..conversation import Message, Text, ToolUse, Usage
from ..errors import (
    ContextOverflow,
    EmptyAssistantResponse,
    ProviderError,
    StreamPoisoned,
)
from ..events import (
    AnyEvent,
    Cost,
    MessageComplete,
    ProviderRetry,
    ResponseDiscarded,
    Steered,
    StopReason,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolStarted,
    TurnComplete,
)
from ..output import OutputCheck
from ..providers.base import Provider, ProviderRequest, ProviderStream
from ..session import Session
from ..tokens import estimate_tokens, message_sizes, request_tokens
from ..tools._dispatch import Dispatch, cancelled_before_start, describe
from ..tools._results import cut_off_results, provider_stopped_results, short_error
from ..tools._tool import ToolSpec
from .control import NotYet, TurnControl
from .extras import TurnExtras
from .offload import Op
from .steering import SteeringQueue

if TYPE_CHECKING:
    from ..core import Reader

__all__ = [
    "TRANSITIONS",
    "CompactionJob",
    "NotYet",
    "Phase",
    "RequestState",
    "Trigger",
    "Turn",
    "TurnHost",
    "render_transitions",
    "retry_notice",
    "transition_table",
]


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

    # members are singletons compared by identity: hash them so too (in C), as the
    # phase machine looks up (phase, trigger) and handlers on every step
    __hash__ = object.__hash__


class Trigger(enum.Enum):
    """What makes the phase change."""

    #: the provider accepted the request and the response is open
    OPENED = "opened"
    #: the response's ``MessageComplete`` arrived
    COMPLETED = "completed"
    #: a retryable failure mid-response: the request is made again from scratch
    STREAM_FAILED = "stream failed"
    #: every tool call of the response has its result
    TOOLS_DONE = "tools done"
    #: no tool call, but steering arrived meanwhile: answer it in this turn
    STEERED = "steered"
    #: the turn ended: an answer, the token or iteration limit, the budget, an idle
    #: resume
    FINISHED = "finished"
    #: ``cancel()`` was noticed
    CANCELLED = "cancelled"

    __hash__ = object.__hash__  # as Phase's
    #: an error ended the turn (also ``close()`` before the end)
    FAILED = "failed"
    #: ``resume()`` found a held batch whose calls are decided: run the approved ones
    APPROVED = "approved"


TRANSITIONS: Final[Mapping[tuple[Phase, Trigger], Phase]] = MappingProxyType(
    {
        (Phase.TURN_START, Trigger.OPENED): Phase.STREAMING,
        (Phase.TURN_START, Trigger.FINISHED): Phase.DONE,
        (Phase.TURN_START, Trigger.CANCELLED): Phase.DONE,
        (Phase.TURN_START, Trigger.FAILED): Phase.FAILED,
        (Phase.TURN_START, Trigger.APPROVED): Phase.AFTER_RESPONSE,
        (Phase.STREAMING, Trigger.COMPLETED): Phase.AFTER_RESPONSE,
        (Phase.STREAMING, Trigger.STREAM_FAILED): Phase.TURN_START,
        (Phase.STREAMING, Trigger.CANCELLED): Phase.DONE,
        (Phase.STREAMING, Trigger.FAILED): Phase.FAILED,
        (Phase.AFTER_RESPONSE, Trigger.TOOLS_DONE): Phase.TURN_START,
        (Phase.AFTER_RESPONSE, Trigger.STEERED): Phase.TURN_START,
        (Phase.AFTER_RESPONSE, Trigger.FINISHED): Phase.DONE,
        (Phase.AFTER_RESPONSE, Trigger.CANCELLED): Phase.DONE,
        (Phase.AFTER_RESPONSE, Trigger.FAILED): Phase.FAILED,
    }
)
"""Every legal move: ``(phase, trigger) -> next phase``. DONE and FAILED have none."""

#: a response's stop reason that ends the turn whatever the response holds: the
#: ``StopReason`` it ends with, and why a call in it did not run (its error result)
_PROVIDER_STOPS: Final[Mapping[str, tuple[StopReason, str]]] = MappingProxyType(
    {
        "refusal": (
            StopReason.REFUSED,
            "the provider's content filter withheld or cut the response it was part of",
        ),
        "pause_turn": (
            StopReason.PAUSED,
            "the provider paused the response it was part of (pause_turn)",
        ),
    }
)


def _answer_reason(message: Message) -> StopReason:
    """What a turn whose final answer is ``message`` ends with."""
    stop = _PROVIDER_STOPS.get(message.stop_reason or "")
    if stop is not None:
        return stop[0]
    if message.stop_reason == "max_tokens":
        return StopReason.MAX_TOKENS
    return StopReason.END_TURN


def render_transitions() -> str:
    """``TRANSITIONS`` as the aligned lines of this module's docstring diagram."""
    rows = [(a.name, f"--{t.value}-->", b.name) for (a, t), b in TRANSITIONS.items()]
    w0 = max(len(r[0]) for r in rows) + 2
    w1 = max(len(r[1]) for r in rows) + 2
    return "\n".join(f"{a:<{w0}}{t:<{w1}}{b}".rstrip() for a, t, b in rows)


def transition_table() -> str:
    """``TRANSITIONS`` as the Markdown table of the README."""
    lines = ["| phase | trigger | next phase |", "|---|---|---|"]
    lines += [
        f"| {a.name} | {t.value} | {b.name} |" for (a, t), b in TRANSITIONS.items()
    ]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class RequestState:
    """Bookkeeping of the request being attempted; a completed response resets it."""

    #: opens of this request so far, the first included
    attempt: int = 1
    #: ``time.monotonic()`` before which the next open waits
    retry_at: float = 0.0
    #: the threshold compaction check ran (or a compaction ran) for this request
    checked: bool = False
    #: a context overflow of this request was already compacted once
    overflow_compacted: bool = False

    def checked_now(self) -> RequestState:
        """This state with ``checked`` set (built directly: it runs every request)."""
        return RequestState(self.attempt, self.retry_at, True, self.overflow_compacted)


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """A compaction announced with ``CompactionStarted`` and not yet run."""

    pending: PendingCompaction
    #: summary requests tried, the next one included
    attempt: int = 1
    #: the notice returned after ``Compacted`` (the overflow that caused it)
    notice: ProviderRetry | None = None


def retry_notice(
    exc: ProviderError,
    attempt: int,
    policy: RetryPolicy,
    delay_ms: int,
    *,
    compaction: bool = False,
) -> ProviderRetry:
    """The ``ProviderRetry`` event for ``exc`` ending attempt ``attempt`` (logged)."""
    get_logger("navi_core.retry").warning(
        "attempt %d/%d failed (%s%s): retrying in %d ms%s",
        attempt, policy.max_attempts, type(exc).__name__,
        f", HTTP {exc.status_code}" if exc.status_code else "", delay_ms,
        " after compacting" if compaction else "",
    )  # fmt: skip
    return ProviderRetry(
        attempt,
        policy.max_attempts,
        delay_ms,
        type(exc).__name__,
        exc.status_code,
        exc.retry_after_ms,
        exc.message,
        compaction,
    )


class TurnHost(Protocol):
    """What a turn needs from its agent; ``Agent`` provides it."""

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

    def start_tools(
        self,
        calls: Sequence[ToolUse],
        factory: Callable[..., Dispatch],
        config: Config,
    ) -> Dispatch:
        """Start running ``calls`` on the tool threads as a batch made by ``factory``."""
        ...

    def turn_ended(self, turn_id: str) -> None:
        """The turn ``turn_id`` reached DONE or FAILED: the host lets go of its stream
        (breaks a cycle)."""
        ...


class Turn:
    """One turn's phase machine: what it has done so far and the handler of its phase.

    Made and driven by ``Stream``, which owns the queue, the control and the ``Reader``
    and passes them in. ``step`` is the live phase's handler (None once the turn ended).
    """

    def __init__(
        self,
        host: TurnHost,
        extras: TurnExtras,
        output: OutputCheck,
        queue: deque[AnyEvent],
        ctl: TurnControl,
        reader: Reader,
        *,
        rng: random.Random | None = None,
        resume: bool = False,
    ) -> None:
        self.host = host
        self.x = extras
        self.output = output
        self.queue = queue
        self.ctl = ctl
        self.reader = reader
        self.phase = Phase.TURN_START
        # the live phase's handler, None once terminal (a function: a bound method is a cycle)
        self.step: Callable[[Turn], None] | None = self._HANDLERS[Phase.TURN_START]
        self.config: Config = host.config
        self.rng = rng  # made at the first retry: seeding one reads the OS's entropy
        self.request = RequestState()  # TURN_START
        self.compaction: CompactionJob | None = None  # TURN_START
        self.response: ProviderStream | None = None  # STREAMING
        self.opened: ProviderStream | None = (
            None  # the same, unwrapped: its text so far
        )
        self.last: Message | None = None  # AFTER_RESPONSE, and the answer at the end
        self.dispatch: Dispatch | None = None  # AFTER_RESPONSE
        self.iterations = 0
        self.tool_calls = 0
        self.usage = Usage()
        self.error: BaseException | None = None
        self.error_raised = False
        self.timed = False  # the clock of Config.turn_timeout started
        self.resuming = resume  # until the first step looked at what resume() found
        self.priced: tuple[Pricing | None] | None = None  # looked up once, when needed
        self.complete: TurnComplete[Any] | None = None  # queued at the end

    # -- what the driver calls ----------------------------------------------------------

    def start_clock(self) -> None:
        """The turn's clock starts at its first ``next()`` (``Config.turn_timeout``)."""
        self.timed = True
        if self.config.turn_timeout is not None:
            self.ctl.start_timer(self.config.turn_timeout, self._time_out)

    def request_stop(self, reason: StopReason) -> None:
        """Ask the driving thread to end the turn; wake it wherever it waits. Every
        sub-agent turn its tools run is cancelled before this returns."""
        if self.step is not None and self.ctl.request_stop(reason):
            dispatch = self.dispatch
            if dispatch is not None:
                dispatch.wake()
            self.x.stop_children()

    def raise_failure(self) -> None:
        """Raise the turn's error the first time, ``StreamPoisoned`` after."""
        err = self.error
        assert err is not None
        if not self.error_raised:
            self.error_raised = True
            raise err
        raise StreamPoisoned(f"the turn failed earlier: {describe(err)}") from err

    def fail(self, exc: BaseException) -> None:
        """End the turn in FAILED with ``exc``, keeping and persisting what finished."""
        self.error = exc
        self._move(Trigger.FAILED)
        self.settle()
        self.keep_finished_results()
        # persist what was committed; a store failure here must not hide ``exc``
        with contextlib.suppress(Exception):
            self.host.session.flush()

    def abandon(self, error: BaseException) -> None:
        """A close before the turn ended: fail it with ``error`` (raised by a later
        ``next()``), store a running batch as a cancel would, persist."""
        if self.step is not None:
            self.error = error
            self._move(Trigger.FAILED)
        self.settle()
        self._commit_abandoned_batch()
        self.keep_finished_results()
        self.ctl.end()
        self.host.session.flush()

    def settle(self) -> None:
        """Abandon a pending off-thread call and close the response (it may be the
        call's to close, when it returns)."""
        response, self.response = self.response, None
        self.opened = None
        self.ctl.settle(response)

    def keep_finished_results(self) -> None:
        """Hand the results of calls that finished to the session when a batch is
        abandoned: it answers the abandoned calls with them before the next turn."""
        dispatch, self.dispatch = self.dispatch, None
        if dispatch is not None:
            self.queue.extend(dispatch.cancel())  # type: ignore[arg-type]
            self.x.keep_progress(dispatch, final=True)  # for another process too
            self.host.session.keep_results(dispatch.finished_results())

    def finish(self, reason: StopReason) -> None:
        """Queue ``TurnComplete`` and move to DONE."""
        self._release_response()
        response = self.last.text if self.last is not None else ""
        counts = (self.iterations, self.tool_calls, self.usage)
        normal = reason not in (StopReason.CANCELLED, StopReason.TIMEOUT)
        pricing = self.pricing(wait=normal)  # a stop never waits for the price table
        done = self.x.complete(
            reason, response, *counts, self.x.turn_id, self.output.value, pricing
        )
        self.complete = done
        self.queue.append(done)
        self._move(Trigger.FINISHED if normal else Trigger.CANCELLED)

    def stop_turn(self, reason: StopReason) -> None:
        """End the turn for a cancel or the turn timeout, keeping what finished."""
        blocks, reported = self._given_so_far()
        partial = "".join(t for kind, t, _ in blocks if kind == BLOCK_TEXT)
        cut = self._cut_usage(blocks, reported)
        if cut is not None:  # a response was billed whose usage never came whole
            self.usage = self.usage + cut
        self.settle()
        if partial.strip():  # the answer so far stays, so the dialogue alternates
            message = Message(
                "assistant",
                (Text(partial),),
                cut,
                stop_reason="cancelled",
                wire=self.host.provider.wire,
            )
            self._commit(message)
            self.last = message
        dispatch, self.dispatch = self.dispatch, None
        if dispatch is not None:
            self.queue.extend(dispatch.cancel())  # type: ignore[arg-type]
            results = (
                dispatch.message() if dispatch.done else dispatch.cancelled_message()
            )
            self.tool_calls += len(results.content)
            self._commit(results)
            self.x.batch_answered()
            self.queue.append(ToolDispatchComplete(results))
        elif self.phase is Phase.AFTER_RESPONSE and self.last is not None:
            message = self.last
            if message.tool_uses:  # the calls never started: answer them
                results = cancelled_before_start(message.tool_uses, message.wire)
                self.tool_calls += len(results.content)
                self._commit(results)
            elif message.content:  # the final answer is committed: a normal end
                reason = _answer_reason(message)
        self.finish(reason)

    def read_ended(self, response: ProviderStream, exc: BaseException | None) -> None:
        """A read of ``next()``'s hot path completed the response (``exc`` None) or
        failed: handled as ``_streaming`` and the driver handle them (the ``Reader``
        calls this inside the read, its close handshake held)."""
        try:
            if exc is None:
                self._completed()
            elif not isinstance(exc, ProviderError):
                self.fail(exc)
            elif self.ctl.stop is None:  # else: the read a stop interrupted
                self._stream_failed(response, exc)
        except ProviderError as err:
            if self.ctl.stop is None:
                self.fail(err)
        except BaseException as err:
            self.fail(err)

    # -- bookkeeping ----------------------------------------------------------------

    def _time_out(self) -> None:
        self.request_stop(StopReason.TIMEOUT)

    def _move(self, trigger: Trigger) -> None:
        to = TRANSITIONS.get((self.phase, trigger))
        if to is None:
            raise RuntimeError(f"no move from {self.phase.name} on {trigger.value!r}")
        was, self.phase = self.phase, to
        self.step = self._HANDLERS.get(to)
        if was is Phase.STREAMING:
            self.reader.disarm()
        if to is Phase.STREAMING:
            self.reader.arm(self.response)
        if self.step is None:  # the turn ended: later steering waits for the next
            self.reader.release()
            self.host.steering.end_turn()
            self.ctl.end()
            self.x.ended()  # no hook call starts, no sub-agent runs on
            self.host.turn_ended(self.x.turn_id)

    def _commit_abandoned_batch(self) -> None:
        """Store a running batch as a cancel would (finished calls keep their results);
        when the store refuses, the session keeps the results for the next turn."""
        dispatch = self.dispatch
        if dispatch is None:
            return
        dispatch.cancel()
        results = dispatch.message() if dispatch.done else dispatch.cancelled_message()
        with contextlib.suppress(Exception):
            self._commit(results)
            self.dispatch = None
            self.x.batch_answered()

    def _release_response(self) -> None:
        """Close the open response; a failure to close it is not the turn's failure."""
        response, self.response = self.response, None
        self.opened = None
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()

    def _commit(self, message: Message) -> None:
        self.host.session.commit(message, self.host.provider.wire)

    def pricing(self, *, wait: bool = True) -> Pricing | None:
        """The provider's price, looked up once: its ``pricing`` attribute when set,
        else the price table's for its endpoint and model (``Pricing.lookup``).
        ``wait=False``: None while the table's answer is still on its way."""
        if self.priced is None:
            provider = self.host.provider
            given = getattr(provider, "pricing", None)  # not in the Provider protocol
            if not isinstance(given, Pricing):
                wire = provider.wire
                if not wait and Pricing.known(wire.model, wire.base_url) is None:
                    return None
                given = Pricing.lookup(wire.model, wire.base_url)
            self.priced = (given,)
        return self.priced[0]

    def _given_so_far(self) -> tuple[list[tuple[int, str, Any]], Any]:
        """What the response being streamed has given so far: its blocks (``(kind,
        text, extra)``) and the raw usage it reported (None); nothing outside
        STREAMING, or for a response that keeps no core assembler."""
        core = getattr(self.opened, "core", None)
        blocks = getattr(core, "blocks", None)
        if self.phase is not Phase.STREAMING or not callable(blocks):
            return [], None
        return blocks(), getattr(core, "usage", None)

    def _cut_usage(
        self, streamed: list[tuple[int, str, Any]], raw: Any
    ) -> Usage | None:
        """The usage of the response a stop cut off, marked estimated: what the server
        reported of it so far (``raw``: an Anthropic stream gives its prompt's tokens
        at once), the rest estimated (the prompt it was sent; what it ``streamed``:
        text, thinking, tool calls). None when nothing came of it (it may not have
        been billed)."""
        if not streamed and raw is None:
            return None
        output = sum(estimate_tokens(text) for _, text, _ in streamed)
        if raw is not None and (reported := Usage(*raw)).prompt_total:
            output = max(output, reported.output)
            return replace(reported, output=output, estimated=True)
        session = self.host.session
        conversation = session.conversation
        dialogue = conversation.dialogue()
        prompt = request_tokens(
            conversation.system_prompt(),
            dialogue,
            message_sizes(dialogue, session.sizes),
            self.host.tool_specs(),
        )
        return Usage(input=prompt, output=output, estimated=True)

    # -- TURN_START -------------------------------------------------------------------

    def _turn_start(self) -> None:
        """Run ``START_STEPS`` until one of them ends the step."""
        for sub in self.START_STEPS:
            if sub(self):
                return

    def _greet(self) -> bool:
        greeting = self.x.greeting
        if greeting is None:
            return False
        self.x.greeting = None
        self.ctl.offload(greeting, _raise_error, detached=True)
        return True

    def _resumed(self) -> bool:
        if not self.resuming:
            return False
        self.resuming = False
        last = self.host.session.last_dialogue_message()
        if self.x.resume_plan is not None:  # a held batch: run what was decided
            self.last = last
            if self.x.hold_again():
                self.finish(StopReason.APPROVAL_REQUIRED)
            else:
                self._move(Trigger.APPROVED)
            return True
        if last is None or last.role == "assistant":  # nothing to answer
            self.last = last
            self.finish(StopReason.END_TURN)
            return True
        return False

    def _take_config(self) -> bool:
        self.config = self.host.config
        return False

    def _at_limit(self) -> bool:
        if self.iterations >= self.config.max_iterations:
            self.finish(StopReason.MAX_ITERATIONS)
            return True
        return False

    def _wait_retry(self) -> bool:
        retry_at = self.request.retry_at
        if retry_at > time.monotonic():
            self.ctl.pause(retry_at)
            return self.ctl.stop is not None  # the driver ends the turn
        return False

    def _run_compaction(self) -> bool:
        if self.compaction is None:
            return False
        self._compact(self.config, self.compaction)
        return True

    def _apply_steering(self) -> bool:
        for message in self.host.steering.take():
            self._commit(message)
            self.queue.append(Steered(message))
        return False

    def _check_threshold(self) -> bool:
        if self.request.checked:
            return False
        self.request = self.request.checked_now()
        config = self.config
        if config.compaction.context_window is None:
            return False  # no threshold without a context window: skip the sizing
        host = self.host
        pending = plan_compaction(
            host.session, config, host.tool_specs(), reason="threshold"
        )
        if pending is None:
            return False
        self._announce(pending)
        return True

    def _hand_out_steered(self) -> bool:
        return bool(self.queue)

    def _within_budget(self) -> bool:
        budget = self.config.budget
        if budget is None:
            return False
        spent = self.usage + self.x.extra_usage
        session = self.host.session
        conversation = session.conversation
        dialogue = conversation.dialogue()
        sizes = message_sizes(dialogue, session.sizes)
        prompt = request_tokens(
            conversation.system_prompt(), dialogue, sizes, self.host.tool_specs()
        )
        over = budget.tokens is not None and (spent.total + prompt >= budget.tokens)
        if budget.usd is not None and not over:
            pricing = self.pricing()
            if pricing is None:
                raise ValueError(
                    "Config.budget.usd needs the model's price: no price is known "
                    f"for {self.host.provider.wire.model!r}; pass pricing=Pricing(...) "
                    "to the provider"
                )
            used = self.x.cost_of(self.usage, pricing).usd
            estimate = prompt * pricing.prompt_rate / 1_000_000
            over = used + estimate >= budget.usd
        if over:
            self.finish(StopReason.BUDGET)
        return over

    def _plan(self) -> bool:
        plan = self.x.take_plan()  # Config.planning, once
        if plan is None:
            return False
        planned = self.x.planned
        self.ctl.offload(
            self.ctl.guarded(plan.run),
            lambda op: self.queue.extend(planned(plan, op)),
        )
        return True

    def _open(self) -> bool:
        host = self.host
        session = host.session
        request = ProviderRequest(
            session.conversation.history(),
            session.conversation.system_prompt(),
            host.tool_specs(),
            self.config,
            self.output.spec,
        )
        provider = host.provider
        opening = self.ctl.guarded(lambda: provider.open(request))
        self.ctl.offload(opening, self._opened, _close)
        return True

    def _opened(self, op: Op[ProviderStream]) -> None:
        try:
            response = op.result()
        except ProviderError as exc:
            if self.ctl.stop is None:
                self._provider_failed(exc)
            return
        if self.ctl.stop is not None:  # opened as the cancel came: drop it
            with contextlib.suppress(Exception):
                response.close()
            return
        hold = getattr(response, "hold_with", None)  # an HTTP response: a stop shuts
        if callable(hold):  # its socket down while the response is open
            hold(self.ctl.interrupter)
        self.opened = response
        self.response = self.x.watch(response, self.config)
        self._move(Trigger.OPENED)

    # -- STREAMING --------------------------------------------------------------------

    def _streaming(self) -> None:
        """Pump the response; commit the message once it is complete."""
        response = self.response
        assert response is not None
        if self.ctl.deadline is not None:
            self.ctl.offload(lambda: _read_some(response), self._streamed)
            return
        try:
            done = self.reader.pump()
        except ProviderError as exc:
            if self.ctl.stop is None:  # else: the read a stop interrupted
                self._stream_failed(response, exc)
            return
        if done:
            self._completed()

    def _streamed(
        self, op: Op[tuple[deque[AnyEvent], bool, ProviderError | None]]
    ) -> None:
        """The continuation of a chunk read on the worker."""
        response = self.response
        assert response is not None
        events, done, error = op.result()
        self.queue.extend(events)
        if error is not None:
            if self.ctl.stop is None:
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
            self.queue.append(ResponseDiscarded(self.request.attempt, *counts))
        self._provider_failed(exc)

    def _completed(self) -> None:
        """The response's ``MessageComplete`` is queued: commit its message."""
        self._release_response()
        queue = self.queue
        complete = queue[-1]
        assert isinstance(complete, MessageComplete)
        message = complete.message
        self.last = message
        self.request = RequestState()
        self.iterations += 1
        self.usage = self.usage + complete.usage
        if not message.content:
            queue.pop()
        else:
            self._commit(message)
        self._move(Trigger.COMPLETED)

    # -- AFTER_RESPONSE ---------------------------------------------------------------

    def _after_response(self) -> None:
        """End the turn, or dispatch the response's tool calls and report their progress."""
        message = self.last
        assert message is not None
        stop = _PROVIDER_STOPS.get(message.stop_reason or "")
        if stop is not None and self.dispatch is None:  # even with nothing in it
            self._provider_stopped(message, *stop)
            return
        if not message.content:
            raise EmptyAssistantResponse(
                "the model completed a response with no text, thinking or tool call"
            )
        dispatch = self.dispatch
        retry = self.output.review(message, self._commit) if dispatch is None else None
        if retry is not None:  # run(..., output=T): a final answer, valid or not
            self._move(Trigger.STEERED) if retry else self.finish(StopReason.END_TURN)
            return
        if dispatch is None:
            uses = message.tool_uses
            if not uses:
                if self.host.steering.finish_unless_waiting():
                    self._move(Trigger.STEERED)  # answer what arrived meanwhile
                    return
                self.finish(_answer_reason(message))
                return
            if message.stop_reason == "max_tokens" and self._cut_off(message):
                return
            self.queue.append(ToolDispatchStart(len(uses)))
            calls, factory = self.x.dispatch_factory(uses)
            self.dispatch = dispatch = self.host.start_tools(
                calls, factory, self.config
            )
            self.queue.extend(self.x.polled(dispatch.begin(self.ctl.remaining())))  # type: ignore[arg-type]
            self.x.keep_progress(dispatch)
            return
        try:
            self.queue.extend(self.x.polled(dispatch.poll(self.ctl.remaining())))  # type: ignore[arg-type]
        except TimeoutError:
            raise NotYet from None
        self.x.keep_progress(dispatch)
        if dispatch.done:
            self.dispatch = None
            if self.x.held(dispatch):  # calls wait for approval: saved, turn ends
                self.finish(StopReason.APPROVAL_REQUIRED)
                return
            results = dispatch.message()
            self.tool_calls += len(results.content)
            self._commit(results)
            self.x.batch_answered()
            self.queue.append(ToolDispatchComplete(results))
            self._move(Trigger.TOOLS_DONE)

    def _cut_off(self, message: Message) -> bool:
        """A response that ran out of output tokens in the middle of a call: none of its
        calls runs; they are reported as a batch whose every call was refused (the
        events of a dispatch), and the turn ends with ``MAX_TOKENS`` (or answers the
        steering that waits). False when every call is whole: they run."""
        results = cut_off_results(message.tool_uses, message.wire)
        if results is None:
            return False
        self._not_run(message, results, StopReason.MAX_TOKENS)
        return True

    def _provider_stopped(self, message: Message, reason: StopReason, why: str) -> None:
        """A response the provider stopped (``_PROVIDER_STOPS``): the turn ends with
        ``reason`` and what streamed, with no retry and no review of a structured
        answer; its calls do not run (reported as ``_cut_off`` reports its calls)."""
        if message.tool_uses:
            results = provider_stopped_results(message.tool_uses, why, message.wire)
            self._not_run(message, results, reason)
        elif self.host.steering.finish_unless_waiting():
            self._move(Trigger.STEERED)
        else:
            self.finish(reason)

    def _not_run(self, message: Message, results: Message, reason: StopReason) -> None:
        """Report ``results`` as a batch whose every call was refused (the events of a
        dispatch), commit them, and end the turn with ``reason`` (or answer the
        steering that waits)."""
        queue = self.queue
        queue.append(ToolDispatchStart(len(results.content)))
        for use, result in zip(message.tool_uses, results.tool_results, strict=True):
            queue.append(ToolStarted(use.id, use.name))
            queue.append(
                ToolFinished(use.id, use.name, True, 0.0, short_error(result.parts))
            )
        self.tool_calls += len(results.content)
        self._commit(results)
        queue.append(ToolDispatchComplete(results))
        if self.host.steering.finish_unless_waiting():
            self._move(Trigger.STEERED)
        else:
            self.finish(reason)

    # -- compaction and failures ------------------------------------------------------

    def _announce(
        self, pending: PendingCompaction, notice: ProviderRetry | None = None
    ) -> None:
        """Queue ``CompactionStarted``; the next TURN_START step runs the compaction."""
        self.compaction = CompactionJob(pending, 1, notice)
        self.queue.append(pending.started)

    def _compact(self, config: Config, job: CompactionJob) -> None:
        """Run an announced compaction; its summary request is retried like any other.

        When the summary keeps failing, a threshold compaction is skipped (the request
        still fits) and an overflow compaction fails the turn.
        """
        provider = self.host.provider
        self.ctl.offload(
            self.ctl.guarded(
                lambda: summarise_with_usage(provider, config, job.pending)
            ),
            lambda op: self._summarised(config, job, op),
        )

    def _summarised(
        self,
        config: Config,
        job: CompactionJob,
        op: Op[tuple[tuple[str, int], Usage, Cost | None]],
    ) -> None:
        """The continuation of a summary request: install it, or retry, skip or fail.
        The summary request's usage counts in the turn's, like a planning request's;
        its cost at the summary provider's own price, when it has one."""
        host = self.host
        try:
            summary, usage, cost = op.result()
            self.x.add_usage(usage, cost)
            compacted = apply_pending(host.session, host.provider, job.pending, summary)
        except ProviderError as exc:
            if self.ctl.stop is not None:
                return
            if exc.retryable and job.attempt < config.retry.max_attempts:
                retry_at = self._notice_retry(exc, job.attempt, compaction=True)
                self.compaction = replace(job, attempt=job.attempt + 1)
                self.request = replace(self.request, retry_at=retry_at)
                return
            self.compaction = None
            if job.pending.started.reason == "overflow":
                raise
            self.request = self.request.checked_now()  # send it uncompacted
            return
        self.compaction = None
        self.request = self.request.checked_now()
        self.queue.append(compacted)
        if job.notice is not None:
            self.queue.append(job.notice)

    def _provider_failed(self, exc: ProviderError) -> None:
        """Compact once on overflow, back off on retryable errors, else fail the turn."""
        config = self.config
        state = self.request
        if isinstance(exc, ContextOverflow) and not state.overflow_compacted:
            if config.compaction.prompt is None:  # every later turn would fail too
                raise ContextOverflow(
                    f"{exc.message} (compaction is off: with "
                    "Config(compaction=CompactionConfig(prompt=...)) the old turns are "
                    "summarised when this happens; "
                    "agent.compact(prompt=..., keep_turns=1) does it now)",
                    status_code=exc.status_code,
                    retry_after_ms=exc.retry_after_ms,
                ) from exc
            self.request = replace(state, overflow_compacted=True)
            pending = plan_compaction(
                self.host.session,
                config,
                self.host.tool_specs(),
                reason="overflow",
                force=True,
            )
            if pending is None:  # a new session, or only the prompt being answered
                raise ContextOverflow(
                    f"{exc.message} (nothing to compact: the prompt being answered, "
                    "the system prompt and the tool declarations alone do not fit)",
                    status_code=exc.status_code,
                    retry_after_ms=exc.retry_after_ms,
                ) from exc
            notice = retry_notice(exc, state.attempt, config.retry, 0, compaction=True)
            self._announce(pending, notice)
            return
        if not exc.retryable or state.attempt >= config.retry.max_attempts:
            raise exc
        retry_at = self._notice_retry(exc, state.attempt)
        self.request = replace(state, attempt=state.attempt + 1, retry_at=retry_at)

    def _notice_retry(
        self, exc: ProviderError, attempt: int, *, compaction: bool = False
    ) -> float:
        """Queue the ``ProviderRetry`` notice; return when the next attempt may start."""
        policy = self.config.retry
        if self.rng is None:
            self.rng = random.Random()
        delay = policy.delay_ms(attempt, exc.retry_after_ms, self.rng)
        self.queue.append(
            retry_notice(exc, attempt, policy, delay, compaction=compaction)
        )
        return time.monotonic() + delay / 1000.0

    #: The sub-steps of TURN_START, in order (the module docstring says what each
    #: does); each returns True when it ended the step.
    START_STEPS: ClassVar[tuple[Callable[[Turn], bool], ...]] = (
        _greet,
        _resumed,
        _take_config,
        _at_limit,
        _wait_retry,
        _run_compaction,
        _apply_steering,
        _check_threshold,
        _hand_out_steered,
        _within_budget,
        _plan,
        _open,
    )

    #: The handler of each live phase (the terminal ones have none).
    _HANDLERS: ClassVar[Mapping[Phase, Callable[[Turn], None]]] = MappingProxyType(
        {
            Phase.TURN_START: _turn_start,
            Phase.STREAMING: _streaming,
            Phase.AFTER_RESPONSE: _after_response,
        }
    )


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


def _raise_error(op: Op[None]) -> None:
    """The continuation of the start hooks: what escaped them fails the turn."""
    op.result()


def _close(response: ProviderStream) -> None:
    """Close a response nobody will read (opened as the turn was cancelled)."""
    with contextlib.suppress(Exception):
        response.close()


publish(globals())

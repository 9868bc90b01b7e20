"""Runs one response's tool calls: grouped by owner, concurrent, results in model order.

Each call to a plain ``Tool`` is its own group; every call to one ``ToolSource`` forms
one batch run on one thread (reported call by call when the source yields its calls
as they finish: ``call_batch_as_completed``). Groups run concurrently on the agent's thread pool and
report back through a queue, so the Stream can return ``ToolStarted``/``ToolFinished``
as calls start and finish while the result message keeps the model's order.

Groups marked inline (``Tool.inline``, a source's ``inline = True``) run instead on
the thread that polls, at its first poll, after the pool groups were posted: no
thread hand-off and no wake-up, through the same code and the same queue (read by
the thread that wrote it, the queue never waits). Calls that a subclass screens or
that need approval always go to the pool.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from .._logs import get_logger
from ..config import ImageLimits
from ..conversation import (
    Message,
    Part,
    TextPart,
    ToolResult,
    ToolUse,
    WireIdentity,
    decode_arguments,
)
from ..core import Signal
from ..errors import Cancelled
from ..events import Event, SubagentEvent, ToolFinished, ToolProgress, ToolStarted
from ._pool import DaemonPool, Inbox, deliver_last
from ._results import (
    ResultText,
    cancelled_before_start,
    describe,
    error_result,
    failure_text,
    interrupted_results,
    short_error,
    to_parts,
)
from ._tool import Tool, ToolCall, ToolContext, ToolRegistry, ToolSource

__all__ = [
    "ABORTING",
    "Dispatch",
    "cancelled_before_start",
    "describe",
    "error_result",
    "failure_text",
    "interrupted_results",
]

#: Exceptions that abort the whole turn instead of becoming an error result.
ABORTING: tuple[type[BaseException], ...] = (Cancelled, KeyboardInterrupt, MemoryError)

#: Seconds a poll waits before it starts calls queued behind one not started yet.
_GRACE = 0.001


@dataclass(slots=True)
class _Outcome:
    parts: tuple[Part, ...]
    is_error: bool
    seconds: float


class Dispatch:
    """One batch of tool calls in flight; ``poll`` returns events as calls progress.

    Every call gets a ``ToolContext`` whose ``cancelled`` event is the batch's: a
    ``cancel()`` sets it, keeps the results of calls that finished (also those not
    polled yet) and closes every started call with a ``ToolFinished``. Each call, and
    its context, carries ``turn_id``: the turn the batch belongs to.
    """

    __slots__ = (
        "_abandon",
        "_batch_context",
        "_cancel",
        "_claim",
        "_inbox",
        "_inline",
        "_limits",
        "_outcomes",
        "_pending",
        "_pool",
        "_posts",
        "_ran",
        "_run",
        "_screens",
        "_session_id",
        "_started",
        "_starts",
        "_turn_id",
        "_uses",
        "_wake",
        "_wire",
        "_woken",
    )

    def __init__(
        self,
        uses: Sequence[ToolUse],
        registry: ToolRegistry,
        executor: Executor,
        limits: ImageLimits,
        wire: WireIdentity | None,
        *,
        session_id: str | None = None,
        on_abandon: Callable[[], None] | None = None,
        turn_id: str = "",
    ) -> None:
        self._uses = tuple(uses)
        self._limits = limits
        self._wire = wire
        self._session_id = session_id
        self._turn_id = turn_id
        self._abandon = on_abandon
        self._cancel = threading.Event()
        #: held while a tool thread claims a call to run, and while cancel() is set: a
        #: call either runs or is known not to (``_ran``), never in between
        self._claim = threading.Lock()
        # for calls that read no context: a coroutine a lambda returns is cancelled by it
        self._batch_context = ToolContext(
            "", "", session_id, self._cancel, turn_id=turn_id
        )
        self._outcomes: list[_Outcome | None] = [None] * len(self._uses)
        #: when each call's start was reported (``perf_counter``), None before
        self._started: list[float | None] = [None] * len(self._uses)
        self._ran = [False] * len(self._uses)
        self._inbox = Inbox()
        #: the wake-up of the pool thread the last post lent, given as the poll waits
        self._wake: Signal | None = None
        self._pending = len(self._uses)
        self._woken = False
        self._screens = getattr(self, "_screens", False)  # a subclass may set it first
        #: groups run by the polling thread: (function, its arguments), in model order
        self._inline: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        tool_groups: list[tuple[Tool, int, dict[str, Any]]] = []
        batches: dict[int, tuple[ToolSource, list[tuple[int, ToolCall]]]] = {}
        for i, use in enumerate(self._uses):
            owner = registry.owner(use.name)
            if owner is None:
                self._reject(i, ResultText.unknown(use.name, registry.names()))
                continue
            args = decode_arguments(use.input)
            if isinstance(args, str):
                self._reject(i, ResultText.not_json(use.name, args, use.input))
                continue
            if isinstance(owner, Tool):
                tool_groups.append((owner, i, args))
            else:
                batches.setdefault(id(owner), (owner, []))[1].append(
                    (i, ToolCall(use.id, use.name, args, turn_id))
                )
        # a watched DaemonPool starts queued calls when poll() asks (no Future either)
        self._pool: DaemonPool | None = (
            executor
            if isinstance(executor, DaemonPool) and not executor.chains
            else None
        )
        inline = self._inline
        screens = self._screens
        #: pool groups, posted by the first poll (or ``begin``) just before it waits
        self._posts: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self._run = getattr(executor, "post", executor.submit)
        free: list[int] = []  # the calls of the last group no screen holds back
        for t, i, args in tool_groups:
            held = screens or t.needs_approval
            if t.inline and not held:
                inline.append((self._run_tool, (t, i, args)))
            else:
                self._posts.append((self._run_tool, (t, i, args)))
                free = [] if held else [i]
        for source, calls in batches.values():
            if getattr(source, "inline", False) is True and not screens:
                inline.append((self._run_source, (source, calls)))
            else:
                self._posts.append((self._run_source, (source, calls)))
                free = [] if screens else [i for i, _ in calls]
        #: the calls whose start the poller reports as it posts them: those of a lone
        #: group that no screen holds back, which starts at once on a ``DaemonPool``
        #: thread (so the worker's only report is the result: one wake-up of the
        #: poller per call instead of two)
        self._starts = (
            free if len(self._posts) == 1 and isinstance(executor, DaemonPool) else []
        )

    def _post(self) -> None:
        """Hand the pool groups to the pool, right before the poller blocks. An idle
        worker's wake-up is kept in ``_wake``: the poll gives it as it waits, with the
        GIL let go, so the worker does not find it taken (``Inbox.get``)."""
        posts, self._posts = self._posts, []
        announced = bool(self._starts)
        pool = self._pool
        for fn, args in posts:
            if pool is None:
                self._run(fn, *args, announced, True)
                continue
            wake = pool.post_quiet(fn, *args, announced, True)
            if wake is not None:
                self._give()
                self._wake = wake

    def _give(self) -> None:
        """Give the kept wake-up of a pool thread now (the poll will not wait)."""
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.give()

    def _reject(self, i: int, text: str) -> None:
        self._inbox.put(("started", i))
        self._inbox.put(("finished", i, _Outcome((TextPart(text),), True, 0.0)))

    def _admit(self, i: int, call: ToolCall, needs_approval: bool) -> bool:
        """Whether call ``i`` may run (on its tool thread); a subclass screens here
        (every call when it sets ``_screens``, else the calls that need approval)."""
        return True

    def _ended(self, i: int, parts: tuple[Part, ...], error: bool) -> None:
        """Call ``i`` has its result (on its tool thread); a subclass that sets
        ``_screens`` watches here."""

    def _finished(
        self,
        i: int,
        parts: tuple[Part, ...],
        error: bool,
        t: float,
        pooled: bool = False,
    ) -> None:
        """Report call ``i`` finished, on its tool thread (``pooled``: a pool thread
        running a posted group, which reports as its last act: ``deliver_last``)."""
        if self._screens:
            self._ended(i, parts, error)
        report = ("finished", i, _Outcome(parts, error, t))
        if pooled:
            deliver_last(self._inbox, report)
        else:
            self._inbox.put(report)

    def _context(self, i: int) -> ToolContext:
        use = self._uses[i]
        put = self._inbox.put
        return self._new_context(
            use.id,
            use.name,
            self._session_id,
            self._cancel,
            lambda text: put(("progress", i, text)),
            lambda event: put(("forward", i, event)),
            self._turn_id,
            lambda event: put(("publish", i, event)),
        )

    def _new_context(self, *args: Any) -> ToolContext:
        """A call's ``ToolContext`` from its arguments; a subclass may make a richer one."""
        return ToolContext(*args)

    def _run_tool(
        self,
        t: Tool,
        i: int,
        args: dict[str, Any],
        announced: bool = False,
        pooled: bool = False,
    ) -> None:
        """Run call ``i`` (``announced``: its start was reported when it was posted;
        ``pooled``: on a pool thread, see ``_finished``)."""
        use = self._uses[i]
        if (self._screens or t.needs_approval) and not self._admit(
            i, ToolCall(use.id, use.name, args, self._turn_id), t.needs_approval
        ):
            return
        if not announced:
            self._inbox.put(("started", i))
        with self._claim:
            if self._cancel.is_set():  # cancelled before it ran: it never will
                return
            self._ran[i] = True
        t0 = time.perf_counter()
        try:
            context = self._context(i) if t.takes_context else self._batch_context
            value = t.invoke(args, context)
            parts, error = to_parts(value, self._limits), False
        except ABORTING as exc:
            self._inbox.put(("abort", exc))
            return
        except BaseException as exc:  # every other failure becomes a readable result
            text = failure_text(t.name, exc)
            get_logger("navi_core.tools").warning(text, exc_info=exc)
            parts, error = (TextPart(text),), True
        self._finished(i, parts, error, time.perf_counter() - t0, pooled)

    def _run_source(
        self,
        source: ToolSource,
        calls: list[tuple[int, ToolCall]],
        announced: bool = False,
        pooled: bool = False,
    ) -> None:
        """Run one source's calls as a batch (``announced``, ``pooled``: as in
        ``_run_tool``)."""
        if not (calls := [(i, c) for i, c in calls if self._admit(i, c, False)]):
            return
        if not announced:
            for i, _ in calls:
                self._inbox.put(("started", i))
        with self._claim:
            if self._cancel.is_set():
                return
            for i, _ in calls:
                self._ran[i] = True
        t0 = time.perf_counter()
        batch = [c for _, c in calls]
        reported = [False] * len(calls)
        as_completed = getattr(source, "call_batch_as_completed", None)
        method = "call_batch" if as_completed is None else "call_batch_as_completed"
        try:
            if as_completed is not None:  # each call reported as it finishes
                contexts = [self._context(i) for i, _ in calls]
                for k, value in as_completed(batch, contexts):
                    if not (type(k) is int and 0 <= k < len(calls)) or reported[k]:
                        raise RuntimeError(
                            f"{type(source).__name__}.{method} reported call {k!r} "
                            f"twice or out of range ({len(calls)} calls)"
                        )
                    reported[k] = True
                    i, call = calls[k]
                    if not self._settle(i, call, value, time.perf_counter() - t0):
                        return
                values: list[Any] = []
            else:
                # a source that takes the calls' contexts hears of progress and cancel
                with_contexts = getattr(source, "call_batch_with", None)
                if with_contexts is not None:
                    contexts = [self._context(i) for i, _ in calls]
                    values = list(with_contexts(batch, contexts))
                else:
                    values = list(source.call_batch(batch))
                if len(values) > len(calls):
                    raise RuntimeError(
                        f"{type(source).__name__}.call_batch returned {len(values)} "
                        f"results for {len(calls)} calls"
                    )
        except ABORTING as exc:
            self._inbox.put(("abort", exc))
            return
        except BaseException as exc:
            seconds = time.perf_counter() - t0
            get_logger("navi_core.tools").warning(
                "%s.%s failed", type(source).__name__, method, exc_info=exc
            )
            for (i, call), done in zip(calls, reported, strict=True):
                if not done:  # what was reported before the failure stands
                    text = ResultText.failed(call.name, exc)
                    self._finished(i, (TextPart(text),), True, seconds, pooled)
            return
        seconds = time.perf_counter() - t0
        # Fewer results than calls: the answered ones are kept, the rest marked.
        unanswered = [
            (i, call)
            for (i, call), done in zip(calls, reported, strict=True)
            if not done
        ]
        given = len(values) + len(calls) - len(unanswered)
        missing = RuntimeError(
            f"{type(source).__name__}.{method} returned no result for this call "
            f"({given} results for {len(calls)} calls)"
        )
        values += [missing] * (len(unanswered) - len(values))
        for (i, call), value in zip(unanswered, values, strict=True):
            if not self._settle(i, call, value, seconds, pooled):
                return

    def _settle(
        self, i: int, call: ToolCall, value: Any, seconds: float, pooled: bool = False
    ) -> bool:
        """Report what a source gave for call ``i``: a value, a ``ToolResult`` (its parts
        and error flag as they are; the call decides the id), or an exception as an
        error result. False when it was one that aborts the turn (reported so)."""
        parts: tuple[Part, ...]
        if isinstance(value, ABORTING):
            self._inbox.put(("abort", value))
            return False
        if isinstance(value, BaseException):
            text = failure_text(call.name, value)
            parts, error = (TextPart(text),), True
        else:
            error = False
            if isinstance(value, ToolResult):  # the source's own: its error flag kept
                value, error = value.parts, value.is_error
            try:
                parts = to_parts(value, self._limits)
            except Exception as exc:
                text = ResultText.unusable(call.name, exc)
                parts, error = (TextPart(text),), True
        self._finished(i, parts, error, seconds, pooled)
        return True

    @property
    def done(self) -> bool:
        """True when every call has finished."""
        return self._pending == 0

    def begin(self, timeout: float | None = None) -> list[Event]:
        """The events of the batch's first millisecond (at most ``timeout``): calls queued
        behind one that blocks at once get threads now, not at the host's next pull."""
        wait = _GRACE if timeout is None else min(_GRACE, timeout)
        if wait <= 0:  # timeout=0: the calls start now, their events at the next poll
            for i in self._starts:
                self._inbox.put(("started", i))
            self._post()
            self._give()
            return []
        try:
            return self.poll(wait)
        except TimeoutError:
            return []

    def poll(self, timeout: float | None = None) -> list[Event]:
        """Wait for progress and return the events it produced (at least one).

        Raises:
            Cancelled, KeyboardInterrupt, MemoryError: a tool aborted the turn.
            TimeoutError: nothing happened within ``timeout`` seconds.
        """
        events: list[Event] = []
        block = True
        pool = self._pool
        if self._posts:
            for i in self._starts:  # reported now, and the poll still waits
                self._take(("started", i), events)
            self._post()  # before the inline calls: the pool's run beside them
        try:
            if self._inline:
                self._give()
                self._run_inline()
            while self._pending:
                if not block:
                    item = self._inbox.get_nowait()
                    if item is None:
                        break
                else:
                    wait = timeout
                    short = pool is not None and pool.stalled
                    if short:  # calls wait behind one that may block before it starts
                        wait = _GRACE if timeout is None else min(_GRACE, timeout)
                    item = self._inbox.get(wait, self._wake)  # gives it, whatever
                    self._wake = None
                    if item is None:
                        if not short:
                            if events:  # the starts reported by _post
                                break
                            raise TimeoutError("no tool progressed in time")
                        pool.catch_up()  # type: ignore[union-attr]
                        if timeout is not None:
                            timeout -= wait  # type: ignore[operator]
                            if timeout <= 0:
                                if events:
                                    break
                                raise TimeoutError("no tool progressed in time")
                        continue
                block = False
                if item[0] == "wake":
                    self._woken = False
                    break
                self._take(item, events)
        finally:
            self._give()  # a poll that did not wait (or failed) still starts the calls
        if pool is not None:
            # calls still queued wait behind ones that block (or run long): start them
            pool.catch_up()
        return events

    def _run_inline(self) -> None:
        """Run the inline groups here, in the model's order; they report through the
        inbox as a pool thread would. A ``wake`` (a stop asked for) leaves the rest
        for a later poll, or unstarted when the batch is cancelled."""
        inline = self._inline
        while inline and not self._woken and not self._cancel.is_set():
            run, args = inline.pop(0)
            run(*args)

    def _take(self, item: tuple[Any, ...], events: list[Event]) -> None:
        """Apply one report from a tool thread, appending the events it makes."""
        kind = item[0]
        if kind == "abort":
            raise item[1]
        if kind == "wake" or kind == "held":  # held: settled, waits for approval
            self._pending -= kind == "held"
            return
        i = item[1]
        use = self._uses[i]
        if kind == "started":
            self._started[i] = time.perf_counter()
            events.append(ToolStarted(use.id, use.name))
        elif kind == "progress" or kind == "forward":
            if self._outcomes[i] is None:
                wrap = ToolProgress if kind == "progress" else SubagentEvent
                events.append(wrap(use.id, item[2]))
        elif kind == "publish":
            if self._outcomes[i] is None:
                events.append(item[2])
        elif self._outcomes[i] is None:
            outcome: _Outcome = item[2]
            self._outcomes[i] = outcome
            self._pending -= 1
            error = short_error(outcome.parts) if outcome.is_error else None
            events.append(
                ToolFinished(use.id, use.name, outcome.is_error, outcome.seconds, error)
            )

    def wake(self) -> None:
        """Make a ``poll`` blocked on another thread return (any thread); one running
        inline calls returns after the call it is in."""
        self._woken = True
        self._inbox.put(("wake",))

    def cancel(self) -> list[Event]:
        """Stop the batch: tell the tools, keep what finished, close what started.

        Returns the events not returned yet: the starts and ends of calls that
        finished meanwhile, then a ``ToolFinished`` (an error, "cancelled") for each
        call that started and did not finish. Calls still running are left to their
        threads, and the pool gets new threads for the next batch.
        """
        with self._claim:
            self._cancel.set()
        self._give()
        events: list[Event] = []
        while (item := self._inbox.get_nowait()) is not None:
            if item[0] != "abort":
                self._take(item, events)
        now = time.perf_counter()
        for i, use in enumerate(self._uses):
            started = self._started[i]
            if self._outcomes[i] is None and started is not None:
                seconds = now - started  # as long as it ran, up to the cancel
                events.append(
                    ToolFinished(use.id, use.name, True, seconds, "cancelled")
                )
        if self._pending > self._unrun() and self._abandon is not None:
            self._abandon()  # pool threads are still busy with calls of this batch
        return events

    def _unrun(self) -> int:
        """How many calls are left in groups never run or never posted (no thread
        holds them)."""
        groups = [*self._inline, *self._posts]
        return sum(1 if run == self._run_tool else len(args[1]) for run, args in groups)

    def finished_results(self) -> dict[str, ToolResult]:
        """The results of the calls that finished so far, by call id."""
        while (item := self._inbox.get_nowait()) is not None:
            if item[0] == "finished":
                self._take(item, [])
        return {
            use.id: ToolResult(use.id, o.parts, o.is_error)
            for use, o in zip(self._uses, self._outcomes, strict=True)
            if o is not None
        }

    def cancelled_message(self) -> Message:
        """Results for a cancelled batch: finished calls keep theirs, the rest say so."""
        results = []
        for i, (use, outcome) in enumerate(
            zip(self._uses, self._outcomes, strict=True)
        ):
            if outcome is None:
                text = (
                    ResultText.cancelled_while_running(use.name)
                    if self._ran[i]
                    else ResultText.cancelled_before_start(use.name)
                )
                results.append(error_result(use.id, text))
            else:
                results.append(ToolResult(use.id, outcome.parts, outcome.is_error))
        return Message("user", tuple(results), wire=self._wire)

    def message(self) -> Message:
        """The user message carrying every result, in the model's order."""
        results = []
        for use, outcome in zip(self._uses, self._outcomes, strict=True):
            assert outcome is not None, "message() before every call finished"
            results.append(ToolResult(use.id, outcome.parts, outcome.is_error))
        return Message("user", tuple(results), wire=self._wire)

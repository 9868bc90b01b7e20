"""Runs one response's tool calls: grouped by owner, concurrent, results in model order.

Each call to a plain ``Tool`` is its own group; every call to one ``ToolSource`` forms
one batch run on one thread. Groups run concurrently on the agent's thread pool and
report back through a queue, so the Stream can return ``ToolStarted``/``ToolFinished``
as calls start and finish while the result message keeps the model's order.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .config import ImageLimits
from .conversation import (
    Message,
    Part,
    TextPart,
    ToolResult,
    ToolUse,
    WireIdentity,
    decode_arguments,
)
from .errors import Cancelled
from .events import Event, ToolFinished, ToolStarted
from .tool_results import to_parts
from .tools import Tool, ToolCall, ToolRegistry, ToolSource

__all__ = [
    "ABORTING",
    "Dispatch",
    "ToolRunner",
    "describe",
    "error_result",
    "interrupted_results",
]

#: Exceptions that abort the whole turn instead of becoming an error result.
ABORTING: tuple[type[BaseException], ...] = (Cancelled, KeyboardInterrupt, MemoryError)


def error_result(call_id: str, text: str) -> ToolResult:
    """An error result the model can read."""
    return ToolResult(call_id, (TextPart(text),), is_error=True)


def interrupted_results(
    uses: Sequence[ToolUse],
    wire: WireIdentity | None = None,
    known: Mapping[str, ToolResult] | None = None,
) -> Message:
    """Results for calls whose run was interrupted (crash, abort, close).

    Calls whose result is ``known`` keep it; the others get an error result saying
    they may or may not have run. They are never re-run by navi_core.
    """
    known = known or {}
    results = tuple(
        known.get(u.id)
        or error_result(
            u.id,
            f"Tool {u.name!r} was interrupted before it returned a result: it may or "
            "may not have taken effect, and it was not run again. Check before "
            "calling it again.",
        )
        for u in uses
    )
    return Message("user", results, wire=wire)


def describe(exc: BaseException) -> str:
    """``Type: message`` (or just ``Type``), for error texts."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(slots=True)
class _Outcome:
    parts: tuple[Part, ...]
    is_error: bool
    seconds: float


class Dispatch:
    """One batch of tool calls in flight; ``poll`` returns events as calls progress."""

    __slots__ = ("_inbox", "_limits", "_outcomes", "_pending", "_uses", "_wire")

    def __init__(
        self,
        uses: Sequence[ToolUse],
        registry: ToolRegistry,
        executor: Executor,
        limits: ImageLimits,
        wire: WireIdentity | None,
    ) -> None:
        self._uses = tuple(uses)
        self._limits = limits
        self._wire = wire
        self._outcomes: list[_Outcome | None] = [None] * len(self._uses)
        self._inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._pending = len(self._uses)
        tool_groups: list[tuple[Tool, int, dict[str, Any]]] = []
        batches: dict[int, tuple[ToolSource, list[tuple[int, ToolCall]]]] = {}
        for i, use in enumerate(self._uses):
            owner = registry.owner(use.name)
            if owner is None:
                known = ", ".join(registry.names()) or "none"
                self._reject(i, f"Unknown tool {use.name!r}; available tools: {known}.")
                continue
            args = decode_arguments(use.input)
            if isinstance(args, str):
                self._reject(
                    i,
                    f"Tool {use.name!r} was not run: its arguments are not a complete "
                    f"JSON object ({args}). Arguments received: {use.input[:200]!r}",
                )
                continue
            if isinstance(owner, Tool):
                tool_groups.append((owner, i, args))
            else:
                batches.setdefault(id(owner), (owner, []))[1].append(
                    (i, ToolCall(use.id, use.name, args))
                )
        for t, i, args in tool_groups:
            executor.submit(self._run_tool, t, i, args)
        for source, calls in batches.values():
            executor.submit(self._run_source, source, calls)

    def _reject(self, i: int, text: str) -> None:
        self._inbox.put(("started", i))
        self._inbox.put(("finished", i, _Outcome((TextPart(text),), True, 0.0)))

    def _run_tool(self, t: Tool, i: int, args: dict[str, Any]) -> None:
        self._inbox.put(("started", i))
        t0 = time.perf_counter()
        try:
            value = t.invoke(args)
            parts = to_parts(value, self._limits)
            outcome = _Outcome(parts, False, time.perf_counter() - t0)
        except ABORTING as exc:
            self._inbox.put(("abort", exc))
            return
        except BaseException as exc:  # every other failure becomes a readable result
            text = f"Tool {t.name!r} failed: {describe(exc)}"
            logging.getLogger("navi_core.tools").warning(text, exc_info=exc)
            outcome = _Outcome((TextPart(text),), True, time.perf_counter() - t0)
        self._inbox.put(("finished", i, outcome))

    def _run_source(
        self, source: ToolSource, calls: list[tuple[int, ToolCall]]
    ) -> None:
        for i, _ in calls:
            self._inbox.put(("started", i))
        t0 = time.perf_counter()
        try:
            values = list(source.call_batch([c for _, c in calls]))
            if len(values) != len(calls):
                raise RuntimeError(
                    f"{type(source).__name__}.call_batch returned {len(values)} "
                    f"results for {len(calls)} calls"
                )
        except ABORTING as exc:
            self._inbox.put(("abort", exc))
            return
        except BaseException as exc:
            seconds = time.perf_counter() - t0
            logging.getLogger("navi_core.tools").warning(
                "%s.call_batch failed", type(source).__name__, exc_info=exc
            )
            for i, call in calls:
                text = f"Tool {call.name!r} failed: {describe(exc)}"
                self._inbox.put(
                    ("finished", i, _Outcome((TextPart(text),), True, seconds))
                )
            return
        seconds = time.perf_counter() - t0
        for (i, call), value in zip(calls, values, strict=True):
            if isinstance(value, ABORTING):
                self._inbox.put(("abort", value))
                return
            if isinstance(value, BaseException):
                text = f"Tool {call.name!r} failed: {describe(value)}"
                outcome = _Outcome((TextPart(text),), True, seconds)
            else:
                try:
                    outcome = _Outcome(to_parts(value, self._limits), False, seconds)
                except Exception as exc:
                    text = f"Tool {call.name!r} returned an unusable value: {describe(exc)}"
                    outcome = _Outcome((TextPart(text),), True, seconds)
            self._inbox.put(("finished", i, outcome))

    @property
    def done(self) -> bool:
        """True when every call has finished."""
        return self._pending == 0

    def poll(self, timeout: float | None = None) -> list[Event]:
        """Wait for progress and return the events it produced (at least one).

        Raises:
            Cancelled, KeyboardInterrupt, MemoryError: a tool aborted the turn.
            TimeoutError: nothing happened within ``timeout`` seconds.
        """
        events: list[Event] = []
        block = True
        while self._pending:
            try:
                item = self._inbox.get(block=block, timeout=timeout if block else None)
            except queue.Empty:
                if block:
                    raise TimeoutError("no tool progressed in time") from None
                break
            block = False
            kind = item[0]
            if kind == "abort":
                raise item[1]
            i = item[1]
            use = self._uses[i]
            if kind == "started":
                events.append(ToolStarted(use.id, use.name))
            else:
                outcome: _Outcome = item[2]
                self._outcomes[i] = outcome
                self._pending -= 1
                events.append(
                    ToolFinished(use.id, use.name, outcome.is_error, outcome.seconds)
                )
        return events

    def finished_results(self) -> dict[str, ToolResult]:
        """The results of the calls that finished so far, by call id."""
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if item[0] == "finished" and self._outcomes[item[1]] is None:
                self._outcomes[item[1]] = item[2]
                self._pending -= 1
        return {
            use.id: ToolResult(use.id, o.parts, o.is_error)
            for use, o in zip(self._uses, self._outcomes, strict=True)
            if o is not None
        }

    def cancelled_message(self) -> Message:
        """Results for a cancelled batch: finished calls keep theirs, the rest say so."""
        results = []
        for use, outcome in zip(self._uses, self._outcomes, strict=True):
            if outcome is None:
                results.append(
                    error_result(
                        use.id, f"Tool {use.name!r} was cancelled before it finished."
                    )
                )
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


class ToolRunner:
    """The registry and the thread pool that tool batches run on.

    The pool is sized by ``Config.max_tool_threads`` of the batch that starts it and
    rebuilt when a later config asks for another size.
    """

    __slots__ = ("_executor", "_size", "registry")

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self._executor: ThreadPoolExecutor | None = None
        self._size = 0

    def start(
        self,
        uses: Sequence[ToolUse],
        threads: int,
        limits: ImageLimits,
        wire: WireIdentity | None,
    ) -> Dispatch:
        """Start running ``uses`` on ``threads`` threads; the batch reports by ``poll``."""
        executor = self._executor
        if executor is None or self._size != threads:
            if executor is not None:
                executor.shutdown(wait=False)
            executor = self._executor = ThreadPoolExecutor(
                max_workers=threads, thread_name_prefix="navi-tool"
            )
            self._size = threads
        return Dispatch(uses, self.registry, executor, limits, wire)

    def shutdown(self) -> None:
        """Stop the pool; calls still running finish on their threads."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

"""Lifecycle hooks: code that watches a turn and may block or hold its tool calls.

A ``Hook`` has four no-op methods; override the ones you need and pass the hook to
``Agent(hooks=[...])`` or ``Agent.add_hook``. Hooks run in registration order.

Threads: ``on_turn_start`` runs in ``Agent.run()``/``resume()``, on the thread that
calls them, before the stream exists for the host; ``on_completion`` runs on the thread
that drives the stream (inside ``Stream.next()``), after the answer was committed.
``on_tool_start`` and ``on_tool_end`` run on the tool thread of the call they concern
(``navi-tool-*``), just before and just after the tool, so a slow policy check never
stalls the other calls of a batch; a cancel abandons that thread, dropping a running
hook, and the start hooks after it are skipped. A call ``resume()`` runs after its
approval passes the start hooks again: a veto still blocks it, an approval ask does
not hold it twice.

``on_tool_start`` may return ``Veto(reason)`` (the call gets an error result with the
reason and does not run; later start hooks are skipped) or ``NeedsApproval()`` (the
turn ends with ``StopReason.APPROVAL_REQUIRED`` until ``Agent.approve``/``deny``).
An exception there fails closed: the call is blocked as by a veto, and the model
reads only that a tool_start hook blocked it, never the exception's text (it may hold
a policy backend's secrets). Every exception a hook raises is recorded as a
``HookFailure`` in ``TurnComplete.hook_failures``; in the other stages it changes
nothing else. A call that cannot run at all (an unknown tool, arguments that are not a
JSON object) gets its error result without passing the hooks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .conversation import Message, ToolResult
from .events import HookFailure, TurnComplete
from .tools._results import BLOCKED_BY_HOOK, ResultText, error_result
from .tools._tool import ToolCall

__all__ = [
    "BLOCKED_BY_HOOK",
    "Hook",
    "HookRunner",
    "NeedsApproval",
    "TurnInfo",
    "Veto",
    "check_hooks",
    "veto_result",
]


@dataclass(frozen=True, slots=True)
class Veto:
    """Returned by ``on_tool_start``: do not run this call; the model reads ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    """Returned by ``on_tool_start``: hold this call until a person approves it."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """What ``on_turn_start`` learns about the turn beginning."""

    turn_id: str
    session_id: str
    #: the user message that started it; None for ``Agent.resume``
    prompt: Message | None


class Hook:
    """Base class of lifecycle hooks; every method does nothing unless overridden."""

    def on_turn_start(self, turn: TurnInfo) -> None:
        """A turn begins (before its first request)."""

    def on_tool_start(self, call: ToolCall) -> Veto | NeedsApproval | None:
        """A tool call is about to run; return ``Veto`` or ``NeedsApproval`` to hold it."""
        return None

    def on_tool_end(self, call: ToolCall, result: ToolResult) -> None:
        """A tool call has its result (also a vetoed or failed one)."""

    def on_completion(self, turn: TurnComplete) -> None:
        """The turn ended; its answer is committed already."""


def check_hooks(hooks: Iterable[object]) -> tuple[Hook, ...]:
    """``hooks`` as a tuple; a TypeError naming the first that is not a ``Hook``."""
    out = tuple(hooks)
    for h in out:
        if not isinstance(h, Hook):
            raise TypeError(f"hooks must be Hook instances, not {type(h).__name__}")
    return out  # type: ignore[return-value]


def _name(hook: Hook) -> str:
    return type(hook).__name__


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class HookRunner:
    """The hooks of one turn and the failures they raised; safe across tool threads."""

    __slots__ = ("_failures", "_mutex", "hooks")

    def __init__(self, hooks: Sequence[Hook]) -> None:
        self.hooks = tuple(hooks)
        self._mutex = threading.Lock()
        self._failures: list[HookFailure] = []

    def __bool__(self) -> bool:
        return bool(self.hooks)

    @property
    def failures(self) -> tuple[HookFailure, ...]:
        """Every failure recorded so far, in the order they happened."""
        with self._mutex:
            return tuple(self._failures)

    def _record(
        self, hook: Hook, stage: str, exc: Exception, call_id: str | None = None
    ) -> None:
        with self._mutex:
            self._failures.append(
                HookFailure(_name(hook), stage, _describe(exc), call_id)
            )

    def turn_start(self, turn: TurnInfo) -> None:
        """Run every ``on_turn_start``."""
        for h in self.hooks:
            try:
                h.on_turn_start(turn)
            except Exception as exc:
                self._record(h, "turn_start", exc)

    def tool_start(
        self, call: ToolCall, cancelled: threading.Event | None = None
    ) -> Veto | NeedsApproval | None:
        """Run the start hooks: the first veto (or failure) wins; else any approval ask.

        A set ``cancelled`` skips the hooks left and blocks the call.
        """
        held: NeedsApproval | None = None
        for h in self.hooks:
            if cancelled is not None and cancelled.is_set():
                return Veto(ResultText.cancelled_before_start(call.name))
            try:
                decision = h.on_tool_start(call)
            except Exception as exc:
                self._record(h, "tool_start", exc, call.id)
                return Veto(ResultText.blocked_by_hook(call.name))
            if isinstance(decision, Veto):
                return decision
            if isinstance(decision, NeedsApproval) and held is None:
                held = decision
        return held

    def tool_end(self, call: ToolCall, result: ToolResult) -> None:
        """Run every ``on_tool_end`` with the call's result."""
        for h in self.hooks:
            try:
                h.on_tool_end(call, result)
            except Exception as exc:
                self._record(h, "tool_end", exc, call.id)

    def completion(self, turn: TurnComplete) -> None:
        """Run every ``on_completion``."""
        for h in self.hooks:
            try:
                h.on_completion(turn)
            except Exception as exc:
                self._record(h, "completion", exc)


def veto_result(call_id: str, name: str, veto: Veto) -> ToolResult:
    """The error result of a vetoed call."""
    return error_result(call_id, ResultText.vetoed(name, veto.reason))

"""Lifecycle hooks: code that watches a turn and may block or hold its tool calls.

A ``Hook`` has five no-op methods; override the ones you need and pass the hook to
``Agent(hooks=[...])`` or ``Agent.add_hook``. Hooks run in registration order.

Threads: ``on_session_start`` and ``on_turn_start`` run in the stream's first step,
inside the first ``next()``, on the stream's worker thread (``navi-stream``) while the
driving thread waits for them, so a ``cancel()`` ends the turn even while one blocks.
``on_session_start`` runs only in the session's first turn: the ``run()`` that finds
no user or assistant message in the session (a session reopened by another agent or
process has some, and a ``resume()`` continues a turn). ``on_completion`` runs on the
thread that drives the stream (inside ``Stream.next()``), after the answer was
committed. ``on_tool_start`` and ``on_tool_end`` run on the tool thread of the call
they concern (``navi-tool-*``), just before and just after the tool, so a slow policy
check never stalls the other calls of a batch; the ``ToolCall`` they get names its
turn (``turn_id``). A call ``resume()`` runs after its approval passes the start hooks
again: a veto still blocks it, an approval ask does not hold it twice.

Nothing of a turn runs after its ``TurnComplete``: a cancel (or the turn timeout)
abandons a hook that is running, no hook call of the turn starts once it ended (the
start hooks after a blocked one, the end hooks of its call), and each call still
running then is recorded in ``TurnComplete.hook_failures`` as abandoned; one that
raises when it finally returns is logged (``navi_core.hooks``).

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

import enum
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ._ids import publish
from ._logs import get_logger
from .conversation import Message, ToolResult
from .events import HookFailure, TurnComplete
from .tools._results import BLOCKED_BY_HOOK, ResultText, error_result
from .tools._tool import ToolCall

__all__ = [
    "ABANDONED",
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
    """What ``on_turn_start`` (and ``on_session_start``) learn about the turn
    beginning."""

    turn_id: str
    session_id: str
    #: the user message that started it; None for ``Agent.resume``
    prompt: Message | None


class Hook:
    """Base class of lifecycle hooks; every method does nothing unless overridden."""

    def on_session_start(self, turn: TurnInfo) -> None:
        """The session's first turn begins (before its ``on_turn_start``); once per
        session, not once per agent."""

    def on_turn_start(self, turn: TurnInfo) -> None:
        """A turn begins (in its first step, before its first request)."""

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


#: the error text recorded for a hook call that the end of its turn abandoned
ABANDONED: Final = "abandoned: the turn ended before it returned"

_LOG: Final = get_logger("navi_core.hooks")


class _Outcome(enum.Enum):
    """What ``HookRunner._run`` returns instead of a hook's value."""

    #: the hook raised (recorded)
    FAILED = "failed"
    #: the turn ended before the call started, or while it ran: it does not count
    GONE = "gone"


class HookRunner:
    """The hooks of one turn and the failures they raised; safe across tool threads.

    ``end()`` closes it as the turn ends: no hook call starts after (``on_completion``
    aside, which is that end), and the calls running then are recorded as abandoned.
    """

    __slots__ = ("_ended", "_failures", "_mutex", "_running", "hooks", "turn_id")

    def __init__(self, hooks: Sequence[Hook], turn_id: str = "") -> None:
        self.hooks = tuple(hooks)
        self.turn_id = turn_id
        self._mutex = threading.Lock()
        self._failures: list[HookFailure] = []
        #: the hook calls running now: hook, stage, call id
        self._running: dict[object, tuple[Hook, str, str | None]] = {}
        self._ended = False

    def __bool__(self) -> bool:
        return bool(self.hooks)

    @property
    def failures(self) -> tuple[HookFailure, ...]:
        """Every failure recorded so far, in the order they happened."""
        with self._mutex:
            return tuple(self._failures)

    def end(self) -> None:
        """The turn ended: no hook call starts from now on, and each one running is
        recorded as abandoned (what it returns or raises later is ignored)."""
        with self._mutex:
            if self._ended:
                return
            self._ended = True
            self._failures.extend(
                HookFailure(_name(h), stage, ABANDONED, call_id)
                for h, stage, call_id in self._running.values()
            )
            self._running.clear()

    def _run(
        self,
        hook: Hook,
        stage: str,
        call_id: str | None,
        method: Callable[..., object],
        *args: object,
    ) -> object:
        """``method(*args)`` of ``hook``, unless the turn ended: its value, or FAILED
        (recorded), or GONE when the turn ended before it started or while it ran."""
        key = object()
        with self._mutex:
            if self._ended:
                return _Outcome.GONE
            self._running[key] = (hook, stage, call_id)
        try:
            value = method(*args)
        except Exception as exc:
            with self._mutex:
                live = self._running.pop(key, None) is not None
                if live:
                    self._failures.append(
                        HookFailure(_name(hook), stage, _describe(exc), call_id)
                    )
            if live:
                return _Outcome.FAILED
            # its failure has no turn left to be reported in; its text may hold secrets
            _LOG.warning(
                "%s.on_%s of turn %s raised %s after the turn ended",
                _name(hook), stage, self.turn_id, type(exc).__name__,
            )  # fmt: skip
            return _Outcome.GONE
        with self._mutex:
            live = self._running.pop(key, None) is not None
        return value if live else _Outcome.GONE

    def _skipped(self, stage: str, call_id: str | None) -> None:
        _LOG.warning(
            "the on_%s hooks%s of turn %s were not run: the turn had ended",
            stage, f" of call {call_id}" if call_id else "", self.turn_id,
        )  # fmt: skip

    def session_start(self, turn: TurnInfo) -> None:
        """Run every ``on_session_start``."""
        for h in self.hooks:
            if self._run(h, "session_start", None, h.on_session_start, turn) is (
                _Outcome.GONE
            ):
                return

    def turn_start(self, turn: TurnInfo) -> None:
        """Run every ``on_turn_start``."""
        for h in self.hooks:
            if self._run(h, "turn_start", None, h.on_turn_start, turn) is (
                _Outcome.GONE
            ):
                return

    def tool_start(
        self, call: ToolCall, cancelled: threading.Event | None = None
    ) -> Veto | NeedsApproval | None:
        """Run the start hooks: the first veto (or failure) wins; else any approval ask.

        A set ``cancelled`` (or the turn's end) skips the hooks left and blocks the
        call.
        """
        held: NeedsApproval | None = None
        for h in self.hooks:
            if cancelled is not None and cancelled.is_set():
                return Veto(ResultText.cancelled_before_start(call.name))
            decision = self._run(h, "tool_start", call.id, h.on_tool_start, call)
            if decision is _Outcome.GONE:
                return Veto(ResultText.cancelled_before_start(call.name))
            if decision is _Outcome.FAILED:
                return Veto(ResultText.blocked_by_hook(call.name))
            if isinstance(decision, Veto):
                return decision
            if isinstance(decision, NeedsApproval) and held is None:
                held = decision
        return held

    def tool_end(self, call: ToolCall, result: ToolResult) -> None:
        """Run every ``on_tool_end`` with the call's result (none once the turn
        ended: that is logged)."""
        for h in self.hooks:
            if self._run(h, "tool_end", call.id, h.on_tool_end, call, result) is (
                _Outcome.GONE
            ):
                self._skipped("tool_end", call.id)
                return

    def completion(self, turn: TurnComplete) -> None:
        """Run every ``on_completion`` (on the driving thread, as the turn ends)."""
        for h in self.hooks:
            try:
                h.on_completion(turn)
            except Exception as exc:
                with self._mutex:
                    self._failures.append(
                        HookFailure(_name(h), "completion", _describe(exc))
                    )


def veto_result(call_id: str, name: str, veto: Veto) -> ToolResult:
    """The error result of a vetoed call."""
    return error_result(call_id, ResultText.vetoed(name, veto.reason))


publish(globals())

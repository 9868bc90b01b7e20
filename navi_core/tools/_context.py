"""``ToolContext``: what a running tool call may know and do, and how a tool's
parameters ask for it."""

from __future__ import annotations

import copy
import threading
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .._ids import publish
from ..events import Event

__all__ = ["ToolContext", "context_parameters"]


class ToolContext:
    """What a running call may know and do; a parameter annotated ``ToolContext`` gets it.

    The parameter is left out of the schema the model sees. ``cancelled`` is set when
    the turn is cancelled or closed: a long tool should check it and return early.
    ``emit(text)`` reports progress, returned by the stream as ``ToolProgress``.
    ``turn_id`` is the id of the turn that made the call (``TurnComplete.turn_id``;
    empty outside a turn).
    """

    __slots__ = (
        "_emit",
        "_forward",
        "_publish",
        "call_id",
        "cancelled",
        "name",
        "session_id",
        "turn_id",
    )

    def __init__(
        self,
        call_id: str,
        name: str,
        session_id: str | None = None,
        cancelled: threading.Event | None = None,
        emit: Callable[[str], None] | None = None,
        forward: Callable[[Event], None] | None = None,
        turn_id: str = "",
        publish: Callable[[Event], None] | None = None,
    ) -> None:
        self.call_id = call_id
        self.name = name
        self.session_id = session_id
        self.cancelled = cancelled if cancelled is not None else threading.Event()
        self.turn_id = turn_id
        self._emit = emit
        self._forward = forward
        self._publish = publish

    def emit(self, text: str) -> None:
        """Report progress of this call (``ToolProgress(call_id, text)``)."""
        if self._emit is not None:
            self._emit(str(text))

    def forward(self, event: Event) -> None:
        """Hand an event of a sub-agent this call runs to the parent stream, where it
        arrives as ``SubagentEvent(call_id, event)`` (a no-op outside a stream)."""
        if self._forward is not None:
            self._forward(event)

    def publish(self, event: Event) -> None:
        """Hand ``event`` of this call to the stream, which returns it as it is
        (between the call's ``ToolStarted`` and ``ToolFinished``; the todo tool's
        ``TodoUpdated``); a no-op outside a stream."""
        if self._publish is not None:
            self._publish(event)

    def copy_with(
        self, cancelled: threading.Event, on_emit: Callable[[], None] | None = None
    ) -> ToolContext:
        """A copy (of the same class) with its own ``cancelled``, whose ``emit`` also
        calls ``on_emit``: for work run on the call's behalf, such as a timed call
        whose idle clock each report restarts."""
        report = self._emit

        def emit(text: str) -> None:
            if on_emit is not None:
                on_emit()
            if report is not None:
                report(text)

        clone = copy.copy(self)  # a subclass (a sub-agent's lineage) keeps its own
        clone.cancelled = cancelled
        object.__setattr__(clone, "_emit", emit)
        return clone

    def __repr__(self) -> str:
        return f"ToolContext(call_id={self.call_id!r}, name={self.name!r})"


def context_parameters(hints: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the parameters annotated ``ToolContext`` or ``ToolContext | None``
    (injected, not in the schema)."""
    return tuple(k for k, v in hints.items() if _is_context(v))


def _is_context(hint: Any) -> bool:
    if hint is ToolContext:
        return True
    args = typing.get_args(hint)  # Optional[ToolContext], ToolContext | None
    return (
        bool(args)
        and ToolContext in args
        and all(a is ToolContext or a is type(None) for a in args)
    )


publish(globals())

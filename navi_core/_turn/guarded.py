"""``GuardedDispatch``: a tool batch whose calls pass the hooks and the approval rule.

On each call's tool thread, before the tool: the ``on_tool_start`` hooks (a veto or a
failing hook blocks the call), then the approval rule (``Tool.needs_approval`` or a
hook's ``NeedsApproval``) which holds the call instead of running it. After the tool,
or for a blocked call with its error result: the ``on_tool_end`` hooks, and the
``on_result`` callback (a resumed approved call stores its result there at once).

A held call reports no ``ToolStarted``; it counts as settled, so the batch is done when
every other call finished, and ``held`` names what waits. Calls are told apart by their
ordinal (their place in the response), never by the model's id, which two calls of
one response may share. Sub-agent usage is counted by the turn from the
``SubagentEvent``s the batch returns; a call that takes a ``ToolContext`` gets a
``LineageContext``, so a sub-agent it runs joins the turn's ``Lineage``. A resumed
batch runs only its approved calls; ``preset`` holds the results the others already
have, and the result message puts every call back in the model's order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..conversation import Message, Part, ToolResult, ToolUse
from ..hooks import HookRunner, NeedsApproval, Veto, veto_result
from ..tools._dispatch import Dispatch
from ..tools._results import ResultText, error_result
from ..tools._tool import ToolCall, ToolContext
from .lineage import Lineage, LineageContext

__all__ = ["CallGuard", "GuardedDispatch"]


class CallGuard:
    """What a batch checks around its calls: hooks, approvals, result sink."""

    __slots__ = ("approved", "hooks", "on_result")

    def __init__(
        self,
        hooks: HookRunner,
        *,
        approved: bool = False,
        on_result: Callable[[int, ToolResult], None] | None = None,
    ) -> None:
        self.hooks = hooks
        #: the calls were approved already: no approval rule applies
        self.approved = approved
        #: gets each call's ordinal and result
        self.on_result = on_result

    def screen(
        self, call: ToolCall, needs_approval: bool, cancelled: threading.Event
    ) -> Veto | NeedsApproval | None:
        """The start hooks and the approval rule for ``call``."""
        decision = self.hooks.tool_start(call, cancelled) if self.hooks else None
        if isinstance(decision, Veto) or self.approved:
            return decision if isinstance(decision, Veto) else None
        if decision is None and needs_approval:
            return NeedsApproval()
        return decision

    def finished(self, ordinal: int, call: ToolCall, result: ToolResult) -> None:
        """The end hooks and the result sink, on the call's tool thread."""
        if self.hooks:
            self.hooks.tool_end(call, result)
        if self.on_result is not None:
            self.on_result(ordinal, result)


class GuardedDispatch(Dispatch):
    """A ``Dispatch`` that runs each call through a ``CallGuard`` (see the module)."""

    __slots__ = (
        "_calls",
        "_guard",
        "_held",
        "_lineage",
        "_order",
        "_ordinals",
        "_preset",
    )

    def __init__(
        self,
        uses: Sequence[ToolUse],
        *args: Any,
        guard: CallGuard,
        preset: Mapping[int, ToolResult] | None = None,
        order: Sequence[ToolUse] | None = None,
        ordinals: Sequence[int] | None = None,
        lineage: Lineage | None = None,
        **kwargs: Any,
    ) -> None:
        # set before the base starts the tool threads, which read them
        self._guard = guard
        self._calls: dict[int, ToolCall] = {}
        self._held: dict[int, str] = {}
        self._preset = dict(preset or {})
        self._order = tuple(order if order is not None else uses)
        #: each call's place in ``order`` (the calls run may be a part of it)
        self._ordinals = tuple(ordinals if ordinals is not None else range(len(uses)))
        self._lineage = lineage if lineage is not None else Lineage()
        # every call is screened and watched when a hook or a sink wants to see it
        self._screens = bool(guard.hooks.hooks) or guard.on_result is not None
        super().__init__(uses, *args, **kwargs)

    @property
    def held(self) -> dict[int, str]:
        """The calls held for approval (ordinal -> the reason a hook gave)."""
        return dict(self._held)

    @property
    def order(self) -> tuple[ToolUse, ...]:
        """Every call of the response, in the model's order."""
        return self._order

    # -- on the tool threads ------------------------------------------------------------

    def _admit(self, i: int, call: ToolCall, needs_approval: bool) -> bool:
        """Run the start hooks and the approval rule; False: blocked or held here."""
        self._calls[i] = call
        guard = self._guard
        if not guard.hooks.hooks and (guard.approved or not needs_approval):
            return True  # nothing to screen
        decision = self._guard.screen(call, needs_approval, self._cancel)
        if isinstance(decision, NeedsApproval):
            self._held[self._ordinals[i]] = decision.reason
            self._inbox.put(("held", i))
            return False
        if isinstance(decision, Veto):
            result = veto_result(call.id, call.name, decision)
            self._inbox.put(("started", i))
            self._finished(i, result.parts, True, 0.0)
            return False
        return True

    def _ended(self, i: int, parts: tuple[Part, ...], error: bool) -> None:
        call = self._calls.get(i)
        if call is not None:
            result = ToolResult(call.id, parts, error)
            self._guard.finished(self._ordinals[i], call, result)

    def _new_context(self, *args: Any) -> ToolContext:
        return LineageContext(self._lineage, *args)

    # -- results ------------------------------------------------------------------------

    def _merged(self, ran: Message) -> Message:
        """``ran`` (a result per call run, in their order) with the preset results,
        every call of the response in the model's order."""
        by_ordinal = dict(zip(self._ordinals, ran.tool_results, strict=True))
        results = tuple(
            self._preset.get(k)
            or by_ordinal.get(k)
            or error_result(u.id, ResultText.did_not_run(u.name))
            for k, u in enumerate(self._order)
        )
        return Message("user", results, wire=ran.wire)

    def message(self) -> Message:
        """Every result in the model's order; a held call reads as not run."""
        if not self._held:
            ran = super().message()
            if not self._preset and self._order == self._uses:
                return ran  # every call ran, in the model's order already
            return self._merged(ran)
        finished = self.finished_by_ordinal()
        results = tuple(
            finished.get(k) or error_result(u.id, ResultText.held(u.name))
            for k, u in zip(self._ordinals, self._uses, strict=True)
        )
        return self._merged(Message("user", results, wire=self._wire))

    def cancelled_message(self) -> Message:
        return self._merged(super().cancelled_message())

    def finished_by_ordinal(self) -> dict[int, ToolResult]:
        """The results known so far (preset, and of the calls that finished), by
        ordinal: calls sharing an id keep their own."""
        super().finished_results()  # takes in the results reported meanwhile
        return self.taken_by_ordinal()

    def taken_by_ordinal(self) -> dict[int, ToolResult]:
        """The results known to the polling thread so far (preset, and of the calls
        whose end a poll took in), by ordinal; the reports still queued are left for
        the next poll."""
        ran = {
            self._ordinals[i]: ToolResult(use.id, o.parts, o.is_error)
            for i, (use, o) in enumerate(zip(self._uses, self._outcomes, strict=True))
            if o is not None
        }
        return {**self._preset, **ran}

    def finished_results(self) -> dict[str, ToolResult]:
        return {self._order[k].id: r for k, r in self.finished_by_ordinal().items()}

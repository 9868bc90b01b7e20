"""``TurnExtras``: what one turn carries beside its phase machine.

The hooks of the turn (and the failures they raised) with the start hooks still to
run, the observers its events are published to, the planning step, a held batch
being resumed, the calls the turn ends holding for approval, the usage of the
sub-agents its tools ran and the ``Lineage`` that bounds and stops them. ``Stream``
calls it at a few fixed points (first step, publish, open, dispatch, dispatch done,
stop, finish, end); the agent builds one per turn.

A sub-agent's usage and cost reach its parent turn in the batch's events, once per
sub-agent turn: in its ``TurnComplete``, or, for a turn that ended without one (it
failed), in a ``ChildSpent`` its ``SubAgent`` forwards, which the parent counts and
drops (the host never sees it). A summary written by a separate compaction provider
is counted the same way: at that provider's price when it is known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import final

from .. import approvals
from .._ids import new_id
from .._logs import get_logger
from ..approvals import ResumePlan
from ..config import Config, Pricing
from ..conversation import Message, ToolResult, ToolUse, Usage
from ..events import (
    Cost,
    Event,
    MessageComplete,
    StopReason,
    SubagentEvent,
    TurnComplete,
)
from ..hooks import Hook, HookRunner, TurnInfo
from ..providers.base import ProviderStream
from ..session import Session
from ..store.base import Approval, ApprovalState
from ..subscribe import Observers
from ..tools._dispatch import Dispatch
from .guarded import CallGuard, GuardedDispatch
from .lineage import Lineage, adopted
from .offload import Op
from .planning import PlanStep
from .thinking import watch_thinking

__all__ = ["ChildSpent", "TurnExtras"]

_log = get_logger("navi_core.tools")


@final
@dataclass(frozen=True, slots=True)
class ChildSpent(Event):
    """What a sub-agent turn that ended without ``TurnComplete`` (it failed) spent:
    ``usage`` as its ``TurnComplete`` would have counted it, ``cost`` at its own
    model's price (None: no known price). Its ``SubAgent`` forwards it; the parent
    turn counts it and drops it from the events it returns."""

    usage: Usage
    cost: Cost | None


class TurnExtras:
    """The per-turn state of hooks, observers, approvals, planning and sub-agents."""

    __slots__ = (
        "claimed",
        "extra_usage",
        "greeting",
        "hooks",
        "lineage",
        "observers",
        "pending",
        "plan",
        "priced_cost",
        "resume_plan",
        "saved",
        "saves_progress",
        "session",
        "turn_id",
        "unpriced_usage",
    )

    def __init__(
        self,
        session: Session,
        hooks: Sequence[Hook] = (),
        observers: Observers | None = None,
        *,
        plan: PlanStep | None = None,
        resume_plan: ResumePlan | None = None,
        prompt: Message | None = None,
        first: bool = False,
    ) -> None:
        self.session = session
        #: the turn's id (``Stream.turn_id``, ``TurnComplete.turn_id``)
        self.turn_id = new_id()
        self.hooks = HookRunner(hooks, self.turn_id)
        #: the start hooks, run once by the turn's first step (None: no hook)
        self.greeting: Callable[[], None] | None = (
            partial(
                _greet, self.hooks, TurnInfo(self.turn_id, session.id, prompt), first
            )
            if self.hooks
            else None
        )
        self.observers = observers if observers is not None else Observers()
        #: the planning request still to make before the first response
        self.plan = plan
        #: the held batch ``resume()`` found, until its dispatch starts
        self.resume_plan = resume_plan
        #: the calls this turn ends holding (``TurnComplete.pending_approvals``)
        self.pending: tuple[ToolUse, ...] = ()
        #: usage of the requests beside the turn's responses (the plan, summaries)
        #: and of the sub-agent turns run by this turn's tools
        self.extra_usage = Usage()
        #: what the sub-agent turns and the summaries of a separate compaction
        #: provider cost, those with a known price, at their own price
        self.priced_cost = Cost(0.0, 0.0, 0.0, 0.0)
        #: the part of ``extra_usage`` priced at this turn's price: the plan, and the
        #: summaries and sub-agent turns that have no price of their own
        self.unpriced_usage = Usage()
        #: a sub-agent's turn: the lineage its parent admitted; else made with the
        #: first tool batch
        self.lineage: Lineage | None = adopted()
        #: the records of the approved calls the resumed batch runs, by ordinal
        self.claimed: dict[int, Approval] = {}
        #: whether the running batch is saved as its calls finish (``keep_progress``;
        #: a resumed held batch stores each result itself), and how many results
        #: the store holds for it
        self.saves_progress = False
        self.saved = 0

    def hold_again(self) -> bool:
        """True when the resumed batch still has undecided calls: nothing runs, and
        they become this turn's ``pending_approvals``."""
        plan = self.resume_plan
        if plan is None or not plan.pending:
            return False
        self.pending = plan.pending
        return True

    def take_plan(self) -> PlanStep | None:
        """The planning step, once (None when there is none or it was taken)."""
        plan, self.plan = self.plan, None
        return plan

    def planned(self, plan: PlanStep, op: Op[Message]) -> list[MessageComplete]:
        """Commit the plan of a finished planning request; its usage counts."""
        events = plan.done(op)
        self.add_usage(plan.usage)
        return events

    def add_usage(self, usage: Usage, cost: Cost | None = None) -> None:
        """Count a request the turn made beside its responses (a plan, a summary) or
        a sub-agent turn: its usage, and its ``cost`` at its own price (its usage at
        the turn's price when ``cost`` is None)."""
        self.extra_usage = self.extra_usage + usage
        if cost is None:
            self.unpriced_usage = self.unpriced_usage + usage
        else:
            self.priced_cost = self.priced_cost + cost

    def total(self, usage: Usage) -> Usage:
        """The turn's usage from ``usage``, its responses': with the plan, the
        summaries and the sub-agent turns (``TurnComplete.usage``)."""
        return usage + self.extra_usage

    def watch(self, response: ProviderStream, config: Config) -> ProviderStream:
        """The opened response under the thinking-stall limit."""
        return watch_thinking(response, config)

    def polled(self, events: list[Event]) -> list[Event]:
        """Tool events as a batch returns them; a sub-agent's usage joins the turn's
        (from its ``TurnComplete``, or the ``ChildSpent`` of a failed one, dropped)."""
        spent = False
        for ev in events:
            if type(ev) is SubagentEvent:
                child = ev.event
                if type(child) is TurnComplete:
                    self.add_usage(child.usage, child.cost)
                elif type(child) is ChildSpent:
                    self.add_usage(child.usage, child.cost)
                    spent = True
        if not spent:
            return events
        return [
            ev
            for ev in events
            if not (type(ev) is SubagentEvent and type(ev.event) is ChildSpent)
        ]

    def cost_of(self, usage: Usage, pricing: Pricing) -> Cost:
        """What the turn spent: its own ``usage`` and the plan at ``pricing``; each
        sub-agent turn, and each summary of a separate compaction provider, at its
        own price (at ``pricing`` when it has none)."""
        return pricing.cost_of(usage + self.unpriced_usage) + self.priced_cost

    def _store_result(self, ordinal: int, result: ToolResult) -> None:
        self.session.store.move_approval(
            self.session.id,
            self.claimed[ordinal],
            ApprovalState.RUNNING,
            ApprovalState.DONE,
            result=result,
        )

    def dispatch_factory(
        self, uses: Sequence[ToolUse]
    ) -> tuple[Sequence[ToolUse], Callable[..., Dispatch]]:
        """The calls to run for a response's ``uses`` and the batch factory for them.

        The first batch of a resumed turn runs only the approved calls of the held
        batch, the others keeping the results they have.
        """
        plan, self.resume_plan = self.resume_plan, None
        if self.lineage is None:
            self.lineage = Lineage()
        self.saves_progress = plan is None or tuple(uses) != plan.uses
        if plan is not None and not self.saves_progress:
            self.claimed = {a.ordinal: a for a, _ in plan.run}
            self.saved = len(plan.uses)  # the held batch, cleared once answered
            guard = CallGuard(self.hooks, approved=True, on_result=self._store_result)
            factory = partial(
                GuardedDispatch,
                guard=guard,
                preset=plan.known,
                order=uses,
                ordinals=[a.ordinal for a, _ in plan.run],
                lineage=self.lineage,
                turn_id=self.turn_id,
            )
            return [use for _, use in plan.run], factory
        guard = CallGuard(self.hooks)
        return uses, partial(
            GuardedDispatch, guard=guard, lineage=self.lineage, turn_id=self.turn_id
        )

    def stop_children(self) -> None:
        """The turn stops or ended: stop every sub-agent turn its tools run."""
        if self.lineage is not None:
            self.lineage.stop()

    def ended(self) -> None:
        """The turn reached DONE or FAILED: no hook call of it starts any more (one
        running is abandoned), and no sub-agent turn of it runs on."""
        if self.hooks:
            self.hooks.end()
        self.stop_children()

    def keep_progress(self, dispatch: Dispatch, *, final: bool = False) -> None:
        """Save the running batch when the driver took in results while other calls
        of it still run (``approvals.keep_running``), so that a process that stops
        before the batch's result message keeps them. ``final``: the batch was left
        unanswered (the turn failed); save what finished even if the batch is done.

        A store that fails here fails nothing: the result message still follows.
        """
        if not self.saves_progress or not isinstance(dispatch, GuardedDispatch):
            return
        if dispatch.done and not final:
            return  # its result message is committed next
        finished = dispatch.taken_by_ordinal()
        held = dispatch.held
        # a call held meanwhile is saved pending at once, so that it can be decided
        # while the batch runs and is never read as interrupted after a crash
        if len(finished) + len(held) <= self.saved:
            return
        try:
            approvals.keep_running(
                self.session, self.turn_id, dispatch.order, finished, held
            )
        except Exception as exc:
            _log.warning(
                "could not save the finished calls of a running batch: %s", exc
            )
            return
        self.saved = len(finished) + len(held)

    def batch_answered(self) -> None:
        """The batch's result message was committed: clear what the store kept of it
        (what ``keep_progress`` saved, or the held batch a resumed turn ran)."""
        if not self.saved:
            return
        self.saved = 0
        try:
            approvals.clear(self.session)
        except Exception as exc:  # the next turn's start clears it (``held_batch``)
            _log.warning("could not clear a saved batch: %s", exc)

    def held(self, dispatch: Dispatch) -> bool:
        """Save the batch when calls of it wait for approval; True when they do."""
        if not isinstance(dispatch, GuardedDispatch) or not dispatch.held:
            return False
        self.saved = 0  # the held batch replaces what keep_progress saved
        self.pending = approvals.hold(
            self.session,
            self.turn_id,
            dispatch.order,
            dispatch.finished_by_ordinal(),
            dispatch.held,
        )
        return True

    def complete(
        self,
        reason: StopReason,
        response: str,
        iterations: int,
        tool_calls: int,
        usage: Usage,
        turn_id: str,
        output: object,
        pricing: Pricing | None = None,
    ) -> TurnComplete:
        """The final ``TurnComplete``: usage of plan and sub-agents, its cost, held
        calls, the ``on_completion`` hooks run, and every hook failure (a hook call
        abandoned as the turn ends among them: none starts after)."""
        cost = self.cost_of(usage, pricing) if pricing is not None else None
        usage = self.total(usage)
        done = TurnComplete(
            reason,
            response,
            iterations,
            tool_calls,
            usage,
            turn_id,
            output,
            pending_approvals=self.pending,
            cost=cost,
        )
        if not self.hooks:  # no hook, so no hook failure: built once
            return done
        self.hooks.end()
        self.hooks.completion(done)
        return replace(done, hook_failures=self.hooks.failures)


def _greet(hooks: HookRunner, turn: TurnInfo, first: bool) -> None:
    """The start hooks of a turn: ``on_session_start`` in the session's first turn,
    then ``on_turn_start``."""
    if first:
        hooks.session_start(turn)
    hooks.turn_start(turn)

"""Approvals that survive a restart: holding a batch, deciding, and resuming it.

When a response's calls include one that needs approval (``@tool(needs_approval=
True)`` or ``NeedsApproval()`` from ``on_tool_start``), the calls that need none run,
and the whole batch is saved in the store (``SessionStore.save_approvals``): the
finished calls with their results, the held ones as pending. The turn ends with
``StopReason.APPROVAL_REQUIRED``; the assistant message stays unanswered.

``Agent.approve``/``deny`` move a held call out of pending, in the store, so any
process may decide. ``Agent.resume`` claims each approved call (approved -> running,
one atomic update: of two resuming drivers only one wins), runs it, stores its result
(running -> done), then commits the batch's result message and clears the batch. A
call found running was claimed by a driver that stopped before storing its result:
it may have taken effect, so it is answered as interrupted and never run again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .conversation import ToolResult, ToolUse
from .errors import ApprovalNotPending
from .session import Session
from .store.base import Approval, ApprovalState, SessionStore
from .tools._results import ResultText, error_result

__all__ = [
    "ResumePlan",
    "clear",
    "decide",
    "denied_result",
    "held_batch",
    "hold",
    "plan_resume",
    "settle_for_new_turn",
]


def denied_result(use: ToolUse, reason: str) -> ToolResult:
    """The result the model reads for a denied call."""
    return error_result(use.id, ResultText.denied(use.name, reason))


def hold(
    session: Session,
    uses: Sequence[ToolUse],
    finished: Mapping[str, ToolResult],
    held: Mapping[str, str],
) -> tuple[ToolUse, ...]:
    """Save the batch of ``uses``: ``finished`` results done, ``held`` calls pending.

    Returns the held calls, in the model's order.
    """
    batch = []
    for u in uses:
        if u.id in held:
            batch.append(Approval(u.id, u.name, ApprovalState.PENDING, held[u.id]))
        else:
            result = finished.get(u.id) or error_result(
                u.id, ResultText.did_not_run(u.name)
            )
            batch.append(Approval(u.id, u.name, ApprovalState.DONE, "", result))
    session.store.save_approvals(session.id, batch)
    return tuple(u for u in uses if u.id in held)


def held_batch(session: Session) -> list[Approval]:
    """The stored batch, when it belongs to the unanswered last assistant message.

    A batch the conversation has moved past (its result message was committed before
    a crash cleared it) is cleared here and not returned.
    """
    batch = session.store.approvals(session.id)
    if not batch:
        return []
    last = session.last_dialogue_message()
    ids = [u.id for u in last.tool_uses] if last and last.role == "assistant" else []
    if ids != [a.call_id for a in batch]:
        session.store.save_approvals(session.id, ())
        return []
    return batch


def _held_calls(
    session: Session,
) -> tuple[tuple[ToolUse, ...], list[tuple[Approval, ToolUse]]] | None:
    """The held batch: the calls it answers, and each stored call with its
    ``ToolUse``, in the batch's order; None when no batch is held."""
    batch = held_batch(session)
    if not batch:
        return None
    last = session.last_dialogue_message()
    assert last is not None
    by_id = {u.id: u for u in last.tool_uses}
    return last.tool_uses, [(a, by_id[a.call_id]) for a in batch]


def _answers(
    calls: Sequence[tuple[Approval, ToolUse]],
    other: Callable[[Approval, ToolUse], ToolResult | None],
) -> dict[str, ToolResult]:
    """Results of held calls, by call id: a done call keeps its result, a denied one
    reads as denied, and ``other`` answers the rest, in order (None: no result)."""
    results: dict[str, ToolResult] = {}
    for a, use in calls:
        if a.state is ApprovalState.DONE and a.result is not None:
            result: ToolResult | None = a.result
        elif a.state is ApprovalState.DENIED:
            result = denied_result(use, a.reason)
        else:
            result = other(a, use)
        if result is not None:
            results[a.call_id] = result
    return results


def decide(
    store: SessionStore,
    session_id: str,
    call_id: str,
    state: ApprovalState,
    reason: str = "",
) -> None:
    """Approve (``APPROVED``) or deny (``DENIED``) one pending call, in the store.

    Needs no ``Agent``: a process that does not drive the session (a web page, a
    chat bot) may decide while another one holds it. Deciding the same way twice is
    harmless.

    Raises:
        ApprovalNotPending: no held call has that id, or it was decided otherwise.
    """
    if state not in (ApprovalState.APPROVED, ApprovalState.DENIED):
        raise ValueError(f"a decision is approved or denied, not {state}")
    moved = store.move_approval(
        session_id,
        call_id,
        ApprovalState.PENDING,
        state,
        reason=reason if state is ApprovalState.DENIED else None,
    )
    if moved:
        return
    batch = store.approvals(session_id)
    current = next((a for a in batch if a.call_id == call_id), None)
    if current is None:
        raise ApprovalNotPending(f"no tool call {call_id!r} waits for approval")
    if current.state is not state:
        raise ApprovalNotPending(
            f"tool call {call_id!r} ({current.name}) is {current.state} already"
        )


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """What ``resume`` does with a held batch."""

    #: the assistant message whose calls the batch answers
    uses: tuple[ToolUse, ...]
    #: results known already (done, denied, interrupted), by call id
    known: dict[str, ToolResult]
    #: approved calls this driver claimed and must run now
    run: tuple[ToolUse, ...]
    #: calls still waiting for a decision (the turn ends again at once)
    pending: tuple[ToolUse, ...]


def plan_resume(session: Session) -> ResumePlan | None:
    """Claim the approved calls of the held batch; None when no batch is held.

    Nothing is claimed while a call is still pending.
    """
    held = _held_calls(session)
    if held is None:
        return None
    uses, calls = held
    pending = tuple(use for a, use in calls if a.state is ApprovalState.PENDING)
    if pending:
        return ResumePlan(uses, {}, (), pending)
    run: list[ToolUse] = []
    store, sid = session.store, session.id

    def claim(a: Approval, use: ToolUse) -> ToolResult | None:
        if a.state is ApprovalState.APPROVED and store.move_approval(
            sid, a.call_id, ApprovalState.APPROVED, ApprovalState.RUNNING
        ):
            run.append(use)
            return None
        # running: claimed by a driver that stopped, or by another one now
        return error_result(use.id, ResultText.approved_then_interrupted(use.name))

    known = _answers(calls, claim)
    return ResumePlan(uses, known, tuple(run), ())


def settle_for_new_turn(session: Session) -> dict[str, ToolResult]:
    """Results for a held batch that a new user message leaves behind.

    Finished calls keep their results; the others did not run and say so (a call
    that was running is left to the interrupted-call answer). Call ``clear`` after
    committing them.
    """
    held = _held_calls(session)
    if held is None:
        return {}

    def left(a: Approval, use: ToolUse) -> ToolResult | None:
        if a.state is ApprovalState.RUNNING:  # answered as interrupted
            return None
        return error_result(use.id, ResultText.superseded(use.name))

    return _answers(held[1], left)


def clear(session: Session) -> None:
    """Forget the held batch (after its result message was committed)."""
    session.store.save_approvals(session.id, ())

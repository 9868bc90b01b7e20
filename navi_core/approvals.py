"""Approvals that survive a restart: holding a batch, deciding, and resuming it.

When a response's calls include one that needs approval (``@tool(needs_approval=
True)`` or ``NeedsApproval()`` from ``on_tool_start``), the calls that need none run,
and the whole batch is saved in the store (``SessionStore.save_approvals``): the
finished calls with their results, the held ones as pending. The turn ends with
``StopReason.APPROVAL_REQUIRED``; the assistant message stays unanswered.

Each stored call is bound to the call it holds, not only to the model's call id:
its place in the response (``ordinal``: two calls of one response may share an id),
the turn that held it, and the digest of its tool name and canonical arguments
(``call_digest``). Models and servers reuse ids such as ``call_0`` across turns, so a
decision names the call it means (an ``Approval`` as listed, its ``key``, or the
``ToolUse``) and is refused with ``ApprovalMismatch`` when the held call is another.

``Agent.approve``/``deny`` move a held call out of pending, in the store, so any
process may decide. ``Agent.resume`` claims each approved call (approved -> running,
one atomic update: of two resuming drivers only one wins), runs it, stores its result
(running -> done), then commits the batch's result message and clears the batch. A
call found running was claimed by a driver that stopped before storing its result:
it may have taken effect, so it is answered as interrupted and never run again.

Any batch whose calls finish apart is saved the same way while it runs
(``keep_running``): finished calls done, the others running, so a process that stops
before the batch's result message loses no result that finished.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

import orjson

from .conversation import Message, ToolResult, ToolUse, WireIdentity
from .errors import ApprovalNotPending
from .session import Session
from .store.base import Approval, ApprovalState, SessionStore, same_call
from .tools._results import ResultText, error_result

__all__ = [
    "ApprovalMismatch",
    "CallRef",
    "ResumePlan",
    "call_digest",
    "clear",
    "decide",
    "denied_result",
    "held_batch",
    "hold",
    "keep_running",
    "plan_resume",
    "settle_for_new_turn",
]

#: what a decision names: an ``Approval`` as ``store.approvals`` lists it (or its
#: ``key``), the ``ToolUse`` of ``TurnComplete.pending_approvals``, or a bare call id
CallRef: TypeAlias = Approval | ToolUse | str

#: ``Approval.key``: ordinal, turn id, digest
_KEY: Final = re.compile(r"(\d{1,6}):([0-9A-Za-z_-]*):([0-9a-f]{64})")


class ApprovalMismatch(ApprovalNotPending):
    """A decision names a call that is not the one held: other arguments, another
    tool, or a call of another turn that reused the id. Nothing was decided."""


def call_digest(name: str, arguments: str) -> str:
    """SHA-256 (hex) of ``name`` and the canonical JSON of ``arguments`` (keys sorted,
    no spaces): the same call however the model spaced or ordered its JSON."""
    try:
        body = orjson.dumps(
            [name, orjson.loads(arguments)], option=orjson.OPT_SORT_KEYS
        )
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        body = orjson.dumps([name, None, arguments])  # never run, still bound
    return hashlib.sha256(body).hexdigest()


def denied_result(use: ToolUse, reason: str) -> ToolResult:
    """The result the model reads for a denied call."""
    return error_result(use.id, ResultText.denied(use.name, reason))


def hold(
    session: Session,
    turn_id: str,
    uses: Sequence[ToolUse],
    finished: Mapping[int, ToolResult],
    held: Mapping[int, str],
) -> tuple[ToolUse, ...]:
    """Save the batch of ``uses`` held by turn ``turn_id``: ``finished`` results (by
    ordinal) done, ``held`` calls (ordinal -> the hook's reason) pending, the rest
    done as calls that did not run.

    Returns the held calls still pending, in the model's order: a call decided while
    the batch ran (``keep_running`` saved it pending) keeps that decision.
    """
    states = _save(session, turn_id, uses, finished, held, holding=True)
    return tuple(
        u
        for u, state in zip(uses, states, strict=True)
        if state is ApprovalState.PENDING
    )


def keep_running(
    session: Session,
    turn_id: str,
    uses: Sequence[ToolUse],
    finished: Mapping[int, ToolResult],
    held: Mapping[int, str],
) -> None:
    """Save a batch whose calls still run: ``finished`` results (by ordinal) done,
    ``held`` calls pending, the others running.

    A process that stops before the batch's result message is committed then loses
    no result that finished: ``resume()`` (or the next ``run()``) answers with them,
    and answers a call that was running as interrupted (it is never run again).
    """
    _save(session, turn_id, uses, finished, held, holding=False)


def _save(
    session: Session,
    turn_id: str,
    uses: Sequence[ToolUse],
    finished: Mapping[int, ToolResult],
    held: Mapping[int, str],
    *,
    holding: bool,
) -> list[ApprovalState]:
    """Save the batch of turn ``turn_id`` (``hold``, ``keep_running``); the calls'
    states as stored, in order.

    When the store already holds this batch, only its running calls move (to done
    or pending): a held call saved pending earlier may have been decided since, by
    another process, and that decision stands. ``holding``: the batch ended, so a
    call neither finished nor held did not run.
    """
    store, sid = session.store, session.id

    def settled(i: int, use: ToolUse) -> tuple[ApprovalState, str, ToolResult | None]:
        if (result := finished.get(i)) is not None:
            return ApprovalState.DONE, "", result
        if i in held:
            return ApprovalState.PENDING, held[i], None
        if holding:
            return (
                ApprovalState.DONE,
                "",
                error_result(use.id, ResultText.did_not_run(use.name)),
            )
        return ApprovalState.RUNNING, "", None

    saved = store.approvals(sid)
    if len(saved) == len(uses) and all(
        a.ordinal == i and a.turn_id == turn_id and _binds(a, u)
        for i, (a, u) in enumerate(zip(saved, uses, strict=True))
    ):
        states: list[ApprovalState] = []
        for a, use in zip(saved, uses, strict=True):
            state, reason, result = settled(a.ordinal, use)
            if a.state is ApprovalState.RUNNING and state is not a.state:
                store.move_approval(
                    sid, a, a.state, state, reason=reason or None, result=result
                )
                states.append(state)
            else:
                states.append(a.state)
        return states
    batch = []
    for i, u in enumerate(uses):
        state, reason, result = settled(i, u)
        digest = call_digest(u.name, u.input)
        batch.append(Approval(u.id, u.name, state, reason, result, i, turn_id, digest))
    store.save_approvals(sid, batch)
    return [a.state for a in batch]


def _binds(a: Approval, use: ToolUse) -> bool:
    """Whether the stored ``a`` holds ``use`` (a record from before digests were
    kept is bound to the call id alone)."""
    if a.call_id != use.id or a.name != use.name:
        return False
    return not a.digest or a.digest == call_digest(use.name, use.input)


def held_batch(session: Session) -> list[Approval]:
    """The stored batch, when it belongs to the unanswered last assistant message.

    A batch the conversation has moved past (its result message was committed before
    a crash cleared it, or a newer response reuses its call ids) is cleared here and
    not returned.
    """
    batch = session.store.approvals(session.id)
    if not batch:
        return []
    last = session.last_dialogue_message()
    uses = last.tool_uses if last and last.role == "assistant" else ()
    if len(uses) != len(batch) or not all(
        a.ordinal == i and _binds(a, u)
        for i, (a, u) in enumerate(zip(batch, uses, strict=True))
    ):
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
    return last.tool_uses, list(zip(batch, last.tool_uses, strict=True))


def _answers(
    calls: Sequence[tuple[Approval, ToolUse]],
    other: Callable[[Approval, ToolUse], ToolResult | None],
) -> dict[int, ToolResult]:
    """Results of held calls, by ordinal: a done call keeps its result, a denied one
    reads as denied, and ``other`` answers the rest, in order (None: no result)."""
    results: dict[int, ToolResult] = {}
    for a, use in calls:
        if a.state is ApprovalState.DONE and a.result is not None:
            result: ToolResult | None = a.result
        elif a.state is ApprovalState.DENIED:
            result = denied_result(use, a.reason)
        else:
            result = other(a, use)
        if result is not None:
            results[a.ordinal] = result
    return results


def _named(batch: Sequence[Approval], call: CallRef) -> Approval:
    """The record of ``batch`` that ``call`` names.

    Raises:
        ApprovalMismatch: a record is there, but holds another call.
        ApprovalNotPending: nothing in the batch answers to ``call``.
    """
    if isinstance(call, str) and (m := _KEY.fullmatch(call)):
        ordinal, turn_id, digest = int(m[1]), m[2], m[3]
        here = batch[ordinal] if ordinal < len(batch) else None
        if here is None:
            raise ApprovalNotPending(f"no held tool call has the key {call!r}")
        if (here.turn_id, here.digest) != (turn_id, digest):
            raise ApprovalMismatch(
                f"the held call {here.call_id!r} ({here.name}) is not the one key "
                f"{call!r} names: it was held by another turn, or with other arguments"
            )
        return here
    if isinstance(call, Approval):
        here = batch[call.ordinal] if 0 <= call.ordinal < len(batch) else None
        if here is None or here.call_id != call.call_id:
            raise ApprovalNotPending(
                f"no tool call {call.call_id!r} waits for approval at place "
                f"{call.ordinal}"
            )
        if not same_call(here, call) or here.name != call.name:
            raise ApprovalMismatch(
                f"the held call {here.call_id!r} ({here.name}) is not the one decided "
                "on: it was held by another turn, or with other arguments"
            )
        return here
    call_id = call.id if isinstance(call, ToolUse) else call
    # calls that ran without approval share the id harmlessly: they are not decided
    found = [
        a for a in batch if a.call_id == call_id and a.state is not ApprovalState.DONE
    ]
    if not found:
        raise ApprovalNotPending(f"no tool call {call_id!r} waits for approval")
    if isinstance(call, ToolUse):
        found = [a for a in found if _binds(a, call)]
        if not found:
            raise ApprovalMismatch(
                f"the held call {call_id!r} is not this {call.name} call: it was "
                "held with another tool or other arguments"
            )
    if len(found) > 1:
        raise ApprovalMismatch(
            f"{len(found)} held calls answer to {call_id!r}: decide on one "
            "Approval from store.approvals(session_id), or its key"
        )
    return found[0]


def decide(
    store: SessionStore,
    session_id: str,
    call: CallRef,
    state: ApprovalState,
    reason: str = "",
) -> None:
    """Approve (``APPROVED``) or deny (``DENIED``) one pending call, in the store.

    ``call`` names the call: an ``Approval`` as ``store.approvals`` lists it or its
    ``key`` (bound to the call's place, turn, tool and arguments), the ``ToolUse`` of
    ``TurnComplete.pending_approvals`` (bound to its id, tool and arguments), or a
    bare call id (bound to whichever call is held under that id now). The move in the
    store names the same call, so a batch replaced meanwhile is never decided.

    Needs no ``Agent``: a process that does not drive the session (a web page, a
    chat bot) may decide while another one holds it. Deciding the same way twice is
    harmless.

    Raises:
        ApprovalMismatch: the held call is not the one ``call`` names.
        ApprovalNotPending: no held call answers to ``call``, or it was decided
            otherwise.
    """
    if state not in (ApprovalState.APPROVED, ApprovalState.DENIED):
        raise ValueError(f"a decision is approved or denied, not {state}")
    target = _named(store.approvals(session_id), call)
    moved = store.move_approval(
        session_id,
        target,
        ApprovalState.PENDING,
        state,
        reason=reason if state is ApprovalState.DENIED else None,
    )
    if moved:
        return
    batch = store.approvals(session_id)
    here = batch[target.ordinal] if target.ordinal < len(batch) else None
    if here is None or not same_call(here, target):
        raise ApprovalNotPending(
            f"tool call {target.call_id!r} ({target.name}) is no longer held"
        )
    if here.state is not state:
        raise ApprovalNotPending(
            f"tool call {target.call_id!r} ({target.name}) is {here.state} already"
        )


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """What ``resume`` does with a held batch."""

    #: the assistant message whose calls the batch answers
    uses: tuple[ToolUse, ...]
    #: results known already (done, denied, interrupted), by ordinal
    known: dict[int, ToolResult]
    #: approved calls this driver claimed and must run now, with their records
    run: tuple[tuple[Approval, ToolUse], ...]
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
    run: list[tuple[Approval, ToolUse]] = []
    store, sid = session.store, session.id

    def claim(a: Approval, use: ToolUse) -> ToolResult | None:
        if a.state is ApprovalState.APPROVED and store.move_approval(
            sid, a, ApprovalState.APPROVED, ApprovalState.RUNNING
        ):
            run.append((a, use))
            return None
        # running: claimed by a driver that stopped, or by another one now, or
        # running in a batch whose driver stopped before its results were committed
        return error_result(use.id, ResultText.interrupted(use.name))

    known = _answers(calls, claim)
    return ResumePlan(uses, known, tuple(run), ())


def settle_for_new_turn(session: Session, wire: WireIdentity | None) -> Message | None:
    """The result message for a held batch that a new user message leaves behind;
    None when no batch is held.

    Finished calls keep their results; a call that was running reads as interrupted;
    the others did not run and say so. Call ``clear`` after committing it.
    """
    held = _held_calls(session)
    if held is None:
        return None
    uses, calls = held

    def left(a: Approval, use: ToolUse) -> ToolResult:
        if a.state is ApprovalState.RUNNING:
            return error_result(use.id, ResultText.interrupted(use.name))
        return error_result(use.id, ResultText.superseded(use.name))

    known = _answers(calls, left)
    return Message("user", tuple(known[i] for i in range(len(uses))), wire=wire)


def clear(session: Session) -> None:
    """Forget the held batch (after its result message was committed)."""
    session.store.save_approvals(session.id, ())

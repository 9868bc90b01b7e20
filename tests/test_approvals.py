"""Approvals in one process: holding a batch, approve/deny, resume, a new prompt."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from navi_core import (
    Agent,
    ApprovalNotPending,
    Hook,
    MemoryStore,
    NeedsApproval,
    Scripted,
    StopReason,
    Text,
    Tool,
    ToolCall,
    ToolDispatchComplete,
    ToolFinished,
    ToolResult,
    ToolStarted,
    ToolUse,
    TurnComplete,
    Veto,
    approvals,
    tool,
)
from navi_core.approvals import ApprovalMismatch
from navi_core.conversation import TextPart
from navi_core.errors import SessionError
from navi_core.events import Event
from navi_core.session import Session
from navi_core.store import SQLiteStore
from navi_core.store.base import Approval, ApprovalState

RAN: list[str] = []


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    RAN.append(f"pay {amount}")
    return f"paid {amount}"


@tool
def balance() -> str:
    """Read the balance."""
    RAN.append("balance")
    return "100"


def drive(stream_ctx: object) -> list[Event]:
    from navi_core import Stream

    assert isinstance(stream_ctx, Stream)
    with stream_ctx as stream:
        return list(stream)


def held_agent(*later: list[Text]) -> tuple[Agent, Scripted, TurnComplete]:
    RAN.clear()
    provider = Scripted(
        [
            [Text("checking"), ToolUse("b1", "balance", "{}"),
             ToolUse("p1", "pay", '{"amount": 30}')],
            *later,
        ]
    )  # fmt: skip
    agent = Agent(provider, tools=[pay, balance])
    events = drive(agent.run("pay 30"))
    done = events[-1]
    assert isinstance(done, TurnComplete)
    return agent, provider, done


def test_a_call_needing_approval_ends_the_turn_and_is_stored() -> None:
    agent, provider, done = held_agent()
    assert done.stop_reason is StopReason.APPROVAL_REQUIRED
    assert [u.id for u in done.pending_approvals] == ["p1"]
    assert RAN == ["balance"]  # the call needing no approval ran once
    batch = agent.store.approvals(agent.session_id)
    assert [(a.call_id, a.state) for a in batch] == [
        ("b1", ApprovalState.DONE),
        ("p1", ApprovalState.PENDING),
    ]
    assert batch[0].result is not None and batch[0].result.text == "100"
    # the assistant message is committed and waits for its results
    assert agent.conversation.messages[-1].tool_uses[1].id == "p1"
    assert provider.calls == 1


def test_approve_then_resume_runs_the_call_once_and_goes_on() -> None:
    agent, provider, _ = held_agent([Text("paid, balance was 100")])
    agent.approve("p1")
    agent.approve("p1")  # the same decision twice is harmless
    events = drive(agent.resume())
    assert RAN == ["balance", "pay 30"]
    assert [e.call_id for e in events if isinstance(e, ToolStarted)] == ["p1"]
    results = next(e for e in events if isinstance(e, ToolDispatchComplete)).message
    assert [(r.tool_use_id, r.text) for r in results.tool_results] == [
        ("b1", "100"),
        ("p1", "paid 30"),
    ]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.END_TURN
    assert done.response == "paid, balance was 100"
    assert done.pending_approvals == ()
    # another resume has nothing left to run
    assert [type(e) for e in drive(agent.resume())] == [TurnComplete]
    assert RAN == ["balance", "pay 30"]
    assert provider.requests[-1][-1] == results.with_wire(agent.provider.wire)


def test_deny_gives_the_model_the_reason_and_never_runs_the_tool() -> None:
    agent, _provider, _ = held_agent([Text("ok, not paying")])
    agent.deny("p1", "over the monthly limit")
    events = drive(agent.resume())
    assert RAN == ["balance"]
    results = next(e for e in events if isinstance(e, ToolDispatchComplete)).message
    denied = results.tool_results[1]
    assert denied.is_error
    assert (
        denied.text == "Tool 'pay' was not approved by the user: over the monthly limit"
    )
    with pytest.raises(ApprovalNotPending):
        agent.approve("p1")


def test_resume_while_undecided_ends_again_without_a_request() -> None:
    agent, provider, _ = held_agent()
    events = drive(agent.resume())
    assert [type(e) for e in events] == [TurnComplete]
    done = events[0]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.APPROVAL_REQUIRED
    assert [u.id for u in done.pending_approvals] == ["p1"]
    assert provider.calls == 1 and RAN == ["balance"]


def test_unknown_or_decided_calls_are_refused() -> None:
    agent, _, _ = held_agent()
    with pytest.raises(ApprovalNotPending, match="no tool call 'nope'"):
        agent.approve("nope")
    agent.deny("p1")
    with pytest.raises(ApprovalNotPending, match="denied already"):
        agent.approve("p1")


def test_a_new_prompt_instead_of_a_decision_answers_the_held_calls() -> None:
    agent, provider, _ = held_agent([Text("fine")])
    events = drive(agent.run("never mind"))
    assert RAN == ["balance"]
    sent = provider.requests[-1]
    results = sent[-2]
    assert [(r.tool_use_id, r.is_error) for r in results.tool_results] == [
        ("b1", False),
        ("p1", True),
    ]
    assert "did not run" in results.tool_results[1].text
    assert sent[-1].text == "never mind"
    assert agent.store.approvals(agent.session_id) == []
    assert isinstance(events[-1], TurnComplete)


def test_needs_approval_from_a_hook_and_a_veto_wins() -> None:
    RAN.clear()

    class AskForBig(Hook):
        def on_tool_start(self, call: ToolCall) -> NeedsApproval | None:
            return NeedsApproval("large amount") if call.name == "balance" else None

    class NoPay(Hook):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            return Veto("payments are frozen") if call.name == "pay" else None

    provider = Scripted(
        [
            [ToolUse("b1", "balance", "{}"), ToolUse("p1", "pay", '{"amount": 5}')],
            [Text("done")],
        ]
    )
    agent = Agent(provider, tools=[pay, balance], hooks=[AskForBig(), NoPay()])
    done = drive(agent.run("go"))[-1]
    assert isinstance(done, TurnComplete)
    assert [u.id for u in done.pending_approvals] == ["b1"]
    held = {a.call_id: a for a in agent.store.approvals(agent.session_id)}
    assert held["b1"].reason == "large amount"
    assert (
        held["p1"].result is not None
        and "payments are frozen" in held["p1"].result.text
    )
    agent.approve("b1")
    events = drive(agent.resume())
    assert RAN == ["balance"]  # approved calls skip the approval ask, vetoes stand
    assert isinstance(events[-1], TurnComplete)


def test_approvals_survive_reopening_the_session() -> None:
    store = MemoryStore()
    RAN.clear()
    first = Agent(
        Scripted([[ToolUse("p1", "pay", '{"amount": 7}')]]), tools=[pay], store=store
    )
    drive(first.run("pay 7"))
    sid = first.session_id
    first.close()
    second = Agent(Scripted([[Text("paid")]]), tools=[pay], store=store, session=sid)
    second.approve("p1")
    done = drive(second.resume())[-1]
    assert isinstance(done, TurnComplete) and done.response == "paid"
    assert RAN == ["pay 7"]


def test_deciding_without_the_agent_while_it_holds_the_session() -> None:
    from navi_core import approvals

    agent, _, _ = held_agent([Text("paid")])
    store, sid = agent.store, agent.session_id
    approvals.decide(store, sid, "p1", ApprovalState.APPROVED)  # e.g. from a web page
    with pytest.raises(ValueError, match="approved or denied"):
        approvals.decide(store, sid, "p1", ApprovalState.RUNNING)
    done = drive(agent.resume())[-1]
    assert isinstance(done, TurnComplete) and done.response == "paid"
    assert RAN == ["balance", "pay 30"]


# -- decisions are bound to the call they name, not to the model's id ----------------


def held_twice(first: str, second: str) -> tuple[Agent, Approval, ToolUse]:
    """Turn 1 holds ``call_0`` = pay(first); a new prompt leaves it behind and turn 2
    holds ``call_0`` = pay(second): the model reused the id. Returns the agent, and
    turn 1's record and call as a decider saw them."""
    RAN.clear()
    provider = Scripted(
        [
            [ToolUse("call_0", "pay", f'{{"amount": {first}}}')],
            [ToolUse("call_0", "pay", f'{{"amount": {second}}}')],
            [Text("done")],
        ]
    )
    agent = Agent(provider, tools=[pay])
    done = drive(agent.run(f"pay {first}"))[-1]
    assert isinstance(done, TurnComplete)
    (record,) = agent.store.approvals(agent.session_id)
    (use,) = done.pending_approvals
    again = drive(agent.run("pay again"))[-1]
    assert isinstance(again, TurnComplete)
    assert again.stop_reason is StopReason.APPROVAL_REQUIRED
    assert [u.id for u in again.pending_approvals] == ["call_0"]
    return agent, record, use


def test_a_decision_on_an_earlier_call_never_lands_on_a_later_one_reusing_its_id() -> (
    None
):
    agent, record, use = held_twice("30", "9999")
    for stale in (record, record.key, use):
        with pytest.raises(ApprovalMismatch, match="call_0"):
            agent.approve(stale)
        with pytest.raises(ApprovalMismatch):
            agent.deny(stale, "no")
    (now,) = agent.store.approvals(agent.session_id)
    assert now.state is ApprovalState.PENDING and now.turn_id != record.turn_id
    done = drive(agent.resume())[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.APPROVAL_REQUIRED and RAN == []
    agent.approve(now)  # the record of the call held now is decided
    done = drive(agent.resume())[-1]
    assert isinstance(done, TurnComplete) and done.response == "done"
    assert RAN == ["pay 9999"]


def test_the_same_call_held_again_by_a_later_turn_needs_its_own_decision() -> None:
    agent, record, _use = held_twice("30", "30")
    with pytest.raises(ApprovalMismatch, match="another turn"):
        agent.approve(record)
    with pytest.raises(ApprovalMismatch, match="another turn"):
        agent.approve(record.key)
    (now,) = agent.store.approvals(agent.session_id)
    assert now.state is ApprovalState.PENDING
    assert (now.call_id, now.digest, now.ordinal) == (
        record.call_id,
        record.digest,
        record.ordinal,
    )
    agent.approve(now.key)
    done = drive(agent.resume())[-1]
    assert isinstance(done, TurnComplete) and done.response == "done"
    assert RAN == ["pay 30"]


def test_a_stale_approved_batch_is_never_run_for_a_newer_call() -> None:
    """A batch a crashed process left approved, whose id the newer held call reuses,
    is not the newer call's: resume drops it and runs nothing."""
    agent, record, _use = held_twice("30", "9999")
    stale = replace(record, state=ApprovalState.APPROVED)
    agent.store.save_approvals(agent.session_id, [stale])
    events = drive(agent.resume())
    assert RAN == []
    assert agent.store.approvals(agent.session_id) == []
    answered = [m for m in agent.conversation.messages if m.tool_results][-1]
    assert "interrupted" in answered.tool_results[0].text
    assert isinstance(events[-1], TurnComplete)


def test_calls_sharing_an_id_beside_a_held_call_keep_their_results(
    tmp_path: Path,
) -> None:
    RAN.clear()
    provider = Scripted(
        [
            [ToolUse("c1", "balance", "{}"), ToolUse("c1", "pay", '{"amount": 5}')],
            [Text("paid 5 of 100")],
        ]
    )
    store = SQLiteStore(tmp_path / "navi.db")
    agent = Agent(provider, tools=[pay, balance], store=store)
    try:
        done = drive(agent.run("pay 5"))[-1]
        assert isinstance(done, TurnComplete)
        assert done.stop_reason is StopReason.APPROVAL_REQUIRED
        batch = store.approvals(agent.session_id)
        assert [(a.name, a.state, a.ordinal) for a in batch] == [
            ("balance", ApprovalState.DONE, 0),
            ("pay", ApprovalState.PENDING, 1),
        ]
        assert batch[0].result is not None and batch[0].result.text == "100"
        agent.approve("c1")  # the one held call with that id: the balance call ran
        events = drive(agent.resume())
    finally:
        agent.close()
        store.close()
    assert RAN == ["balance", "pay 5"]
    results = next(e for e in events if isinstance(e, ToolDispatchComplete)).message
    assert [(r.tool_use_id, r.text, r.is_error) for r in results.tool_results] == [
        ("c1", "100", False),
        ("c1", "paid 5", False),
    ]
    last = events[-1]
    assert isinstance(last, TurnComplete) and last.response == "paid 5 of 100"


def test_identical_calls_sharing_an_id_are_decided_one_by_one() -> None:
    RAN.clear()
    twice = ToolUse("c1", "pay", '{"amount": 5}')
    provider = Scripted([[twice, twice], [Text("paid once")]])
    agent = Agent(provider, tools=[pay])
    done = drive(agent.run("pay 5"))[-1]
    assert isinstance(done, TurnComplete)
    assert done.pending_approvals == (twice, twice)
    for ambiguous in ("c1", twice):
        with pytest.raises(ApprovalMismatch, match="2 held calls"):
            agent.approve(ambiguous)
    first, second = agent.store.approvals(agent.session_id)
    agent.approve(first)
    agent.deny(second.key, "once is enough")
    events = drive(agent.resume())
    assert RAN == ["pay 5"]
    results = next(e for e in events if isinstance(e, ToolDispatchComplete)).message
    assert [r.text for r in results.tool_results] == [
        "paid 5",
        "Tool 'pay' was not approved by the user: once is enough",
    ]


def test_a_decision_on_spaced_or_reordered_arguments_is_the_same_call() -> None:
    RAN.clear()
    provider = Scripted(
        [[ToolUse("c1", "pay", '{"amount":5, "note": "rent"}')], [Text("ok")]]
    )

    @tool(needs_approval=True)
    def pay(amount: int, note: str) -> str:
        """Pay an amount."""
        RAN.append(f"pay {amount} {note}")
        return "paid"

    agent = Agent(provider, tools=[pay])
    drive(agent.run("pay rent"))
    with pytest.raises(ApprovalMismatch):
        agent.approve(ToolUse("c1", "pay", '{"amount": 6, "note": "rent"}'))
    agent.approve(ToolUse("c1", "pay", '{ "note":"rent","amount": 5 }'))
    drive(agent.resume())
    assert RAN == ["pay 5 rent"]


def _apart_tools(gate: threading.Event) -> list[Tool]:
    """``fast`` returns at once; ``slow`` waits for ``gate``."""

    @tool
    def fast() -> str:
        """Answer at once."""
        return "fast finished"

    @tool
    def slow() -> str:
        """Wait for the gate."""
        assert gate.wait(10)
        return "slow finished"

    return [fast, slow]


def _apart_script() -> Scripted:
    """``fast`` and ``slow`` in one response, then an answer."""
    calls = [ToolUse("c1", "fast", "{}"), ToolUse("c2", "slow", "{}")]
    return Scripted([calls, [Text("ok")]])


def test_a_batch_whose_calls_finish_apart_is_saved_until_it_is_answered(
    tmp_path: Path,
) -> None:
    gate = threading.Event()
    store = SQLiteStore(tmp_path / "a.db")
    with store, Agent(_apart_script(), tools=_apart_tools(gate), store=store) as agent:
        seen: list[tuple[str, ApprovalState, str]] = []
        for ev in agent.run("go"):
            if isinstance(ev, ToolFinished) and ev.call_id == "c1":
                seen = [
                    (a.call_id, a.state, a.result.text if a.result else "")
                    for a in store.approvals(agent.session_id)
                ]
                gate.set()
        assert seen == [
            ("c1", ApprovalState.DONE, "fast finished"),
            ("c2", ApprovalState.RUNNING, ""),
        ]
        assert store.approvals(agent.session_id) == []  # answered: cleared
        results = agent.conversation.messages[2].tool_results
        assert [r.text for r in results] == ["fast finished", "slow finished"]


class _NoBatches(SQLiteStore):
    """A store that refuses to save a batch."""

    def save_approvals(self, session_id: str, approvals: Sequence[Approval]) -> None:
        raise SessionError("the batch table is gone")


def test_a_store_that_cannot_save_a_running_batch_fails_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gate = threading.Event()
    store = _NoBatches(tmp_path / "b.db")
    with store, Agent(_apart_script(), tools=_apart_tools(gate), store=store) as agent:
        for ev in agent.run("go"):
            if isinstance(ev, ToolFinished) and ev.call_id == "c1":
                gate.set()
        done = ev
        assert isinstance(done, TurnComplete) and done.response == "ok"
        results = store.load(agent.session_id).messages[2].tool_results
        assert [r.text for r in results] == ["fast finished", "slow finished"]
    assert "could not save the finished calls of a running batch" in caplog.text


def test_a_decision_made_while_the_held_batch_still_ran_stands(
    tmp_path: Path,
) -> None:
    """``keep_running`` saved the held call as pending mid-batch and another process
    approved it then: holding the finished batch keeps that decision."""
    uses = [
        ToolUse("c1", "balance", "{}"),
        ToolUse("c2", "pay", '{"amount": 5}'),
        ToolUse("c3", "balance", "{}"),
    ]
    done = ToolResult("c1", (TextPart("100"),))
    with SQLiteStore(tmp_path / "d.db") as store:
        session = Session.open(store)
        try:
            approvals.keep_running(session, "t1", uses, {0: done}, {1: "a payment"})
            stored = store.approvals(session.id)
            assert [a.state for a in stored] == [
                ApprovalState.DONE,
                ApprovalState.PENDING,
                ApprovalState.RUNNING,
            ]
            approvals.decide(store, session.id, stored[1].key, ApprovalState.APPROVED)
            # another call finishing saves the batch again: the decision stands
            last = ToolResult("c3", (TextPart("90"),))
            finished = {0: done, 2: last}
            approvals.keep_running(session, "t1", uses, finished, {1: "x"})
            assert store.approvals(session.id)[1].state is ApprovalState.APPROVED
            held = approvals.hold(session, "t1", uses, finished, {1: "x"})
            assert held == ()  # decided already: nothing waits
            final = store.approvals(session.id)
            assert [(a.state, a.result) for a in final] == [
                (ApprovalState.DONE, done),
                (ApprovalState.APPROVED, None),
                (ApprovalState.DONE, last),
            ]
            assert final[1].reason == "a payment"
        finally:
            session.close()

"""Approvals in one process: holding a batch, approve/deny, resume, a new prompt."""

from __future__ import annotations

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
    ToolCall,
    ToolDispatchComplete,
    ToolStarted,
    ToolUse,
    TurnComplete,
    Veto,
    tool,
)
from navi_core.events import Event
from navi_core.store.base import ApprovalState

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

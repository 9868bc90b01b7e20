"""``Session``: results kept from an abandoned batch answer only the calls they belong to."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from navi_core import Agent, Cancelled, Scripted, Text, ToolUse, TurnComplete, tool
from navi_core.events import Event
from navi_core.store import SQLiteStore


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    raise Cancelled("the payment backend went away")


@tool
def balance() -> str:
    """Read the balance."""
    return "balance is 100"


@tool
def crash() -> str:
    """Abort the turn."""
    raise Cancelled("the tool aborted the turn")


def drain(agent: Agent, prompt: str | None) -> list[Event]:
    stream = agent.run(prompt) if prompt is not None else agent.resume()
    events: list[Event] = []
    with stream, contextlib.suppress(Cancelled):
        events.extend(stream)
    return events


def test_results_kept_from_a_failed_resumed_batch_never_answer_a_later_call(
    tmp_path: Path,
) -> None:
    """A resumed batch that failed mid-run leaves its finished results with the
    session; a new prompt settles that batch from the store, and a later call that
    reuses one of those ids, abandoned in its turn, reads that it was interrupted,
    not the old result."""
    provider = Scripted(
        [
            [ToolUse("c1", "balance", "{}"), ToolUse("c2", "pay", '{"amount": 5}')],
            [Text("ok, moving on")],
            [ToolUse("c1", "crash", "{}")],  # the model reuses the id c1
            [Text("fine")],
        ]
    )
    store = SQLiteStore(tmp_path / "s.db")
    agent = Agent(provider, tools=[pay, balance, crash], store=store)
    done = drain(agent, "pay 5")[-1]
    assert isinstance(done, TurnComplete) and done.pending_approvals
    agent.approve("c2")
    drain(agent, None)  # the approved call aborts the resumed turn
    drain(agent, "forget it")  # settles the held batch, answers it
    drain(agent, "crash now")  # c1 again: aborts with no result
    drain(agent, "and now?")
    agent.close()
    store.close()
    again = SQLiteStore(tmp_path / "s.db")
    messages = again.load(agent.session_id).messages
    again.close()
    crash_call = max(
        i for i, m in enumerate(messages) if any(u.name == "crash" for u in m.tool_uses)
    )
    (answer,) = messages[crash_call + 1].tool_results
    assert answer.tool_use_id == "c1" and answer.is_error
    assert "balance is 100" not in answer.text
    assert "interrupted" in answer.text


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])

"""``resume(output=T)``: a structured turn that stopped for an approval ends typed.

The turn asks for a ``Receipt`` and stops at a call that needs approval; the call is
approved and the turn resumed with the same type. The resumed request asks the model
for the schema (``response_format`` over real HTTP) and ``TurnComplete.output`` is a
``Receipt``; resumed without it, the answer is left as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from faultkit import openai_stream
from loopback import LoopbackServer, Reply

from navi_core import Agent, StopReason, tool
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore


@dataclass
class Receipt:
    paid: int


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


@pytest.mark.parametrize("typed", [True, False])
def test_a_resumed_structured_turn_ends_with_its_type(
    loopback: LoopbackServer, tmp_path: Path, typed: bool
) -> None:
    loopback.add(
        Reply.sse(openai_stream("", tool_calls=[("c1", "pay", '{"amount": 5}')])),
        Reply.sse(openai_stream('{"paid": 5}')),
    )
    with (
        OpenAIChat("m", loopback.url + "/v1", "k") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
        Agent(provider, tools=[pay], store=store) as agent,
    ):
        held = agent.run("pay 5", output=Receipt).result()
        assert held.stop_reason is StopReason.APPROVAL_REQUIRED
        agent.approve("c1")
        stream = agent.resume(output=Receipt) if typed else agent.resume()
        with stream:
            done = stream.result()
    assert done.stop_reason is StopReason.END_TURN
    first, resumed = (r.json for r in loopback.requests)
    assert "response_format" in first
    if typed:
        assert done.output == Receipt(paid=5)
        assert resumed["response_format"] == first["response_format"]
    else:
        assert done.output is None and done.response == '{"paid": 5}'
        assert "response_format" not in resumed


def test_a_type_that_cannot_be_asked_for_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    with (
        SQLiteStore(tmp_path / "navi.db") as store,
        Agent(OpenAIChat("m", "http://127.0.0.1:9/v1", "k"), store=store) as agent,
    ):
        with pytest.raises(TypeError):
            agent.resume(output=object)
        assert agent.conversation.messages == []

"""Compaction by hand: ``compact_stream``, ``keep_turns`` and a per-call prompt."""

from __future__ import annotations

import pytest

from navi_core import (
    Agent,
    Compacted,
    CompactionConfig,
    CompactionStarted,
    CompactionSummary,
    Config,
    MemoryStore,
    Message,
    NoCompactionPrompt,
    NothingToCompact,
    Scripted,
    Text,
    TextPart,
    ToolResult,
    ToolUse,
    UserMessage,
)
from navi_core.compaction._manual import split_turns

PROMPT = "Summarise."


def turns(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [UserMessage(f"q{i}"), Message("assistant", (Text(f"a{i}"),))]
    return out


def long_turn(iterations: int) -> list[Message]:
    """One prompt, then ``iterations`` tool round trips and an answer."""
    out: list[Message] = [UserMessage("do the long thing")]
    for i in range(iterations):
        out.append(Message("assistant", (ToolUse(f"c{i}", "step", "{}"),)))
        out.append(Message("user", (ToolResult(f"c{i}", (TextPart(f"r{i}"),)),)))
    out.append(Message("assistant", (Text("done"),)))
    return out


def agent_with(
    messages: list[Message], script: list[object], prompt: str | None = PROMPT
) -> tuple[Agent, Scripted]:
    store = MemoryStore()
    sid = store.create().id
    store.append(sid, messages)
    provider = Scripted(script)  # type: ignore[arg-type]
    config = Config(compaction=CompactionConfig(prompt=prompt))
    return Agent(provider, store=store, session=sid, config=config), provider


def test_compact_stream_small_session_with_keep_turns() -> None:
    # keep_verbatim (20,000 tokens) would keep all of it; keep_turns=1 does not
    agent, provider = agent_with(turns(3), ["the summary"])
    events = list(agent.compact_stream(keep_turns=1))
    assert [type(e) for e in events] == [CompactionStarted, Compacted]
    started, done = events
    assert isinstance(started, CompactionStarted) and started.reason == "manual"
    assert started.messages_before == 6
    assert isinstance(done, Compacted)
    assert (done.summarized_messages, done.kept_turns) == (4, 1)
    msgs = agent.conversation.messages
    assert isinstance(msgs[0].content[0], CompactionSummary)
    assert [m.text for m in msgs[1:]] == ["q2", "a2"]
    assert agent.store.history(agent.session_id)[-1] == msgs
    assert provider.calls == 1


def test_keep_turns_keeps_turns_whatever_their_size() -> None:
    big = "x" * 200_000
    messages = [*turns(2), UserMessage(big), Message("assistant", (Text(big),))]
    plan = split_turns(messages, 1)
    assert [m.text for m in plan.kept] == [big, big]
    assert len(plan.prefix) == 4


def test_one_long_turn_is_split_between_iterations() -> None:
    messages = long_turn(3)
    plan = split_turns(messages, 1)
    # the last assistant message is kept; no tool call is parted from its result
    assert plan.kept == (messages[-1],)
    assert len(plan.prefix) == len(messages) - 1
    agent, _ = agent_with(messages, ["summary of the steps"])
    done = list(agent.compact_stream(keep_turns=1))[-1]
    assert isinstance(done, Compacted)
    assert agent.conversation.messages[-1].text == "done"


def test_nothing_to_compact_is_raised_at_once() -> None:
    agent, provider = agent_with(turns(1), ["unused"])
    with pytest.raises(NothingToCompact, match="at least two"):
        agent.compact_stream(keep_turns=1)
    with pytest.raises(NothingToCompact):
        agent.compact_stream()  # keep_verbatim keeps everything of a small session
    assert provider.calls == 0
    assert len(agent.conversation.messages) == 2


def test_per_call_prompt_and_extra_instructions() -> None:
    agent, provider = agent_with(turns(3), ["s"], prompt=None)
    with pytest.raises(NoCompactionPrompt):
        agent.compact_stream(keep_turns=1)
    list(agent.compact_stream("Keep the numbers.", keep_turns=1, prompt="Be terse."))
    request = provider.last_request
    assert request is not None and request.system is not None
    assert request.system.startswith("Be terse.")
    assert "Keep the numbers." in request.system


def test_compact_takes_keep_turns() -> None:
    agent, _ = agent_with(turns(4), ["s"])
    result = agent.compact(keep_turns=2)
    assert (result.compacted, result.summarized_messages, result.kept_turns) == (
        True,
        4,
        2,
    )
    assert agent.compact(keep_turns=2).compacted is False  # summary + 2 turns left


def test_a_failed_summary_changes_nothing() -> None:
    from navi_core import BadRequest

    agent, _ = agent_with(turns(3), [BadRequest("no", status_code=400)])
    before = list(agent.conversation.messages)
    it = agent.compact_stream(keep_turns=1)
    assert isinstance(next(it), CompactionStarted)
    with pytest.raises(BadRequest):
        next(it)
    assert agent.conversation.messages == before
    assert len(agent.store.history(agent.session_id)) == 1

"""Behaviours where the seed library (libpanto) was right and navi_core differed.

- the summary's own measured size (its response's output tokens) anchors the usage
  restated on the kept messages, not an estimate of its text;
- a ``ToolSource`` that returns fewer results than calls keeps the answered ones and
  marks only the missing ones (before: every call of the batch became an error);
- an empty summary from the compaction model falls back to the chat model, like any
  other failure of it (before: ``EmptyAssistantResponse``, no fallback).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faultkit import openai_stream, run_turn
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    CompactionConfig,
    CompactionSummary,
    Config,
    Message,
    Scripted,
    Text,
    ToolResult,
    ToolUse,
    Usage,
    UserMessage,
)
from navi_core.compaction import message_sizes
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore
from navi_core.tokens import estimate_message_tokens
from navi_core.tools import ToolCall, ToolSpec

OLD = [
    UserMessage("Which port does staging use? " * 20),
    Message("assistant", (Text("8443 behind nginx. " * 30),), Usage(300, 40)),
    UserMessage("And the database?"),
    Message("assistant", (Text("PostgreSQL 15."),), Usage(400, 5)),
]


def _seeded(provider: Any, store: SQLiteStore, config: Config) -> Agent:
    sid = store.create().id
    store.append(sid, [m.with_wire(provider.wire) for m in OLD])
    return Agent(provider, store=store, session=sid, config=config)


def test_summary_output_tokens_anchor_the_restated_usage(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        Reply.sse(
            openai_stream(
                "Staging on 8443.",
                usage={"prompt_tokens": 900, "completion_tokens": 77},
            )
        )
    )
    config = Config(compaction=CompactionConfig(keep_verbatim=200, prompt="Summarise."))
    with (
        OpenAIChat("m", loopback.url + "/v1", "sk-test-anchor") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        agent = _seeded(provider, store, config)
        result = agent.compact()
        messages = list(agent.conversation.messages)
        agent.close()
    assert result.compacted
    summary, kept_prompt, kept_answer = messages
    assert estimate_message_tokens(summary) != 77
    assert kept_answer.usage is not None
    assert kept_prompt.text == OLD[2].text
    assert kept_answer.usage.input == 77 + message_sizes(OLD)[2]
    assert kept_answer.usage.output == 5


class Lookup:
    """A ``ToolSource`` whose batch call loses its last answer."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def tools(self) -> Sequence[ToolSpec]:
        schema = {"type": "object", "properties": {"key": {"type": "string"}}}
        return (ToolSpec("lookup", "Look a key up.", schema),)

    def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
        self.batches.append([c.arguments["key"] for c in calls])
        return [f"value of {c.arguments['key']}" for c in calls[:-1]]


def test_tool_source_with_fewer_results_keeps_the_answered_ones(
    loopback: LoopbackServer,
) -> None:
    calls = [(f"call_{k}", "lookup", f'{{"key": "{k}"}}') for k in ("a", "b", "c")]
    loopback.add(
        Reply.sse(openai_stream("", tool_calls=calls)),
        Reply.sse(openai_stream("Two of three.")),
    )
    source = Lookup()
    with (
        OpenAIChat("m", loopback.url + "/v1", "sk-test-source") as provider,
        Agent(provider, tools=[source]) as agent,
    ):
        _, done = run_turn(agent, "Look up a, b and c.")
        results = [
            b
            for m in agent.conversation.messages
            for b in m.content
            if isinstance(b, ToolResult)
        ]
    assert done.response == "Two of three."
    assert source.batches == [["a", "b", "c"]]
    assert [(r.tool_use_id, r.is_error) for r in results] == [
        ("call_a", False),
        ("call_b", False),
        ("call_c", True),
    ]
    assert [p.text for p in results[0].parts] == ["value of a"]  # type: ignore[union-attr]
    assert "no result for this call" in results[2].parts[0].text  # type: ignore[union-attr]
    sent = loopback.requests[1].json["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"][:2] == [
        "value of a",
        "value of b",
    ]


def test_empty_summary_from_the_compaction_model_falls_back(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    summariser = Scripted([[Text("   ")]])
    loopback.add(Reply.sse(openai_stream("Staging on 8443; PostgreSQL 15.")))
    config = Config(
        compaction=CompactionConfig(
            keep_verbatim=200, prompt="Summarise.", provider=summariser
        )
    )
    with (
        OpenAIChat("m", loopback.url + "/v1", "sk-test-fallback") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        agent = _seeded(provider, store, config)
        result = agent.compact()
        first = agent.conversation.messages[0]
        agent.close()
    assert result.compacted
    assert summariser.calls == 1
    assert len(loopback.requests) == 1
    assert first.content == (CompactionSummary("Staging on 8443; PostgreSQL 15."),)


def test_tool_use_ids_are_answered_once() -> None:
    """The marked results still answer every call exactly once."""
    source = Lookup()
    uses = [ToolUse(f"c{i}", "lookup", f'{{"key": "{i}"}}') for i in range(4)]
    provider = Scripted([list(uses), [Text("ok")]])
    with Agent(provider, tools=[source]) as agent:
        run_turn(agent, "go")
        (results,) = [m for m in agent.conversation.messages if m.tool_results]
    assert [r.tool_use_id for r in results.tool_results] == ["c0", "c1", "c2", "c3"]
    assert [r.is_error for r in results.tool_results] == [False, False, False, True]

"""One oversized tool result no longer bricks a session.

A 640 KB tool result in a ~400 KB context: the request overflows, the compaction's
summary request carried the whole oversized prefix and overflowed too, and before the
fix every later turn failed with ``ContextOverflow``. Now the summary request is
bounded (the biggest blocks cut, start and end kept), so compaction fits and the turn
and the next ones answer. The server enforces its window on the real request bytes.
"""

from __future__ import annotations

from pathlib import Path

from faultkit import WindowedServer, openai_stream, run_turn
from loopback import Reply

from navi_core import (
    Agent,
    Compacted,
    CompactionConfig,
    CompactionSummary,
    Config,
    tool,
)
from navi_core.conversation import Message, Text, UserMessage
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore

WINDOW = 400_000
BIG = "".join(f"line {i}: status=ok latency={i % 97}ms\n" for i in range(20_000))


@tool
def read_log() -> str:
    """Read the service log."""
    return BIG


def _bodies() -> list[Reply]:
    return [
        Reply.sse(openai_stream("", tool_calls=[("call_1", "read_log", "{}")])),
        Reply.sse(openai_stream("The log shows 20000 healthy requests.")),  # summary
        Reply.sse(openai_stream("All requests were healthy.")),
        Reply.sse(openai_stream("Still healthy.")),
    ]


def test_an_oversized_result_compacts_and_later_turns_answer(tmp_path: Path) -> None:
    assert len(BIG) > 640_000
    config = Config(compaction=CompactionConfig(prompt="Summarise the conversation."))
    with (
        WindowedServer(WINDOW) as server,
        OpenAIChat("m", server.url + "/v1", "sk-test-oversized") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        server.add(*_bodies())
        with Agent(provider, tools=[read_log], store=store, config=config) as agent:
            events, done = run_turn(agent, "How healthy is the service?")
            assert done.response == "All requests were healthy."
            assert any(isinstance(e, Compacted) for e in events)
            _, again = run_turn(agent, "And now?")
            assert again.response == "Still healthy."
            sid = agent.session_id
        stored = store.load(sid).messages
    sizes = [len(r.body) for r in server.requests]
    # the tool turn overflowed, the whole summary overflowed, a bounded one fitted
    assert server.overflows >= 2
    fitted = [s for s in sizes if s <= WINDOW]
    assert len(fitted) == 4
    assert isinstance(stored[0].content[0], CompactionSummary)
    assert stored[-1].text == "Still healthy."


def test_a_known_window_bounds_the_first_summary_request(tmp_path: Path) -> None:
    """With ``context_window`` set, the one summary request already fits."""
    config = Config(
        compaction=CompactionConfig(
            prompt="Summarise the conversation.", context_window=90_000
        )
    )
    with (
        WindowedServer(WINDOW) as server,
        OpenAIChat("m", server.url + "/v1", "sk-test-oversized") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        server.add(*_bodies()[:3])
        with Agent(provider, tools=[read_log], store=store, config=config) as agent:
            _, done = run_turn(agent, "How healthy is the service?")
    assert done.response == "All requests were healthy."
    # the threshold check compacts before sending; nothing ever overflowed
    assert server.overflows == 0
    (summary,) = [
        r
        for r in server.requests
        if r.json["messages"][0]["content"] == "Summarise the conversation."
    ]
    assert len(summary.body) < WINDOW
    assert (
        "characters cut to fit the summary request"
        in (summary.json["messages"][-1]["content"])
    )


def test_bounded_transcript_cuts_the_biggest_blocks_first() -> None:
    from navi_core.compaction._summary import bounded_transcript, clip_block

    small = [UserMessage(f"question {i}") for i in range(5)]
    big = Message("assistant", (Text("x" * 50_000 + "END"),))
    text = bounded_transcript([*small, big], 2_000)
    for i in range(5):
        assert f"question {i}" in text
    assert text.rstrip().endswith("END")
    assert len(text) < 12_000
    assert clip_block("short", 100) == "short"

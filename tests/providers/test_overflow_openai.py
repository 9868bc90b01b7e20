"""A context overflow through the real OpenAI-compatible path: compact, then retry.

The server on 127.0.0.1 answers the turn with a 400 context-length error, then serves
the summary request, then the retried turn; the requests it records show what went out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import openai_body

from navi_core import (
    Agent,
    Compacted,
    CompactionConfig,
    CompactionStarted,
    Config,
    ContextOverflow,
    Message,
    ProviderRetry,
    Text,
    TextDelta,
    TurnComplete,
    UserMessage,
)
from navi_core.providers.openai_chat import SUMMARY_PREFIX, OpenAIChat
from navi_core.store.sqlite import SQLiteStore

PROMPT = "Summarise the conversation for the assistant."

OPENAI_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, "
        "your messages resulted in 9000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
LLAMA_CPP_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
    }
}


def history() -> list[Message]:
    return [
        UserMessage("Which port does the staging server use?"),
        Message("assistant", (Text("Port 8443, behind the nginx proxy."),)),
        UserMessage("And the database?"),
        Message("assistant", (Text("PostgreSQL 15 on db-staging.internal:5432."),)),
        UserMessage("Thanks."),
        Message("assistant", (Text("You're welcome."),)),
    ]


def seeded_agent(provider: OpenAIChat, store: SQLiteStore, config: Config) -> Agent:
    sid = store.create().id
    store.append(sid, [m.with_wire(provider.wire) for m in history()])
    return Agent(provider, store=store, session=sid, config=config)


@pytest.mark.parametrize("error", [OPENAI_OVERFLOW, LLAMA_CPP_OVERFLOW])
def test_overflow_compacts_then_retries_over_http(
    loopback: LoopbackServer, tmp_path: Path, error: dict[str, Any]
) -> None:
    summary = "Staging: app on port 8443 via nginx; PostgreSQL 15 at db-staging:5432."
    loopback.add(
        Reply.json(400, error),
        Reply.sse(openai_body([summary[:30], summary[30:]]), chunk=11),
        Reply.sse(openai_body(["Restart ", "nginx first."])),
    )
    config = Config(compaction=CompactionConfig(keep_verbatim=40, prompt=PROMPT))
    with (
        OpenAIChat("gpt-test", loopback.url + "/v1", "sk-test-1234567") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        agent = seeded_agent(provider, store, config)
        with agent.run("How do I restart the stack?") as stream:
            events = list(stream)
        sid = agent.session_id
        agent.close()
        windows = store.history(sid)

    started, compacted, retry = events[:3]
    assert isinstance(started, CompactionStarted) and started.reason == "overflow"
    assert isinstance(compacted, Compacted)
    assert (compacted.messages_before, compacted.messages_after) == (7, 4)
    assert isinstance(retry, ProviderRetry)
    assert (retry.error, retry.status_code, retry.delay_ms, retry.compaction) == (
        "ContextOverflow",
        400,
        0,
        True,
    )
    assert error["error"]["message"] in retry.message
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Restart nginx first."
    assert isinstance(events[-1], TurnComplete)

    first, summarise, retried = (r.json for r in loopback.requests)
    assert len(first["messages"]) == 7
    # the summary request: the prompt as system, the transcript as the one user turn
    assert "tools" not in summarise and summarise["stream"] is True
    sys_msg, user_msg = summarise["messages"]
    assert sys_msg == {"role": "system", "content": PROMPT}
    assert "Port 8443, behind the nginx proxy." in user_msg["content"]
    # the retry: the summary stands in for the prefix, the recent turns follow
    assert retried["messages"] == [
        {"role": "user", "content": SUMMARY_PREFIX + summary},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "You're welcome."},
        {"role": "user", "content": "How do I restart the stack?"},
    ]
    # the store kept the old window and the compacted one, which the answer extends
    assert [len(w) for w in windows] == [7, 5]
    assert windows[1][-1].text == "Restart nginx first."


def test_second_overflow_over_http_propagates(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        Reply.json(400, OPENAI_OVERFLOW),
        Reply.sse(openai_body(["short summary"])),
        Reply.json(400, OPENAI_OVERFLOW),
    )
    config = Config(compaction=CompactionConfig(keep_verbatim=40, prompt=PROMPT))
    with (
        OpenAIChat("gpt-test", loopback.url + "/v1", "sk-test-1234567") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        agent = seeded_agent(provider, store, config)
        stream = agent.run("How do I restart the stack?")
        kinds = [type(stream.next()) for _ in range(3)]
        with pytest.raises(ContextOverflow):
            stream.next()
        stream.close()
        agent.close()
    assert kinds == [CompactionStarted, Compacted, ProviderRetry]
    assert len(loopback.requests) == 3


def test_with_compaction_off_the_overflow_says_how_to_recover_and_that_works(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """Default config: the turn fails with the provider's words and what to do; doing
    it (``agent.compact(prompt=...)``) makes the next turn fit."""
    loopback.add(
        Reply.json(400, OPENAI_OVERFLOW),
        Reply.sse(openai_body(["Staging: port 8443 via nginx."])),
        Reply.sse(openai_body(["Restart nginx."])),
    )
    with (
        OpenAIChat("gpt-test", loopback.url + "/v1", "sk-test-1234567") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        agent = seeded_agent(provider, store, Config())
        with (
            pytest.raises(ContextOverflow) as failed,
            agent.run("How do I restart the stack?") as stream,
        ):
            list(stream)
        message = str(failed.value)
        assert message.startswith(OPENAI_OVERFLOW["error"]["message"])
        assert (
            "compaction is off" in message
            and "agent.compact(prompt=..., keep_turns=1)" in message
        )
        assert failed.value.status_code == 400
        assert agent.compact(prompt=PROMPT, keep_turns=1).compacted
        assert agent.ask("And now?").response == "Restart nginx."
        agent.close()
    assert len(loopback.requests) == 3


def test_reasoning_tokens_do_not_trigger_a_threshold_compaction(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    # o-series usage: 6,000 completion tokens of which 5,950 were reasoning, which the
    # next request does not carry; the context holds about 1,300 tokens of 4,000
    reasoning = {
        "prompt_tokens": 1100,
        "completion_tokens": 6000,
        "completion_tokens_details": {"reasoning_tokens": 5950},
    }
    loopback.add(
        Reply.sse(openai_body(["Port 8443."], usage=reasoning)),
        Reply.sse(openai_body(["Use port 5432."])),
    )
    notes = [
        f"note {i}: " + "the staging stack runs behind nginx " * 40 for i in range(3)
    ]
    config = Config(
        compaction=CompactionConfig(
            keep_verbatim=40, prompt=PROMPT, context_window=4000, threshold=0.8
        )
    )
    with (
        OpenAIChat("o-test", loopback.url + "/v1", "sk-test-1234567") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        sid = store.create().id
        store.append(sid, [UserMessage(n).with_wire(provider.wire) for n in notes])
        agent = Agent(provider, store=store, session=sid, config=config)
        for question in ("Which port?", "And the database?"):
            with agent.run(question) as stream:
                events = list(stream)
            assert not any(isinstance(e, CompactionStarted) for e in events)
        first_usage = agent.conversation.messages[-3].usage
        agent.close()

    assert first_usage is not None and first_usage.reasoning == 5950
    assert len(loopback.requests) == 2  # no summary request between the turns
    assert loopback.requests[1].json["messages"][-1] == {
        "role": "user",
        "content": "And the database?",
    }

"""Compaction at the edges of a turn, over real HTTP on 127.0.0.1 and a real SQLite file.

What a compaction must never summarise away: the prompt being answered (a new session
whose first prompt nears the window, or overflows it, has nothing to compact) and a
tool call held for approval (``resume()`` runs it once it is approved). And when a
threshold compaction happens: early enough that the prompt still leaves room for
``max_output_tokens``, which OpenAI, vLLM and Anthropic add to the prompt when they
check the window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    Compacted,
    CompactionConfig,
    CompactionStarted,
    CompactionSummary,
    Config,
    ContextOverflow,
    Message,
    Pricing,
    StopReason,
    Text,
    ToolResult,
    ToolUse,
    TurnComplete,
    UserMessage,
    tool,
)
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore
from navi_core.tokens import estimate_message_tokens

PROMPT = "Summarise the conversation for the assistant."
KEY = "sk-test-1234567"
#: Ollama's words for a prompt that does not fit
OLLAMA_OVERFLOW = {
    "error": "prompt too long; exceeded max context length by 412 tokens"
}


def _data(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def chat_body(text: str = "", call: tuple[str, str, str] | None = None) -> bytes:
    """A complete chat-completions stream: ``text``, or one tool call (id, name,
    arguments), then its finish reason, usage and ``[DONE]``."""
    delta: dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        delta["tool_calls"] = [
            {
                "index": 0,
                "id": call[0],
                "type": "function",
                "function": {"name": call[1], "arguments": call[2]},
            }
        ]
    finish = "tool_calls" if call is not None else "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return b"".join(
        [
            _data({"choices": [{"index": 0, "delta": delta}]}),
            _data({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            _data({"choices": [], "usage": usage}),
            b"data: [DONE]\n\n",
        ]
    )


def big_prompt(lines: int) -> str:
    row = "The staging cluster log line number {} reports a healthy heartbeat.\n"
    return "Which node failed? The log:\n" + "".join(
        row.format(i) for i in range(lines)
    )


def six_questions() -> list[Message]:
    """Six questions about a proxy's logs and their answers: about 1,600 tokens."""
    history: list[Message] = []
    for i in range(6):
        history += [
            UserMessage(f"Question {i}: " + "what does the staging proxy log? " * 30),
            Message("assistant", (Text(f"Answer {i}: " + "it logs requests. " * 30),)),
        ]
    return history


def provider_for(loopback: LoopbackServer, **kwargs: Any) -> OpenAIChat:
    return OpenAIChat("gpt-test", loopback.url + "/v1", KEY, **kwargs)


def turn_after(
    provider: OpenAIChat, tmp_path: Path, history: list[Message], config: Config
) -> list[Any]:
    """The events of a turn ("And now?") in a session stored holding ``history``."""
    with provider, SQLiteStore(tmp_path / "navi.db") as store:
        sid = store.create().id
        store.append(sid, [m.with_wire(provider.wire) for m in history])
        with (
            Agent(provider, store=store, session=sid, config=config) as agent,
            agent.run("And now?") as stream,
        ):
            return list(stream)


def test_a_first_prompt_that_fits_is_sent_not_summarised(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """The first prompt of a session, above the threshold but inside the window:
    summarising it would answer a summary of the user's words instead of them, and
    shrink nothing. It goes out whole."""
    text = big_prompt(3500)
    size = estimate_message_tokens(UserMessage(text))
    window = 60_000
    assert 0.8 * window < size < window
    loopback.add(Reply.sse(chat_body("node 7")))
    config = Config(compaction=CompactionConfig(prompt=PROMPT, context_window=window))
    with (
        OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
        Agent(provider, store=store, config=config) as agent,
    ):
        with agent.run(text) as stream:
            events = list(stream)
        messages = agent.conversation.messages
    assert not [e for e in events if isinstance(e, (CompactionStarted, Compacted))]
    (sent,) = (r.json for r in loopback.requests)
    assert sent["messages"] == [{"role": "user", "content": text}]
    assert [m.text for m in messages] == [text, "node 7"]


def test_an_overflowing_first_prompt_fails_without_a_summary_request(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """Nothing to compact: the provider's overflow is raised at once, no summary
    request is made and the stored prompt stays the user's own."""
    loopback.add(Reply.json(400, OLLAMA_OVERFLOW))
    config = Config(compaction=CompactionConfig(prompt=PROMPT))
    with (
        OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        with Agent(provider, store=store, config=config) as agent:
            sid = agent.session_id
            with (
                pytest.raises(ContextOverflow) as failed,
                agent.run("Summarise this repository.") as stream,
            ):
                list(stream)
        windows = store.history(sid)
    assert OLLAMA_OVERFLOW["error"] in str(failed.value)
    assert "nothing to compact" in str(failed.value)
    assert failed.value.status_code == 400
    assert len(loopback.requests) == 1
    assert [[m.text for m in w] for w in windows] == [["Summarise this repository."]]


@tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy the build to ``target``."""
    DEPLOYED.append(target)
    return f"deployed to {target}"


DEPLOYED: list[str] = []


def test_a_call_held_for_approval_survives_a_compaction_and_runs_on_resume(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """A compaction while a call waits for approval keeps that call as the last
    message: approving it and resuming runs it exactly once, and the model reads its
    result. Summarised away, the approval was accepted and then silently dropped."""
    DEPLOYED.clear()
    loopback.add(
        Reply.sse(chat_body("The build is green. " * 20)),
        Reply.sse(chat_body("Tests pass on staging. " * 20)),
        Reply.sse(chat_body(call=("call_1", "deploy", '{"target": "prod"}'))),
        Reply.sse(chat_body("Built, tested on staging; deploying to prod.")),
        Reply.sse(chat_body("Deployed.")),
    )
    config = Config(compaction=CompactionConfig(prompt=PROMPT, keep_verbatim=10))
    with (
        OpenAIChat("gpt-test", loopback.url + "/v1", KEY) as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        with Agent(provider, store=store, tools=[deploy], config=config) as agent:
            sid = agent.session_id
            agent.ask("Is the build green? " * 20)
            agent.ask("Do the tests pass? " * 20)
            held = agent.ask("Deploy to prod.")
            assert held.stop_reason is StopReason.APPROVAL_REQUIRED
            events = list(agent.compact_stream(keep_turns=0))
            assert isinstance(events[-1], Compacted)
        # a new process opens the session, approves and resumes
        with Agent(provider, store=store, session=sid, tools=[deploy]) as agent:
            agent.approve("call_1")
            done = agent.resume().result()
            messages = agent.conversation.messages
    assert DEPLOYED == ["prod"]
    assert done.stop_reason is StopReason.END_TURN and done.response == "Deployed."
    summary, use, results, answer = messages
    assert isinstance(summary.content[0], CompactionSummary)
    assert use.tool_uses == (ToolUse("call_1", "deploy", '{"target": "prod"}'),)
    (result,) = results.content
    assert isinstance(result, ToolResult) and not result.is_error
    assert answer.text == "Deployed."
    resumed = loopback.requests[-1].json["messages"]
    assert resumed[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "deployed to prod",
    }


def test_the_threshold_leaves_room_for_max_output_tokens(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """Below ``threshold * window`` but above ``window - max_output_tokens``: a real
    server refuses the request (vLLM: "you requested 5000 tokens (3000 in the
    messages, 2000 in the completion)"), so the compaction comes first."""
    window, out = 4096, 2048
    history = six_questions()
    size = sum(estimate_message_tokens(m) for m in history)
    assert window - out < size < 0.8 * window
    loopback.add(
        Reply.sse(chat_body("Six questions about the staging proxy's logs.")),
        Reply.sse(chat_body("It logs requests.")),
    )
    config = Config(
        max_output_tokens=out,
        compaction=CompactionConfig(
            prompt=PROMPT, context_window=window, keep_verbatim=400
        ),
    )
    events = turn_after(provider_for(loopback), tmp_path, history, config)
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert [s.reason for s in started] == ["threshold"]
    summary_request, turn_request = (r.json for r in loopback.requests)
    assert summary_request["messages"][0] == {"role": "system", "content": PROMPT}
    assert turn_request["max_tokens"] == out
    assert turn_request["messages"][-1] == {"role": "user", "content": "And now?"}


def test_a_summary_requests_usage_counts_in_the_turns_usage_and_cost(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """The summary request is the turn's spending too: its tokens join
    ``TurnComplete.usage`` and ``cost``, as a planning request's do."""
    history = six_questions()
    summary = chat_body("Six questions about the staging proxy's logs.")
    summary = summary.replace(b'"prompt_tokens":10', b'"prompt_tokens":5000')
    summary = summary.replace(b'"completion_tokens":5', b'"completion_tokens":300')
    loopback.add(Reply.sse(summary), Reply.sse(chat_body("It logs requests.")))
    config = Config(
        compaction=CompactionConfig(
            prompt=PROMPT, context_window=2048, keep_verbatim=400
        )
    )
    provider = provider_for(loopback, pricing=Pricing(1.0, 2.0))
    events = turn_after(provider, tmp_path, history, config)
    assert [type(e) for e in events if isinstance(e, Compacted)] == [Compacted]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.cost is not None
    assert (done.usage.input, done.usage.output) == (5010, 305)
    assert done.cost.usd == pytest.approx((5010 * 1.0 + 305 * 2.0) / 1_000_000)

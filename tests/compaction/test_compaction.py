"""Compaction: the split, the summary request, the rewrite, the store, and the loop hooks."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pytest
from loopback import LoopbackServer, Reply

import navi_core
from navi_core import (
    Agent,
    BadRequest,
    Compacted,
    CompactionConfig,
    CompactionStarted,
    CompactionSummary,
    Config,
    ContextOverflow,
    EmptyAssistantResponse,
    MediaPart,
    MemoryStore,
    Message,
    MessageComplete,
    NoCompactionPrompt,
    ProviderRetry,
    Scripted,
    SessionStore,
    System,
    Text,
    TextDelta,
    TextPart,
    ToolResult,
    ToolUse,
    TurnComplete,
    Usage,
    UserMessage,
    WireIdentity,
    tokens as sizing,
)
from navi_core.compaction import (
    MIN_FOLD_TOKENS,
    CompactionResult,
    plan_compaction,
    split,
)
from navi_core.compaction._transcript import render_transcript
from navi_core.core import estimate_tokens
from navi_core.events import Event
from navi_core.tokens import (
    SizeCache,
    estimate_message_tokens,
    estimate_request_tokens,
    message_sizes,
)
from navi_core.tools import ToolSpec

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is 3.11+

PROMPT = "Summarise the conversation for the assistant."
WIRE = WireIdentity("scripted", "scripted://local", "scripted")


def words(tag: str, n: int) -> str:
    return f"{tag}: " + " ".join(f"w{i}" for i in range(n))


def prompt(t: str) -> Message:
    return Message("user", (Text(t),), wire=WIRE)


def answer(t: str, usage: Usage | None = None) -> Message:
    return Message("assistant", (Text(t),), usage, "end_turn", WIRE)


def call(cid: str, name: str, args: str, usage: Usage | None = None) -> Message:
    return Message("assistant", (ToolUse(cid, name, args),), usage, "tool_use", WIRE)


def result(cid: str, t: str) -> Message:
    return Message("user", (ToolResult(cid, (TextPart(t),)),), wire=WIRE)


def system(t: str) -> Message:
    return Message("system", (System(t),), wire=WIRE)


def size(messages: Sequence[Message]) -> int:
    return sum(estimate_message_tokens(m) for m in messages)


class CompactionOptions(TypedDict, total=False):
    """The ``CompactionConfig`` fields the tests set besides keep and provider."""

    context_window: int | None
    threshold: float


def config(
    keep: int, summariser: Scripted | None = None, **kw: Unpack[CompactionOptions]
) -> Config:
    return Config(
        compaction=CompactionConfig(
            keep_verbatim=keep, prompt=PROMPT, provider=summariser, **kw
        )
    )


def open_agent(
    messages: Sequence[Message],
    provider: Scripted,
    cfg: Config,
    store: SessionStore | None = None,
) -> Agent:
    store = store if store is not None else MemoryStore()
    sid = store.create().id
    store.append(sid, messages)
    return Agent(provider, store=store, session=sid, config=cfg)


def drain(agent: Agent, text: str) -> list[Event]:
    with agent.run(text) as stream:
        return list(stream)


def summaries(messages: Sequence[Message]) -> list[str]:
    return [
        b.text for m in messages for b in m.content if isinstance(b, CompactionSummary)
    ]


def check_pairs(messages: Sequence[Message]) -> None:
    """Every ToolUse has its result right after it, and every result its call."""
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_uses:
            nxt = messages[i + 1]
            ids = {r.tool_use_id for r in nxt.tool_results}
            assert ids == {u.id for u in m.tool_uses}
        if m.tool_results:
            assert i > 0 and messages[i - 1].tool_uses


def three_turns() -> list[Message]:
    return [
        system("You are terse."),
        prompt(words("first question", 40)),
        answer(words("first answer", 60)),
        system("Prefer lists."),
        prompt(words("second question", 40)),
        answer(words("second answer", 60)),
        prompt(words("third question", 10)),
        answer(words("third answer", 10)),
    ]


# -- Agent.compact -----------------------------------------------------------------


def test_prefix_summarised_suffix_kept_and_system_messages_survive() -> None:
    msgs = three_turns()
    msgs[7] = msgs[7].with_usage(Usage())  # a provider that reported no usage
    summariser = Scripted(["The user asked two questions; both were answered."])
    main = Scripted()
    keep = size(msgs[6:])
    agent = open_agent(msgs, main, config(keep, summariser))
    sid = agent.session_id

    res = agent.compact()

    assert res == CompactionResult(True, 4, 1)
    new = agent.conversation.messages
    assert [m.role for m in new] == ["system", "system", "user", "user", "assistant"]
    assert new[:2] == [msgs[0], msgs[3]]
    assert summaries(new) == ["The user asked two questions; both were answered."]
    assert new[3:] == msgs[6:]  # no usage known there: nothing to restate
    assert main.calls == 0 and summariser.calls == 1
    request = summariser.last_request
    assert request is not None
    assert request.system == PROMPT and request.tools == ()
    (sent,) = request.messages
    for m in msgs[1:3] + msgs[4:6]:
        assert m.text in sent.text
    assert "third question" not in sent.text
    assert "Prefer lists" not in sent.text  # system messages stay out of the summary
    # the store holds the old window and the new one; load returns the new one
    history = agent.store.history(sid)
    assert history == [msgs, new]
    assert agent.store.load(sid).messages == new
    agent.close()


def test_restated_usage_is_computed_from_sizes_exactly() -> None:
    p1 = prompt(words("setup", 200))
    a1 = answer("ok", Usage(input=1000, output=50))
    p2 = prompt("list the files")
    a2 = call("c1", "ls", '{"dir": "."}', Usage(input=1080, output=7))
    t2 = result("c1", "a.txt b.txt")
    a3 = answer(
        "two files", Usage(127, 9, cache_read=900, cache_write=100, reasoning=3)
    )
    msgs = [p1, a1, p2, a2, t2, a3]
    # usage says: p2 costs 1080 - 1000 - 50 = 30 and t2 costs 1127 - 1080 - 7 = 40;
    # a3 costs its output without the reasoning: 9 - 3 = 6
    assert message_sizes(msgs)[1:] == [50, 30, 7, 40, 6]
    summariser = Scripted(["Setup was done."])
    agent = open_agent(msgs, Scripted(), config(30 + 7 + 40 + 6, summariser))

    assert agent.compact() == CompactionResult(True, 2, 1)

    summary, *kept = agent.conversation.messages
    s = estimate_message_tokens(
        Message("user", (CompactionSummary("Setup was done."),))
    )
    assert estimate_message_tokens(summary) == s
    assert kept[:3] == [p2, a2.with_usage(Usage(s + 30, 7)), t2]
    assert kept[3].usage == Usage(s + 30 + 7 + 40, 9, 0, 0, 3)
    assert kept[3].content == a3.content
    # the restated window reads the same sizes back from its usage
    assert message_sizes(agent.conversation.messages)[2:] == [7, 40, 6]
    agent.close()


def test_reasoning_tokens_are_not_counted_as_context() -> None:
    # the provider does not send reasoning back: 1,950 of a1's 2,000 output tokens
    # were reasoning, so the next prompt grew by 50 for a1 and 30 for p2
    p1 = prompt(words("setup", 200))
    a1 = answer("ok", Usage(input=1000, output=2000, reasoning=1950))
    p2 = prompt("list the files")
    a2 = answer("two files", Usage(input=1080, output=4000, reasoning=3990))
    msgs = [p1, a1, p2, a2]

    assert message_sizes(msgs)[1:] == [50, 30, 10]
    assert estimate_request_tokens(msgs) == 1080 + 10

    summariser = Scripted(["Setup was done."])
    agent = open_agent(msgs, Scripted(), config(30 + 10, summariser))
    assert agent.compact() == CompactionResult(True, 2, 1)
    summary, *kept = agent.conversation.messages
    s = estimate_message_tokens(summary)
    assert kept == [p2, a2.with_usage(Usage(s + 30, 4000, 0, 0, 3990))]
    assert message_sizes(agent.conversation.messages)[2:] == [10]
    agent.close()


def test_size_cache_estimates_each_message_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    estimated: list[Message] = []

    def counting(m: Message) -> int:
        estimated.append(m)
        return estimate_message_tokens(m)

    monkeypatch.setattr(sizing, "estimate_message_tokens", counting)
    msgs = three_turns()
    cfg = config(0, context_window=10**9)  # the threshold is never reached
    agent = open_agent(msgs, Scripted(), cfg)
    cache = SizeCache()
    dialogue = agent.conversation.dialogue()

    assert (
        plan_compaction(agent.session, cfg, (), reason="threshold", cache=cache) is None
    )
    assert estimated == dialogue
    assert message_sizes(dialogue, cache) == message_sizes(dialogue)
    estimated.clear()
    agent.conversation.messages.append(prompt("fourth"))
    # an equal message that is another object is estimated on its own
    agent.conversation.messages[1] = replace(msgs[1])
    assert (
        plan_compaction(agent.session, cfg, (), reason="threshold", cache=cache) is None
    )
    assert estimated == [agent.conversation.messages[1], prompt("fourth")]
    agent.close()


def test_size_cache_forgets_messages_that_left_the_conversation() -> None:
    many = [prompt(words(f"question {i}", 5)) for i in range(300)]
    cache = SizeCache()
    sizes = message_sizes(many, cache)
    assert len(cache) == 300
    few = many[-3:]
    assert message_sizes(few, cache) == sizes[-3:]
    assert len(cache) == 3
    assert message_sizes(many[:10], cache) == sizes[:10]
    assert len(cache) == 13  # a few stale entries are kept until they outnumber


def test_nothing_to_summarise_is_a_no_op_without_provider_call() -> None:
    msgs = three_turns()
    summariser = Scripted(["unused"])
    agent = open_agent(msgs, Scripted(), config(size(msgs), summariser))

    assert agent.compact() == CompactionResult(False, 0, 3)

    assert summariser.calls == 0
    assert agent.conversation.messages == msgs
    assert len(agent.store.history(agent.session_id)) == 1
    agent.close()


def test_extra_instructions_reach_the_summary_request() -> None:
    summariser = Scripted(["summary"])
    agent = open_agent(three_turns(), Scripted(), config(0, summariser))

    agent.compact("Keep every file name.")

    request = summariser.last_request
    assert request is not None and request.system is not None
    assert request.system.startswith(PROMPT)
    assert request.system.endswith("Keep every file name.")
    agent.close()


def test_summaries_chain_through_the_previous_one() -> None:
    msgs = three_turns()
    summariser = Scripted(["FIRST SUMMARY of turns one and two", "SECOND SUMMARY"])
    agent = open_agent(msgs, Scripted(), config(size(msgs[6:]), summariser))
    agent.compact()
    assert [m.role for m in agent.conversation.messages][2:] == ["user"] * 2 + [
        "assistant"
    ]

    agent.set_config(config(0, summariser))
    res = agent.compact()

    assert res == CompactionResult(True, 2, 0)
    request = summariser.last_request
    assert request is not None and request.system is not None
    (sent,) = request.messages
    assert "FIRST SUMMARY of turns one and two" in sent.text
    assert "third question" in sent.text and "first question" not in sent.text
    assert "fold that summary into yours" in request.system
    assert summaries(agent.conversation.messages) == ["SECOND SUMMARY"]
    assert [m.role for m in agent.conversation.messages] == ["system", "system", "user"]
    assert len(agent.store.history(agent.session_id)) == 3
    agent.close()


def test_one_long_turn_is_cut_between_iterations_never_inside_a_call() -> None:
    msgs: list[Message] = [prompt("Read every file and report.")]
    for i in range(8):
        msgs.append(call(f"c{i}", "read_file", f'{{"path": "f{i}.txt"}}'))
        msgs.append(result(f"c{i}", words(f"contents of f{i}", 50)))
    last_three = msgs[-6:]
    summariser = Scripted(["Read f0 to f4."])
    # the last three iterations fit, the fourth-last result does not
    agent = open_agent(msgs, Scripted(), config(size(last_three) + 5, summariser))

    res = agent.compact()

    assert res == CompactionResult(True, 11, 0)
    summary, *kept = agent.conversation.messages
    assert summaries([summary]) == ["Read f0 to f4."]
    assert kept == last_three
    check_pairs(kept)
    (sent,) = summariser.requests[0]
    assert '[tool call read_file id=c4] {"path": "f4.txt"}' in sent.text
    assert "[tool result read_file id=c4]" in sent.text
    assert "contents of f5" not in sent.text
    agent.close()


@pytest.mark.parametrize("tenths", range(10))
def test_long_turn_split_keeps_calls_with_results_for_any_budget(tenths: int) -> None:
    msgs: list[Message] = [prompt("go")]
    for i in range(5):
        msgs.append(call(f"c{i}", "t", "{}"))
        msgs.append(result(f"c{i}", words(f"r{i}", 30 + 20 * i)))
    keep = size(msgs) * tenths // 10
    plan = split(msgs, keep)
    assert plan.prefix  # one turn that does not fit: something is always summarised
    assert list(plan.prefix) + list(plan.kept) == msgs
    assert sum(plan.kept_sizes) <= keep
    assert not plan.kept or plan.kept[0].role == "assistant"
    check_pairs(plan.kept)


def test_request_estimate_takes_the_larger_of_usage_and_the_estimator() -> None:
    hi, more = prompt("hi"), prompt(words("more", 20))
    spec = ToolSpec("ls", "List the files of a folder.", {"type": "object"})

    def msgs(usage: Usage) -> list[Message]:
        return [system("Be brief."), hi, answer("hello", usage), more]

    # usage says the prompt was big (say, a long system prompt on the server side)
    big = Usage(4000, 5, cache_read=1000)
    assert estimate_request_tokens(msgs(big)) == 5000 + 5 + size([more])
    # usage says little: the estimator's sum wins, system prompt and tools included
    small = Usage(1, 5)
    summed = estimate_tokens("Be brief.") + size([hi]) + 5 + size([more])
    assert estimate_request_tokens(msgs(small)) == summed
    assert estimate_request_tokens(msgs(small), [spec]) > summed


def test_transcript_shows_tools_errors_and_images_as_placeholders() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * (12 * 1024 - 4)).decode()
    tiny = base64.b64encode(b"\x89PNG\r").decode()  # 5 bytes: "iVBORw0="
    msgs = [
        prompt("look"),
        call("c1", "screenshot", '{"x": 1}'),
        Message(
            "user",
            (
                ToolResult("c1", (TextPart("captured"), MediaPart("image/png", png))),
                ToolResult("c9", (MediaPart("image/png", tiny),), is_error=True),
            ),
        ),
    ]
    text = render_transcript(msgs)
    assert text.split("\n\n") == [
        "## User\nlook",
        '## Assistant\n[tool call screenshot id=c1] {"x": 1}',
        "## Tool results\n[tool result screenshot id=c1]\ncaptured\n"
        "[image: image/png, 12 KB]\n[tool result unknown tool id=c9 (error)]\n"
        "[image: image/png, 5 bytes]",
    ]
    assert png not in text


def test_no_prompt_raises_and_changes_nothing() -> None:
    msgs = three_turns()
    agent = open_agent(msgs, Scripted(), Config())
    with pytest.raises(NoCompactionPrompt):
        agent.compact()
    assert agent.conversation.messages == msgs
    agent.close()


def test_failing_compaction_provider_falls_back_to_the_agent_provider() -> None:
    summariser = Scripted([BadRequest("no such model", status_code=404)])
    main = Scripted(["summary from the main model"])
    agent = open_agent(three_turns(), main, config(0, summariser))

    assert agent.compact().compacted
    assert summariser.calls == 1 and main.calls == 1
    assert summaries(agent.conversation.messages) == ["summary from the main model"]
    agent.close()


def test_failures_leave_conversation_and_store_unchanged() -> None:
    msgs = three_turns()
    # an empty summary falls back to the chat model like any failure: both empty
    summariser = Scripted([[], BadRequest("down", status_code=400)])
    main = Scripted([[], BadRequest("down too", status_code=400)])
    agent = open_agent(msgs, main, config(0, summariser))

    with pytest.raises(EmptyAssistantResponse):
        agent.compact()
    with pytest.raises(BadRequest, match="down too"):
        agent.compact()

    assert agent.conversation.messages == msgs
    assert agent.store.history(agent.session_id) == [msgs]
    agent.close()


# -- the loop: overflow and threshold ----------------------------------------------


def test_overflow_compacts_and_the_retry_succeeds() -> None:
    msgs = three_turns()
    overflow = ContextOverflow("prompt is too long", status_code=400)
    provider = Scripted([overflow, "summary of the old turns", [Text("done")]])
    cfg = Config(compaction=CompactionConfig(prompt=PROMPT))  # default keep: 20000
    agent = open_agent(msgs, provider, cfg)
    estimated = estimate_request_tokens([*msgs, UserMessage("fourth")])

    events = drain(agent, "fourth")

    before = len(msgs) + 1
    assert events[:3] == [
        CompactionStarted("overflow", before, estimated),
        Compacted(before, 6, 4, 2),
        ProviderRetry(
            1, 4, 0, "ContextOverflow", 400, None, "prompt is too long", True
        ),
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "done"
    assert isinstance(events[-1], TurnComplete)
    assert provider.calls == 3
    retried = provider.requests[2]
    assert summaries(retried[:1]) == ["summary of the old turns"]
    assert [m.text for m in retried[1:]] == [msgs[6].text, msgs[7].text, "fourth"]
    agent.close()


def test_second_overflow_propagates() -> None:
    overflow = ContextOverflow("prompt is too long", status_code=400)
    provider = Scripted([overflow, "summary", overflow])
    agent = open_agent(three_turns(), provider, config(0))
    stream = agent.run("fourth")
    seen = [stream.next(), stream.next(), stream.next()]
    assert [type(e) for e in seen] == [CompactionStarted, Compacted, ProviderRetry]
    with pytest.raises(ContextOverflow):
        stream.next()
    assert provider.calls == 3
    stream.close()
    agent.close()


def test_overflow_without_prompt_propagates_untouched() -> None:
    msgs = three_turns()
    provider = Scripted([ContextOverflow("prompt is too long", status_code=400)])
    agent = open_agent(msgs, provider, Config())
    with agent.run("fourth") as stream, pytest.raises(ContextOverflow):
        stream.next()
    assert provider.calls == 1
    assert agent.conversation.messages[:-1] == msgs
    assert agent.conversation.messages[-1].text == "fourth"
    assert len(agent.store.history(agent.session_id)) == 1
    agent.close()


def big_history() -> list[Message]:
    return [
        prompt(words("old question", 600)),
        answer(words("old answer", 600)),
        prompt("short question"),
        answer("short answer"),
    ]


def test_threshold_compaction_comes_before_the_response() -> None:
    msgs = big_history()
    summariser = Scripted(["summary"])
    main = Scripted([[Text("fresh answer")]])
    new = words("new", 30)
    keep = size([*msgs[2:], UserMessage(new)])  # the last turn and the new prompt
    # the new prompt takes the request over half the window
    cfg = config(keep, summariser, context_window=2 * size(msgs), threshold=0.5)
    agent = open_agent(msgs, main, cfg)

    events = drain(agent, new)

    assert isinstance(events[0], CompactionStarted) and events[0].reason == "threshold"
    assert events[1] == Compacted(len(msgs) + 1, 4, 2, 2)
    assert not any(isinstance(e, (CompactionStarted, Compacted)) for e in events[2:])
    assert isinstance(events[-2], MessageComplete)
    assert summariser.calls == 1 and main.calls == 1
    assert summaries(main.requests[0][:1]) == ["summary"]
    agent.close()


def test_compaction_started_is_returned_before_the_summary_call() -> None:
    msgs = big_history()
    summariser = Scripted(["summary"])
    main = Scripted([[Text("fresh answer")]])
    new = words("new", 30)
    keep = size([*msgs[2:], UserMessage(new)])
    cfg = config(keep, summariser, context_window=2 * size(msgs), threshold=0.5)
    agent = open_agent(msgs, main, cfg)
    with agent.run(new) as stream:
        started = stream.next()
        assert isinstance(started, CompactionStarted)
        assert summariser.calls == 0  # the host hears of it before the slow call
        assert isinstance(stream.next(), Compacted)
        assert summariser.calls == 1 and main.calls == 0
        list(stream)
    agent.close()


@pytest.mark.parametrize("replaced_prompt", [None, "Another prompt."])
def test_set_config_after_compaction_started_runs_the_announced_compaction(
    replaced_prompt: str | None,
) -> None:
    msgs = big_history()
    summariser, other = Scripted(["summary"]), Scripted(["other summary"])
    main = Scripted([[Text("fresh answer")]])
    new = words("new", 30)
    keep = size([*msgs[2:], UserMessage(new)])
    cfg = config(keep, summariser, context_window=2 * size(msgs), threshold=0.5)
    agent = open_agent(msgs, main, cfg)
    with agent.run(new) as stream:
        assert isinstance(stream.next(), CompactionStarted)
        # compaction off, or another prompt and summary model, from now on
        agent.set_config(
            Config(compaction=CompactionConfig(prompt=replaced_prompt, provider=other))
        )
        assert stream.next() == Compacted(len(msgs) + 1, 4, 2, 2)
        events = list(stream)
    assert isinstance(events[-1], TurnComplete)
    assert summariser.calls == 1 and other.calls == 0 and main.calls == 1
    request = summariser.last_request
    assert request is not None and request.system == PROMPT
    assert summaries(agent.conversation.messages) == ["summary"]
    agent.close()


@pytest.mark.parametrize(
    ("keep", "window", "why"),
    [
        (100_000, 100, "everything fits verbatim: compacting cannot shrink"),
        (0, 1_000_000, "below the threshold"),
        (None, None, "no context window configured"),
    ],
)
def test_threshold_compaction_only_when_it_helps(
    keep: int | None, window: int | None, why: str
) -> None:
    msgs = big_history()
    summariser = Scripted(["summary"])
    main = Scripted([[Text("fresh answer")]])
    agent = open_agent(msgs, main, config(keep or 0, summariser, context_window=window))

    events = drain(agent, "next")

    assert not any(isinstance(e, (CompactionStarted, Compacted)) for e in events), why
    assert summariser.calls == 0
    assert main.requests[0] == [*msgs, agent.conversation.messages[-2]]
    agent.close()


def test_threshold_does_not_fold_a_tiny_prefix() -> None:
    msgs = [prompt("hi"), answer("hello"), prompt(words("long", 2000))]
    plan = split(msgs, size(msgs[2:]))
    assert 0 < plan.prefix_tokens <= MIN_FOLD_TOKENS
    summariser = Scripted(["summary"])
    cfg = config(size(msgs[2:]), summariser, context_window=100)
    agent = open_agent(msgs[:2], Scripted(["ok"]), cfg)
    events = drain(agent, msgs[2].text)
    assert not any(isinstance(e, CompactionStarted) for e in events)
    assert summariser.calls == 0
    agent.close()


# -- persistence -------------------------------------------------------------------


def test_compaction_is_persisted_and_reloaded_from_sqlite(tmp_path: Path) -> None:
    from navi_core.store.sqlite import SQLiteStore

    db = tmp_path / "navi.db"
    msgs = three_turns()
    msgs[7] = answer(msgs[7].text, Usage(500, 11, cache_read=40))
    store = SQLiteStore(db)
    agent = open_agent(
        msgs, Scripted(), config(size(msgs[6:]), Scripted(["sum"])), store
    )
    sid = agent.session_id
    agent.compact()
    compacted = list(agent.conversation.messages)
    agent.close()
    store.close()

    with SQLiteStore(db) as reopened:
        again = Agent(Scripted(), store=reopened, session=sid[:8])
        assert again.conversation.messages == compacted
        assert again.conversation.messages[-1].usage == Usage(
            estimate_message_tokens(compacted[2]) + estimate_message_tokens(msgs[6]),
            11,
        )
        assert reopened.history(sid) == [msgs, compacted]
        again.close()


# -- the command line --------------------------------------------------------------


def _openai_sse(text: str) -> bytes:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": 12}},
    ]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + b"data: [DONE]\n\n"


def _cli(
    *args: str, key: str = "sk-cli-test-9f8e7d6c"
) -> subprocess.CompletedProcess[str]:
    root = str(Path(navi_core.__file__).parent.parent)
    env = {**os.environ, "OPENAI_API_KEY": key, "PYTHONPATH": root}
    return subprocess.run(
        [sys.executable, "-m", "navi_core.cli", "compact", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_cli_compacts_a_stored_session(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    from navi_core.compaction import DEFAULT_SUMMARY_PROMPT
    from navi_core.store.sqlite import SQLiteStore

    db = tmp_path / "navi.db"
    msgs = three_turns()
    with SQLiteStore(db) as store:
        sid = store.create().id
        store.append(sid, msgs)
    loopback.add(Reply.sse(_openai_sse("Two questions answered tersely.")))
    keep = str(size(msgs[6:]))
    url = loopback.url + "/v1"

    done = _cli(
        sid[:10],
        "Name every question.",
        "--db",
        str(db),
        "--base-url",
        url,
        "--model",
        "m1",
        "--keep-verbatim",
        keep,
    )

    assert done.returncode == 0, done.stderr
    assert "sk-cli-test" not in done.stdout + done.stderr
    assert done.stdout == (
        f"session {sid}: summarised 4 messages, kept 1 turn verbatim; 8 -> 5 messages\n"
    )
    (req,) = loopback.requests
    assert req.headers["authorization"] == "Bearer sk-cli-test-9f8e7d6c"
    system_msg = req.json["messages"][0]
    assert system_msg["content"].startswith(DEFAULT_SUMMARY_PROMPT)
    assert system_msg["content"].endswith("Name every question.")
    with SQLiteStore(db) as store:
        windows = store.history(sid)
        assert windows[0] == msgs
        assert summaries(windows[1]) == ["Two questions answered tersely."]
        assert "sk-cli-test" not in repr(windows)

    again = _cli(sid, "--db", str(db), "--base-url", url, "--model", "m1")
    assert again.returncode == 0, again.stderr
    assert (
        again.stdout
        == f"session {sid}: nothing to summarise (5 messages fit verbatim)\n"
    )
    assert len(loopback.requests) == 1


def test_cli_reports_an_unknown_session(tmp_path: Path) -> None:
    done = _cli("nope", "--db", str(tmp_path / "navi.db"), "--model", "m1")
    assert done.returncode == 1
    assert "SessionNotFound" in done.stderr and done.stdout == ""


def _anthropic_sse(text: str) -> bytes:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 90, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 12},
        },
        {"type": "message_stop"},
    ]
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
    )


def test_cli_anthropic_base_url_implies_anthropic(
    loopback: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from navi_core.store.sqlite import SQLiteStore

    db = tmp_path / "navi.db"
    msgs = three_turns()
    with SQLiteStore(db) as store:
        sid = store.create().id
        store.append(sid, msgs)
    loopback.add(Reply.sse(_anthropic_sse("Two questions answered.")))
    # an OpenAI endpoint that refuses connections, should the flag be ignored
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cli-test-5a4b3c")
    keep = str(size(msgs[6:]))

    done = _cli(
        sid,
        "--db",
        str(db),
        "--anthropic",
        "--base-url",
        loopback.url,
        "--model",
        "c1",
        "--keep-verbatim",
        keep,
    )

    assert done.returncode == 0, done.stderr
    assert "summarised 4 messages" in done.stdout
    (req,) = loopback.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-cli-test-5a4b3c"
    assert "sk-ant-cli-test" not in done.stdout + done.stderr

    both = _cli(
        sid,
        "--db",
        str(db),
        "--anthropic-base-url",
        loopback.url,
        "--openai-base-url",
        loopback.url + "/v1",
        "--model",
        "c1",
    )
    assert both.returncode == 2 and "not both" in both.stderr


class _ClosingStore(MemoryStore):
    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://[bad/v1", "error: base_url is not a URL: "),
        ("http://127.0.0.1:9/v1", "error: SessionNotFound: "),
    ],
)
def test_cli_failures_close_store_and_provider_and_print_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    url: str,
    error: str,
) -> None:
    from navi_core.cli import main, options
    from navi_core.providers.openai_chat import OpenAIChat

    closed_providers: list[object] = []
    close_provider = OpenAIChat.close

    def recording_close(self: OpenAIChat) -> None:
        closed_providers.append(self)
        close_provider(self)

    monkeypatch.setattr(_ClosingStore, "closed", 0)
    monkeypatch.setattr(options, "store_from_args", lambda a: _ClosingStore())
    monkeypatch.setattr(OpenAIChat, "close", recording_close)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli-test-9f8e7d6c")

    code = main(["compact", "nope", "--model", "m1", "--base-url", url])

    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith(error) and err.count("\n") == 1, err
    assert "sk-cli-test" not in err
    assert _ClosingStore.closed == 1
    # a URL the provider refuses makes no provider to close
    assert len(closed_providers) == (0 if "[bad" in url else 1)

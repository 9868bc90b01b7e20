"""A summary written by a separate provider is priced at that provider's own price.

``CompactionConfig.provider`` is often a cheaper model (sometimes a dearer one). Its
summary request's tokens count in the turn's usage, and in ``TurnComplete.cost`` and
``Config.budget`` at its own price (``pricing=``, else the price table), as a
sub-agent's turn is; at the turn's price when its price is unknown, or when the
session's provider wrote the summary (the summariser failed). ``agent.compact()``
reports the summary request's usage and cost in its ``CompactionResult``.

Two real model servers on 127.0.0.1 (loopback), each reporting usage, and a real
SQLite file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    Budget,
    Compacted,
    CompactionConfig,
    CompactionResult,
    Config,
    Cost,
    Message,
    Pricing,
    StopReason,
    Text,
    TurnComplete,
    Usage,
    UserMessage,
)
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore

PROMPT = "Summarise the conversation for the assistant."
KEY = "sk-test-1234567"

#: the session's model
MAIN = Pricing(10.0, 20.0)
#: a summary model ten times cheaper, and one ten times dearer
CHEAP = Pricing(1.0, 2.0)
DEAR = Pricing(100.0, 200.0)
#: what the summary request reports, and what the turn's response reports
SUMMARY_USAGE = Usage(5000, 300)
ANSWER_USAGE = Usage(10, 5)
SUMMARY = "Six questions about the staging proxy's logs."
#: a model no price table knows (and a server on this machine: never looked up)
UNKNOWN = "no-such-model-7f3a"


def _data(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def chat_body(text: str, usage: Usage) -> bytes:
    """A complete chat-completions stream: ``text``, its finish reason, ``usage``
    and ``[DONE]``."""
    delta = {"role": "assistant", "content": text}
    reported = {"prompt_tokens": usage.input, "completion_tokens": usage.output}
    return b"".join(
        [
            _data({"choices": [{"index": 0, "delta": delta}]}),
            _data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            _data({"choices": [], "usage": reported}),
            b"data: [DONE]\n\n",
        ]
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


def summary_reply() -> Reply:
    return Reply.sse(chat_body(SUMMARY, SUMMARY_USAGE))


def answer_reply() -> Reply:
    return Reply.sse(chat_body("It logs requests.", ANSWER_USAGE))


def compaction(summariser: OpenAIChat | None, **kw: Any) -> CompactionConfig:
    """A threshold compaction of ``six_questions`` before the next response."""
    return CompactionConfig(
        prompt=PROMPT,
        context_window=2048,
        keep_verbatim=400,
        provider=summariser,
        **kw,
    )


@contextmanager
def session(
    main: LoopbackServer,
    tmp_path: Path,
    summary: LoopbackServer | None = None,
    *,
    main_pricing: Pricing | None = MAIN,
    summary_pricing: Pricing | None = CHEAP,
    summary_model: str = "gpt-summary",
    budget: Budget | None = None,
) -> Iterator[Agent]:
    """An agent on ``main`` over a stored session of six questions, its summaries
    written by a model on ``summary`` (when given)."""
    with ExitStack() as stack:
        provider = stack.enter_context(
            OpenAIChat("gpt-main", main.url + "/v1", KEY, pricing=main_pricing)
        )
        summariser = None
        if summary is not None:
            summariser = stack.enter_context(
                OpenAIChat(
                    summary_model, summary.url + "/v1", KEY, pricing=summary_pricing
                )
            )
        store = stack.enter_context(SQLiteStore(tmp_path / "navi.db"))
        sid = store.create().id
        store.append(sid, [m.with_wire(provider.wire) for m in six_questions()])
        config = Config(compaction=compaction(summariser), budget=budget)
        yield stack.enter_context(
            Agent(provider, store=store, session=sid, config=config)
        )


def run_turn(agent: Agent) -> tuple[list[Any], TurnComplete[None]]:
    with agent.run("And now?") as stream:
        events = list(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    return events, done


def compacted_once(events: list[Any]) -> None:
    assert [type(e) for e in events if isinstance(e, Compacted)] == [Compacted]


def assert_cost(cost: Cost | None, expected: Cost) -> None:
    assert cost is not None
    assert cost.usd == pytest.approx(expected.usd)
    assert cost.input_usd == pytest.approx(expected.input_usd)
    assert cost.output_usd == pytest.approx(expected.output_usd)
    assert cost.cache_usd == pytest.approx(expected.cache_usd)


@pytest.fixture
def summary_server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


# -- in a turn ------------------------------------------------------------------------


def test_a_separate_summary_provider_is_priced_at_its_own_price(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    summary_server.add(summary_reply())
    loopback.add(answer_reply())
    with session(loopback, tmp_path, summary_server) as agent:
        events, done = run_turn(agent)
    compacted_once(events)
    assert len(summary_server.requests) == 1 and len(loopback.requests) == 1
    assert done.usage == ANSWER_USAGE + SUMMARY_USAGE  # tokens count whatever the price
    assert_cost(done.cost, MAIN.cost_of(ANSWER_USAGE) + CHEAP.cost_of(SUMMARY_USAGE))


def test_stream_cost_counts_the_summary_at_its_own_price(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    """``Stream.cost`` (the turn so far) prices the summary the same way, from the
    moment it is installed."""
    summary_server.add(summary_reply())
    loopback.add(answer_reply())
    with (
        session(loopback, tmp_path, summary_server) as agent,
        agent.run("And now?") as stream,
    ):
        for event in stream:
            if isinstance(event, Compacted):
                assert_cost(stream.cost, CHEAP.cost_of(SUMMARY_USAGE))
                break
        else:
            pytest.fail("no compaction")
        list(stream)


def test_a_summary_provider_with_no_known_price_is_priced_at_the_turns_price(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    summary_server.add(summary_reply())
    loopback.add(answer_reply())
    with session(
        loopback,
        tmp_path,
        summary_server,
        summary_pricing=None,
        summary_model=UNKNOWN,
    ) as agent:
        events, done = run_turn(agent)
    compacted_once(events)
    assert_cost(done.cost, MAIN.cost_of(ANSWER_USAGE + SUMMARY_USAGE))


def test_a_summary_the_sessions_provider_wrote_is_priced_at_the_turns_price(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    """The summariser refuses the request; the session's provider writes the summary,
    at its own (the turn's) price."""
    summary_server.add(
        Reply.json(400, {"error": {"message": "no", "type": "invalid_request_error"}})
    )
    loopback.add(summary_reply(), answer_reply())
    with session(loopback, tmp_path, summary_server) as agent:
        events, done = run_turn(agent)
    compacted_once(events)
    assert len(summary_server.requests) == 1 and len(loopback.requests) == 2
    assert_cost(done.cost, MAIN.cost_of(ANSWER_USAGE + SUMMARY_USAGE))


def test_a_turn_with_no_known_price_has_no_cost_even_with_a_priced_summary(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    summary_server.add(summary_reply())
    loopback.add(answer_reply())
    with session(loopback, tmp_path, summary_server, main_pricing=None) as agent:
        events, done = run_turn(agent)
    compacted_once(events)
    assert done.cost is None
    assert done.usage == ANSWER_USAGE + SUMMARY_USAGE


def test_a_budget_the_cheap_summary_leaves_room_in_lets_the_turn_answer(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    """At the session's price the summary alone (0.056 USD) would exceed the budget;
    at its own (0.0056 USD) the response is sent."""
    assert MAIN.cost_of(SUMMARY_USAGE).usd > 0.03 > 2 * CHEAP.cost_of(SUMMARY_USAGE).usd
    summary_server.add(summary_reply())
    loopback.add(answer_reply())
    with session(loopback, tmp_path, summary_server, budget=Budget(usd=0.03)) as agent:
        events, done = run_turn(agent)
    compacted_once(events)
    assert done.stop_reason is StopReason.END_TURN
    assert len(loopback.requests) == 1
    assert_cost(done.cost, MAIN.cost_of(ANSWER_USAGE) + CHEAP.cost_of(SUMMARY_USAGE))


def test_a_budget_a_dear_summary_exceeds_stops_the_turn_before_its_response(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    """At the session's price the summary (0.056 USD) would leave room in the budget;
    at its own (0.56 USD) it does not: nothing more is sent."""
    assert MAIN.cost_of(SUMMARY_USAGE).usd < 0.1 < DEAR.cost_of(SUMMARY_USAGE).usd
    summary_server.add(summary_reply())
    loopback.add(answer_reply())
    with session(
        loopback,
        tmp_path,
        summary_server,
        summary_pricing=DEAR,
        budget=Budget(usd=0.2),
    ) as agent:
        events, done = run_turn(agent)
    compacted_once(events)
    assert done.stop_reason is StopReason.BUDGET
    assert loopback.requests == []
    assert_cost(done.cost, DEAR.cost_of(SUMMARY_USAGE))


# -- agent.compact() ------------------------------------------------------------------


def test_compact_reports_the_summary_requests_usage_and_cost(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    summary_server.add(summary_reply(), summary_reply())
    with session(loopback, tmp_path, summary_server) as agent:
        result = agent.compact()
        assert result.compacted
        assert result.usage == SUMMARY_USAGE
        assert result.cost == CHEAP.cost_of(SUMMARY_USAGE)
        # by hand with keep_turns (the compact_stream path) too
        again = agent.compact(keep_turns=0)
    assert again.compacted
    assert (again.usage, again.cost) == (SUMMARY_USAGE, CHEAP.cost_of(SUMMARY_USAGE))
    assert loopback.requests == []


def test_compact_by_the_sessions_provider_is_priced_at_its_price(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(summary_reply())
    with session(loopback, tmp_path) as agent:
        result = agent.compact()
    assert result == CompactionResult(
        True,
        result.summarized_messages,
        result.kept_turns,
        SUMMARY_USAGE,
        MAIN.cost_of(SUMMARY_USAGE),
    )


def test_compact_by_a_summariser_with_no_known_price_uses_the_sessions_price(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    summary_server.add(summary_reply())
    with session(
        loopback, tmp_path, summary_server, summary_pricing=None, summary_model=UNKNOWN
    ) as agent:
        result = agent.compact(prompt=PROMPT)  # the compact_stream path
    assert (result.usage, result.cost) == (SUMMARY_USAGE, MAIN.cost_of(SUMMARY_USAGE))


def test_compact_with_no_known_price_reports_usage_and_no_cost(
    loopback: LoopbackServer, summary_server: LoopbackServer, tmp_path: Path
) -> None:
    summary_server.add(summary_reply())
    with session(
        loopback,
        tmp_path,
        summary_server,
        main_pricing=None,
        summary_pricing=None,
        summary_model=UNKNOWN,
    ) as agent:
        result = agent.compact()
    assert (result.usage, result.cost) == (SUMMARY_USAGE, None)


def test_compact_with_nothing_to_summarise_spent_nothing(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    with session(loopback, tmp_path) as agent:
        agent.set_config(
            Config(compaction=CompactionConfig(prompt=PROMPT, keep_verbatim=1 << 20))
        )
        result = agent.compact()
        by_hand = agent.compact(keep_turns=99, prompt=PROMPT)
    assert result == CompactionResult(False, 0, 6)
    assert (result.usage, result.cost) == (Usage(), None)
    assert (by_hand.compacted, by_hand.usage, by_hand.cost) == (False, Usage(), None)
    assert loopback.requests == []


def test_compaction_result_defaults_keep_old_constructions_working() -> None:
    old = CompactionResult(True, 10, 2)
    assert (old.usage, old.cost) == (Usage(), None)
    assert old == CompactionResult(True, 10, 2, Usage(), None)

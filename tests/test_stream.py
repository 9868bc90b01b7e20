"""The Stream contract of DESIGN.md, clause by clause, on the offline provider."""

from __future__ import annotations

import time

import pytest

from navi_core import (
    Agent,
    AnyEvent,
    AuthFailed,
    Config,
    EmptyAssistantResponse,
    Message,
    MessageComplete,
    MidStreamFailure,
    ModelInfo,
    Phase,
    ProviderRetry,
    RateLimited,
    RetryPolicy,
    Scripted,
    ServerError,
    StopReason,
    Stream,
    StreamPoisoned,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolDispatchComplete,
    ToolUse,
    TurnComplete,
    Usage,
    tool,
)

FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=5, jitter=False))


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def drain(stream: Stream) -> list[AnyEvent]:
    events: list[AnyEvent] = []
    while (ev := stream.next()) is not None:
        events.append(ev)
    return events


def test_tool_call_then_final_text_gives_four_messages_paired_by_id() -> None:
    p = Scripted([[ToolUse("call_1", "echo", '{"text": "hi"}')], [Text("done")]])
    agent = Agent(p, tools=[echo], config=FAST)
    events = drain(agent.run("say hi"))
    msgs = agent.conversation.messages
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant"]
    (result,) = msgs[2].tool_results
    assert result.tool_use_id == msgs[1].tool_uses[0].id == "call_1"
    assert result.text == "hi" and not result.is_error
    last = events[-1]
    assert isinstance(last, TurnComplete)
    assert (last.stop_reason, last.response, last.iterations, last.tool_calls) == (
        StopReason.END_TURN,
        "done",
        2,
        1,
    )


def test_run_persists_prompt_and_does_no_provider_io_before_next() -> None:
    p = Scripted([[Text("ok")]])
    agent = Agent(p)
    stream = agent.run("hello")
    assert p.calls == 0
    assert agent.store.load(agent.session_id).messages[-1].text == "hello"
    assert stream.phase is Phase.TURN_START
    stream.next()
    assert p.calls == 1


def test_none_only_after_turn_complete_and_then_forever() -> None:
    agent = Agent(Scripted([[Text("abcdefgh")]]))
    stream = agent.run("x")
    seen: list[AnyEvent] = []
    while True:
        ev = stream.next()
        if ev is None:
            break
        seen.append(ev)
    assert isinstance(seen[-1], TurnComplete)
    assert all(not isinstance(e, TurnComplete) for e in seen[:-1])
    assert stream.next() is None and stream.next() is None
    assert stream.phase is Phase.DONE


def test_text_streams_in_small_deltas_in_order_and_model_info_once() -> None:
    p = Scripted([[Text("hello world, streamed")]], chunk_chars=3)
    events = drain(Agent(p).run("x"))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3 and "".join(deltas) == "hello world, streamed"
    assert [e for e in events if isinstance(e, ModelInfo)] == [ModelInfo("scripted")]
    assert isinstance(events[0], ModelInfo)


def test_model_info_is_not_repeated_across_responses_of_one_turn() -> None:
    p = Scripted([[ToolUse("a", "echo", '{"text":"1"}')], [Text("x")]])
    events = drain(Agent(p, tools=[echo]).run("x"))
    assert sum(isinstance(e, ModelInfo) for e in events) == 1


def test_thinking_and_tool_call_events() -> None:
    p = Scripted(
        [
            [Thinking("let me think", "sig"), ToolUse("c", "echo", '{"text": "abc"}')],
            [Text("fin")],
        ]
    )
    agent = Agent(p, tools=[echo])
    events = drain(agent.run("x"))
    assert (
        "".join(e.text for e in events if isinstance(e, ThinkingDelta))
        == "let me think"
    )
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(0, "c", "echo")]
    args = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert args == '{"text": "abc"}'
    assert agent.conversation.messages[1].content[0] == Thinking("let me think", "sig")


def test_iterator_and_context_manager() -> None:
    agent = Agent(Scripted([[Text("it")]]))
    with agent.run("x") as stream:
        events = list(stream)
    assert isinstance(events[-1], TurnComplete)
    stream.close()  # idempotent
    stream.close()


def test_usage_summed_and_message_complete_carries_it() -> None:
    p = Scripted(
        [
            Message(
                "assistant",
                (ToolUse("a", "echo", '{"text":"1"}'),),
                Usage(10, 5, 2, 1, 3),
            ),
            Message("assistant", (Text("ok"),), Usage(20, 7, 0, 0, 0)),
        ]
    )
    events = drain(Agent(p, tools=[echo]).run("x"))
    completes = [e for e in events if isinstance(e, MessageComplete)]
    assert [c.usage for c in completes] == [
        Usage(10, 5, 2, 1, 3),
        Usage(20, 7, 0, 0, 0),
    ]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.usage == Usage(30, 12, 2, 1, 3)


def test_429_twice_then_success() -> None:
    p = Scripted(
        [
            RateLimited("slow down", status_code=429),
            RateLimited("slow down", status_code=429),
            [Text("finally")],
        ]
    )
    agent = Agent(p, config=FAST)
    events = drain(agent.run("x"))
    retries = [e for e in events if isinstance(e, ProviderRetry)]
    assert p.calls == 3
    assert [r.attempt for r in retries] == [1, 2]
    assert all(r.max_attempts == 4 and r.status_code == 429 for r in retries)
    assert all(r.error == "RateLimited" and r.message == "slow down" for r in retries)
    assert [m.role for m in agent.conversation.messages] == ["user", "assistant"]
    assert agent.store.load(agent.session_id).messages == agent.conversation.messages


def test_401_is_not_retried() -> None:
    p = Scripted([AuthFailed("bad key", status_code=401), [Text("never")]])
    stream = Agent(p, config=FAST).run("x")
    with pytest.raises(AuthFailed):
        stream.next()
    assert p.calls == 1
    assert stream.phase is Phase.FAILED


def test_exhaustion_returns_notices_then_error_then_poisoned() -> None:
    p = Scripted([ServerError("boom", status_code=500) for _ in range(5)])
    stream = Agent(p, config=FAST).run("x")
    notices: list[AnyEvent | None] = []
    with pytest.raises(ServerError) as info:
        while True:
            notices.append(stream.next())
    assert p.calls == 4
    assert [n.attempt for n in notices if isinstance(n, ProviderRetry)] == [1, 2, 3]
    assert all(isinstance(n, ProviderRetry) for n in notices)
    with pytest.raises(StreamPoisoned) as poisoned:
        stream.next()
    assert poisoned.value.__cause__ is info.value
    with pytest.raises(StreamPoisoned):
        stream.next()


def test_retry_after_wins_but_is_capped_and_reported_raw() -> None:
    cfg = Config(retry=RetryPolicy(initial_delay_ms=10_000, max_delay_ms=1))
    p = Scripted(
        [RateLimited("later", status_code=429, retry_after_ms=7000), [Text("ok")]]
    )
    stream = Agent(p, config=cfg).run("x")
    t0 = time.monotonic()
    retry = stream.next()
    assert isinstance(retry, ProviderRetry)
    assert retry.delay_ms == 1 and retry.retry_after_ms == 7000
    drain(stream)
    assert time.monotonic() - t0 < 2.0  # waited the capped 1 ms, not 7 s


def test_backoff_is_exponential_with_full_jitter() -> None:
    policy = RetryPolicy(
        initial_delay_ms=100, multiplier=2.0, max_delay_ms=1000, jitter=False
    )
    assert [policy.delay_ms(a) for a in (1, 2, 3, 4, 5)] == [100, 200, 400, 800, 1000]
    jittered = RetryPolicy(initial_delay_ms=100, max_delay_ms=1000)
    import random

    rng = random.Random(7)
    samples = [jittered.delay_ms(3, rng=rng) for _ in range(200)]
    assert all(0 <= s <= 400 for s in samples) and len(set(samples)) > 50


def test_mid_stream_failure_reopens_without_doubling() -> None:
    p = Scripted(
        [
            MidStreamFailure(
                [Text("partial answer that breaks")], ServerError("cut"), after=3
            ),
            [Text("whole answer")],
        ]
    )
    agent = Agent(p, config=FAST)
    stream = agent.run("x")
    events = drain(stream)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ProviderRetry") < kinds.index("MessageComplete")
    assert p.calls == 2
    msgs = agent.conversation.messages
    assert [m.text for m in msgs] == ["x", "whole answer"]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.iterations == 1


@pytest.mark.parametrize("per_read", [1, 2, 64])
def test_mid_stream_failure_streams_after_deltas_whatever_the_read_size(
    per_read: int,
) -> None:
    # ``after`` counts deltas (the model delta first), not reads: with many deltas a
    # read, the response must still break after three of them.
    failing = MidStreamFailure([Text("abcdefghijklmnop")], ServerError("cut"), after=3)
    p = Scripted([failing, [Text("whole")]], chunk_chars=1, deltas_per_read=per_read)
    events = drain(Agent(p, config=FAST).run("x"))
    retry = next(i for i, e in enumerate(events) if isinstance(e, ProviderRetry))
    before = [e.text for e in events[:retry] if isinstance(e, TextDelta)]
    assert "".join(before) == "ab"
    assert p.calls == 2


def test_empty_assistant_response_fails_the_turn() -> None:
    p = Scripted([Message("assistant", ())])
    agent = Agent(p)
    stream = agent.run("x")
    with pytest.raises(EmptyAssistantResponse):
        drain(stream)
    assert [m.role for m in agent.conversation.messages] == ["user"]
    with pytest.raises(StreamPoisoned):
        stream.next()


def test_queued_events_come_before_a_deferred_error() -> None:
    p = Scripted([RateLimited("a", status_code=429), AuthFailed("no", status_code=401)])
    stream = Agent(p, config=FAST).run("x")
    assert isinstance(stream.next(), ProviderRetry)
    with pytest.raises(AuthFailed):
        stream.next()


def test_max_iterations_ends_the_turn() -> None:
    loop = [[ToolUse(f"c{i}", "echo", '{"text":"again"}')] for i in range(10)]
    agent = Agent(Scripted(loop), tools=[echo], config=Config(max_iterations=3))
    events = drain(agent.run("x"))
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.MAX_ITERATIONS
    assert done.iterations == 3 and done.tool_calls == 3
    # every call got its result: the conversation stays valid for the next turn
    assert agent.conversation.messages[-1].role == "user"


def test_max_tokens_stop_reason() -> None:
    p = Scripted([Message("assistant", (Text("cut of"),), stop_reason="max_tokens")])
    events = drain(Agent(p).run("x"))
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.MAX_TOKENS


def test_config_is_reread_at_each_turn_start() -> None:
    p = Scripted(
        [[ToolUse("a", "echo", '{"text":"1"}')], [ToolUse("b", "echo", '{"text":"2"}')]]
    )
    agent = Agent(p, tools=[echo], config=Config(max_iterations=10))
    stream = agent.run("x")
    while not isinstance(stream.next(), ToolDispatchComplete):
        pass
    agent.set_config(Config(max_iterations=1))
    events = drain(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.MAX_ITERATIONS
    assert p.calls == 1


def test_set_config_between_turns_keeps_tools() -> None:
    p = Scripted(
        [[Text("one")], [ToolUse("t", "echo", '{"text":"kept"}')], [Text("two")]]
    )
    agent = Agent(p, tools=[echo])
    drain(agent.run("first"))
    agent.set_config(Config(max_iterations=5))
    drain(agent.run("second"))
    assert p.last_request is not None
    assert [s.name for s in p.last_request.tools] == ["echo"]
    assert agent.conversation.messages[-2].tool_results[0].text == "kept"


def test_second_run_while_a_turn_is_open_is_refused() -> None:
    agent = Agent(Scripted([[Text("a")], [Text("b")]]))
    stream = agent.run("x")
    stream.next()
    with pytest.raises(RuntimeError, match="still running"):
        agent.run("y")
    stream.close()
    drain(agent.run("y"))


def test_close_mid_turn_ends_it_as_a_cancel_and_keeps_committed_messages() -> None:
    p = Scripted([[ToolUse("a", "echo", '{"text":"1"}')], [Text("never read")]])
    agent = Agent(p, tools=[echo])
    stream = agent.run("x")
    while not isinstance(stream.next(), ToolDispatchComplete):
        pass
    stream.close()
    done = stream.next()
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.CANCELLED and done.tool_calls == 1
    assert stream.next() is None
    stored = agent.store.load(agent.session_id).messages
    assert [m.role for m in stored] == ["user", "assistant", "user"]


def test_cancel_ends_with_cancelled() -> None:
    agent = Agent(Scripted([[Text("a long answer indeed")]]))
    stream = agent.run("x")
    stream.next()
    stream.cancel()
    events = drain(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.CANCELLED


def test_cancel_from_another_thread_interrupts_a_retry_wait() -> None:
    import threading

    cfg = Config(retry=RetryPolicy(initial_delay_ms=30_000, max_delay_ms=30_000))
    p = Scripted([RateLimited("wait", status_code=429, retry_after_ms=30_000)])
    stream = Agent(p, config=cfg).run("x")
    assert isinstance(stream.next(), ProviderRetry)
    threading.Timer(0.2, stream.cancel).start()
    t0 = time.monotonic()
    done = stream.next()
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    assert time.monotonic() - t0 < 5 and p.calls == 1


def test_steering_message_is_applied_before_next_response() -> None:
    p = Scripted([[ToolUse("a", "echo", '{"text":"1"}')], [Text("ok")]])
    agent = Agent(p, tools=[echo])
    stream = agent.run("x")
    stream.next()
    agent.steer("also do y")
    drain(stream)
    sent = p.requests[1]
    assert sent[-1].text == "also do y"


def test_system_prompt_reaches_the_provider_and_replace_mode() -> None:
    p = Scripted([[Text("a")], [Text("b")]])
    agent = Agent(p, system="You are terse.")
    drain(agent.run("x"))
    assert p.last_request is not None
    assert p.last_request.system == "You are terse."
    agent.add_system_message("Also polite.")
    agent.add_system_message("Only this.", mode="replace")
    drain(agent.run("y"))
    assert p.last_request is not None
    assert p.last_request.system == "Only this."
    assert all(m.role != "system" for m in p.requests[-1])


def test_resume_answers_a_trailing_prompt() -> None:
    from navi_core import MemoryStore

    store = MemoryStore()
    first = Agent(Scripted([]), store=store)
    first.run("pending question").close()
    first.close()
    p = Scripted([[Text("answer")]])
    agent = Agent(p, store=store, session="latest")
    events = drain(agent.resume())
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.response == "answer"
    assert [m.text for m in agent.conversation.messages] == [
        "pending question",
        "answer",
    ]


def test_resume_after_a_finished_turn_completes_at_once() -> None:
    from navi_core import MemoryStore

    store = MemoryStore()
    with Agent(Scripted([[Text("done")]]), store=store) as a:
        drain(a.run("q"))
    p = Scripted([])
    with Agent(p, store=store, session="latest") as b:
        events = drain(b.resume())
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert p.calls == 0 and done.response == "done"

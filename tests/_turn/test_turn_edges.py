"""Edge cases of a turn: abandoned batches, late steering, cancellation, compaction
retries, odd text, and what must stay true of the conversation afterwards."""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from navi_core import (
    Agent,
    BadRequest,
    Cancelled,
    Compacted,
    CompactionConfig,
    CompactionStarted,
    Config,
    ContextOverflow,
    MemoryStore,
    Message,
    ProviderRetry,
    RateLimited,
    RetryPolicy,
    Scripted,
    SessionBusy,
    StopReason,
    Stream,
    StreamPoisoned,
    Text,
    Thinking,
    ToolFinished,
    ToolStarted,
    ToolUse,
    TurnComplete,
    UserMessage,
    WireIdentity,
    _deltas as D,
    tool,
)
from navi_core.events import Event
from navi_core.providers.assembler import ResponseAssembler
from navi_core.providers.base import ProviderRequest
from navi_core.providers.delta_stream import DeltaStream
from navi_core.tools import schema_for

FAST = RetryPolicy(initial_delay_ms=0, max_delay_ms=1, jitter=False)
PROMPT = "Summarise."


def drain(stream: Stream) -> list[Event]:
    out: list[Event] = []
    while (ev := stream.next()) is not None:
        out.append(ev)
    return out


def assistant(text: str) -> Message:
    return Message("assistant", (Text(text),))


def words(tag: str, n: int) -> str:
    return tag + ": " + " ".join(f"w{i}" for i in range(n))


# -- abandoned batches --------------------------------------------------------------


def test_abort_keeps_the_results_of_calls_that_finished() -> None:
    paid: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay once."""
        paid.append(amount)
        return f"paid {amount}"

    @tool
    def stop() -> str:
        """Abort after pay finished."""
        deadline = time.monotonic() + 5
        while not paid and time.monotonic() < deadline:
            time.sleep(0.01)
        raise Cancelled("operator stop")

    calls = [ToolUse("p", "pay", '{"amount": 5}'), ToolUse("s", "stop", "{}")]
    p = Scripted([calls, [Text("after")]])
    agent = Agent(p, tools=[pay, stop])
    with pytest.raises(Cancelled):
        drain(agent.run("go"))
    drain(agent.run("continue"))
    paid_result, stop_result = agent.conversation.messages[2].tool_results
    assert paid_result.text == "paid 5" and not paid_result.is_error
    assert (
        stop_result.is_error and "may or may not have taken effect" in stop_result.text
    )
    assert paid == [5]


def test_close_during_dispatch_keeps_finished_results() -> None:
    release = threading.Event()

    @tool
    def quick() -> str:
        """Quick."""
        return "quick done"

    @tool
    def slow() -> str:
        """Slow."""
        release.wait(5)
        return "slow done"

    p = Scripted(
        [[ToolUse("q", "quick", "{}"), ToolUse("s", "slow", "{}")], [Text("x")]]
    )
    agent = Agent(p, tools=[quick, slow])
    stream = agent.run("go")
    seen: set[tuple[type, str]] = set()
    while not {(ToolFinished, "q"), (ToolStarted, "s")} <= seen:
        ev = stream.next()
        if isinstance(ev, (ToolFinished, ToolStarted)):
            seen.add((type(ev), ev.call_id))
    stream.close()
    release.set()
    drain(agent.run("next"))
    q, s = agent.conversation.messages[2].tool_results
    assert q.text == "quick done"
    assert s.is_error and "may or may not have taken effect" in s.text


# -- system prompt on resume ---------------------------------------------------------


def test_resuming_with_the_same_system_prompt_does_not_pile_it_up() -> None:
    store = MemoryStore()
    with Agent(Scripted([]), store=store, system="A") as a:
        sid = a.session_id
    for _ in range(3):
        with Agent(Scripted([]), store=store, session=sid, system="B") as b:
            assert b.conversation.system_prompt() == "B"
    systems = [m for m in store.load(sid).messages if m.role == "system"]
    assert len(systems) == 2


# -- cancellation --------------------------------------------------------------------


class QuietProvider:
    """A provider whose response sends keep-alives (no events) for a long time."""

    wire = WireIdentity("test", "test://", "quiet")

    def open(self, request: ProviderRequest) -> DeltaStream:
        def batches() -> Iterator[list[tuple[Any, ...]]]:
            for _ in range(200):
                time.sleep(0.02)
                yield []
            yield [(D.TEXT, "late"), (D.DONE,)]

        return DeltaStream(batches(), self.wire)

    def close(self) -> None:
        pass


def test_cancel_is_seen_while_chunks_carry_no_events() -> None:
    stream = Agent(QuietProvider()).run("x")
    threading.Timer(0.1, stream.cancel).start()
    t0 = time.monotonic()
    events = drain(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.CANCELLED
    assert time.monotonic() - t0 < 2


def test_a_store_failure_while_cancelling_poisons_the_stream() -> None:
    class Flaky(MemoryStore):
        fail = False

        def append(self, session_id: str, messages: Sequence[Message]) -> None:
            if self.fail:
                raise OSError("disk full")
            super().append(session_id, messages)

    release = threading.Event()

    @tool
    def wait() -> str:
        """Wait."""
        release.wait(5)
        return "ok"

    store = Flaky()
    agent = Agent(Scripted([[ToolUse("w", "wait", "{}")]]), tools=[wait], store=store)
    stream = agent.run("x")
    while not isinstance(stream.next(), ToolStarted):
        pass
    store.fail = True
    stream.cancel()
    seen = []
    with pytest.raises(OSError):  # after the events queued before the failure
        while True:
            seen.append(stream.next())
    assert [type(e) for e in seen] == [ToolFinished]
    with pytest.raises(StreamPoisoned):
        stream.next()
    release.set()


# -- steering ------------------------------------------------------------------------


def test_steering_that_arrives_during_the_last_response_is_answered_in_the_same_turn() -> (
    None
):
    p = Scripted([[Text("first answer")], [Text("en français")]])
    agent = Agent(p)
    stream = agent.run("q1")
    stream.next()
    agent.steer("actually, use French")
    events = drain(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.response == "en français" and done.iterations == 2
    assert [m.text for m in p.requests[1]][-2:] == [
        "first answer",
        "actually, use French",
    ]


def test_steering_during_a_compaction_is_not_lost() -> None:
    summariser = Scripted(["summary"])
    old = [
        (words("old question", 600), words("old answer", 600)),
        ("short q", "short a"),
    ]
    store = MemoryStore()
    sid = store.create().id
    store.append(sid, [m for q, a in old for m in (UserMessage(q), assistant(a))])
    cfg = Config(
        compaction=CompactionConfig(
            prompt=PROMPT, provider=summariser, keep_verbatim=200, context_window=2000
        )
    )
    main = Scripted([[Text("answer")]])
    agent = Agent(main, store=store, session=sid, config=cfg)
    stream = agent.run("new question")
    assert isinstance(stream.next(), CompactionStarted)
    agent.steer("and one more thing")
    assert isinstance(stream.next(), Compacted)
    drain(stream)
    sent = [m.text for m in main.requests[0]]
    assert "and one more thing" in sent
    assert "and one more thing" in [m.text for m in store.load(sid).messages]


# -- compaction retries ----------------------------------------------------------------


def compaction_agent(provider: Scripted) -> Agent:
    """An agent whose history is over its threshold; summaries use ``provider`` too."""
    store = MemoryStore()
    sid = store.create().id
    store.append(
        sid,
        [
            UserMessage(words("old question", 600)),
            assistant(words("old answer", 600)),
            UserMessage("short q"),
            assistant("short a"),
        ],
    )
    cfg = Config(
        retry=FAST,
        compaction=CompactionConfig(
            prompt=PROMPT, keep_verbatim=200, context_window=2000
        ),
    )
    return Agent(provider, store=store, session=sid, config=cfg)


def test_a_failing_summary_request_is_retried_with_a_notice() -> None:
    p = Scripted([RateLimited("busy", status_code=429), "summary", [Text("answer")]])
    events = drain(compaction_agent(p).run("q"))
    kinds = [type(e) for e in events[:3]]
    assert kinds == [CompactionStarted, ProviderRetry, Compacted]
    retry, done = events[1], events[-1]
    assert isinstance(retry, ProviderRetry) and isinstance(done, TurnComplete)
    assert retry.compaction and retry.error == "RateLimited"
    assert p.calls == 3 and done.response == "answer"


def test_a_threshold_compaction_that_keeps_failing_is_skipped() -> None:
    p = Scripted([BadRequest("no summaries today", status_code=400), [Text("anyway")]])
    events = drain(compaction_agent(p).run("q"))
    assert not any(isinstance(e, Compacted) for e in events)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.response == "anyway"
    assert len(p.requests[1]) == 5  # sent uncompacted


def test_overflow_compacts_again_on_a_later_request_of_the_same_turn() -> None:
    @tool
    def step() -> str:
        """Step."""
        return "stepped"

    overflow = ContextOverflow("prompt is too long", status_code=400)
    summariser = Scripted(["summary one", "summary two"])
    main = Scripted(
        [
            overflow,
            [ToolUse("a", "step", "{}")],
            [ToolUse("b", "step", "{}")],
            overflow,
            [Text("done")],
        ]
    )
    store = MemoryStore()
    sid = store.create().id
    history: list[Message] = []
    for i in range(4):
        history += [UserMessage(words(f"q{i}", 100)), assistant(words(f"a{i}", 100))]
    store.append(sid, history)
    cfg = Config(
        retry=FAST,
        compaction=CompactionConfig(
            prompt=PROMPT, provider=summariser, keep_verbatim=50
        ),
    )
    agent = Agent(main, tools=[step], store=store, session=sid, config=cfg)
    events = drain(agent.run("go"))
    assert sum(isinstance(e, Compacted) for e in events) == 2
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.response == "done"


# -- odd text and resources ------------------------------------------------------------


def test_lone_surrogates_from_a_tool_do_not_break_the_session(tmp_path: Path) -> None:
    from navi_core.store.sqlite import SQLiteStore

    @tool
    def listing() -> str:
        """A file name that is not valid UTF-8."""
        return "report-\udcff.txt"

    store = SQLiteStore(tmp_path / "s.db")
    p = Scripted([[ToolUse("l", "listing", "{}")], [Text("ok")], [Text("again")]])
    with Agent(p, tools=[listing], store=store) as agent:
        drain(agent.run("ls \udcfe"))
        drain(agent.run("second"))
        sid = agent.session_id
    stored = store.load(sid).messages
    assert [m.text for m in stored if m.role == "user" and m.text] == [
        "ls \ufffd",
        "second",
    ]
    assert stored[2].tool_results[0].text == "report-\ufffd.txt"
    store.close()


def test_memory_store_lock_is_freed_when_the_agent_is_collected() -> None:
    store = MemoryStore()
    agent = Agent(Scripted([]), store=store)
    sid = agent.session_id
    with pytest.raises(SessionBusy):
        Agent(Scripted([]), store=store, session=sid)
    del agent
    gc.collect()
    Agent(Scripted([]), store=store, session=sid).close()


# -- assembler and schema details -------------------------------------------------------


def test_signature_in_two_pieces_seals_one_thinking_block_and_ids_are_unique() -> None:
    wire = WireIdentity("t", "t://", "m")
    asm = ResponseAssembler(wire)
    q: deque[Event] = deque()
    asm.feed(
        [
            (D.THINKING, "hmm"),
            (D.SIGNATURE, "AAAA"),
            (D.SIGNATURE, "BBBB"),
            (D.TOOL_START, 0, "", "a"),
            (D.TOOL_START, 1, "", "b"),
            (D.DONE,),
        ],
        q,
    )
    msg = asm.finish()
    thinking, first, second = msg.content
    assert isinstance(thinking, Thinking)
    assert isinstance(first, ToolUse) and isinstance(second, ToolUse)
    assert thinking.signature == "AAAABBBB" and thinking.text == "hmm"
    assert first.id != second.id
    other = ResponseAssembler(wire)
    other.feed([(D.TOOL_START, 0, "", "a"), (D.DONE,)], deque())
    only = other.finish().content[0]
    assert isinstance(only, ToolUse)
    assert only.id != first.id


def test_dataclass_schema_skips_classvars_and_non_init_fields() -> None:
    @dataclasses.dataclass
    class Rec:
        kind: ClassVar[str] = "rec"
        name: str
        # a bare ``set`` on purpose: its schema is under test
        tags: set = dataclasses.field(default_factory=set)  # type: ignore[type-arg]
        cache: int = dataclasses.field(init=False, default=0)

    s = schema_for(Rec)
    assert set(s["properties"]) == {"name", "tags"}
    assert s["required"] == ["name"]
    assert s["properties"]["tags"] == {"type": "array"}

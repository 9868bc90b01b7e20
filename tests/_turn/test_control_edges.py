"""Turn control at its edges, over real loopback HTTP: each test is a way the control
once broke (a shared connection pool, a thread that runs HTTP after a cancel, deltas
that share a read with an error, close during a batch, a hung tool at exit, a hook that
closes the agent, steering that races the end of a turn)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import anthropic_body, openai_body, openai_chunk

from navi_core import (
    PENDING,
    Agent,
    Anthropic,
    Config,
    Hook,
    OpenAIChat,
    ResponseDiscarded,
    RetryPolicy,
    Scripted,
    SQLiteStore,
    SteerDisposition,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolStarted,
    TurnComplete,
    tool,
)
from navi_core.events import Event

NO_RETRY = RetryPolicy(max_attempts=1)
ROOT = Path(__file__).resolve().parents[2]


def test_a_cancel_never_touches_a_pooled_connection_another_turn_uses(
    loopback: LoopbackServer,
) -> None:
    release = threading.Event()

    @tool
    def slow() -> str:
        """Slow."""
        release.wait(10)
        return "ok"

    with OpenAIChat("gpt-test", loopback.url + "/v1", "sk-test-1234567890") as shared:
        loopback.add(Reply.sse(openai_body(tool_calls=[("c1", "slow", ["{}"])])))
        a = Agent(shared, tools=[slow], config=Config(retry=NO_RETRY))
        sa = a.run("a")
        while not isinstance(sa.next(), ToolStarted):
            pass
        chunks: list[bytes | float] = []
        for i in range(20):
            chunks += [openai_chunk({"content": f"b{i} "}), 0.02]
        loopback.add(Reply(body=[*chunks, openai_body(["end"])]))
        b = Agent(shared, config=Config(retry=NO_RETRY))
        sb = b.run("b")
        assert isinstance(next(e for e in sb if isinstance(e, TextDelta)), TextDelta)
        # B streams on the connection A's response left in the pool
        assert loopback.requests[1].connection == loopback.requests[0].connection
        sa.cancel()
        ended = list(sa)[-1]
        assert isinstance(ended, TurnComplete)
        assert ended.stop_reason is StopReason.CANCELLED
        done = list(sb)[-1]
        assert isinstance(done, TurnComplete) and done.response.endswith("end")
        release.set()
        a.close()
        b.close()


def test_http_on_the_thread_after_a_cancelled_turn_works(
    loopback: LoopbackServer,
) -> None:
    from navi_core import CompactionConfig

    loopback.add(
        Reply.sse(openai_body(["one " * 30])), Reply.sse(openai_body(["x"]), delay=30)
    )
    config = Config(
        retry=NO_RETRY,
        compaction=CompactionConfig(prompt="Summarise.", keep_verbatim=1),
    )
    with (
        OpenAIChat("gpt-test", loopback.url + "/v1", "sk-test-1234567890") as p,
        Agent(p, config=config) as agent,
    ):
        for _ in agent.run("first " * 30):
            pass
        stream = agent.run("second")
        threading.Timer(0.3, stream.cancel).start()
        ended = list(stream)[-1]
        assert isinstance(ended, TurnComplete)
        assert ended.stop_reason is StopReason.CANCELLED
        loopback.add(Reply.sse(openai_body(["the summary"])))
        result = agent.compact()  # same thread, outside any turn
        assert result.compacted


@pytest.mark.parametrize("polling", [False, True], ids=["blocking", "timeout"])
def test_deltas_read_with_an_error_are_returned_before_the_discard(
    loopback: LoopbackServer, polling: bool
) -> None:
    bad = anthropic_body(
        [("thinking", (["hmm ", "ok"], "sig")), ("text", ["Hel", "lo"])],
        error=("overloaded_error", "busy"),
    )
    loopback.add(Reply(body=(bad,)), Reply.sse(anthropic_body([("text", ["Hello"])])))
    retry = RetryPolicy(max_attempts=2, initial_delay_ms=0)
    with (
        Anthropic("claude-test", loopback.url, "sk-ant-test-1234567890") as p,
        Agent(p, config=Config(retry=retry)) as agent,
    ):
        stream = agent.run("hi")
        events: list[Event] = []
        while (
            ev := stream.next(timeout=0.5) if polling else stream.next()
        ) is not None:
            if ev is not PENDING:
                events.append(ev)
    i = next(i for i, e in enumerate(events) if isinstance(e, ResponseDiscarded))
    shown = [e for e in events[:i] if isinstance(e, (TextDelta, ThinkingDelta))]
    discarded = events[i]
    assert isinstance(discarded, ResponseDiscarded)
    text = sum(len(e.text) for e in shown if isinstance(e, TextDelta))
    thinking = sum(len(e.text) for e in shown if isinstance(e, ThinkingDelta))
    assert (
        (discarded.text_chars, discarded.thinking_chars) == (text, thinking) == (5, 6)
    )


def test_closing_during_a_batch_stores_the_finished_results(
    sqlite_stores: Callable[..., SQLiteStore], loopback: LoopbackServer, tmp_path: Path
) -> None:
    release = threading.Event()

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    @tool
    def hang() -> str:
        """Hang."""
        release.wait(10)
        return "late"

    calls = [("c1", "send_email", ['{"to": "a@b"}']), ("c2", "hang", ["{}"])]
    loopback.add(Reply.sse(openai_body(tool_calls=calls)))
    db = tmp_path / "s.db"
    with OpenAIChat("gpt-test", loopback.url + "/v1", "sk-test-1234567890") as p:
        agent = Agent(p, tools=[send_email, hang], store=sqlite_stores(db))
        with agent.run("go") as stream:
            started: set[str] = set()
            while started != {"c1", "c2"}:
                ev = stream.next()
                if isinstance(ev, ToolStarted):
                    started.add(ev.call_id)
            time.sleep(0.1)  # c1 finishes; its result is not returned yet
        session = agent.session_id
        agent.close()
    release.set()
    again = Agent(Scripted([]), store=sqlite_stores(db), session=session)
    results = {r.tool_use_id: r for r in again.conversation.messages[-1].tool_results}
    assert results["c1"].text == "sent to a@b" and not results["c1"].is_error
    assert results["c2"].is_error
    again.close()


def test_a_hung_cancelled_tool_does_not_hold_up_the_exit(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(
        textwrap.dedent(
            """
            import time
            from navi_core import Agent, Scripted, ToolStarted, ToolUse, tool

            @tool
            def hang() -> str:
                "Hang."
                time.sleep(30)
                return "late"

            with Agent(Scripted([[ToolUse("h", "hang", "{}")]]), tools=[hang]) as agent:
                stream = agent.run("go")
                while not isinstance(stream.next(), ToolStarted):
                    pass
                stream.cancel()
                print([type(e).__name__ for e in stream][-1])
            """
        )
    )
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "TurnComplete"
    assert time.monotonic() - t0 < 15  # the interpreter did not wait 30 s for the tool


def test_a_hook_that_closes_the_agent_does_not_deadlock() -> None:
    class CloseOnDone(Hook):
        agent: Agent | None = None

        def on_completion(self, turn: object) -> None:
            assert self.agent is not None
            self.agent.close()

    hook = CloseOnDone()
    agent = Agent(Scripted(["x"]), hooks=[hook])
    hook.agent = agent
    stream = agent.run("hi")
    got: list[list[Event]] = []
    t = threading.Thread(target=lambda: got.append(list(stream)), daemon=True)
    t.start()
    t.join(5)
    assert got, "next() deadlocked"
    assert isinstance(got[0][-1], TurnComplete)


def test_steering_while_a_turn_finishes_waits_for_the_next_turn() -> None:
    class SlowEnd(Hook):
        def on_completion(self, turn: object) -> None:
            time.sleep(0.3)

    with Agent(Scripted(["answer", "answer to it"]), hooks=[SlowEnd()]) as agent:
        stream = agent.run("hi")
        got: list[SteerDisposition] = []
        threading.Timer(0.15, lambda: got.append(agent.steer("also this"))).start()
        events = list(stream)
        assert isinstance(events[-1], TurnComplete)
        assert got == [SteerDisposition.NEXT_TURN]  # promised to the next turn
        assert len(agent.steering) == 1
        last = list(agent.resume())[-1]
        assert isinstance(last, TurnComplete) and last.response == "answer to it"


def test_steering_a_closed_agent_is_refused() -> None:
    agent = Agent(Scripted([]))
    agent.close()
    with pytest.raises(RuntimeError, match="closed"):
        agent.steer("lost?")


def test_a_driver_between_calls_learns_of_a_close_from_another_thread() -> None:
    agent = Agent(Scripted(["a long answer, streamed in small pieces"]))
    stream = agent.run("hi")
    shown = [
        ev.text for ev in [stream.next(), stream.next()] if isinstance(ev, TextDelta)
    ]
    closer = threading.Thread(target=stream.close)
    closer.start()
    closer.join(5)
    events = list(stream)  # ended as a cancel: what was shown is the answer
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    assert shown and done.response == "".join(shown)
    assert agent.conversation.messages[-1].text == done.response
    assert stream.next() is None
    agent.close()

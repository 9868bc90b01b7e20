"""``@tool(inline=True)``: calls run on the thread that calls ``next()``, no hand-off.

Each behaviour runs over a real loopback HTTP server (``OpenAIChat``, a SQLite store)
and with ``Scripted``: the thread a call runs on, a mixed batch (pool calls posted
first, so they run while the inline ones do), error results, aborts, the refusals at
decoration, and a ``cancel()`` from another thread while an inline call runs.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from faultkit import openai_stream
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    AnyEvent,
    Cancelled,
    Hook,
    Scripted,
    SQLiteStore,
    StopReason,
    Stream,
    StreamPoisoned,
    TodoList,
    TodoUpdated,
    Tool,
    ToolCall,
    ToolFinished,
    ToolRegistrationError,
    ToolSearch,
    ToolSpec,
    ToolStarted,
    ToolUse,
    TurnComplete,
    tool,
)
from navi_core.providers.openai_chat import OpenAIChat

#: one response: tool calls (id, name, JSON arguments), or a final text
Step = list[tuple[str, str, str]] | str
#: (steps, tools) -> an agent whose provider answers the steps in order
MakeAgent = Callable[[Sequence[Step], Sequence[Any]], Agent]


@pytest.fixture(params=["loopback", "scripted"])
def make_agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeAgent]:
    """Agents on a real loopback server and SQLite file, or on ``Scripted``."""
    closers: list[Callable[[], None]] = []

    def scripted(steps: Sequence[Step], tools: Sequence[Any]) -> Agent:
        script = [
            s if isinstance(s, str) else [ToolUse(i, n, a) for i, n, a in s]
            for s in steps
        ]
        return Agent(Scripted(script), tools=tools)

    def loopback(steps: Sequence[Step], tools: Sequence[Any]) -> Agent:
        server = LoopbackServer().start()
        closers.append(server.close)
        server.add(
            *(
                Reply.sse(
                    openai_stream(s)
                    if isinstance(s, str)
                    else openai_stream("", tool_calls=s)
                )
                for s in steps
            )
        )
        provider = OpenAIChat("m", server.url + "/v1", "sk-test-inline")
        store = SQLiteStore(tmp_path / f"navi-{len(closers)}.db")
        agent = Agent(provider, tools=tools, store=store)
        closers[-1:] = [agent.close, store.close, provider.close, server.close]
        return agent

    yield loopback if request.param == "loopback" else scripted
    for close in reversed(closers):
        close()


def drain(stream: Stream) -> list[AnyEvent]:
    events: list[AnyEvent] = []
    with stream:
        while (ev := stream.next()) is not None:
            events.append(ev)
    return events


def results(agent: Agent) -> list[tuple[str, str, bool]]:
    """(call id, text, is_error) of the first tool result message."""
    message = next(m for m in agent.conversation.messages if m.tool_results)
    return [(r.tool_use_id, r.text, r.is_error) for r in message.tool_results]


def assert_paired(events: Sequence[AnyEvent], ids: Sequence[str]) -> None:
    """Each call has exactly one start, then exactly one finish."""
    for call in ids:
        marks = [
            type(e).__name__
            for e in events
            if isinstance(e, (ToolStarted, ToolFinished)) and e.call_id == call
        ]
        assert marks == ["ToolStarted", "ToolFinished"], (call, marks)


def where(name: str, *, inline: bool) -> Tool:
    """A tool that answers with the id of the thread it ran on."""

    def run() -> str:
        return str(threading.get_ident())

    run.__doc__ = "Name the thread."
    return tool(name=name, inline=inline)(run)


def test_an_inline_call_runs_on_the_calling_thread_a_pool_call_does_not(
    make_agent: MakeAgent,
) -> None:
    calls = [("c1", "here", "{}"), ("c2", "there", "{}")]
    agent = make_agent(
        [calls, "done"], [where("here", inline=True), where("there", inline=False)]
    )
    events = drain(agent.run("go"))
    assert isinstance(events[-1], TurnComplete)
    assert events[-1].stop_reason is StopReason.END_TURN
    (_, here, _), (_, there, _) = results(agent)
    assert int(here) == threading.get_ident()
    assert int(there) != threading.get_ident()
    assert_paired(events, ["c1", "c2"])


def test_a_mixed_batch_posts_its_pool_calls_first_and_keeps_the_model_order(
    make_agent: MakeAgent,
) -> None:
    pool_started = threading.Event()
    go = threading.Event()

    @tool(inline=True)
    def release() -> str:
        """Wait for the pool call to run, then let it finish."""
        running = pool_started.wait(5)
        go.set()
        return f"pool call was running: {running}"

    @tool
    def held() -> str:
        """Run on the pool until the inline call lets go."""
        pool_started.set()
        return f"released: {go.wait(5)}"

    @tool(inline=True)
    def after(n: int) -> str:
        """A second inline call."""
        return f"after {n}"

    calls = [("c1", "release", "{}"), ("c2", "held", "{}"), ("c3", "after", '{"n": 3}')]
    agent = make_agent([calls, "done"], [release, held, after])
    t0 = time.monotonic()
    events = drain(agent.run("go"))
    assert time.monotonic() - t0 < 4  # nobody waited out a 5 s limit
    assert results(agent) == [
        ("c1", "pool call was running: True", False),
        ("c2", "released: True", False),
        ("c3", "after 3", False),
    ]
    assert_paired(events, ["c1", "c2", "c3"])
    marks = [
        (type(e).__name__, e.call_id)
        for e in events
        if isinstance(e, (ToolStarted, ToolFinished))
    ]
    # the inline calls run one after the other, in the model's order
    assert marks.index(("ToolFinished", "c1")) < marks.index(("ToolStarted", "c3"))


def test_an_inline_call_that_raises_becomes_an_error_result(
    make_agent: MakeAgent,
) -> None:
    @tool(inline=True)
    def parse(text: str) -> int:
        """Parse a number."""
        return int(text)

    calls = [("c1", "parse", '{"text": "x"}'), ("c2", "parse", '{"text": "7"}')]
    agent = make_agent([calls, "recovered"], [parse])
    events = drain(agent.run("go"))
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.response == "recovered"
    (_, bad, bad_error), (_, good, good_error) = results(agent)
    assert bad_error and "ValueError" in bad and "invalid literal" in bad
    assert (good, good_error) == ("7", False)
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [(f.call_id, f.is_error) for f in finished] == [("c1", True), ("c2", False)]
    assert finished[0].error is not None and "ValueError" in finished[0].error


def test_an_aborting_exception_from_an_inline_call_aborts_the_turn() -> None:
    @tool(inline=True)
    def stop() -> str:
        """Abort."""
        raise Cancelled("stop")

    agent = Agent(Scripted([[ToolUse("a", "stop", "{}")], "never"]), tools=[stop])
    stream = agent.run("x")
    with pytest.raises(Cancelled):
        while stream.next() is not None:
            pass
    with pytest.raises(StreamPoisoned):
        stream.next()
    assert [m.role for m in agent.conversation.messages] == ["user", "assistant"]


def test_cancel_from_another_thread_waits_for_the_inline_call_and_keeps_its_result(
    make_agent: MakeAgent,
) -> None:
    running = threading.Event()
    cancel_sent = threading.Event()
    returned: list[float] = []

    @tool(inline=True)
    def lookup(key: str) -> str:
        """Look a key up (here: until the test has sent its cancel)."""
        running.set()
        assert cancel_sent.wait(5)
        returned.append(time.monotonic())
        return f"value of {key}"

    @tool(inline=True)
    def second() -> str:
        """Never runs: the turn was cancelled before it started."""
        return "ran"

    agent = make_agent(
        [[("c1", "lookup", '{"key": "k"}'), ("c2", "second", "{}")], "never asked"],
        [lookup, second],
    )
    stream = agent.run("go")

    def canceller() -> None:
        assert running.wait(5)
        stream.cancel()
        cancel_sent.set()

    thread = threading.Thread(target=canceller)
    thread.start()
    events = drain(stream)
    ended = time.monotonic()
    thread.join(5)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.CANCELLED
    assert ended - returned[0] < 1.0  # right after the call returned
    first, later = results(agent)
    assert first == ("c1", "value of k", False)  # the real result is kept
    assert later[0] == "c2" and later[2] and "cancelled" in later[1]
    assert_paired(events, ["c1"])
    assert not any(
        isinstance(e, (ToolStarted, ToolFinished)) and e.call_id == "c2" for e in events
    )
    stored = agent.session.store.load(agent.session_id).messages
    assert any(
        r.tool_use_id == "c1" and r.text == "value of k"
        for m in stored
        for r in m.tool_results
    )


def test_next_with_a_timeout_returns_after_the_inline_call() -> None:
    """The documented trade: a deadline cannot cut an inline call short."""

    @tool(inline=True)
    def slow() -> str:
        """Return after a while (an inline tool should not)."""
        time.sleep(0.3)
        return str(threading.get_ident())

    agent = Agent(Scripted([[ToolUse("c1", "slow", "{}")], "done"]), tools=[slow])
    longest = 0.0
    with agent.run("go") as stream:
        while True:
            t0 = time.monotonic()
            ev = stream.next(timeout=0.01)
            longest = max(longest, time.monotonic() - t0)
            if ev is None:
                break
    assert longest >= 0.25
    ((_, thread, error),) = results(agent)
    assert int(thread) == threading.get_ident() and not error


def test_a_timeout_or_an_async_function_is_refused_with_inline() -> None:
    with pytest.raises(ToolRegistrationError, match="timeout"):

        @tool(inline=True, timeout=1.0)
        def timed() -> str:
            """Timed."""
            return ""

    with pytest.raises(ToolRegistrationError, match="async"):

        @tool(inline=True)
        async def waits() -> str:
            """Async."""
            return ""

    async def inner() -> str:
        return ""

    @functools.wraps(inner)
    def wrapper() -> Any:
        return inner()

    with pytest.raises(ToolRegistrationError, match="async"):
        tool(name="wrapped", inline=True)(wrapper)
    with pytest.raises(ToolRegistrationError, match="timeout"):
        Tool("t", "", {"type": "object"}, lambda: "", idle_timeout=1.0, inline=True)

    @tool(inline=True)
    def fine() -> str:
        """Fine."""
        return "ok"

    assert fine.inline and not fine.needs_approval and fine() == "ok"
    assert not where("plain", inline=False).inline


def test_a_turn_with_hooks_runs_inline_tools_on_the_pool() -> None:
    """Start hooks run on the call's thread and may block: the pool keeps them."""
    seen: list[int] = []

    class Watch(Hook):
        def on_tool_start(self, call: ToolCall) -> None:
            seen.append(threading.get_ident())

    agent = Agent(
        Scripted([[ToolUse("c1", "here", "{}")], "done"]),
        tools=[where("here", inline=True)],
        hooks=[Watch()],
    )
    drain(agent.run("go"))
    ((_, thread, _),) = results(agent)
    assert int(thread) != threading.get_ident() and seen == [int(thread)]


class Counter:
    """A source whose batch returns at once: it says so with ``inline = True``."""

    inline = True

    def __init__(self) -> None:
        self.threads: list[int] = []

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("count", "Count.", {"type": "object", "properties": {}})]

    def call_batch(self, calls: Sequence[ToolCall]) -> list[str]:
        self.threads.append(threading.get_ident())
        return [str(k) for k in range(len(calls))]


def test_an_inline_source_and_the_built_in_tools_run_on_the_calling_thread() -> None:
    counter = Counter()
    plan = '{"items": [{"text": "count", "status": "in_progress"}]}'
    calls = [
        ToolUse("c1", "count", "{}"),
        ToolUse("c2", "todo_write", plan),
        ToolUse("c3", "count", "{}"),
        ToolUse("c4", "search_tools", '{"query": "count"}'),
    ]
    agent = Agent(
        Scripted([calls, "done"]),
        tools=[counter, TodoList(), ToolSearch(max_visible=1)],
    )
    events = drain(agent.run("go"))
    assert counter.threads == [threading.get_ident()]  # one batch, on this thread
    assert TodoList().inline and ToolSearch.inline
    texts = results(agent)
    assert [(i, e) for i, _, e in texts] == [(c.id, False) for c in calls]
    assert texts[0][1] == "0" and texts[2][1] == "1"
    assert "count" in texts[3][1]
    # the todo list's update still sits between its call's start and finish
    kinds = [
        (type(e).__name__, getattr(e, "call_id", None))
        for e in events
        if isinstance(e, (ToolStarted, ToolFinished, TodoUpdated))
    ]
    at = kinds.index(("TodoUpdated", None))
    assert kinds[at - 1] == ("ToolStarted", "c2")
    assert kinds[at + 1] == ("ToolFinished", "c2")
    assert_paired(events, [c.id for c in calls])

"""Tool dispatch rules: grouping, threads, ordering, error results, aborts."""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest

from navi_core import (
    Agent,
    AnyEvent,
    Cancelled,
    Config,
    Hook,
    Scripted,
    Stream,
    StreamPoisoned,
    Text,
    TextPart,
    Tool,
    ToolCall,
    ToolContext,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolResult,
    ToolSource,
    ToolSpec,
    ToolStarted,
    ToolUse,
    TurnComplete,
    Veto,
    tool,
)
from navi_core.tools._runner import DaemonPool


def drain(stream: Stream) -> list[AnyEvent]:
    out: list[AnyEvent] = []
    while (ev := stream.next()) is not None:
        out.append(ev)
    return out


def run_turn(
    tools: Sequence[Tool | ToolSource],
    calls: Sequence[ToolUse],
    *,
    config: Config | None = None,
) -> tuple[Agent, list[AnyEvent], Scripted]:
    p = Scripted([list(calls), [Text("done")]])
    agent = Agent(p, tools=tools, config=config)
    events = drain(agent.run("go"))
    return agent, events, p


def test_three_calls_finish_only_when_all_run_at_once_on_three_threads() -> None:
    barrier = threading.Barrier(3, timeout=5)
    threads: dict[str, str] = {}

    @tool
    def meet(tag: str) -> str:
        """Wait for the others."""
        barrier.wait()
        threads[tag] = threading.current_thread().name
        return f"met {tag}"

    calls = [ToolUse(f"c{i}", "meet", f'{{"tag": "{t}"}}') for i, t in enumerate("abc")]
    agent, _, _ = run_turn([meet], calls)
    results = agent.conversation.messages[2].tool_results
    assert [r.tool_use_id for r in results] == ["c0", "c1", "c2"]
    assert [r.text for r in results] == ["met a", "met b", "met c"]
    assert len(set(threads.values())) == 3
    assert threading.current_thread().name not in threads.values()


def test_results_keep_model_order_when_calls_finish_in_reverse() -> None:
    @tool
    def nap(seconds: float, tag: str) -> str:
        """Sleep, then return the tag."""
        time.sleep(seconds)
        return tag

    calls = [
        ToolUse("slow", "nap", '{"seconds": 0.3, "tag": "first"}'),
        ToolUse("mid", "nap", '{"seconds": 0.15, "tag": "second"}'),
        ToolUse("fast", "nap", '{"seconds": 0, "tag": "third"}'),
    ]
    agent, events, _ = run_turn([nap], calls)
    finished = [e.call_id for e in events if isinstance(e, ToolFinished)]
    assert finished == ["fast", "mid", "slow"]
    results = agent.conversation.messages[2].tool_results
    assert [r.text for r in results] == ["first", "second", "third"]
    complete = next(e for e in events if isinstance(e, ToolDispatchComplete))
    assert complete.message == agent.conversation.messages[2]


class RecordingSource:
    """A source that records every batch and the thread it ran on."""

    def __init__(self, names: Sequence[str]) -> None:
        self._names = names
        self.batches: list[tuple[str, list[ToolCall]]] = []

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(n, f"tool {n}", {"type": "object"}) for n in self._names]

    def call_batch(self, calls: Sequence[ToolCall]) -> list[object]:
        self.batches.append((threading.current_thread().name, list(calls)))
        return [f"{c.name}:{c.arguments.get('n')}" for c in calls]


def test_a_source_gets_its_calls_in_one_batch_on_one_thread_in_order() -> None:
    src = RecordingSource(["s_a", "s_b"])
    calls = [
        ToolUse("1", "s_a", '{"n": 1}'),
        ToolUse("2", "s_b", '{"n": 2}'),
        ToolUse("3", "s_a", '{"n": 3}'),
    ]
    agent, _, _ = run_turn([src], calls)
    assert len(src.batches) == 1
    _, batch = src.batches[0]
    assert [c.id for c in batch] == ["1", "2", "3"]
    assert [r.text for r in agent.conversation.messages[2].tool_results] == [
        "s_a:1",
        "s_b:2",
        "s_a:3",
    ]


def test_distinct_sources_run_on_distinct_threads() -> None:
    gate = threading.Barrier(2, timeout=5)

    class Waiting(RecordingSource):
        def call_batch(self, calls: Sequence[ToolCall]) -> list[object]:
            gate.wait()  # both batches must be in flight at once
            return super().call_batch(calls)

    one, two = Waiting(["x1"]), Waiting(["x2"])
    calls = [ToolUse("a", "x1", "{}"), ToolUse("b", "x2", "{}")]
    run_turn([one, two], calls)
    assert one.batches[0][0] != two.batches[0][0]


def test_invalid_arguments_become_an_error_result_and_the_tool_does_not_run() -> None:
    ran: list[int] = []

    @tool
    def record(x: int) -> str:
        """Record x."""
        ran.append(x)
        return "ran"

    calls = [
        ToolUse("bad", "record", '{"x": 1'),
        ToolUse("list", "record", "[1]"),
        ToolUse("good", "record", '{"x": 2}'),
    ]
    agent, _, p = run_turn([record], calls)
    bad, not_obj, good = agent.conversation.messages[2].tool_results
    assert bad.is_error and "record" in bad.text and "JSON" in bad.text
    assert not_obj.is_error and "object" in not_obj.text
    assert not good.is_error and ran == [2]
    assert p.calls == 2  # the loop went on


def test_unknown_tool_and_raising_tool_become_readable_errors() -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    calls = [ToolUse("u", "nope", "{}"), ToolUse("e", "explode", "{}")]
    agent, events, _ = run_turn([explode], calls)
    unknown, exploded = agent.conversation.messages[2].tool_results
    assert unknown.is_error and "nope" in unknown.text and "explode" in unknown.text
    assert (
        exploded.is_error
        and "explode" in exploded.text
        and "disk on fire" in exploded.text
    )
    assert [e.is_error for e in events if isinstance(e, ToolFinished)] == [True, True]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.response == "done"


def test_wrong_argument_names_are_an_error_result() -> None:
    @tool
    def needs(a: int) -> int:
        """Needs a."""
        return a

    agent, _, _ = run_turn([needs], [ToolUse("w", "needs", '{"b": 1}')])
    (res,) = agent.conversation.messages[2].tool_results
    assert res.is_error and "needs" in res.text and "was not run" in res.text
    assert "`a`: required field is missing" in res.text


def test_whole_batch_failure_of_a_source_gives_one_error_per_call() -> None:
    class Broken(RecordingSource):
        def call_batch(self, calls: Sequence[ToolCall]) -> list[object]:
            raise ConnectionError("backend down")

    src = Broken(["b1", "b2"])
    calls = [ToolUse("1", "b1", "{}"), ToolUse("2", "b2", "{}")]
    agent, _, _ = run_turn([src], calls)
    results = agent.conversation.messages[2].tool_results
    assert [r.tool_use_id for r in results] == ["1", "2"]
    assert all(r.is_error and "backend down" in r.text for r in results)


def test_source_may_return_an_exception_for_one_call() -> None:
    class Partial(RecordingSource):
        def call_batch(self, calls: Sequence[ToolCall]) -> list[object]:
            return ["fine", KeyError("missing")]

    agent, _, _ = run_turn(
        [Partial(["p1", "p2"])], [ToolUse("1", "p1", "{}"), ToolUse("2", "p2", "{}")]
    )
    ok, err = agent.conversation.messages[2].tool_results
    assert ok.text == "fine" and not ok.is_error
    assert err.is_error and "KeyError" in err.text


def test_a_source_s_own_tool_results_keep_their_parts_and_error_flag() -> None:
    """A ``ToolResult`` from ``call_batch`` is the result itself, not data to write
    as JSON; the call's position decides its id."""

    class Results(RecordingSource):
        def call_batch(self, calls: Sequence[ToolCall]) -> list[object]:
            return [
                ToolResult("ignored", (TextPart("no such key"),), True),
                ToolResult(calls[1].id, (TextPart("found"),)),
            ]

    agent, _, _ = run_turn(
        [Results(["r1", "r2"])], [ToolUse("1", "r1", "{}"), ToolUse("2", "r2", "{}")]
    )
    missing, found = agent.conversation.messages[2].tool_results
    assert (missing.tool_use_id, missing.parts, missing.is_error) == (
        "1",
        (TextPart("no such key"),),
        True,
    )
    assert (found.tool_use_id, found.text, found.is_error) == ("2", "found", False)


class AsCompletedSource(RecordingSource):
    """Reports its calls as they finish: the last call first, then the first only
    once the test lets it (``release``); ``reports`` overrides what it yields."""

    def __init__(
        self, names: Sequence[str], reports: list[tuple[Any, object]] | None = None
    ) -> None:
        super().__init__(names)
        self.release = threading.Event()
        self._reports = reports

    def call_batch_as_completed(
        self, calls: Sequence[ToolCall], contexts: Sequence[ToolContext]
    ) -> Iterator[tuple[Any, object]]:
        assert [c.call_id for c in contexts] == [c.id for c in calls]
        if self._reports is not None:
            for k, value in self._reports:
                if isinstance(value, BaseException) and k is None:
                    raise value
                yield k, value
            return
        yield len(calls) - 1, "quick"
        assert self.release.wait(5)
        yield 0, "slow"


def test_a_source_that_reports_as_completed_has_each_call_finish_on_its_own() -> None:
    """The quick call's ``ToolFinished`` comes while the slow one still runs; the
    result message keeps the model's order."""
    src = AsCompletedSource(["s_a", "s_b"])
    agent = Agent(
        Scripted([[ToolUse("1", "s_a", "{}"), ToolUse("2", "s_b", "{}")], "done"]),
        tools=[src],
    )
    seen: list[str] = []
    with agent.run("go") as stream:
        for event in stream:
            if isinstance(event, ToolFinished):
                seen.append(event.call_id)
                src.release.set()  # the slow call ends only after "2" was reported
    assert seen == ["2", "1"]
    assert [r.text for r in agent.conversation.messages[2].tool_results] == [
        "slow",
        "quick",
    ]


@pytest.mark.parametrize(
    ("reports", "texts"),
    [
        # a failure after one report: that report stands, the rest are errors
        (
            [(1, "b done"), (None, ConnectionError("backend down"))],
            ["backend down", "b done"],
        ),
        # a call left unreported is answered with what went missing
        ([(0, "a done")], ["a done", "returned no result for this call"]),
        # an index reported twice or out of range fails the calls not reported
        ([(0, "a"), (0, "again")], ["a", "reported call 0 twice or out of range"]),
        ([(5, "x")], ["reported call 5", "reported call 5"]),
        # an exception for one call is that call's error result
        ([(0, KeyError("gone")), (1, "b")], ["KeyError", "b"]),
    ],
)
def test_what_an_as_completed_source_gets_wrong_is_answered_per_call(
    reports: list[tuple[Any, object]], texts: list[str]
) -> None:
    src = AsCompletedSource(["s_a", "s_b"], reports)
    agent, _, _ = run_turn(
        [src], [ToolUse("1", "s_a", "{}"), ToolUse("2", "s_b", "{}")]
    )
    results = agent.conversation.messages[2].tool_results
    assert [r.tool_use_id for r in results] == ["1", "2"]
    for result, text in zip(results, texts, strict=True):
        assert text in result.text
        assert result.is_error == (text not in ("a done", "b done", "a", "b"))


@pytest.mark.parametrize("exc", [Cancelled("stop"), KeyboardInterrupt(), MemoryError()])
def test_aborting_exceptions_abort_the_turn_with_no_result_appended(
    exc: BaseException,
) -> None:
    @tool
    def abort() -> str:
        """Raise the aborting exception."""
        raise exc

    p = Scripted([[ToolUse("a", "abort", "{}")], [Text("never")]])
    agent = Agent(p, tools=[abort])
    stream = agent.run("x")
    with pytest.raises(type(exc)):
        drain(stream)
    assert [m.role for m in agent.conversation.messages] == ["user", "assistant"]
    with pytest.raises(StreamPoisoned):
        stream.next()
    # the next turn answers the dangling call first, so the conversation stays valid
    p.add([Text("recovered")])
    drain(agent.run("again"))
    roles = [m.role for m in agent.conversation.messages]
    assert roles == ["user", "assistant", "user", "user", "assistant"]
    assert agent.conversation.messages[2].tool_results[0].is_error


def test_dispatch_events_order() -> None:
    @tool
    def one() -> str:
        """One."""
        return "1"

    _, events, _ = run_turn(
        [one], [ToolUse("a", "one", "{}"), ToolUse("b", "one", "{}")]
    )
    names = [type(e).__name__ for e in events]
    start = names.index("ToolDispatchStart")
    end = names.index("ToolDispatchComplete")
    middle = events[start + 1 : end]
    assert events[start] == ToolDispatchStart(2)
    assert (
        sorted(type(e).__name__ for e in middle)
        == ["ToolFinished"] * 2 + ["ToolStarted"] * 2
    )
    for call in ("a", "b"):
        s = next(
            i
            for i, e in enumerate(middle)
            if isinstance(e, ToolStarted) and e.call_id == call
        )
        f = next(
            i
            for i, e in enumerate(middle)
            if isinstance(e, ToolFinished) and e.call_id == call
        )
        assert s < f


def test_json_and_none_results_are_text() -> None:
    @tool
    def data() -> dict[str, list[int] | None]:
        """Data."""
        return {"a": [1, 2], "b": None}

    @tool
    def nothing() -> None:
        """Nothing."""

    agent, _, _ = run_turn(
        [data, nothing], [ToolUse("d", "data", "{}"), ToolUse("n", "nothing", "{}")]
    )
    d, n = agent.conversation.messages[2].tool_results
    assert d.text == '{"a":[1,2],"b":null}'
    assert n.text == "(no output)"


def busy_probe() -> tuple[Tool, dict[str, int]]:
    """A tool that sleeps briefly, and a dict recording the most calls seen at once."""
    seen = {"active": 0, "peak": 0}
    lock = threading.Lock()

    @tool
    def busy() -> str:
        """Busy."""
        with lock:
            seen["active"] += 1
            seen["peak"] = max(seen["peak"], seen["active"])
        time.sleep(0.05)
        with lock:
            seen["active"] -= 1
        return "ok"

    return busy, seen


def test_thread_limit_from_config() -> None:
    busy, seen = busy_probe()
    calls = [ToolUse(f"c{i}", "busy", "{}") for i in range(6)]
    run_turn([busy], calls, config=Config(max_tool_threads=2))
    assert seen["peak"] == 2


def test_thread_limit_follows_set_config_between_turns() -> None:
    busy, seen = busy_probe()
    calls = [ToolUse(f"c{i}", "busy", "{}") for i in range(4)]
    p = Scripted([calls, [Text("1")], calls, [Text("2")]])
    agent = Agent(p, tools=[busy], config=Config(max_tool_threads=1))
    drain(agent.run("a"))
    assert seen["peak"] == 1
    agent.set_config(Config(max_tool_threads=4))
    drain(agent.run("b"))
    assert seen["peak"] == 4


_FORK_SCRIPT = """
import os, sys, time
from navi_core import Agent, Scripted, Text, ToolUse, TurnComplete, tool

@tool
def echo(x: str) -> str:
    '''Echo.

    Args:
        x: the text.
    '''
    return x

def turn(agent):
    agent.provider.add([ToolUse("c1", "echo", '{"x": "hi"}')], [Text("done")])
    stream = agent.run("go")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ev = stream.next(timeout=0.1)
        if isinstance(ev, TurnComplete):
            return str(ev.stop_reason)
    stream.cancel()
    return "hung"

parent = Agent(Scripted(), tools=[echo])
print("parent", turn(parent), flush=True)
pid = os.fork()
if pid == 0:
    print("child-new", turn(Agent(Scripted(), tools=[echo])), flush=True)
    print("child-inherited", turn(parent), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent-after", turn(parent), flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_tool_turns_run_in_a_forked_child_after_the_parent_ran_tools() -> None:
    # The parent's idle tool threads do not exist in a forked child (a prefork server
    # such as gunicorn with --preload): the child must start its own.
    done = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split("\n") == [
        "parent end_turn",
        "child-new end_turn",
        "child-inherited end_turn",
        "parent-after end_turn",
        "",
    ], done.stderr


def test_a_call_posted_while_the_pool_s_worker_is_busy_gets_another() -> None:
    """Workers are borrowed in a chain, one more only when none is free: a call posted
    while the only worker is inside a long call must still start at once."""
    pool = DaemonPool(4)
    release = threading.Event()
    second_ran = threading.Event()

    def hold() -> None:
        release.wait(10)

    pool.post(hold)
    time.sleep(0.05)  # the first call is running now
    pool.post(second_ran.set)
    assert second_ran.wait(5), "the second call waited behind the first"
    release.set()
    pool.shutdown(wait=True)


def test_calls_posted_from_many_threads_all_run_and_the_pool_drains() -> None:
    pool = DaemonPool(3)
    done: list[int] = []
    lock = threading.Lock()

    def record(n: int) -> None:
        if n % 7 == 0:
            time.sleep(0.002)  # some calls block, most return at once
        with lock:
            done.append(n)

    def poster(base: int) -> None:
        for n in range(base, base + 200):
            pool.post(record, n)

    posters = [threading.Thread(target=poster, args=(k * 200,)) for k in range(4)]
    for t in posters:
        t.start()
    for t in posters:
        t.join()
    pool.shutdown(wait=True)  # returns only once every borrowed worker went back
    assert sorted(done) == list(range(800))


def test_a_watched_pool_starts_queued_calls_only_when_asked() -> None:
    """Watched, a worker inside a call does not borrow another for the queued ones:
    ``catch_up`` (what ``Dispatch.poll`` calls) starts them."""
    pool = DaemonPool(4, watched=True)
    release = threading.Event()
    second_ran = threading.Event()

    def hold() -> None:
        release.wait(10)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)  # both are queued before the worker takes the first
    try:
        pool.post(hold)
        pool.post(second_ran.set)
    finally:
        sys.setswitchinterval(interval)
    assert not second_ran.wait(0.2) and pool.waiting and pool.stalled
    pool.catch_up()
    assert second_ran.wait(5), "catch_up did not start the queued call"
    release.set()
    pool.shutdown(wait=True)
    assert not pool.waiting


def test_quick_calls_of_a_batch_run_on_one_tool_thread() -> None:
    """Calls that return at once wake one worker, not one each."""
    names: list[str] = []

    @tool
    def quick(n: int) -> str:
        """Return n."""
        names.append(threading.current_thread().name)
        return str(n)

    calls = [ToolUse(f"c{i}", "quick", f'{{"n": {i}}}') for i in range(5)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(
        1.0
    )  # the driver takes the GIL back only when the worker waits
    try:
        agent, _, _ = run_turn([quick], calls)
    finally:
        sys.setswitchinterval(interval)
    assert [r.text for r in agent.conversation.messages[2].tool_results] == [
        "0",
        "1",
        "2",
        "3",
        "4",
    ]
    assert len(names) == 5 and len(set(names)) == 1, names


def test_calls_behind_a_start_hook_that_waits_start_while_it_waits() -> None:
    """Each call's start hook runs on its tool thread before the call reports a start:
    hooks that wait for one another still all run at once (the poll starts the calls
    queued behind a hook after a millisecond)."""
    meet = threading.Barrier(4, timeout=5)

    class Gate(Hook):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            meet.wait()
            return None

    @tool
    def mark(n: int) -> str:
        """Return n."""
        return str(n)

    calls = [ToolUse(f"c{i}", "mark", f'{{"n": {i}}}') for i in range(4)]
    p = Scripted([list(calls), [Text("done")]])
    agent = Agent(p, tools=[mark], hooks=[Gate()])
    drain(agent.run("go"))
    results = agent.conversation.messages[2].tool_results
    assert [(r.text, r.is_error) for r in results] == [
        (str(i), False) for i in range(4)
    ]


@pytest.mark.parametrize("kind", ["lambda", "async-wrapper"])
def test_a_cancel_cancels_the_coroutine_a_plain_function_returns(kind: str) -> None:
    """A dispatcher cannot always tell that a call awaits (a lambda returning a
    coroutine, an ``async def`` wrapper of a sync function): its coroutine is still
    cancelled with the turn."""
    running, cancelled = threading.Event(), threading.Event()

    async def nap() -> None:
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    def label(n: int) -> str:
        """Return n."""
        return str(n)

    def in_background(fn: Callable[..., str]) -> Callable[..., Awaitable[str]]:
        @functools.wraps(fn)
        async def wrapper(**kwargs: Any) -> str:
            await nap()
            return fn(**kwargs)

        return wrapper

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    returns_one: Callable[[int], Awaitable[None]] = lambda n: nap()  # noqa: E731
    t: Tool = (
        Tool("nap", "Sleep.", schema, returns_one)
        if kind == "lambda"
        else tool(name="nap")(in_background(label))
    )
    p = Scripted([[ToolUse("c1", "nap", '{"n": 1}')], [Text("done")]])
    stream = Agent(p, tools=[t]).run("go")
    done = None
    for ev in stream:
        if isinstance(ev, ToolStarted):
            # ToolStarted may come before the pool thread runs the call: a cancel
            # then would keep the call from running at all
            assert running.wait(5), "the tool never ran"
            stream.cancel()
        elif isinstance(ev, TurnComplete):
            done = ev
    assert done is not None and done.stop_reason == "cancelled"
    assert cancelled.wait(5), "the tool's coroutine ran on after the cancel"


def test_a_cancel_tells_the_model_whether_the_call_ran() -> None:
    """A cancel right after ``ToolStarted`` may come before the pool thread runs the
    call: the call then never runs, and the model is told it did not; a call that
    began is told it may have taken effect. Repeated, so both orders happen."""
    for round_ in range(30):
        _cancel_at_the_start(settle=0.02 if round_ % 3 else 0.2)


def _cancel_at_the_start(settle: float) -> str:
    ran = threading.Event()

    @tool
    def act() -> str:
        """Act."""
        ran.set()
        return "done"

    agent = Agent(Scripted([[ToolUse("a", "act", "{}")]]), tools=[act])
    stream = agent.run("go")
    while not isinstance(stream.next(), ToolStarted):
        pass
    stream.cancel()
    assert [type(e) for e in list(stream)[:1]] == [ToolFinished]
    (result,) = agent.conversation.messages[2].tool_results
    agent.close()
    if "before it started" in result.text:
        time.sleep(settle)
        assert not ran.is_set(), "told the model it did not run, and it ran"
        return "not run"
    if "may or may not" in result.text:
        assert ran.wait(5), "told the model it may have run, and it never did"
        return "ran"
    assert result.text == "done"
    return "finished"


def test_calls_behind_a_blocking_call_start_while_a_slow_host_looks_away() -> None:
    """A host that takes its time over ``ToolDispatchStart`` (a GUI drawing, a server
    writing to a slow client) does not hold up the calls queued behind one that
    blocks: they start as the batch does, not at the host's next ``next()``."""
    meet = threading.Barrier(4, timeout=0.5)

    @tool
    def gather(n: int) -> str:
        """Wait for the others."""
        meet.wait()
        return str(n)

    calls = [ToolUse(f"c{i}", "gather", f'{{"n": {i}}}') for i in range(4)]
    agent = Agent(Scripted([list(calls), [Text("done")]]), tools=[gather])
    stream = agent.run("go")
    while (ev := stream.next()) is not None:
        if isinstance(ev, ToolDispatchStart):
            time.sleep(1.5)  # longer than the barrier waits
    results = agent.conversation.messages[2].tool_results
    assert [(r.text, r.is_error) for r in results] == [
        (str(i), False) for i in range(4)
    ]


def test_a_single_call_is_reported_started_while_it_still_runs() -> None:
    """The start of a lone pool call is reported by the polling thread, not by the
    worker: it still reaches the host before the call ends."""
    release = threading.Event()
    seen_start = []

    @tool
    def slow() -> str:
        """Wait to be released."""
        if not release.wait(5):
            return "never released"
        return "ok"

    agent = Agent(
        Scripted([[ToolUse("c1", "slow", "{}")], [Text("done")]]), tools=[slow]
    )
    stream = agent.run("go")
    kinds = []
    while (ev := stream.next()) is not None:
        kinds.append(type(ev))
        if isinstance(ev, ToolStarted):
            seen_start.append(release.is_set())
            release.set()
    assert seen_start == [False]
    assert kinds.index(ToolStarted) < kinds.index(ToolFinished)
    assert agent.conversation.messages[2].tool_results[0].text == "ok"


def test_a_zero_timeout_pull_starts_the_calls_before_it_returns() -> None:
    """A game loop's ``next(timeout=0)`` that returns ``ToolDispatchStart`` has
    already started the calls: they run while the host does other work."""
    ran = threading.Event()

    @tool
    def mark() -> str:
        """Say it ran."""
        ran.set()
        return "ran"

    agent = Agent(
        Scripted([[ToolUse("c1", "mark", "{}")], [Text("done")]]), tools=[mark]
    )
    stream = agent.run("go")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ev = stream.next(timeout=0)
        if isinstance(ev, ToolDispatchStart):
            break
    else:
        pytest.fail("no ToolDispatchStart")
    assert ran.wait(5), "the call waited for the next pull"
    drain(stream)
    assert agent.conversation.messages[2].tool_results[0].text == "ran"


def test_a_pool_call_that_runs_a_turn_with_an_inline_tool_finishes() -> None:
    """A tool on a pool thread that runs an agent of its own, whose inline calls run
    on that same pool thread: their results are reported at once (a pool thread holds
    back only the result of the call it was given, until that call returns)."""

    @tool(inline=True)
    def inner() -> str:
        """The inner agent's tool."""
        return "inner result"

    @tool
    def outer() -> str:
        """Run an inner turn."""
        script = Scripted([[ToolUse("i1", "inner", "{}")], [Text("inner done")]])
        child = Agent(script, tools=[inner])
        events = drain(child.run("go"))
        assert isinstance(events[-1], TurnComplete)
        return child.conversation.messages[2].tool_results[0].text

    done = threading.Event()
    result: list[Any] = []

    def run() -> None:
        _, events, _ = run_turn([outer], [ToolUse("o1", "outer", "{}")])
        result.append(events)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(10), "the outer turn hung on the inner turn's inline call"
    finished = [e for e in result[0] if isinstance(e, ToolFinished)]
    assert [(e.name, e.is_error) for e in finished] == [("outer", False)]

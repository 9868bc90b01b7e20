"""A finished turn leaves no reference cycle: the agent, its stream and the turn's
objects are freed by reference counting as soon as the host drops them, so a process
that makes an ``Agent`` per request gives the cyclic collector nothing to do. (A failed
turn keeps its error, whose traceback holds the frames that raised it: that one is the
collector's.)"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from navi_core import (
    Agent,
    Config,
    NullStore,
    Scripted,
    SQLiteStore,
    Text,
    ToolUse,
    TurnComplete,
    tool,
)
from navi_core.conversation import Block


@tool
def echo(n: int) -> str:
    """Return n as text."""
    return str(n)


@pytest.fixture(autouse=True)
def no_collector() -> Iterator[None]:
    """Only reference counting may free anything while a test runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def tool_script() -> list[Sequence[Block]]:
    uses = [ToolUse(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(3)]
    return [[Text("calling"), *uses], [Text("done")]]


def drain(agent: Agent, prompt: str = "go") -> list[object]:
    stream = agent.run(prompt)
    return [ev for ev in stream]


def assert_freed(*refs: weakref.ref[object]) -> None:
    alive = [r() for r in refs if r() is not None]
    assert not alive, f"kept alive by a reference cycle: {alive}"


def test_a_tool_turn_frees_agent_and_stream_without_the_collector() -> None:
    agent = Agent(Scripted(tool_script()), tools=[echo], store=NullStore())
    stream = agent.run("go")
    events = list(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.response == "done"
    refs: tuple[weakref.ref[object], ...] = (weakref.ref(agent), weakref.ref(stream))
    del agent, stream, events, done
    assert_freed(*refs)


def test_a_stream_dropped_unfinished_stays_with_its_agent() -> None:
    agent = Agent(Scripted([[Text("hello there")]]), store=NullStore())
    stream = agent.run("go")
    stream.next()
    ref = weakref.ref(stream)
    del stream
    assert ref() is not None  # the agent still knows its running turn
    with pytest.raises(RuntimeError, match="still running"):
        agent.run("again")
    agent.close()


def test_many_turns_on_sqlite_leave_nothing_to_collect(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    agent = Agent(
        Scripted(tool_script() * 3),
        tools=[echo],
        store=store,
        config=Config(max_tool_threads=2),
    )
    for _ in range(3):
        drain(agent)
    refs: tuple[weakref.ref[object], ...] = (weakref.ref(agent),)
    agent.close()
    del agent
    assert_freed(*refs)
    store.close()
    gc.enable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
    finally:
        gc.set_debug(0)
        garbage, gc.garbage[:] = list(gc.garbage), []
    names = sorted({type(o).__name__ for o in garbage})
    assert found == 0, f"cyclic garbage after the turns: {names}"

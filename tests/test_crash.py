"""A process killed mid-turn loses nothing committed, and ``resume()`` finishes the turn.

A real child process drives a turn against a SQLite file and is SIGKILLed while a slow
tool runs; a fresh store in this process then finds every committed message and
resumes. The slow tool writes a line to a marker file each time it starts, so the
marker proves it was never run a second time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from navi_core import Agent, Scripted, Text, ToolResult, ToolUse, TurnComplete, tool
from navi_core.store import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent / "store"))
# tests/store is on sys.path (line above) but not on the MYPYPATH of this directory
from storekit import child_env

_MCP_SERVER = str(Path(__file__).parent / "mcp_server.py")

_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from navi_core import Agent, Scripted, Text, ToolFinished, ToolUse, tool
    from navi_core.store import SQLiteStore

    db, marker, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    @tool
    def fast() -> str:
        \"\"\"Answer at once.\"\"\"
        return "fast finished"

    @tool
    def slow() -> str:
        \"\"\"Take a minute.\"\"\"
        with marker.open("a") as f:
            f.write("slow started\\n")
        time.sleep(60)
        return "slow finished"

    script = [[ToolUse("c1", "fast", "{}")], [ToolUse("c2", "slow", "{}")], [Text("done")]]
    tools = [fast, slow]
    if mode == "parallel":
        script = [[ToolUse("c1", "fast", "{}"), ToolUse("c2", "slow", "{}")], [Text("done")]]
    elif mode == "mcp":  # one batch of a stdio MCP server: echo answers, nap sleeps
        from navi_core.mcp import MCPTools
        tools = [MCPTools(command=[sys.executable, sys.argv[4]])]
        script = [
            [ToolUse("c1", "echo", '{"text": "fast finished"}'),
             ToolUse("c2", "nap", '{"seconds": 60}')],
            [Text("done")],
        ]
        mode = "parallel"
    agent = Agent(Scripted(script), tools=tools, store=SQLiteStore(db))
    print(agent.session_id, flush=True)
    stream = agent.run("run fast, then slow")
    if mode == "prompt-only":
        marker.write_text("prompt stored\\n")
        time.sleep(60)
    while ev := stream.next():
        if mode == "parallel" and isinstance(ev, ToolFinished) and ev.call_id == "c1":
            Path(str(marker) + ".fast").write_text("fast finished\\n")
    """
)


def _wait_for(path: Path, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        if child.poll() is not None:
            pytest.fail(f"the child exited early with {child.returncode}")
        if time.monotonic() > deadline:
            pytest.fail("the child never reached the point to kill it at")
        time.sleep(0.02)


@pytest.fixture
def run_and_kill(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Starts the child in a mode, kills it at its marker, returns the session id."""
    children: list[subprocess.Popen[str]] = []

    def run(mode: str, until: str = "marker") -> str:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _CHILD,
                str(tmp_path / "navi.db"),
                str(tmp_path / "marker"),
                mode,
                _MCP_SERVER,
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        children.append(child)
        assert child.stdout is not None
        session_id = child.stdout.readline().strip()
        _wait_for(tmp_path / until, child)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        return session_id

    yield run
    for child in children:
        if child.poll() is None:
            child.kill()
            child.wait()
        assert child.stdout is not None
        child.stdout.close()


@tool
def fast() -> str:
    """Answer at once."""
    return "fast finished"


def test_kill_during_a_tool_then_resume(
    run_and_kill: Callable[..., str], tmp_path: Path
) -> None:
    session_id = run_and_kill("tools")
    marker = tmp_path / "marker"

    ran_here: list[str] = []

    @tool
    def slow() -> str:
        """Take a minute."""
        ran_here.append("slow")
        return "slow finished"

    with SQLiteStore(tmp_path / "navi.db") as store:
        stored = store.load(session_id).messages
        assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
        assert stored[0].text == "run fast, then slow"
        assert stored[1].tool_uses == (ToolUse("c1", "fast", "{}"),)
        (result,) = stored[2].tool_results
        assert (result.tool_use_id, result.text, result.is_error) == (
            "c1",
            "fast finished",
            False,
        )
        assert stored[3].tool_uses == (ToolUse("c2", "slow", "{}"),)
        assert all(
            m.wire is not None and m.wire.api_style == "scripted" for m in stored
        )

        provider = Scripted([[Text("done")]])
        with (
            Agent(
                provider, tools=[fast, slow], store=store, session=session_id
            ) as agent,
            agent.resume() as stream,
        ):
            events = list(stream)
        assert isinstance(events[-1], TurnComplete)

        after = store.load(session_id).messages
        assert after[:4] == stored
        (interrupted,) = after[4].tool_results
        assert isinstance(interrupted, ToolResult)
        assert interrupted.tool_use_id == "c2" and interrupted.is_error
        assert "interrupted" in interrupted.text
        assert after[5].role == "assistant" and after[5].text == "done"
        assert len(after) == 6
        # The model saw the interrupted result; the slow tool never ran again.
        assert provider.requests[0][-1].tool_results == (interrupted,)
    assert ran_here == []
    assert marker.read_text() == "slow started\n"


@pytest.mark.parametrize("then", ["resume", "run"])
def test_kill_while_a_batch_runs_keeps_the_results_that_finished(
    run_and_kill: Callable[..., str], tmp_path: Path, then: str
) -> None:
    """``fast`` finished while ``slow`` of the same batch still ran: its result is
    the model's to read after the crash, and ``slow`` reads as interrupted."""
    session_id = run_and_kill("parallel", "marker.fast")
    ran_here: list[str] = []

    @tool
    def slow() -> str:
        """Take a minute."""
        ran_here.append("slow")
        return "slow finished"

    with SQLiteStore(tmp_path / "navi.db") as store:
        stored = store.load(session_id).messages
        assert [m.role for m in stored] == ["user", "assistant"]
        provider = Scripted([[Text("done")]])
        with Agent(provider, tools=[fast, slow], store=store, session=session_id) as a:
            stream = a.resume() if then == "resume" else a.run("and now?")
            with stream:
                assert isinstance(list(stream)[-1], TurnComplete)
        answered = store.load(session_id).messages[2]
        kept, cut = answered.tool_results
        assert (kept.tool_use_id, kept.text, kept.is_error) == (
            "c1",
            "fast finished",
            False,
        )
        assert cut.tool_use_id == "c2" and cut.is_error
        assert "interrupted" in cut.text
        assert answered.tool_results == provider.requests[0][2].tool_results
        assert store.approvals(session_id) == []
    assert ran_here == []


def test_kill_while_an_mcp_batch_runs_keeps_the_calls_that_answered(
    run_and_kill: Callable[..., str], tmp_path: Path
) -> None:
    """One batch to an MCP server: ``echo`` answered while ``nap`` still slept. The
    batch was saved as ``echo`` answered, so after the kill its result is kept."""
    session_id = run_and_kill("mcp", "marker.fast")
    with SQLiteStore(tmp_path / "navi.db") as store:
        states = {a.call_id: a.state.value for a in store.approvals(session_id)}
        assert states == {"c1": "done", "c2": "running"}
        provider = Scripted([[Text("done")]])
        with (
            Agent(provider, store=store, session=session_id) as agent,
            agent.resume() as stream,
        ):
            assert isinstance(list(stream)[-1], TurnComplete)
        kept, cut = store.load(session_id).messages[2].tool_results
        assert (kept.tool_use_id, kept.text, kept.is_error) == (
            "c1",
            "fast finished",
            False,
        )
        assert cut.tool_use_id == "c2" and cut.is_error and "interrupted" in cut.text


def test_kill_after_the_prompt_was_stored_then_resume_answers_it(
    run_and_kill: Callable[..., str], tmp_path: Path
) -> None:
    session_id = run_and_kill("prompt-only")
    with SQLiteStore(tmp_path / "navi.db") as store:
        (prompt,) = store.load(session_id).messages
        assert (prompt.role, prompt.text) == ("user", "run fast, then slow")

        provider = Scripted([[Text("answered after the crash")]])
        with Agent(provider, store=store, session="latest") as agent:
            assert agent.session_id == session_id
            with agent.resume() as stream:
                events = list(stream)
        assert isinstance(events[-1], TurnComplete)
        assert provider.requests[0] == [prompt]
        answer = store.load(session_id).messages[-1]
        assert (answer.role, answer.text) == ("assistant", "answered after the crash")

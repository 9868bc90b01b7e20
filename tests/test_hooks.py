"""Hooks: order, vetoes, failing closed, failures recorded, threads, cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from navi_core import (
    Agent,
    Hook,
    MemoryStore,
    Scripted,
    StopReason,
    Text,
    ToolCall,
    ToolDispatchComplete,
    ToolFinished,
    ToolResult,
    ToolSpec,
    ToolStarted,
    ToolUse,
    TurnComplete,
    TurnInfo,
    Veto,
    tool,
)
from navi_core.events import Event

RAN: list[str] = []


@tool
def delete(path: str) -> str:
    """Delete a file."""
    RAN.append(path)
    return f"deleted {path}"


class Recorder(Hook):
    """Records every call it sees, with the thread it ran on."""

    def __init__(self, name: str, log: list[tuple[str, str, str]]) -> None:
        self.name = name
        self.log = log

    def _note(self, stage: str) -> None:
        self.log.append((self.name, stage, threading.current_thread().name))

    def on_turn_start(self, turn: TurnInfo) -> None:
        self._note("turn_start")

    def on_tool_start(self, call: ToolCall) -> Veto | None:
        self._note(f"tool_start {call.name} {call.arguments}")
        return None

    def on_tool_end(self, call: ToolCall, result: ToolResult) -> None:
        self._note(f"tool_end {result.is_error} {result.text}")

    def on_completion(self, turn: TurnComplete) -> None:
        self._note(f"completion {turn.stop_reason}")


class Vetoer(Recorder):
    def on_tool_start(self, call: ToolCall) -> Veto | None:
        super().on_tool_start(call)
        if call.arguments.get("path") == "/etc/passwd":
            return Veto("system files are off limits")
        return None


class Exploding(Hook):
    def __init__(self, *stages: str) -> None:
        self.stages = stages

    def _maybe(self, stage: str) -> None:
        if stage in self.stages:
            raise RuntimeError(f"policy backend token=sk-SECRET failed in {stage}")

    def on_turn_start(self, turn: TurnInfo) -> None:
        self._maybe("turn_start")

    def on_tool_start(self, call: ToolCall) -> Veto | None:
        self._maybe("tool_start")
        return None

    def on_tool_end(self, call: ToolCall, result: ToolResult) -> None:
        self._maybe("tool_end")

    def on_completion(self, turn: TurnComplete) -> None:
        self._maybe("completion")


def drive(agent: Agent, prompt: str = "go") -> list[Event]:
    with agent.run(prompt) as stream:
        return list(stream)


def call(cid: str, path: str) -> ToolUse:
    return ToolUse(cid, "delete", f'{{"path": "{path}"}}')


def results_of(events: Sequence[Event]) -> dict[str, ToolResult]:
    done = next(e for e in events if isinstance(e, ToolDispatchComplete))
    return {r.tool_use_id: r for r in done.message.tool_results}


def test_veto_blocks_the_call_skips_later_start_hooks_and_runs_end_hooks() -> None:
    RAN.clear()
    log: list[tuple[str, str, str]] = []
    provider = Scripted(
        [[call("c1", "/etc/passwd"), call("c2", "/tmp/x")], [Text("done")]]
    )
    hooks = [Recorder("first", log), Vetoer("second", log), Recorder("third", log)]
    agent = Agent(provider, tools=[delete], hooks=hooks)
    events = drive(agent)
    assert RAN == ["/tmp/x"]
    results = results_of(events)
    assert results["c1"].is_error
    assert "system files are off limits" in results["c1"].text
    assert not results["c2"].is_error
    c1 = [(h, s) for h, s, _ in log if "/etc/passwd" in s or "off limits" in s]
    assert c1 == [
        ("first", "tool_start delete {'path': '/etc/passwd'}"),
        ("second", "tool_start delete {'path': '/etc/passwd'}"),
        # the third start hook is skipped; every end hook sees the veto's result
        ("first", f"tool_end True {results['c1'].text}"),
        ("second", f"tool_end True {results['c1'].text}"),
        ("third", f"tool_end True {results['c1'].text}"),
    ]
    # a vetoed call still starts and finishes for a renderer
    finished = [e for e in events if isinstance(e, ToolFinished) and e.call_id == "c1"]
    assert len(finished) == 1 and finished[0].is_error
    assert any(isinstance(e, ToolStarted) and e.call_id == "c1" for e in events)
    # registration order in every stage
    stages = [(h, s.split()[0]) for h, s, _ in log if "/tmp/x" in s]
    assert stages == [
        ("first", "tool_start"),
        ("second", "tool_start"),
        ("third", "tool_start"),
        ("first", "tool_end"),
        ("second", "tool_end"),
        ("third", "tool_end"),
    ]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.hook_failures == ()


def test_a_failing_start_hook_fails_closed_without_leaking_its_text() -> None:
    RAN.clear()
    provider = Scripted([[call("c1", "/tmp/a")], [Text("ok")]])
    agent = Agent(provider, tools=[delete], hooks=[Exploding("tool_start")])
    events = drive(agent)
    assert RAN == []
    result = results_of(events)["c1"]
    assert result.is_error
    assert result.text == "Tool 'delete' was blocked by a tool_start hook."
    sent = provider.requests[-1][-1]  # what the model read next
    assert "SECRET" not in repr(sent)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    (failure,) = done.hook_failures
    assert (failure.hook, failure.stage, failure.call_id) == (
        "Exploding",
        "tool_start",
        "c1",
    )
    assert "RuntimeError" in failure.error


def test_failures_in_other_stages_are_recorded_and_change_nothing() -> None:
    RAN.clear()
    provider = Scripted([[call("c1", "/tmp/a")], [Text("fine")]])
    stages = ("turn_start", "tool_end", "completion")
    agent = Agent(provider, tools=[delete], hooks=[Exploding(*stages)])
    events = drive(agent)
    assert RAN == ["/tmp/a"]
    assert results_of(events)["c1"].text == "deleted /tmp/a"
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason is StopReason.END_TURN and done.response == "fine"
    assert [(f.stage, f.call_id) for f in done.hook_failures] == [
        ("turn_start", None),
        ("tool_end", "c1"),
        ("completion", None),
    ]


def test_completion_runs_after_the_answer_is_stored_and_threads_are_as_documented() -> (
    None
):
    store = MemoryStore()
    seen: list[str] = []
    log: list[tuple[str, str, str]] = []

    class Check(Recorder):
        def on_completion(self, turn: TurnComplete) -> None:
            super().on_completion(turn)
            stored = store.load(agent.session_id).messages
            seen.append(stored[-1].text)

    provider = Scripted([[call("c1", "/tmp/b")], [Text("all done")]])
    agent = Agent(provider, tools=[delete], store=store, hooks=[Check("h", log)])
    main = threading.current_thread().name
    drive(agent)
    assert seen == ["all done"]
    threads = {s.split()[0]: t for _, s, t in log}
    assert threads["turn_start"] == "navi-stream"  # waited for by the first next()
    assert threads["completion"] == main
    assert threads["tool_start"].startswith("navi-tool")
    assert threads["tool_end"] == threads["tool_start"]


def test_add_hook_and_tool_sources_pass_the_hooks_too() -> None:
    class Files:
        def tools(self) -> Sequence[ToolSpec]:
            return [ToolSpec("rm", "remove", {"type": "object", "properties": {}})]

        def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
            return [f"removed {c.id}" for c in calls]

    class NoRm(Hook):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            return Veto("not c2") if call.id == "c2" else None

    provider = Scripted(
        [[ToolUse("c1", "rm", "{}"), ToolUse("c2", "rm", "{}")], [Text("ok")]]
    )
    agent = Agent(provider, tools=[Files()])
    agent.add_hook(NoRm())
    results = results_of(drive(agent))
    assert results["c1"].text == "removed c1"
    assert results["c2"].is_error and "not c2" in results["c2"].text


def test_cancel_drops_a_running_hook_and_skips_the_rest() -> None:
    RAN.clear()
    entered = threading.Event()
    release = threading.Event()
    later: list[str] = []

    class Slow(Hook):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            entered.set()
            release.wait(5)
            return None

    class Later(Hook):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            later.append(call.id)
            return None

    provider = Scripted([[call("c1", "/tmp/c")]])
    agent = Agent(provider, tools=[delete], hooks=[Slow(), Later()])
    with agent.run("go") as stream:
        events: list[Event] = []
        while not entered.is_set():
            ev = stream.next(timeout=0.05)
            if ev is not None and type(ev).__name__ != "Pending":
                events.append(ev)
        t0 = time.monotonic()
        stream.cancel()
        rest = [e for e in iter(lambda: stream.next(timeout=1), None)]
        assert time.monotonic() - t0 < 0.5
    release.set()
    done = rest[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    time.sleep(0.05)
    assert later == [] and RAN == []


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="hooks must be Hook instances, not function"):
        Agent(Scripted([]), hooks=[lambda call: None])  # type: ignore[list-item]
    agent = Agent(Scripted([]))
    with pytest.raises(TypeError, match="not str"):
        agent.add_hook("audit")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="maxsize must be at least 1"):
        agent.subscribe(0)
    with pytest.raises(ValueError, match="keep_turns must not be negative"):
        agent.compact_stream(keep_turns=-1, prompt="p")
    assert agent.hooks == ()


# -- nothing of a turn runs after its TurnComplete ------------------------------------


class Stamped(Hook):
    """Notes when each of its methods starts, on a shared clock of events."""

    def __init__(self, name: str, log: list[tuple[float, str, str]]) -> None:
        self.name = name
        self.log = log

    def _note(self, stage: str) -> None:
        self.log.append((time.monotonic(), self.name, stage))

    def on_session_start(self, turn: TurnInfo) -> None:
        self._note("session_start")

    def on_turn_start(self, turn: TurnInfo) -> None:
        self._note("turn_start")

    def on_tool_start(self, call: ToolCall) -> Veto | None:
        self._note("tool_start")
        return None

    def on_tool_end(self, call: ToolCall, result: ToolResult) -> None:
        self._note("tool_end")

    def on_completion(self, turn: TurnComplete) -> None:
        self._note("completion")


class BlockedAt(Stamped):
    """Waits in one stage until ``release`` is set; ``left`` once it returned."""

    def __init__(
        self, name: str, log: list[tuple[float, str, str]], stage: str
    ) -> None:
        super().__init__(name, log)
        self.stage = stage
        self.entered = threading.Event()
        self.release = threading.Event()
        self.left = threading.Event()

    def _block(self, stage: str) -> None:
        if stage == self.stage:
            self.entered.set()
            try:
                self.release.wait(5)
            finally:
                self.left.set()

    def on_turn_start(self, turn: TurnInfo) -> None:
        super().on_turn_start(turn)
        self._block("turn_start")

    def on_tool_start(self, call: ToolCall) -> Veto | None:
        super().on_tool_start(call)
        self._block("tool_start")
        return None


def cancel_when_entered(stream: Any, entered: threading.Event) -> list[Event]:
    """Pull until ``entered``, cancel, and drain to the end; every event returned."""
    events: list[Event] = []
    while not entered.is_set():
        ev = stream.next(timeout=0.05)
        if ev is not None and type(ev).__name__ != "Pending":
            events.append(ev)
    stream.cancel()
    events.extend(iter(lambda: stream.next(timeout=1), None))
    return events


@pytest.mark.parametrize("count", [1, 2, 3])
def test_no_hook_of_a_cancelled_turn_runs_after_its_turn_complete(count: int) -> None:
    """A cancel while ``on_tool_start`` blocks: once ``TurnComplete`` is returned, no
    hook method of that turn starts, even after the blocked hook returns; the
    blocked call is recorded as abandoned."""
    RAN.clear()
    log: list[tuple[float, str, str]] = []
    blocked = BlockedAt("h0", log, "tool_start")
    hooks = [blocked, *(Stamped(f"h{i}", log) for i in range(1, count))]
    agent = Agent(Scripted([[call("c1", "/tmp/e")]]), tools=[delete], hooks=hooks)
    with agent.run("go") as stream:
        events = cancel_when_entered(stream, blocked.entered)
        returned = time.monotonic()
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    blocked.release.set()
    assert blocked.left.wait(5)
    time.sleep(0.3)  # what the abandoned tool thread would run, it runs at once
    late = [(name, stage) for t, name, stage in log if t >= returned]
    assert late == []
    assert RAN == []
    assert [(f.hook, f.stage, f.call_id) for f in done.hook_failures] == [
        ("BlockedAt", "tool_start", "c1")
    ]
    assert "abandoned" in done.hook_failures[0].error
    # the hooks that ran did so in order, completion last
    assert [s for _, n, s in log if n == "h0"][-1] == "completion"


def test_a_hook_raising_after_its_turn_ended_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An abandoned hook that fails when it finally returns has no turn to report to:
    the failure is logged (its type, not its text)."""

    class Fails(BlockedAt):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            super().on_tool_start(call)
            raise RuntimeError("backend token=sk-SECRET")

    log: list[tuple[float, str, str]] = []
    blocked = Fails("h", log, "tool_start")
    agent = Agent(Scripted([[call("c1", "/tmp/f")]]), tools=[delete], hooks=[blocked])
    with caplog.at_level("WARNING", logger="navi_core"):
        with agent.run("go") as stream:
            cancel_when_entered(stream, blocked.entered)
        blocked.release.set()
        assert blocked.left.wait(5)
        deadline = time.monotonic() + 5
        while "RuntimeError" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
    assert "Fails.on_tool_start" in caplog.text and "RuntimeError" in caplog.text
    assert "SECRET" not in caplog.text


# -- on_turn_start in the stream's first step ----------------------------------------


def test_cancel_reaches_a_blocking_on_turn_start() -> None:
    """``run()`` returns at once; ``on_turn_start`` runs inside the first ``next()``,
    off the driving thread, so a ``cancel()`` from another thread ends the turn
    (CANCELLED) while it blocks; the hooks after it never start, nor does anything
    else of the turn, even once it returns."""
    log: list[tuple[float, str, str]] = []
    blocked = BlockedAt("h0", log, "turn_start")
    provider = Scripted([[Text("never")]])
    agent = Agent(provider, hooks=[blocked, Stamped("h1", log)])
    made = threading.Event()
    box: dict[str, Any] = {}

    def drive_it() -> None:
        stream = agent.run("go")
        box["stream"] = stream
        made.set()
        with stream:
            box["events"] = list(stream)
            box["returned"] = time.monotonic()

    driver = threading.Thread(target=drive_it, daemon=True)
    driver.start()
    assert made.wait(1), "run() waited for on_turn_start"
    assert blocked.entered.wait(5)
    t0 = time.monotonic()
    box["stream"].cancel()
    driver.join(5)
    assert not driver.is_alive()
    assert box["returned"] - t0 < 1.0
    done = box["events"][-1]
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    assert provider.calls == 0
    assert [(f.hook, f.stage) for f in done.hook_failures] == [
        ("BlockedAt", "turn_start")
    ]
    blocked.release.set()
    assert blocked.left.wait(5)
    time.sleep(0.2)
    assert [(n, s) for t, n, s in log if t >= box["returned"]] == []
    assert ("h1", "turn_start") not in [(n, s) for _, n, s in log]
    agent.close()


def test_on_turn_start_runs_in_the_first_next_before_the_request() -> None:
    seen: list[int] = []
    provider = Scripted([[Text("hi")]])

    class Watch(Hook):
        def on_turn_start(self, turn: TurnInfo) -> None:
            seen.append(provider.calls)

    agent = Agent(provider, hooks=[Watch()])
    stream = agent.run("go")
    assert seen == []  # run() only stores the prompt
    with stream:
        list(stream)
    assert seen == [0]


# -- on_session_start: once per session ----------------------------------------------


def test_on_session_start_runs_once_per_session_across_agents(tmp_path: Any) -> None:
    """The first turn of a session (a ``run()`` that finds no user or assistant
    message in it) runs ``on_session_start`` before ``on_turn_start``; a second Agent
    on the same SQLite session, and a resume, do not run it again."""
    from navi_core.store import SQLiteStore

    log: list[tuple[float, str, str]] = []
    path = tmp_path / "sessions.db"
    first = Agent(
        Scripted([[Text("one")], [Text("two")]]),
        store=SQLiteStore(path),
        system="be brief",
        hooks=[Stamped("h", log)],
    )
    drive(first, "hello")
    drive(first, "again")
    sid = first.session_id
    first.close()
    first.store.close()
    stages = [s for _, _, s in log]
    assert stages == [
        "session_start", "turn_start", "completion", "turn_start", "completion"
    ]  # fmt: skip

    log.clear()
    second = Agent(
        Scripted([[Text("three")]]),
        store=SQLiteStore(path),
        session=sid,
        hooks=[Stamped("h", log)],
    )
    drive(second, "still there?")
    with second.resume() as stream:  # a finished turn: nothing to answer
        list(stream)
    second.close()
    second.store.close()
    assert [s for _, _, s in log] == [
        "turn_start", "completion", "turn_start", "completion"
    ]  # fmt: skip

    log.clear()
    fresh = Agent(
        Scripted([[Text("new")]]), store=SQLiteStore(path), hooks=[Stamped("h", log)]
    )
    drive(fresh, "a new session")
    fresh.close()
    fresh.store.close()
    assert [s for _, _, s in log][:2] == ["session_start", "turn_start"]


def test_a_failing_on_session_start_is_recorded_and_changes_nothing() -> None:
    class Boom(Hook):
        def on_session_start(self, turn: TurnInfo) -> None:
            raise ValueError("no")

    agent = Agent(Scripted([[Text("fine")]]), hooks=[Boom()])
    done = drive(agent)[-1]
    assert isinstance(done, TurnComplete) and done.response == "fine"
    assert [(f.hook, f.stage) for f in done.hook_failures] == [
        ("Boom", "session_start")
    ]


# -- turn_id on what tool hooks receive ------------------------------------------------


def test_tool_hooks_receive_the_turn_id() -> None:
    seen: list[tuple[str, str]] = []

    class Ids(Hook):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            seen.append(("start", call.turn_id))
            return None

        def on_tool_end(self, call: ToolCall, result: ToolResult) -> None:
            seen.append(("end", call.turn_id))

    provider = Scripted([[call("c1", "/tmp/g")], [Text("ok")]])
    agent = Agent(provider, tools=[delete], hooks=[Ids()])
    with agent.run("go") as stream:
        events = list(stream)
        turn_id = stream.turn_id
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.turn_id == turn_id != ""
    assert seen == [("start", turn_id), ("end", turn_id)]
    # positional construction of a ToolCall still works, the turn id defaults empty
    assert ToolCall("c1", "delete", {}).turn_id == ""

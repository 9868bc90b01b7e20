"""``TodoList``: the model's todo list, its ``TodoUpdated`` events, and the list a
resumed session shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from navi_core import (
    Agent,
    CompactionConfig,
    Config,
    Hook,
    Scripted,
    Text,
    TodoItem,
    TodoList,
    TodoUpdated,
    ToolCall,
    ToolDispatchComplete,
    ToolFinished,
    ToolStarted,
    ToolUse,
    TurnComplete,
    Veto,
)
from navi_core.events import Event
from navi_core.store import SQLiteStore


def write(cid: str, *items: tuple[str, str], name: str = "todo_write") -> ToolUse:
    body = {"items": [{"text": t, "status": s} for t, s in items]}
    return ToolUse(cid, name, json.dumps(body))


def drive(agent: Agent, prompt: str = "go") -> list[Event]:
    with agent.run(prompt) as stream:
        return list(stream)


def result_of(events: list[Event], cid: str) -> Any:
    done = next(e for e in events if isinstance(e, ToolDispatchComplete))
    return next(r for r in done.message.tool_results if r.tool_use_id == cid)


PLAN = (
    ("read the spec", "done"),
    ("write the code", "in_progress"),
    ("test", "pending"),
)
ITEMS = (
    TodoItem("read the spec", "done"),
    TodoItem("write the code", "in_progress"),
    TodoItem("test", "pending"),
)


def test_a_call_yields_todo_updated_between_its_start_and_finish() -> None:
    provider = Scripted([[Text("planning"), write("t1", *PLAN)], [Text("on it")]])
    agent = Agent(provider, tools=[TodoList()])
    events = drive(agent)
    kinds = [
        type(e) for e in events if type(e) in (ToolStarted, TodoUpdated, ToolFinished)
    ]
    assert kinds == [ToolStarted, TodoUpdated, ToolFinished]
    (update,) = [e for e in events if isinstance(e, TodoUpdated)]
    assert update == TodoUpdated(ITEMS)
    result = result_of(events, "t1")
    assert not result.is_error
    assert result.text.splitlines() == [
        "Todo list updated: 3 items (1 done, 1 in progress, 1 pending).",
        "[x] read the spec",
        "[>] write the code",
        "[ ] test",
    ]
    assert agent.todos == ITEMS
    assert isinstance(events[-1], TurnComplete)


def test_the_tool_is_declared_with_its_schema() -> None:
    agent = Agent(Scripted([]), tools=[TodoList()])
    (spec,) = agent.tool_specs()
    assert spec.name == "todo_write"
    item = spec.parameters["properties"]["items"]["items"]
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "done"]
    assert item["required"] == ["text", "status"]
    renamed = Agent(Scripted([]), tools=[TodoList("plan", "Keep a plan.")])
    assert [(s.name, s.description) for s in renamed.tool_specs()] == [
        ("plan", "Keep a plan.")
    ]


@pytest.mark.parametrize(
    "arguments",
    [
        '{"items": [{"text": "x", "status": "started"}]}',  # not a status
        '{"items": [{"text": "", "status": "pending"}]}',  # empty
        '{"items": [{"text": "   ", "status": "pending"}]}',  # blank
        '{"items": [{"text": "x"}]}',  # no status
        '{"items": [{"text": "x", "status": "done", "due": "now"}]}',  # unknown field
        '{"items": "read; write"}',  # not a list
        json.dumps({"items": [{"text": "y" * 501, "status": "pending"}]}),  # too long
        json.dumps({"items": [{"text": "z", "status": "pending"}] * 101}),
    ],
    ids=["status", "empty", "blank", "missing", "extra", "type", "long", "many"],
)
def test_a_bad_list_is_an_error_result_and_changes_nothing(arguments: str) -> None:
    provider = Scripted(
        [
            [write("t1", ("first", "pending"))],
            [ToolUse("t2", "todo_write", arguments)],
            [Text("ok")],
        ]
    )
    agent = Agent(provider, tools=[TodoList()])
    events = drive(agent)
    updates = [e for e in events if isinstance(e, TodoUpdated)]
    assert updates == [TodoUpdated((TodoItem("first"),))]
    bad = next(
        r
        for e in events
        if isinstance(e, ToolDispatchComplete)
        for r in e.message.tool_results
        if r.tool_use_id == "t2"
    )
    assert bad.is_error and "todo_write" in bad.text
    assert agent.todos == (TodoItem("first"),)


def test_a_vetoed_call_changes_nothing_and_a_later_one_replaces_the_list() -> None:
    class NoClear(Hook):
        def on_tool_start(self, call: ToolCall) -> Veto | None:
            return Veto("keep the list") if not call.arguments["items"] else None

    provider = Scripted(
        [
            [write("t1", *PLAN)],
            [write("t2")],  # an empty list: vetoed
            [write("t3", ("ship", "in_progress"))],
            [Text("done")],
        ]
    )
    agent = Agent(provider, tools=[TodoList()], hooks=[NoClear()])
    events = drive(agent)
    assert [e.items for e in events if isinstance(e, TodoUpdated)] == [
        ITEMS,
        (TodoItem("ship", "in_progress"),),
    ]
    assert agent.todos == (TodoItem("ship", "in_progress"),)


def test_without_the_tool_or_a_call_the_list_is_empty() -> None:
    assert Agent(Scripted([[Text("hi")]])).todos == ()
    agent = Agent(Scripted([[Text("hi")]]), tools=[TodoList()])
    drive(agent)
    assert agent.todos == ()


def test_a_resumed_session_shows_the_list_from_its_sqlite_file(tmp_path: Path) -> None:
    """The list lives in the history only: another agent on the same SQLite file, and
    another process, read it back; so does an agent after a compaction summarised
    the call away (it is in an older window)."""
    path = tmp_path / "todo.db"
    provider = Scripted(
        [[write("t1", *PLAN)], [Text("started")], [Text("two")], [Text("three")]]
    )
    first = Agent(provider, tools=[TodoList()], store=SQLiteStore(path))
    drive(first, "build it")
    sid = first.session_id
    first.close()
    first.store.close()

    second = Agent(
        Scripted([]), tools=[TodoList()], store=SQLiteStore(path), session=sid
    )
    assert second.todos == ITEMS
    second.close()
    second.store.close()

    code = (
        "import sys\n"
        "from navi_core import Agent, Scripted, TodoList\n"
        "from navi_core.store import SQLiteStore\n"
        "a = Agent(Scripted([]), tools=[TodoList()], store=SQLiteStore(sys.argv[1]),"
        " session=sys.argv[2])\n"
        "print([(i.text, i.status) for i in a.todos])\n"
        "a.close()\n"
        "a.store.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), sid],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.strip() == repr([(i.text, i.status) for i in ITEMS])

    summary = Scripted(["The user asked to build it; a plan was written."])
    config = Config(compaction=CompactionConfig(prompt="Sum up.", provider=summary))
    third = Agent(
        Scripted([[Text("two")], [Text("three")]]),
        tools=[TodoList()],
        store=SQLiteStore(path),
        session=sid,
        config=config,
    )
    drive(third, "next")
    drive(third, "and next")
    assert third.compact(keep_turns=1).compacted
    assert not any(
        u.name == "todo_write" for m in third.conversation.messages for u in m.tool_uses
    )
    assert third.todos == ITEMS
    third.close()
    third.store.close()

"""Real SDK servers whose listings or output are unusual still work, or fail in
bounded time with a clear error: a log line like ``[dotenv@17.2.1] ...`` on stdout
before the first message, tool names that clash once cleaned for the providers, and a
``nextCursor`` a server sends again and again."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("mcp")

from odd_listing_server import ODD_NAMES

from navi_core import Agent, Scripted, Text, TextPart, ToolUse, TurnComplete
from navi_core.mcp import MCPError, MCPTools

SERVER = [sys.executable, str(Path(__file__).parent / "odd_listing_server.py")]


def use(name: str, call_id: str) -> ToolUse:
    return ToolUse(call_id, name, orjson.dumps({}).decode())


def test_a_bracketed_log_line_on_stdout_is_skipped_not_fatal() -> None:
    """A line that starts with ``[`` but is no JSON batch is a log line, which the
    docs say is skipped; it used to be taken for a mangled message, so the server was
    ended before it could answer and ``MCPTools`` never started."""
    with MCPTools([*SERVER, "chatty"], startup_timeout=20) as tools:
        assert [s.name for s in tools.tools()] == ["only"]


def test_names_that_clash_once_cleaned_stay_apart_in_a_turn() -> None:
    """``read.file`` and ``read_file`` (and two long names cut at 64 characters) were
    declared under one name each, so the agent refused the whole server; now each
    gets a name of its own and is called as itself."""
    with MCPTools([*SERVER, "names"], startup_timeout=20) as tools:
        names = [s.name for s in tools.tools()]
        assert len(set(names)) == 4 and all(len(n) <= 64 for n in names)
        uses = [use(n, f"id{k}") for k, n in enumerate(names)]
        agent = Agent(Scripted([uses, [Text("done")]]), tools=[tools])
        with agent.run("go") as stream:
            events = list(stream)
        assert isinstance(events[-1], TurnComplete)
        results = agent.conversation.messages[2].tool_results
        texts = [p.text for r in results for p in r.parts if isinstance(p, TextPart)]
        assert texts == [f"called {n}" for n in ODD_NAMES]


def test_a_repeated_tools_cursor_fails_at_once_saying_so() -> None:
    """The listing used to ask for the same page until ``startup_timeout`` ran out
    and then blamed a server that had answered every time."""
    with pytest.raises(MCPError, match="cursor 'again' again"):
        MCPTools([*SERVER, "cursor"], startup_timeout=20)


def test_a_repeated_resources_cursor_is_an_error_not_a_hang() -> None:
    """``resources()`` has no deadline of its own: with a cursor that repeats it used
    to list forever."""
    with MCPTools([*SERVER, "resources"], startup_timeout=20) as tools:
        out: list[Any] = []

        def listing() -> None:
            try:
                out.append(tools.resources())
            except MCPError as exc:
                out.append(exc)

        worker = threading.Thread(target=listing, daemon=True)
        worker.start()
        worker.join(10)
        assert out and isinstance(out[0], MCPError), out
        assert "again" in str(out[0])

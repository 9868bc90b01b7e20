"""Real SDK servers whose listings or output are unusual still work, or fail in
bounded time with a clear error: a log line like ``[dotenv@17.2.1] ...`` on stdout
before the first message, tool names that clash once cleaned for the providers (named
alike whatever order they are listed in), and a ``nextCursor`` a server sends again and
again."""

from __future__ import annotations

import hashlib
import random
import re
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
from navi_core.mcp._tools import _tool_names

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


def names_by_server_name(mode: str, prefix: str | None = None) -> dict[str, str]:
    """The name each of the server's tools is declared under, by its own name (each
    tool's description is ``tool <its name>``)."""
    with MCPTools([*SERVER, mode], prefix=prefix, startup_timeout=20) as tools:
        return {s.description.removeprefix("tool "): s.name for s in tools.tools()}


def suffixed(cleaned: str, server_name: str) -> str:
    return f"{cleaned[:55]}_{hashlib.sha256(server_name.encode()).hexdigest()[:8]}"


@pytest.mark.parametrize("prefix", [None, "fs"])
def test_clashing_names_do_not_depend_on_the_listing_order(prefix: str | None) -> None:
    """Which of two clashing names got the hashed suffix used to depend on which the
    server listed first, so a tool's declared name changed with the listing order.
    Now a name that is clean as it is keeps it, and every name that needed cleaning
    and clashes gets a suffix from its own name, whatever the order."""
    forward = names_by_server_name("names", prefix)
    backward = names_by_server_name("names-reversed", prefix)
    assert forward == backward
    pre = f"{prefix}_" if prefix else ""
    long_a, long_b = ODD_NAMES[2:]
    assert forward == {
        "read_file": f"{pre}read_file",
        "read.file": suffixed(f"{pre}read_file", "read.file"),
        long_a: suffixed(pre + long_a, long_a),
        long_b: suffixed(pre + long_b, long_b),
    }
    assert len(set(forward.values())) == 4
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in forward.values())


def test_names_are_one_mapping_in_any_listing_order() -> None:
    """Any order of a set of names gives the same names, also where a suffixed
    name is taken by a tool the server named so (it is hashed again, salted), and
    each fits what providers take."""
    taken = suffixed("a_b", "a.b")
    server_names = ["a.b", "a_b", "a-b", "a b", taken, "", "tool", "x" * 80, "solo.one"]
    orders = [random.Random(seed).sample(server_names, 9) for seed in range(200)]
    mappings = [
        _tool_names(o, None) for o in [server_names, server_names[::-1], *orders]
    ]
    first = mappings[0]
    assert all(m == first for m in mappings)
    assert len(set(first.values())) == len(server_names)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in first.values())
    assert first["a_b"] == "a_b" and first["a-b"] == "a-b" and first["tool"] == "tool"
    assert first[taken] == taken  # clean as it is: it keeps its name
    assert first["a.b"] not in (taken, "a_b") and first["a.b"].startswith("a_b_")
    assert first["a b"] == suffixed("a_b", "a b")
    assert first[""] == suffixed("tool", "")
    assert first["x" * 80] == "x" * 64  # cut, but clashing with nothing
    assert first["solo.one"] == "solo_one"  # cleaned, clashing with nothing


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

"""A cancelled turn reaches a 2026-07-28 HTTP server whose tool has sent nothing yet.

That revision cancels a call by closing its connection. The SDK's server sends the
answer's headers only with the result, so a call that reports no progress had no
response to close: the server was never told, ran on, and the call's thread and
socket stayed open until it answered, or forever. Each such call now has a connection
of its own, known from the moment it opens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

pytest.importorskip("mcp")

from mcp_servers import http_script

from navi_core import (
    Agent,
    Scripted,
    StopReason,
    Text,
    ToolStarted,
    ToolUse,
    TurnComplete,
)
from navi_core.mcp import MCPTools

SERVER = str(Path(__file__).parent / "quiet_http_server.py")


@pytest.fixture
def url() -> Iterator[str]:
    yield from http_script(SERVER, "{port}")


def test_a_cancelled_turn_closes_a_quiet_calls_connection(
    url: str, tmp_path: Path
) -> None:
    mark = tmp_path / "cancelled.txt"
    use = ToolUse("q", "quiet", orjson.dumps({"mark": str(mark)}).decode())
    with MCPTools(url=url, timeout=600) as tools:
        assert tools.protocol_version == "2026-07-28"
        agent = Agent(Scripted([[use], [Text("x")]]), tools=[tools])
        with agent.run("go") as stream:
            for event in stream:
                if isinstance(event, ToolStarted):  # cancel once the call is sent
                    threading.Timer(0.5, stream.cancel).start()
                if isinstance(event, TurnComplete):
                    assert event.stop_reason == StopReason.CANCELLED
        deadline = time.monotonic() + 5
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert mark.exists() and mark.read_text() == "cancelled"
    deadline = time.monotonic() + 5
    while _posting() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _posting() == []  # the call's thread ended with its connection


def _posting() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.endswith("(_post)")]

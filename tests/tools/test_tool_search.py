"""``ToolSearch``: past ``max_visible`` tools, a request carries the search tool and
what the model's searches loaded; the model still reaches the tool it needs."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    MCPTools,
    OpenAIChat,
    Scripted,
    Text,
    ToolCall,
    ToolSearch,
    ToolSpec,
    ToolUse,
    TurnComplete,
    tool,
)
from navi_core.errors import ToolRegistrationError

SERVER = str(Path(__file__).with_name("many_tools_server.py"))


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    obj = {"id": "c", "object": "chat.completion.chunk", "choices": [choice]}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def calls(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    """A chat-completions stream that calls one tool."""
    start = {"index": 0, "id": call_id, "type": "function"}
    start["function"] = {"name": name, "arguments": orjson.dumps(arguments).decode()}
    body = chunk({"role": "assistant", "tool_calls": [start]}) + chunk({}, "tool_calls")
    return Reply.sse(body + b"data: [DONE]\n\n")


def says(text: str) -> Reply:
    body = chunk({"role": "assistant", "content": text}) + chunk({}, "stop")
    return Reply.sse(body + b"data: [DONE]\n\n")


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", ())]


@pytest.fixture(scope="module")
def servers() -> Iterator[list[MCPTools]]:
    """Three MCP servers (official SDK, stdio) of 100 tools each."""
    started: list[MCPTools] = []
    try:
        for area in ("files", "calendar", "harbour"):
            started.append(MCPTools([sys.executable, SERVER, area]))
        yield started
    finally:
        for s in started:
            s.close()


def test_a_turn_over_300_mcp_tools_searches_then_calls_the_right_one(
    servers: list[MCPTools], loopback: LoopbackServer
) -> None:
    assert sum(len(s.tools()) for s in servers) == 300
    loopback.add(
        calls("s1", "search_tools", {"query": "tide times at the harbour"}),
        calls("c1", "harbour_tide_forecast", {"item": "Brest"}),
        says("High tide in Brest is at 06:12."),
    )
    search = ToolSearch(max_visible=20)
    with OpenAIChat("m", f"{loopback.url}/v1", "k") as model:
        agent = Agent(model, tools=[*servers, search])
        with agent.run("When is high tide in Brest?") as stream:
            done = list(stream)[-1]
        agent.close()
    assert isinstance(done, TurnComplete) and "06:12" in done.response
    first, second, third = (r.json for r in loopback.requests)
    assert tool_names(first) == ["search_tools"]
    loaded = tool_names(second)
    assert loaded[0] == "search_tools" and len(loaded) == 1 + search.max_results
    assert loaded[1] == "harbour_tide_forecast"  # the best match comes first
    assert tool_names(third) == loaded
    results = [m for m in agent.conversation.messages if m.tool_results]
    answer = results[-1].tool_results[0]
    assert not answer.is_error
    assert answer.parts[0].text == "high tide at 06:12 and 18:40 in Brest"  # type: ignore[union-attr]
    # every declaration would be 300 tools long
    assert len(loopback.requests[0].body) * 20 < len(orjson.dumps(all_specs(servers)))


def all_specs(servers: Sequence[MCPTools]) -> list[Any]:
    return [
        {"name": s.name, "description": s.description, "parameters": s.parameters}
        for src in servers
        for s in src.tools()
    ]


def catalogue(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):

        def f(x: int) -> int:
            return x

        out.append(tool(name=f"widget_{i}", description=f"Widget number {i}.")(f))
    return out


@tool
def weather(city: str) -> str:
    """Tell the weather forecast of a city."""
    return f"sunny in {city}"


def test_at_or_under_max_visible_every_tool_is_sent_and_no_search_tool() -> None:
    agent = Agent(Scripted([]), tools=[*catalogue(3), ToolSearch(max_visible=3)])
    assert [s.name for s in agent.tool_specs()] == ["widget_0", "widget_1", "widget_2"]


def test_loaded_tools_stay_for_later_turns_and_pinned_ones_always_show() -> None:
    search = ToolSearch(max_visible=4, max_results=1, pinned=["widget_7"])
    provider = Scripted(
        [
            [ToolUse("s", "search_tools", '{"query": "forecast of the weather"}')],
            [ToolUse("w", "weather", '{"city": "Oslo"}')],
            [Text("sunny")],
            [Text("again")],
        ]
    )
    agent = Agent(provider, tools=[*catalogue(10), weather, search])
    assert [s.name for s in agent.tool_specs()] == ["search_tools", "widget_7"]
    with agent.run("weather?") as stream:
        list(stream)
    assert search.loaded == ("weather",)
    with agent.run("again?") as stream:
        list(stream)
    assert [s.name for s in agent.tool_specs()] == [
        "search_tools",
        "widget_7",
        "weather",
    ]


def test_a_search_ranks_names_descriptions_and_parameters() -> None:
    search = ToolSearch(max_visible=2)
    specs = [
        ToolSpec("readFile", "Read a file.", {"properties": {"path": {}}}),
        ToolSpec("send_mail", "Send an email.", {"properties": {"recipient": {}}}),
        ToolSpec("geo", "Locate.", {"properties": {"postcode": {}}}),
    ]
    search.bind(lambda: (*specs, *search.tools()))
    assert [s.name for s in search.search("read files")] == ["readFile"]
    assert [s.name for s in search.search("postcode")] == ["geo"]
    assert search.search("quantum") == []
    out = search.call_batch([ToolCall("1", "search_tools", {"query": "quantum"})])
    assert "No tool matches" in out[0] and search.loaded == ()
    out = search.call_batch([ToolCall("2", "search_tools", {"query": ""})])
    assert isinstance(out[0], ValueError)


def test_only_one_tool_search_per_agent() -> None:
    with pytest.raises(ToolRegistrationError):
        Agent(Scripted([]), tools=[ToolSearch(), ToolSearch(name="find_tools")])


def test_past_max_visible_loaded_tools_the_oldest_go() -> None:
    search = ToolSearch(max_visible=2, max_results=1)
    agent = Agent(Scripted([]), tools=[*catalogue(5), search])
    for i in (1, 2, 3):
        search.call_batch([ToolCall(str(i), "search_tools", {"query": f"number {i}"})])
    assert search.loaded == ("widget_2", "widget_3")
    assert [s.name for s in agent.tool_specs()] == [
        "search_tools",
        "widget_2",
        "widget_3",
    ]

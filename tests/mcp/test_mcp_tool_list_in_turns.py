"""A server's changed tool list reaches the agent's next request.

The real stdio server (``mcp_server.py``) adds a tool ``extra`` when ``grow`` runs and
sends ``notifications/tools/list_changed``; a loopback model server then calls the new
tool. The request after the change must declare it, and the call must reach it.

The declarations keep their order across a change (the tools array is part of the
prefix a provider caches): the tools that stay keep their places, a changed one too, a
removed one drops out, and a new one comes last.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from faultkit import openai_stream
from loopback import LoopbackServer, Reply
from mcp_servers import STDIO

from navi_core import Agent, OpenAIChat, ToolFinished, tool
from navi_core.mcp import MCPTools
from navi_core.tools import ToolCall, ToolRegistry

CHANGING = [
    sys.executable,
    str(Path(__file__).parent / "odd_listing_server.py"),
    "changing",
]


def _declared(body: dict[str, object]) -> set[str]:
    return set(_in_order(body))


def _in_order(body: dict[str, object]) -> list[str]:
    return [t["function"]["name"] for t in _tools(body)]


def _tools(body: dict[str, object]) -> list[Any]:
    tools = body.get("tools") or []
    assert isinstance(tools, list)
    return tools


@tool
def local() -> str:
    """A tool of this process, registered after the server."""
    return "local"


def test_a_tool_the_server_added_is_declared_and_called(
    loopback: LoopbackServer,
) -> None:
    loopback.add(
        Reply.sse(openai_stream("", tool_calls=[("c1", "grow", "{}")])),
        Reply.sse(openai_stream("", tool_calls=[("c2", "extra", "{}")])),
        Reply.sse(openai_stream("Grown.")),
    )
    with (
        MCPTools(STDIO, protocol="2025-11-25") as server,
        OpenAIChat("m", loopback.url + "/v1", "k") as provider,
        Agent(provider, tools=[server]) as agent,
        agent.run("grow, then use the new tool") as stream,
    ):
        finished = [e for e in stream if isinstance(e, ToolFinished)]
    first, second, third = (r.json for r in loopback.requests)
    assert "grow" in _declared(first) and "extra" not in _declared(first)
    assert "extra" in _declared(second) and "extra" in _declared(third)
    assert [(e.name, e.is_error) for e in finished] == [
        ("grow", False),
        ("extra", False),
    ]
    results = [r for m in agent.conversation.messages for r in m.tool_results]
    assert "extra!" in str(results[-1])


def test_a_changed_tool_list_keeps_the_declarations_in_their_places(
    loopback: LoopbackServer,
) -> None:
    """``change`` drops ``beta``, changes ``gamma``, adds ``epsilon`` and lists them
    all backwards. The server's tools used to be declared again after every other
    registration, in the server's new order, so the request after a change shared
    none of its tools with the cached prefix of the one before."""
    loopback.add(
        Reply.sse(openai_stream("", tool_calls=[("c1", "change", "{}")])),
        Reply.sse(openai_stream("Changed.")),
    )
    with (
        MCPTools(CHANGING, protocol="2025-11-25", startup_timeout=20) as server,
        OpenAIChat("m", loopback.url + "/v1", "k") as provider,
        Agent(provider, tools=[server, local]) as agent,
        agent.run("change the tools") as stream,
    ):
        finished = [e for e in stream if isinstance(e, ToolFinished)]
    assert [(e.name, e.is_error) for e in finished] == [("change", False)]
    first, second = (r.json for r in loopback.requests)
    assert _in_order(first) == ["alpha", "beta", "gamma", "delta", "change", "local"]
    assert _in_order(second) == [
        "alpha",
        "gamma",
        "delta",
        "change",
        "local",
        "epsilon",
    ]
    before = {t["function"]["name"]: t["function"] for t in _tools(first)}
    after = {t["function"]["name"]: t["function"] for t in _tools(second)}
    assert after["gamma"]["description"] == "gamma, changed"
    assert "n" in after["gamma"]["parameters"]["properties"]
    for name in ("alpha", "delta", "change", "local"):
        assert after[name] == before[name]


def test_the_registry_keeps_the_places_of_the_tools_around_a_changed_server() -> None:
    """The same change straight through ``ToolRegistry``, with a tool registered
    before the server and one after: only ``beta`` goes, ``gamma`` is replaced where
    it stood, and ``epsilon`` comes last."""

    @tool
    def first() -> str:
        """Registered before the server."""
        return "first"

    with MCPTools(CHANGING, protocol="2025-11-25", startup_timeout=20) as server:
        registry = ToolRegistry()
        registry.register_tool(first)
        registry.register_source(server)
        registry.register_tool(local)
        names = [s.name for s in registry.specs()]
        assert names == ["first", "alpha", "beta", "gamma", "delta", "change", "local"]
        assert server.call_batch([ToolCall("1", "change", {})]) == ["called change"]
        specs = registry.specs()
        assert [s.name for s in specs] == [
            "first",
            "alpha",
            "gamma",
            "delta",
            "change",
            "local",
            "epsilon",
        ]
        assert specs[2].description == "gamma, changed"
        assert registry.owner("epsilon") is server and registry.owner("beta") is None

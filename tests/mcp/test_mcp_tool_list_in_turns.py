"""A server's changed tool list reaches the agent's next request.

The real stdio server (``mcp_server.py``) adds a tool ``extra`` when ``grow`` runs and
sends ``notifications/tools/list_changed``; a loopback model server then calls the new
tool. The request after the change must declare it, and the call must reach it.
"""

from __future__ import annotations

from faultkit import openai_stream
from loopback import LoopbackServer, Reply
from mcp_servers import STDIO

from navi_core import Agent, OpenAIChat, ToolFinished
from navi_core.mcp import MCPTools


def _declared(body: dict[str, object]) -> set[str]:
    tools = body.get("tools") or []
    assert isinstance(tools, list)
    return {t["function"]["name"] for t in tools}


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

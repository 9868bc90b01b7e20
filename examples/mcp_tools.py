"""MCP: tools from a server written with the official ``mcp`` SDK, over stdio.

    pip install '.[mcp]'              # the SDK, to write the server; the client needs none
    python examples/mcp_tools.py      # starts this same file as the server, `... server`

``MCPTools`` starts the server as a child process, lists its tools and hands the
model's calls to it; ``prefix`` keeps two servers' tool names apart. The model:
NAVI_BASE_URL and NAVI_MODEL name a real endpoint; unset, it runs offline on ``Scripted``.
"""

from __future__ import annotations

import os
import sys

from navi_core import (
    Agent,
    MCPTools,
    OpenAIChat,
    Provider,
    Scripted,
    Text,
    TextDelta,
    ToolFinished,
    ToolUse,
)


def serve() -> None:
    """The MCP server: two tools, served on stdin/stdout."""
    from mcp.server.mcpserver import MCPServer  # FastMCP in mcp 1.x

    app = MCPServer("units", log_level="ERROR")

    @app.tool()
    def celsius_to_fahrenheit(celsius: float) -> float:
        """Convert degrees Celsius to Fahrenheit."""
        return celsius * 9 / 5 + 32

    @app.tool()
    def km_to_miles(km: float) -> float:
        """Convert kilometres to miles."""
        return round(km / 1.609344, 3)

    app.run()  # stdio by default


def provider(*answers: str | list[Text | ToolUse]) -> Provider:
    """NAVI_BASE_URL's endpoint, or ``answers`` replayed offline."""
    base_url = os.environ.get("NAVI_BASE_URL")
    if base_url:
        return OpenAIChat(os.environ.get("NAVI_MODEL", "qwen2.5"), base_url=base_url)
    return Scripted(answers)


def main() -> None:
    model = provider(
        [ToolUse("call_1", "units_celsius_to_fahrenheit", '{"celsius": 21.5}')],
        "21.5 °C is 70.7 °F.",
    )
    # the server is this file with the argument "server"; any argv works, e.g.
    # ["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]
    with MCPTools([sys.executable, __file__, "server"], prefix="units") as units:
        print("tools:", ", ".join(sorted(spec.name for spec in units.tools())))
        agent = Agent(model, tools=[units])
        with agent.run("What is 21.5 °C in Fahrenheit?") as stream:
            for ev in stream:
                if isinstance(ev, ToolFinished):
                    print(f"[{ev.name}: {'failed' if ev.is_error else 'ok'}]")
                elif isinstance(ev, TextDelta):
                    print(ev.text, end="", flush=True)
        print()
        results = [r.text for m in agent.conversation.messages for r in m.tool_results]
        print("the server answered:", results)
        agent.close()


if __name__ == "__main__":
    serve() if sys.argv[1:] == ["server"] else main()

"""A stdio MCP server, written with the official SDK's low-level ``Server``, that lists
its tools or resources in ways a client must survive.

    python tests/mcp/odd_listing_server.py names    # tool names that clash once cleaned
    python tests/mcp/odd_listing_server.py names-reversed  # the same, listed backwards
    python tests/mcp/odd_listing_server.py changing  # ``change`` changes the tool list
    python tests/mcp/odd_listing_server.py cursor   # tools/list repeats its nextCursor
    python tests/mcp/odd_listing_server.py resources  # resources/list repeats it
    python tests/mcp/odd_listing_server.py chatty   # logs a "[tag] ..." line on stdout

Each tool answers ``called <the name it was called by>``. In ``changing`` mode the
server lists ``alpha``, ``beta``, ``gamma``, ``delta`` and ``change``; a call of
``change`` drops ``beta``, gives ``gamma`` a new description and schema, adds
``epsilon``, lists them all in the reverse order from then on, and sends
``notifications/tools/list_changed``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1] if len(sys.argv) > 1 else "names"
#: names that providers cannot take as they are: cleaned, each pair becomes one name
ODD_NAMES = ["read.file", "read_file", "x" * 70 + "A", "x" * 70 + "B"]
#: ``changing`` mode's tools before and after a call of ``change``
BEFORE = ["alpha", "beta", "gamma", "delta", "change"]
AFTER = ["epsilon", "change", "delta", "gamma", "alpha"]
#: whether ``change`` was called (``changing`` mode)
changed = False


def _tool(name: str) -> types.Tool:
    if changed and name == "gamma":  # the changed declaration of a tool that stays
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        return types.Tool(name=name, description="gamma, changed", input_schema=schema)
    return types.Tool(
        name=name, description=f"tool {name}", input_schema={"type": "object"}
    )


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    if MODE == "cursor":  # every page points at the same next page
        return types.ListToolsResult(tools=[_tool("only")], next_cursor="again")
    if MODE == "changing":
        names = AFTER if changed else BEFORE
    elif MODE.startswith("names"):
        names = ODD_NAMES[::-1] if MODE == "names-reversed" else ODD_NAMES
    else:
        names = ["only"]
    return types.ListToolsResult(tools=[_tool(n) for n in names])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
    global changed
    if MODE == "changing" and params.name == "change" and not changed:
        changed = True
        await ctx.session.send_tool_list_changed()
    text = types.TextContent(type="text", text=f"called {params.name}")
    return types.CallToolResult(content=[text])


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
    resource = types.Resource(uri="notes://x", name="x")
    return types.ListResourcesResult(resources=[resource], next_cursor="again")


SERVER = Server(
    "odd-listing",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


if __name__ == "__main__":
    if MODE == "chatty":  # as dotenv 17 does when a server loads its .env
        print("[dotenv@17.2.1] injecting env (0) from .env", flush=True)
    anyio.run(main)

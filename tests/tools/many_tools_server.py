"""An MCP stdio server (official SDK) with 100 tools of one area, for the ToolSearch
tests: ``python many_tools_server.py AREA``. The ``harbour`` area also has
``harbour_tide_forecast``, the one tool the tests look for."""

from __future__ import annotations

import sys
from collections.abc import Callable

from mcp.server.mcpserver import MCPServer

AREAS = {
    "files": ["file", "folder", "link", "archive", "upload"],
    "calendar": ["event", "meeting", "reminder", "invite", "agenda"],
    "harbour": ["vessel", "berth", "crane", "cargo", "manifest"],
}
VERBS = [
    "create", "delete", "list", "get", "update",
    "rename", "share", "export", "restore", "count",
    "copy", "lock", "unlock", "tag", "untag",
    "move", "merge", "split", "audit", "preview",
]  # fmt: skip


def action(text: str) -> Callable[[str], str]:
    """A tool function answering ``text`` about the item it is given."""

    def act(item: str) -> str:
        return f"{text} {item}"

    return act


def build(area: str) -> MCPServer:
    app = MCPServer(f"many-{area}", log_level="ERROR")
    for noun in AREAS[area]:
        for verb in VERBS:
            name = f"{area}_{verb}_{noun}"
            description = f"{verb.capitalize()} a {noun} in the {area} system."
            answer = f"{verb} {noun}"
            if area == "harbour" and (verb, noun) == ("preview", "manifest"):
                name = "harbour_tide_forecast"  # the 100th tool of the area
                description = "Predict the high and low tide times at a harbour."
                answer = "high tide at 06:12 and 18:40 in"
            app.add_tool(action(answer), name=name, description=description)
    return app


if __name__ == "__main__":
    build(sys.argv[1]).run()

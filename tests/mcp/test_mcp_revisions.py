"""Both MCP revisions, chosen per server: ``protocol="auto"`` agrees on 2026-07-28 with
a server that speaks it (the official SDK's, and one that refuses the initialize
handshake) and falls back to the handshake with a server that knows only that, over
stdio and streamable HTTP; resources, prompts, resource links and list changes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp_servers import STDIO
from revision_servers import AGREED, KINDS, http, where

from navi_core import MediaPart, Text, TextPart
from navi_core.mcp import MCPError, MCPTools
from navi_core.tools import ToolCall

TRANSPORTS = ("stdio", "http")


def colour(message: str, schema: Any) -> dict[str, str]:
    assert message == "Which colour?" and "colour" in schema["properties"]
    return {"colour": "teal"}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_auto_agrees_on_a_revision_the_server_speaks(kind: str, transport: str) -> None:
    with where(kind, transport) as at, MCPTools(**at, elicit=colour) as tools:
        assert tools.protocol_version == AGREED[kind]
        calls = [ToolCall("1", "add", {"a": 2, "b": 3}), ToolCall("2", "ask", {})]
        assert tools.call_batch(calls) == ["5", "colour: teal"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_pinned_revision_is_the_only_one_spoken(transport: str) -> None:
    with where("sdk", transport) as at:
        with MCPTools(**at, protocol="2025-11-25") as tools:
            assert tools.protocol_version == "2025-11-25"
            assert tools.call_batch([ToolCall("1", "add", {"a": 1, "b": 1})]) == ["2"]
        with MCPTools(**at, protocol="2026-07-28") as tools:
            assert tools.protocol_version == "2026-07-28"
    with where("modern-only", transport) as at, pytest.raises(MCPError):
        MCPTools(**at, protocol="2025-11-25", startup_timeout=20)
    with where("legacy-only", transport) as at, pytest.raises(MCPError):
        MCPTools(**at, protocol="2026-07-28", startup_timeout=20)


def test_an_unknown_protocol_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="protocol must be"):
        MCPTools(STDIO, protocol="2030-01-01")


@pytest.fixture(scope="module", params=["2026-07-28", "2025-11-25"])
def both(request: pytest.FixtureRequest) -> Iterator[MCPTools]:
    """The SDK server over stdio in each revision."""
    with MCPTools(STDIO, protocol=request.param) as tools:
        yield tools


def test_resources_are_listed_and_read_as_parts(both: MCPTools) -> None:
    uris = {r["uri"] for r in both.resources()}
    assert {"notes://today", "image://square", "data://blob"} <= uris
    assert both.read_resource("notes://today") == [TextPart("buy milk")]
    (image,) = both.read_resource("image://square")
    assert isinstance(image, MediaPart) and image.media_type == "image/png"
    (note,) = both.read_resource("data://blob")
    assert isinstance(note, TextPart)
    assert "application/octet-stream" in note.text and "10 bytes" in note.text


def test_prompts_are_listed_and_filled_in(both: MCPTools) -> None:
    (prompt,) = [p for p in both.prompts() if p["name"] == "review"]
    assert prompt["arguments"][0]["name"] == "code"
    user, assistant = both.get_prompt("review", {"code": "x = 1"})
    assert user.role == "user" and user.content == (Text("Review this: x = 1"),)
    assert assistant.role == "assistant" and assistant.text == "Looking at it."


def test_a_resource_link_in_a_tool_result_is_read(both: MCPTools) -> None:
    (value,) = both.call_batch([ToolCall("1", "link", {})])
    assert value == ["[resource notes://today]", "buy milk"]


def test_a_missing_resource_is_an_error(both: MCPTools) -> None:
    with pytest.raises(MCPError):
        both.read_resource("notes://nothing-here")


def test_a_changed_tool_list_is_listed_again_before_the_next_request() -> None:
    with MCPTools(STDIO, protocol="2025-11-25") as tools:
        assert "extra" not in {s.name for s in tools.tools()}
        assert tools.call_batch([ToolCall("1", "grow", {})]) == ["grown"]
        assert "extra" in {s.name for s in tools.tools()}
        assert tools.call_batch([ToolCall("2", "extra", {})]) == ["extra!"]


def test_http_2026_requests_carry_the_revision_headers_and_no_session() -> None:
    with http("modern-only") as url, MCPTools(url=url) as tools:
        transport: Any = tools.transport
        assert transport.stateless and transport.session_id is None
        assert tools.read_resource("notes://today") == [TextPart("buy milk")]


def test_http_2026_mirrors_x_mcp_header_arguments_as_headers() -> None:
    """The server checks ``Mcp-Param-Region`` against the argument: it is sent, and
    a value a header cannot hold as it is goes base64-wrapped."""
    with http("sdk") as url, MCPTools(url=url) as tools:
        assert tools.protocol_version == "2026-07-28"
        calls = [
            ToolCall("1", "region", {"name": "eu-west"}),
            ToolCall("2", "region", {"name": "zürich "}),
        ]
        assert tools.call_batch(calls) == ["region eu-west", "region zürich "]


def test_stdio_probe_of_a_server_that_ends_on_it_falls_back(tmp_path: Any) -> None:
    """A handshake-only server that exits on an unknown method is started again and
    spoken to with the handshake."""
    script = tmp_path / "strict.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if m.get('method') == 'server/discover':\n"
        "        sys.exit(1)\n"
        "    if m.get('method') == 'initialize':\n"
        "        r = {'protocolVersion': '2025-03-26', 'capabilities': {},"
        " 'serverInfo': {'name': 'strict'}}\n"
        "    elif m.get('method') == 'tools/list':\n"
        "        r = {'tools': []}\n"
        "    else:\n"
        "        continue\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n"
    )
    with MCPTools([sys.executable, str(script)]) as tools:
        assert tools.protocol_version == "2025-03-26"
        assert tools.server_info == {"name": "strict"}

"""No credential given to an MCP server over HTTP comes back out: a real server on
loopback echoes the request's headers and URL in a 403 body, a JSON-RPC error and a
tool result, and every place that text can reach is searched for the sentinel."""

from __future__ import annotations

import base64
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("mcp")

from mcp_servers import STDIO, free_port, http_server

from navi_core import Agent, AnyEvent, Scripted, Text, ToolUse, TurnComplete
from navi_core.mcp import MCPError, MCPTools
from navi_core.mcp._http import HTTPTransport
from navi_core.store.sqlite import SQLiteStore
from navi_core.tools import ToolCall

MARK = "SENTINEL"
KEY = f"sk-mcp-{MARK}-77aa"
PASSWORD = f"pw/{MARK}+x"
TOKEN = f"tok {MARK}&="  # needs percent-encoding in a URL
LOGGERS = ("navi_core", "httpx", "httpcore")


@pytest.fixture
def echo_url() -> Iterator[str]:
    yield from http_server("echo")


def _with_credentials(url: str, userinfo: bool) -> str:
    if userinfo:
        url = url.replace("://", f"://ann:{quote(PASSWORD, safe='')}@")
    return f"{url}?token={quote(TOKEN, safe='')}"


def _text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


def _hunted(blob: str) -> list[str]:
    """The spellings of the sentinel credentials found in ``blob``."""
    basic = base64.b64encode(f"ann:{PASSWORD}".encode()).decode()
    forms = {MARK, MARK.lower(), basic, quote(TOKEN, safe=""), quote(PASSWORD)}
    return sorted(f for f in forms if f in blob)


@pytest.mark.parametrize(
    "headers,userinfo",
    [
        ({"X-Api-Key": KEY}, True),  # user info becomes Basic credentials
        ({"Authorization": f"Bearer {KEY}"}, False),
    ],
    ids=["x-api-key+userinfo", "bearer"],
)
def test_no_credential_comes_back_from_an_echoing_server(
    echo_url: str,
    headers: dict[str, str],
    userinfo: bool,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = _with_credentials(echo_url, userinfo)
    seen: list[str] = []
    events: list[AnyEvent] = []
    with caplog.at_level(logging.DEBUG):
        for name in LOGGERS:
            logging.getLogger(name).setLevel(logging.DEBUG)
        try:
            with (
                MCPTools(url=url, headers=headers, prefix="web") as tools,
                SQLiteStore(tmp_path / "navi.db") as store,
            ):
                transport = tools.transport
                assert isinstance(transport, HTTPTransport)
                seen += [repr(tools), repr(transport), transport.url]
                direct = tools.call_batch(
                    [
                        ToolCall("1", "web_reject", {}),
                        ToolCall("2", "web_rpc_error", {}),
                        ToolCall("3", "web_headers", {}),
                    ]
                )
                uses = [ToolUse(f"u{i}", n, "{}") for i, n in enumerate(
                    ("web_reject", "web_rpc_error", "web_headers"))]  # fmt: skip
                agent = Agent(
                    Scripted([uses, [Text("done")]]), tools=[tools], store=store
                )
                with agent.run("go") as stream:
                    events.extend(stream)
                seen += [repr(m) for m in agent.conversation.messages]
                agent.close()
            # an unreachable server: the URL (credentials in it) goes into the error
            dead = _with_credentials(f"http://127.0.0.1:{free_port()}/mcp", userinfo)
            with pytest.raises(MCPError) as refused:
                MCPTools(url=dead, headers=headers, startup_timeout=5)
            seen.append(_text(refused.value))
        finally:
            for name in LOGGERS:
                logging.getLogger(name).setLevel(logging.NOTSET)
    rejected, rpc_error, echoed = direct
    assert isinstance(rejected, MCPError) and "HTTP 403" in str(rejected)
    assert "denied; you sent" in str(rejected) and "[REDACTED]" in str(rejected)
    assert isinstance(rpc_error, MCPError) and "refused: " in str(rpc_error)
    assert isinstance(echoed, str) and echoed.startswith("you sent ")
    assert "[REDACTED]" in rpc_error.args[0] and "[REDACTED]" in echoed
    assert "cannot connect" in str(refused.value)
    seen += [_text(e) for e in direct if isinstance(e, BaseException)]
    seen += [echoed, repr(events), caplog.text]
    assert isinstance(events[-1], TurnComplete)
    assert "HTTP Request: POST" in caplog.text  # httpx logged each request
    db = (tmp_path / "navi.db").read_bytes().decode("latin-1")
    assert "you sent" in db  # the tool results were stored
    assert _hunted("\n".join(seen) + db) == []


def test_the_public_url_is_what_is_shown(echo_url: str) -> None:
    url = _with_credentials(echo_url, userinfo=True)
    with MCPTools(url=url, headers={"X-Api-Key": KEY}) as tools:
        shown = repr(tools)
        assert "127.0.0.1" in shown and "/mcp" in shown
        assert "token" not in shown and "ann" not in shown
        assert isinstance(tools.transport, HTTPTransport)
        assert tools.transport.url == echo_url
        assert tools.call_batch([ToolCall("a", "add", {"a": 1, "b": 2})]) == ["3"]


def test_a_stdio_server_does_not_hand_back_a_secret_it_was_given() -> None:
    """A variable whose name looks secret reaches the server, not the model."""
    env = {"NAVI_TEST_API_KEY": KEY, "NAVI_PLAIN": "plain"}
    with MCPTools(STDIO, env=env) as tools:
        got = tools.call_batch(
            [
                ToolCall("1", "env", {"name": "NAVI_TEST_API_KEY"}),
                ToolCall("2", "echo", {"text": f"the key is {KEY}"}),
                ToolCall("3", "env", {"name": "NAVI_PLAIN"}),
            ]
        )
    assert got == ["[REDACTED]", "the key is [REDACTED]", "plain"]

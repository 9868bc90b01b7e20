"""Credentials an MCP connection is set up with, beyond its headers, never come back.

Over HTTP a proxy from the environment gets its own credentials (``HTTP_PROXY`` with
user info becomes ``Proxy-Authorization: Basic ...``); a proxy that echoes them in its
error must not get them into the ``MCPError``. Over stdio the command's arguments
(``postgresql://bob:PASS@db/x``, ``--token=...``, ``--api-key ...``) and values of
variables whose names do not look secret (``DATABASE_URL`` with a password in it) are
credentials too: a server that quotes how it was started in a failed call must not get
them into an event, a stored row or ``navi-core sessions show``.

Before the fix the proxy's password, ``user:pass`` and the Basic token reached the
error as the proxy sent them, and every stdio credential below but ``GITHUB_TOKEN``
reached the events, the store and the command's output.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from echo_proxy import proxy_leaks

from navi_core import Agent, AnyEvent, Scripted, Text, ToolFinished, ToolUse
from navi_core._secrets import process_secrets
from navi_core.mcp import MCPError, MCPTools
from navi_core.mcp._http import HTTPTransport
from navi_core.store.sqlite import SQLiteStore

SERVER = str(Path(__file__).with_name("echo_argv_server.py"))
KEY = "sk-mcp-proxied-SENTINEL-41"


def test_an_environment_proxy_s_credentials_stay_out_of_the_error(
    echo_proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", echo_proxy)
    headers = {"Authorization": f"Bearer {KEY}"}
    with pytest.raises(MCPError) as info:
        MCPTools(url="http://mcp.example.invalid/mcp", headers=headers)
    error = info.value
    assert "HTTP 400" in str(error) and "proxy refused: " in str(error)
    assert "[REDACTED]" in str(error)
    assert proxy_leaks(str(error) + repr(error)) == []


def test_a_client_s_proxy_credentials_stay_out_of_the_error(echo_proxy: str) -> None:
    with httpx.Client(proxy=echo_proxy) as client:
        transport = HTTPTransport("http://mcp.example.invalid/mcp", client=client)
        deadline = time.monotonic() + 30
        call = transport.start("initialize", {}, deadline)
        with pytest.raises(MCPError) as info:
            transport.wait(call, deadline)
        transport.close()
    error = info.value
    assert "proxy refused: " in str(error) and "[REDACTED]" in str(error)
    assert proxy_leaks(str(error) + repr(error)) == []


# -- stdio: the command's arguments and the values of its variables ------------------

ARG_PASSWORD = "ARGPASS123"
ARG_TOKEN = "ARGTOKEN456"
ARG_KEY = "ARGKEY789xyz"
ARG_OPTION_PASSWORD = "OPTPASS321"
ENV_PASSWORD = "DBPASS000"
ENV_PAT = "ghp_PATVALUE0000"
ENV_TOKEN = "ghp_TOKENVALUE111"
SECRETS = (ARG_PASSWORD, ARG_TOKEN, ARG_KEY, ARG_OPTION_PASSWORD, ENV_PASSWORD,
           ENV_PAT, ENV_TOKEN)  # fmt: skip
#: what is no secret stays readable: a path, a model name, a URL's host (its user goes
#: with the password, as ``bob:PASS`` is redacted whole)
PLAIN = ("/srv/data", "gpt-4o-mini", "db.internal", "--model")


def _navi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_stdio_server_s_arguments_and_variables_stay_out(tmp_path: Path) -> None:
    command = [
        sys.executable,
        SERVER,
        f"postgresql://bob:{ARG_PASSWORD}@db.internal/x",
        f"--token={ARG_TOKEN}",
        "--api-key",
        ARG_KEY,
        f"--password={ARG_OPTION_PASSWORD}",
        "--root",
        "/srv/data",
        "--model",
        "gpt-4o-mini",
    ]
    env = {
        "DATABASE_URL": f"postgres://u:{ENV_PASSWORD}@h/d",
        "GITHUB_PAT": ENV_PAT,
        "GITHUB_TOKEN": ENV_TOKEN,  # redacted before the fix too
        "ECHO_VARS": "DATABASE_URL,GITHUB_PAT,GITHUB_TOKEN",
    }
    db = tmp_path / "navi.db"
    events: list[AnyEvent] = []
    with MCPTools(command, env=env, prefix="srv") as tools:
        script = Scripted([[ToolUse("u1", "srv_whoami", "{}")], [Text("done")]])
        with (
            SQLiteStore(db) as store,
            Agent(script, tools=[tools], store=store) as agent,
            agent.run("who are you?") as stream,
        ):
            events.extend(stream)
            session = agent.session_id
        transport_name = getattr(tools.transport, "name", "")
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.is_error and finished.error is not None
    assert "cannot run: argv=" in finished.error
    shown = _navi("sessions", "show", session, "--db", str(db), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "cannot run: argv=" in shown.stdout
    stored = db.read_bytes().decode("latin-1")
    assert "cannot run: argv=" in stored  # the tool result was stored
    for text in (repr(events), stored, shown.stdout, finished.error):
        assert "[REDACTED]" in text
        assert [s for s in SECRETS if s in text] == []
        assert [p for p in PLAIN if p not in text] == []
    assert "--token=[REDACTED]" in finished.error
    assert [s for s in SECRETS if s in transport_name] == []


def test_a_server_name_in_messages_hides_an_argument_s_secret() -> None:
    """A server is named in messages by its first two arguments: ``--token=...``
    among them is redacted there too."""
    command = [sys.executable, f"--token={ARG_TOKEN}", SERVER]
    with pytest.raises(MCPError) as info:
        MCPTools(command, startup_timeout=10)  # python refuses the option
    text = str(info.value)
    assert "--token=[REDACTED]" in text and ARG_TOKEN not in text


@pytest.mark.parametrize(
    ("argv", "secret"),
    [
        (["postgresql://bob:s3cret-pw@db/x"], "s3cret-pw"),
        (["--dsn=postgres://u:p%40ss-word@h/d"], "p@ss-word"),
        (["--token=tok-123456"], "tok-123456"),
        (["--api-key", "key-123456"], "key-123456"),
        (["--client-secret", "cs-123456"], "cs-123456"),
        (["-Dapi.key=jv-123456"], "jv-123456"),
        (["-e", "GITHUB_TOKEN=ghp_123456"], "ghp_123456"),
        (["host=db password=lib-123456 user=u"], "lib-123456"),
        (["--header", "Authorization: Bearer hdr-123456"], "hdr-123456"),
        (["https://h/x?api_key=q-123456&v=2"], "q-123456"),
        (["--set=api_key=set-123456"], "set-123456"),
        (["host=db password='s3cret pwB'"], "s3cret pwB"),
        (["Server=db;User Id=sa;Password=my secret pw;"], "my secret pw"),
    ],
)
def test_what_an_argument_holds_as_a_credential(argv: list[str], secret: str) -> None:
    found = process_secrets(["server", *argv])
    assert secret in found
    assert "server" not in found


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "gpt-4o-mini", "--root", "/srv/data"],
        ["--token-file", "/run/secrets/token"],
        ["--api-key-env", "OPENAI_API_KEY"],
        ["--auth-type", "basic", "--token-url", "https://login.example/token"],
        ["--no-auth", "/srv/data"],
        ["--author", "Jane Doe", "--keywords", "python"],
        ["ssh://deploy@host/repo", "https://host/users/@me"],
        ["--api-key", "--verbose"],
        # an option's name is a guess: a value that cannot be a secret is none
        ["--max-tokens", "100000000", "--auth", "none", "--auth-required", "true"],
        ["--pass", "time", "--password-stdin", "serve", "--key-prefix", "myapp"],
        ["--tls-key", "/etc/ssl/private/server.key", "--sort-key", "name"],
    ],
)
def test_what_an_argument_does_not_hold(argv: list[str]) -> None:
    assert process_secrets(["server", *argv]) == ()


def test_a_variable_named_like_a_password_with_a_plain_value_holds_none() -> None:
    """``DB_PASS=user`` would blank ``user`` out of every path in every result."""
    assert process_secrets(["server"], {"DB_PASS": "user", "X_PW": "true"}) == ()
    assert process_secrets(["server"], {"API_KEY": "abcd"}) != ()  # a sure name


def test_an_option_value_never_renames_the_protocol_s_fields() -> None:
    """``--sort-key name`` (the value a word of JSON-RPC) leaves the tools as listed."""
    with MCPTools([sys.executable, SERVER, "--sort-key", "name"]) as tools:
        assert [t.name for t in tools.tools()] == ["whoami"]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_PAT", True),
        ("githubPat", True),
        ("SENTRY_DSN", True),
        ("DB_PASS", True),
        ("DB_PWD", True),
        ("GOOGLE_CREDENTIALS", True),
        ("API_KEY", True),
        ("PATH", False),
        ("PWD", False),
        ("BYPASS_CACHE", False),
        ("MODEL", False),
    ],
)
def test_which_variables_hold_a_credential(name: str, secret: bool) -> None:
    assert (process_secrets(["server"], {name: "value-123456"}) != ()) is secret

"""A set-up that cannot work is one ``error:`` line before anything is opened or sent
(``python -m navi_core`` in real processes, a real server on loopback):

* a PostgreSQL store (``--postgres DSN`` or ``$NAVI_POSTGRES_DSN``) without the
  ``postgres`` extra: the pip command that adds it, status 1, in every command;
* a public API (OpenAI's, Anthropic's) without its key variable: status 2 and
  nothing sent; a local server without a key keeps working.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from loopback import LoopbackServer
from test_chat import ROOT, chat_env, text_reply

DSN = "host=127.0.0.1 port=1 dbname=navi"


def navi(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        input=stdin,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- PostgreSQL without its extra ---------------------------------------------------


def without_psycopg(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of an install without the postgres extra: ``psycopg`` and
    ``psycopg_pool`` cannot be imported (modules first on ``PYTHONPATH`` say so)."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for name in ("psycopg", "psycopg_pool"):
        (hidden / f"{name}.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {name!r}'!r}, "
            f"name={name!r})\n",
            encoding="utf-8",
        )
    env = chat_env(tmp_path, **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(hidden), str(ROOT)])
    return env


ENDPOINT = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1"]

STORE_COMMANDS = {
    "demo": ["demo"],
    "sessions list": ["sessions", "list"],
    "sessions show": ["sessions", "show", "latest"],
    "run": ["run", "hi", *ENDPOINT],
    "compact": ["compact", "abc", *ENDPOINT],
    "chat": ["chat", "--demo"],
    "serve": ["serve", "--demo", "--no-auth", "--bind", "127.0.0.1:0"],
}


@pytest.mark.parametrize("command", sorted(STORE_COMMANDS))
@pytest.mark.parametrize("source", ["--postgres", "$NAVI_POSTGRES_DSN"])
def test_postgres_without_the_extra_is_one_error_line(
    tmp_path: Path, command: str, source: str
) -> None:
    args = list(STORE_COMMANDS[command])
    if source == "--postgres":
        env = without_psycopg(tmp_path)
        args += ["--postgres", DSN]
    else:
        env = without_psycopg(tmp_path, NAVI_POSTGRES_DSN=DSN)
    result = navi(args, env, tmp_path, stdin="hi\n")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    if command == "serve":  # it says first where its demo's tools read
        assert lines[0].startswith("navi-core serve --demo: its tools read ")
        lines = lines[1:]
    (line,) = lines
    assert line.startswith(
        f"error: {source} names a PostgreSQL store, which needs the postgres extra "
        "(psycopg 3 and psycopg_pool): pip install "
    ), line
    assert "[postgres]" in line, line
    assert DSN not in line  # a DSN may hold a password


# -- a public API without its key ---------------------------------------------------


def keyless(tmp_path: Path, proxy: LoopbackServer) -> dict[str, str]:
    """No key and no base URL in the environment; every request, to any host,
    goes through ``proxy`` (a loopback server that records it)."""
    env = chat_env(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        env.pop(name, None)
    for name in ("NO_PROXY", "no_proxy"):
        env.pop(name, None)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = proxy.url
    return env


OPENAI_MESSAGE = (
    "error: $OPENAI_API_KEY is not set (export it, or give --base-url for a local "
    "server that needs none)\n"
)
ANTHROPIC_MESSAGE = OPENAI_MESSAGE.replace("OPENAI", "ANTHROPIC")

KEY_CASES = {
    "run": (["run", "hi", "--model", "gpt-4o"], OPENAI_MESSAGE),
    "run --anthropic": (
        ["run", "hi", "--anthropic", "--model", "claude-sonnet-4-5"],
        ANTHROPIC_MESSAGE,
    ),
    "run, the public URL named": (
        ["run", "hi", "--model", "gpt-4o", "--base-url", "https://api.openai.com/v1"],
        OPENAI_MESSAGE,
    ),
    "compact": (["compact", "abc", "--model", "gpt-4o"], OPENAI_MESSAGE),
    "bench": (["bench", "--model", "gpt-4o", "--no-progress"], OPENAI_MESSAGE),
    "chat": (["chat", "--model", "gpt-4o"], OPENAI_MESSAGE),
    "chat --anthropic": (
        ["chat", "--anthropic", "--model", "claude-sonnet-4-5"],
        ANTHROPIC_MESSAGE,
    ),
    "chat --responses": (["chat", "--responses", "--model", "gpt-4o"], OPENAI_MESSAGE),
    "serve": (["serve", "--model", "gpt-4o", "--no-auth"], OPENAI_MESSAGE),
}


@pytest.mark.parametrize("case", sorted(KEY_CASES))
def test_a_public_api_without_its_key_is_refused_before_anything_is_sent(
    loopback: LoopbackServer, tmp_path: Path, case: str
) -> None:
    args, message = KEY_CASES[case]
    if args[0] != "bench":  # the one that opens no store
        args = [*args, "--db", "n.db"]
    result = navi(args, keyless(tmp_path, loopback), tmp_path, "hi\n")
    assert (result.returncode, result.stderr) == (2, message), result.stderr
    assert loopback.requests == []  # nothing went out, not even to a proxy
    assert not (tmp_path / "n.db").exists()


def test_a_local_server_needs_no_key(loopback: LoopbackServer, tmp_path: Path) -> None:
    """Ollama and llama.cpp take no key: by --base-url or by $OPENAI_BASE_URL."""
    loopback.add(text_reply("Hello ", "there."), text_reply("Again."))
    env = keyless(tmp_path, loopback)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        del env[name], env[name.lower()]
    url = f"{loopback.url}/v1"
    by_flag = navi(
        ["run", "hi", "--model", "m", "--base-url", url, "--db", "n.db"], env, tmp_path
    )
    assert by_flag.returncode == 0, by_flag.stderr
    assert "assistant: Hello there." in by_flag.stdout
    by_env = navi(
        ["chat", "--model", "m", "--db", "n.db"], {**env, "OPENAI_BASE_URL": url},
        tmp_path, "hi\n",
    )  # fmt: skip
    assert by_env.returncode == 0, by_env.stderr
    assert "Again." in by_env.stdout
    assert [r.headers.get("authorization") for r in loopback.requests] == [None, None]

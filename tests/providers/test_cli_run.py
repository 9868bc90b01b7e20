"""``navi-core run`` and ``compact`` end to end: a real process, a real endpoint on
loopback, SQLite, and the provider flags both commands share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from loopback import LoopbackServer, Reply
from terminal_check import HOSTILE, leaks, without_own_styling
from wire_streams import anthropic_body, openai_body

from navi_core.conversation import Message, Text, UserMessage
from navi_core.store.sqlite import SQLiteStore

SECRET = "sk-cli-test-0123456789abcdef"


def navi(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": SECRET, **extra}
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        if name not in extra:
            env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_answers_with_workspace_tools_and_stores_the_session(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha beta gamma\n", encoding="utf-8")
    loopback.add(
        Reply.sse(
            openai_body(tool_calls=[("c1", "word_count", ['{"path": "notes.txt"}'])])
        ),
        Reply.sse(openai_body(["notes.txt has ", "3 words."])),
    )
    db = tmp_path / "navi.db"
    result = navi(
        "run",
        "How many words in notes.txt?",
        "--model",
        "local-model",
        "--base-url",
        f"{loopback.url}/v1",
        "--db",
        str(db),
        "--workspace",
        str(ws),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "notes.txt has 3 words." in result.stdout
    assert "word_count" in result.stdout and "[end_turn]" in result.stdout
    first, second = loopback.requests
    assert first.path == "/v1/chat/completions"
    assert first.json["model"] == "local-model"
    assert {t["function"]["name"] for t in first.json["tools"]} == {
        "list_dir",
        "read_file",
        "word_count",
    }
    tool_msg = second.json["messages"][-1]
    assert tool_msg["role"] == "tool" and '"words":3' in tool_msg["content"]
    store = SQLiteStore(db)
    try:
        (info,) = store.list()
        roles = [m.role for m in store.load(info.id).messages]
    finally:
        store.close()
    assert roles == ["user", "assistant", "user", "assistant"]
    assert SECRET.encode() not in db.read_bytes()


def test_run_reports_a_refused_key_without_showing_it(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        Reply.json(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    )
    result = navi(
        "run",
        "hi",
        "--model",
        "m",
        "--base-url",
        f"{loopback.url}/v1",
        "--db",
        str(tmp_path / "navi.db"),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "AuthFailed" in result.stderr
    assert SECRET not in result.stderr + result.stdout
    assert len(loopback.requests) == 1


# -- the provider flags, the same on every command ---------------------------------

OTHER_KEY = "sk-other-test-fedcba9876543210"


def test_run_speaks_anthropic_with_a_key_from_a_named_variable(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(Reply.sse(anthropic_body([("text", ["Hello ", "there."])])))
    result = navi(
        "run",
        "hi",
        "--model",
        "claude-test",
        "--anthropic",
        "--base-url",
        loopback.url,
        "--api-key-env",
        "MY_ANTHROPIC_KEY",
        "--db",
        str(tmp_path / "navi.db"),
        cwd=tmp_path,
        MY_ANTHROPIC_KEY=OTHER_KEY,
    )
    assert result.returncode == 0, result.stderr
    assert "Hello there." in result.stdout and "[end_turn]" in result.stdout
    (req,) = loopback.requests
    assert req.path == "/v1/messages" and req.json["model"] == "claude-test"
    assert req.headers["x-api-key"] == OTHER_KEY
    assert "authorization" not in req.headers
    assert OTHER_KEY not in result.stdout + result.stderr


def _stored_session(db: Path) -> str:
    words = " ".join(f"word{i}" for i in range(200))
    msgs: list[Message] = []
    for n in range(3):
        msgs.append(UserMessage(f"question {n}: {words}"))
        msgs.append(Message("assistant", (Text(f"answer {n}: {words}"),)))
    with SQLiteStore(db) as store:
        sid = store.create().id
        store.append(sid, msgs)
    return sid


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_compact_takes_the_same_provider_flags_as_run(
    loopback: LoopbackServer, tmp_path: Path, api: str
) -> None:
    db = tmp_path / "navi.db"
    sid = _stored_session(db)
    if api == "anthropic":
        loopback.add(Reply.sse(anthropic_body([("text", ["Three questions."])])))
        flags = ["--anthropic", "--base-url", loopback.url]
    else:
        loopback.add(Reply.sse(openai_body(["Three questions."])))
        flags = ["--base-url", f"{loopback.url}/v1"]
    result = navi(
        "compact",
        sid[:8],
        "--model",
        "summary-model",
        *flags,
        "--api-key-env",
        "MY_SUMMARY_KEY",
        "--keep-verbatim",
        "10",
        "--db",
        str(db),
        cwd=tmp_path,
        MY_SUMMARY_KEY=OTHER_KEY,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"session {sid}: summarised ")
    (req,) = loopback.requests
    assert req.json["model"] == "summary-model"
    if api == "anthropic":
        assert req.path == "/v1/messages"
        assert req.headers["x-api-key"] == OTHER_KEY
    else:
        assert req.path == "/v1/chat/completions"
        assert req.headers["authorization"] == f"Bearer {OTHER_KEY}"
    assert SECRET not in str(req.headers)
    assert OTHER_KEY not in result.stdout + result.stderr


@pytest.mark.parametrize("command", [["run", "hi"], ["compact", "abc"]])
def test_two_base_urls_are_a_usage_error_on_every_command(
    tmp_path: Path, command: list[str]
) -> None:
    result = navi(
        *command,
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--openai-base-url",
        "http://127.0.0.1:9/v1",
        "--db",
        str(tmp_path / "navi.db"),
        cwd=tmp_path,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: ") and "not both" in result.stderr
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "navi.db").exists()


# -- what the model and the server say reaches the terminal inert --------------------


def _hostile_turn(loopback: LoopbackServer) -> list[str]:
    """A turn whose text, thinking, tool name, call id and arguments all carry escape
    sequences, one cut between its ESC and the rest; the flags of ``run`` against it."""
    tool = ("c1\x1b]0;id\x07", "evil\x1b]0;name\x07", ['{"x": "\x1b[2J"}'])
    loopback.add(
        Reply.sse(
            openai_body(
                ["A\x1b", "]52;c;SGVsbG8=\x07B", HOSTILE],
                reasoning=[HOSTILE],
                tool_calls=[tool],
            )
        ),
        Reply.sse(openai_body([HOSTILE])),
    )
    return ["run", "hi", "--model", "m", "--base-url", f"{loopback.url}/v1"]


def test_run_shows_the_model_s_escape_sequences_inert(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    flags = _hostile_turn(loopback)
    result = navi(*flags, "--db", str(tmp_path / "navi.db"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert leaks(out) == [], out
    assert "assistant: A␛]52;c;SGVsbG8=␇B" in out  # split across two deltas
    assert "-> call evil␛]0;name␇ (c1␛]0;id␇)" in out
    assert "thinking: A␛]52;c;SGVsbG8=␇B␛]0;pwned␇" in out
    assert "<U+202E>gnp.exe" in out and "line␍forged" in out


def test_run_on_a_terminal_writes_only_its_own_styling(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    flags = _hostile_turn(loopback)
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "TERM": "xterm-256color"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "navi_core", *flags, "--db", str(tmp_path / "navi.db")],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    raw = child.read()
    child.close()
    assert child.exitstatus == 0, raw
    assert "\x1b[1massistant: \x1b[0m" in raw  # colour is on
    shown = without_own_styling(raw).replace("\r\n", "\n")
    assert leaks(shown) == [], shown
    assert "␛]52;c;SGVsbG8=␇" in shown


def test_an_error_that_quotes_the_server_is_one_inert_line(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(Reply.json(400, {"error": {"message": HOSTILE}}))
    result = navi(
        "run",
        "hi",
        "--model",
        "m",
        "--base-url",
        f"{loopback.url}/v1",
        "--db",
        str(tmp_path / "navi.db"),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: BadRequest: A␛]52;c;SGVsbG8=␇B")
    assert result.stderr.count("\n") == 1
    assert leaks(result.stderr) == [], result.stderr


def test_compact_shows_a_server_error_inert(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    db = tmp_path / "navi.db"
    sid = _stored_session(db)
    loopback.add(Reply.json(400, {"error": {"message": HOSTILE}}))
    result = navi(
        "compact",
        sid,
        "--model",
        "m",
        "--base-url",
        f"{loopback.url}/v1",
        "--keep-verbatim",
        "10",
        "--db",
        str(db),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "A␛]52;c;SGVsbG8=␇B" in result.stderr
    assert leaks(result.stderr) == [], result.stderr


# -- a wrong base URL says what to change ---------------------------------------------


@pytest.mark.parametrize(
    ("flags", "endpoint", "use"),
    [
        ([], "/v1/chat/completions", "/v1"),
        ([], "/v1/chat/completions/", "/v1"),
        (["--anthropic"], "/v1/messages", ""),
    ],
)
def test_run_with_an_endpoint_url_as_the_base_says_which_base_to_use(
    loopback: LoopbackServer,
    tmp_path: Path,
    flags: list[str],
    endpoint: str,
    use: str,
) -> None:
    """The endpoint's URL, as a curl example writes it, given as ``--base-url``: one
    ``error:`` line naming the base URL to give instead; nothing is sent."""
    result = navi(
        "run",
        "hi",
        "--model",
        "m",
        *flags,
        "--base-url",
        loopback.url + endpoint,
        "--db",
        str(tmp_path / "navi.db"),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: base_url '{loopback.url}{endpoint}' ")
    assert result.stderr.count("\n") == 1
    assert result.stderr.rstrip().endswith(f"use base_url='{loopback.url}{use}'")
    assert not loopback.requests


def test_run_against_a_path_the_server_lacks_says_to_check_the_base_url(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        Reply.json(
            404,
            {
                "error": {
                    "code": 404,
                    "message": "File Not Found",
                    "type": "not_found_error",
                }
            },
        )
    )
    result = navi(
        "run",
        "hi",
        "--model",
        "m",
        "--base-url",
        f"{loopback.url}/api/v1",
        "--db",
        str(tmp_path / "navi.db"),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: BadRequest: File Not Found (POST {loopback.url}/api/v1/chat/"
        "completions): check base_url: the server has no endpoint at this URL"
        " (base_url + /chat/completions)\n"
    )
    assert SECRET not in result.stderr

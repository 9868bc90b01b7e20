"""``navi-core run`` end to end: a real process, a real endpoint on loopback, SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from loopback import LoopbackServer, Reply
from wire_streams import openai_body

from navi_core.store.sqlite import SQLiteStore

SECRET = "sk-cli-test-0123456789abcdef"


def navi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": SECRET}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "navi_core.cli", *args],
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

"""``navi-core demo``: the README's main job, run as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from navi_core.store.sqlite import SQLiteStore


def navi(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", "navi_core.cli", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_demo_runs_a_turn_with_real_tools_and_stores_it(tmp_path: Path) -> None:
    # an unreachable PostgreSQL in the environment must not beat an explicit --db
    result = navi(
        "demo",
        "--db",
        "demo.db",
        cwd=tmp_path,
        NAVI_POSTGRES_DSN="host=127.0.0.1 port=1",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in ("list_dir", "read_file", "word_count"):
        assert f"<- {name}" in out and "ok in" in out
    assert "[end_turn] 3 responses, 3 tool calls" in out
    store = SQLiteStore(tmp_path / "demo.db")
    try:
        (info,) = store.list()
        messages = store.load(info.id).messages
    finally:
        store.close()
    assert [m.role for m in messages] == ["user", "assistant"] * 3
    counted = messages[4].tool_results[1].text
    assert counted == '{"lines":2,"words":10,"chars":63}'


def test_demo_with_an_unusable_database_says_so_in_one_line(tmp_path: Path) -> None:
    result = navi("demo", "--db", str(tmp_path / "missing" / "x.db"), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr

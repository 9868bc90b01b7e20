"""A session id is shown inert: a SQLite file from elsewhere may hold any text as one
(an escape sequence, a bidi override, a newline that would forge a table row), and
``sessions list``, ``sessions delete``, ``chat`` (its banner, ``/sessions``,
``/usage``) and ``run``'s summary line all show it through the terminal marks.

Real commands in subprocesses on a real SQLite file whose session id was rewritten.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from terminal_check import HOSTILE, leaks, without_own_styling

import navi_core
from navi_core.cli._terminal_text import terminal_safe_line
from navi_core.cli.console import turn_summary
from navi_core.conversation import Message, Text, Usage, UserMessage, WireIdentity
from navi_core.events import StopReason, TurnComplete
from navi_core.store import SQLiteStore

WIRE = WireIdentity("openai_chat", "http://127.0.0.1:9/v1", "m")
#: an id a hostile file may hold: every control of HOSTILE, then a forged row
EVIL_ID = "evil" + HOSTILE + "\nforged-row\t"


def _navi(
    tmp_path: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    root = str(Path(navi_core.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    for name in ("NAVI_DB", "NAVI_POSTGRES_DSN"):
        env.pop(name, None)
    env["HOME"] = str(tmp_path / "home")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        timeout=60,
    )


def _hostile_db(tmp_path: Path) -> Path:
    """A store with one answered session, its id rewritten to ``EVIL_ID``."""
    path = tmp_path / "shared.db"
    with SQLiteStore(path) as store:
        sid = store.create().id
        store.append(
            sid, [UserMessage("q"), Message("assistant", (Text("ok"),), wire=WIRE)]
        )
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE navi_sessions SET id = ? WHERE id = ?", (EVIL_ID, sid))
        conn.execute(
            "UPDATE navi_messages SET session_id = ? WHERE session_id = ?",
            (EVIL_ID, sid),
        )
    conn.close()
    return path


def _shown(text: str) -> str:
    """What the commands printed, their own colours taken out, checked inert."""
    plain = without_own_styling(text)
    assert leaks(plain) == [], plain
    return plain


def test_sessions_list_and_delete_show_a_hostile_id_inert(tmp_path: Path) -> None:
    db = str(_hostile_db(tmp_path))
    listed = _navi(tmp_path, "sessions", "list", "--db", db)
    assert listed.returncode == 0, listed.stderr
    rows = _shown(listed.stdout).splitlines()
    assert len(rows) == 2  # the header and one row: the newline forged none
    assert rows[1].startswith(terminal_safe_line(EVIL_ID))
    deleted = _navi(tmp_path, "sessions", "delete", "evil", "--db", db)
    assert deleted.returncode == 0, deleted.stderr
    assert _shown(deleted.stdout) == (
        f"deleted session {terminal_safe_line(EVIL_ID)} (2 messages)\n"
    )


def test_the_chat_shows_a_hostile_id_inert(tmp_path: Path) -> None:
    db = str(_hostile_db(tmp_path))
    chat = _navi(
        tmp_path,
        "chat",
        "--demo",
        "--session",
        "latest",
        "--db",
        db,
        stdin="/sessions\n/usage\n/model\n/resume latest\n/exit\n",
    )
    assert chat.returncode == 0, chat.stderr
    shown = _shown(chat.stdout)
    assert f"resumed session {terminal_safe_line(EVIL_ID)} (2 messages)" in shown
    assert f"* {terminal_safe_line(EVIL_ID)}  " in shown  # /sessions marks it
    assert f"already in session {terminal_safe_line(EVIL_ID)}" in shown


def test_the_run_summary_shows_a_hostile_id_inert() -> None:
    done: TurnComplete[str] = TurnComplete(StopReason.END_TURN, "ok", 1, 0, Usage())
    line = turn_summary(done, HOSTILE)
    assert leaks(line) == []
    assert line.endswith(f"session {terminal_safe_line(HOSTILE[:12])}")
    assert "\n" not in turn_summary(done, "ab\ncd")

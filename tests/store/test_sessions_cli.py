"""``navi-core sessions list`` / ``show``, run as a real command in a subprocess."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest
from storekit import child_env
from terminal_check import HOSTILE, leaks

from navi_core.conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
    UserMessage,
    WireIdentity,
)
from navi_core.store import SessionStore, SQLiteStore

WIRE = WireIdentity("openai_chat", "http://127.0.0.1:11434/v1", "qwen2.5")
LONG = "Please read every file\nin the repository and then " + "summarise it " * 10
TINY_PNG = base64.b64encode(b"\x89PNG\r").decode()  # 5 bytes, padded: "iVBORw0="


def _cli(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "navi_core", "sessions", *args],
        capture_output=True,
        text=True,
        env=env or child_env(),
        timeout=60,
    )


def _fill(store: SessionStore) -> tuple[str, str]:
    """An old short session and a newer one with a tool turn and a compaction."""
    old = store.create().id
    answer = Message("assistant", (Text("Done."),), stop_reason="end_turn", wire=WIRE)
    store.append(old, [UserMessage(LONG), answer])
    sid = store.create().id
    turn = [
        UserMessage("What does a.txt say?"),
        Message(
            "assistant",
            (
                Thinking("need the file"),
                ToolUse("call_7", "read_file", '{"path": "a.txt"}'),
            ),
            Usage(120, 30, 64, 0, 8),
            "tool_use",
            WIRE,
        ),
        Message(
            "user",
            (
                ToolResult("call_7", (TextPart("alpha\nbeta"),)),
                ToolResult(
                    "call_8", (MediaPart("image/png", TINY_PNG),), is_error=True
                ),
            ),
        ),
        Message(
            "assistant",
            (Text("The file says alpha."),),
            Usage(200, 9),
            "end_turn",
            WIRE,
        ),
    ]
    store.append(sid, turn)
    summary = Message("user", (CompactionSummary("read a.txt: alpha"),))
    store.new_window(sid, [summary, UserMessage("And b.txt?"), turn[-1]])
    return old, sid


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "navi.db"
    with SQLiteStore(path) as store:
        old, sid = _fill(store)
    return path, old, sid


def test_list_shows_sessions_newest_first(db: tuple[Path, str, str]) -> None:
    path, old, sid = db
    result = _cli("list", "--db", str(path))
    assert result.returncode == 0, result.stderr
    header, first, second = result.stdout.splitlines()
    assert header.split() == ["ID", "MODIFIED", "MSGS", "MODEL", "LAST", "PROMPT"]
    assert first.startswith(sid) and second.startswith(old)
    assert " 7  qwen2.5  And b.txt?" in first  # every window counts: 4 + 3
    assert "Please read every file in the repository" in second  # on one line
    assert second.endswith("…") and len(second) < 150


def _env(**variables: str) -> dict[str, str]:
    env = child_env()
    env.pop("NAVI_DB", None)
    env.pop("NAVI_POSTGRES_DSN", None)
    env.update(variables)
    return env


# nothing listens on port 9: the command fails if it opens this server
UNREACHABLE_DSN = "postgresql://navi@127.0.0.1:9/navi?connect_timeout=2"


def test_list_reads_navi_db_from_the_environment(
    db: tuple[Path, str, str], tmp_path: Path
) -> None:
    path, _, sid = db
    result = _cli("list", env=_env(NAVI_DB=str(path)))
    assert result.returncode == 0, result.stderr
    assert sid in result.stdout
    # an explicit --db wins over both variables
    other = tmp_path / "other.db"
    for env in (
        _env(NAVI_DB=str(other)),
        _env(NAVI_DB=str(other), NAVI_POSTGRES_DSN=UNREACHABLE_DSN),
        _env(NAVI_POSTGRES_DSN=UNREACHABLE_DSN),
    ):
        result = _cli("list", "--db", str(path), env=env)
        assert result.returncode == 0, result.stderr
        assert sid in result.stdout
    assert not other.exists()


def test_navi_postgres_dsn_wins_over_navi_db(db: tuple[Path, str, str]) -> None:
    path, _, _ = db
    env = _env(NAVI_DB=str(path), NAVI_POSTGRES_DSN=UNREACHABLE_DSN)
    result = _cli("list", env=env)
    assert result.returncode == 1
    assert result.stdout == "" and result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_list_of_an_empty_database(tmp_path: Path) -> None:
    result = _cli("list", "--db", str(tmp_path / "empty.db"))
    assert (result.returncode, result.stdout) == (0, "no sessions\n")


def test_show_prints_the_latest_window(db: tuple[Path, str, str]) -> None:
    path, _, sid = db
    result = _cli("show", sid[:8], "--db", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"session {sid}\n")
    assert "4 earlier messages were compacted, --all shows them" in out
    assert "read a.txt: alpha" in out and "The file says alpha." in out
    assert "read_file" not in out and "=====" not in out


def test_show_all_prints_every_window_with_a_separator(
    db: tuple[Path, str, str],
) -> None:
    path, _, sid = db
    result = _cli("show", sid, "--all", "--db", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    first, second = out.split("===== compaction: window 2 of 2 =====")
    assert "===== start: window 1 of 2 =====" in first
    assert "[user]\n    What does a.txt say?" in first
    assert (
        "[assistant] qwen2.5 · tool_use · tokens: 120 in, 30 out, cache 64 read"
        in first
    )
    # blocks read as in the summary request's transcript (navi_core.compaction._transcript)
    assert "    (thinking) need the file" in first
    assert '    [tool call read_file id=call_7] {"path": "a.txt"}' in first
    assert (
        "[tool results]\n    [tool result read_file id=call_7]\n    alpha\n    beta"
        in first
    )
    assert (
        "    [tool result unknown tool id=call_8 (error)]\n"
        "    [image: image/png, 5 bytes]"
    ) in first
    assert TINY_PNG not in out
    assert "[summary of the earlier conversation]\n    read a.txt: alpha" in second
    assert "The file says alpha." in second


@pytest.mark.parametrize("target", ["nope", ""])
def test_show_unknown_session_is_an_error(
    db: tuple[Path, str, str], target: str
) -> None:
    path, _, _ = db
    result = _cli("show", target, "--db", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: no session matches")


def test_corrupt_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    path.write_bytes(b"\x00garbage" * 512)
    result = _cli("list", "--db", str(path))
    assert result.returncode == 1
    assert "broken.db" in result.stderr and "not a database" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.postgres
def test_list_and_show_on_postgres(pg_dsn: str, tmp_path: Path) -> None:
    from navi_core.store.postgres import PostgresStore

    with PostgresStore(pg_dsn) as store:
        old, sid = _fill(store)
    sqlite = tmp_path / "unused.db"
    # --postgres wins over --db and over $NAVI_DB
    result = _cli(
        "list", "--postgres", pg_dsn, "--db", str(sqlite), env=_env(NAVI_DB=str(sqlite))
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith(sid) and lines[2].startswith(old)
    assert not sqlite.exists()
    env = child_env()
    env["NAVI_POSTGRES_DSN"] = pg_dsn
    result = _cli("show", sid, "--all", env=env)
    assert result.returncode == 0, result.stderr
    assert "===== compaction: window 2 of 2 =====" in result.stdout


def test_list_and_show_print_stored_escape_sequences_inert(tmp_path: Path) -> None:
    """What a model, a tool or a server once said is stored as sent; reading the
    session later must not hand its escape sequences to the terminal."""
    path = tmp_path / "navi.db"
    wire = WireIdentity("openai_chat", "http://127.0.0.1:9/v1", "m\x1b]0;model\x07")
    with SQLiteStore(path) as store:
        sid = store.create().id
        store.append(
            sid,
            [
                UserMessage(f"look at {HOSTILE}"),
                Message(
                    "assistant",
                    (
                        Thinking(HOSTILE),
                        Text(HOSTILE),
                        ToolUse("c\x1b[2J", "evil\x1b]0;t\x07", '{"p": "\\u001b[2J"}'),
                    ),
                    Usage(1, 1),
                    "tool_use\x1b[2J",
                    wire,
                ),
                Message("user", (ToolResult("c\x1b[2J", (TextPart(HOSTILE),)),)),
            ],
        )
    listing = _cli("list", "--db", str(path))
    assert listing.returncode == 0, listing.stderr
    assert leaks(listing.stdout) == [], listing.stdout
    assert "m␛]0;model␇" in listing.stdout and "look at A␛]52;c" in listing.stdout
    shown = _cli("show", sid, "--db", str(path))
    assert shown.returncode == 0, shown.stderr
    assert leaks(shown.stdout) == [], shown.stdout
    assert "A␛]52;c;SGVsbG8=␇B" in shown.stdout
    assert "[tool call evil␛]0;t␇ id=c␛[2J]" in shown.stdout

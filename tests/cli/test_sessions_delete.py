"""``navi-core sessions delete`` and ``show latest``, and the default store in the user's data directory,
run as real commands in subprocesses on real SQLite files."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import navi_core
from navi_core.cli.sessions import render_listing
from navi_core.conversation import Message, Text, UserMessage, WireIdentity
from navi_core.store import SQLiteStore

WIRE = WireIdentity("openai_chat", "http://127.0.0.1:9/v1", "m")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    root = str(Path(navi_core.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    for name in ("NAVI_DB", "NAVI_POSTGRES_DSN"):
        env.pop(name, None)
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


def _navi(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        capture_output=True,
        text=True,
        cwd=work,
        env=_env(tmp_path, **extra),
        timeout=60,
    )


def _session(store: SQLiteStore, prompt: str, session_id: str | None = None) -> str:
    sid = session_id or store.create().id
    store.append(
        sid,
        [UserMessage(prompt), Message("assistant", (Text("ok"),), wire=WIRE)],
    )
    return sid


def test_sessions_live_in_the_user_data_directory_by_default(tmp_path: Path) -> None:
    result = _navi(tmp_path, "sessions", "list")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no sessions\n"
    default = tmp_path / "data" / "navi-core" / "navi.db"
    assert default.is_file()  # created, directory and all, on first use
    assert not list((tmp_path / "work").iterdir())  # nothing in the working directory
    with SQLiteStore(default) as store:
        sid = _session(store, "kept in the data directory")
    listed = _navi(tmp_path, "sessions", "list")
    assert sid in listed.stdout and "kept in the data directory" in listed.stdout
    # NAVI_DB and --db still choose another file
    other = tmp_path / "other.db"
    assert sid not in _navi(tmp_path, "sessions", "list", NAVI_DB=str(other)).stdout
    assert other.is_file()
    assert sid not in _navi(tmp_path, "sessions", "list", "--db", str(other)).stdout


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        ids = [_session(store, f"prompt {n}") for n in range(3)]
    return path, ids


def test_delete_by_prefix_removes_only_that_session(
    tmp_path: Path, db: tuple[Path, list[str]]
) -> None:
    path, ids = db
    result = _navi(tmp_path, "sessions", "delete", ids[1][:10], "--db", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"deleted session {ids[1]} (2 messages)\n"
    with SQLiteStore(path) as store:
        assert sorted(i.id for i in store.list()) == sorted([ids[0], ids[2]])
    again = _navi(tmp_path, "sessions", "delete", ids[1], "--db", str(path))
    assert again.returncode == 1
    assert again.stderr == f"error: no session matches {ids[1]!r}\n"


def test_an_ambiguous_prefix_lists_the_matches_and_deletes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        # ids are hex: of 17 sessions, two share their first character
        ids = [_session(store, f"prompt {n}") for n in range(17)]
    firsts = [i[0] for i in ids]
    prefix = next(c for c in firsts if firsts.count(c) > 1)
    matches = [i for i in ids if i.startswith(prefix)]
    result = _navi(tmp_path, "sessions", "delete", prefix, "--db", str(path))
    assert result.returncode == 1
    first, header, *rows = result.stderr.splitlines()
    assert first == (
        f"error: {prefix!r} matches {len(matches)} sessions; "
        "give more characters of one of them:"
    )
    assert header.split()[0] == "ID"
    assert sorted(r.split()[0] for r in rows) == sorted(matches)
    assert all("prompt " in r for r in rows)
    with SQLiteStore(path) as store:
        assert len(store.list()) == 17


def test_a_session_being_driven_is_not_deleted(
    tmp_path: Path, db: tuple[Path, list[str]]
) -> None:
    path, ids = db
    with SQLiteStore(path) as store:
        lock = store.lock(ids[0])
        try:
            result = _navi(tmp_path, "sessions", "delete", ids[0], "--db", str(path))
        finally:
            lock.release()
        assert result.returncode == 1
        assert "driven by another agent" in result.stderr
        assert store.get(ids[0]).message_count == 2


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_run_the_model_never_answered_is_kept_but_not_listed(
    tmp_path: Path, db: tuple[Path, list[str]]
) -> None:
    path, ids = db
    port = _dead_port()
    run = _navi(
        tmp_path,
        *("run", "are you there?", "--model", "m", "--db", str(path)),
        *("--base-url", f"http://127.0.0.1:{port}/v1?key=sk-not-shown-123"),
    )
    assert run.returncode == 1
    assert f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions" in (
        run.stderr
    )
    assert "sk-not-shown-123" not in run.stderr
    listed = _navi(tmp_path, "sessions", "list", "--db", str(path))
    assert listed.returncode == 0, listed.stderr
    assert "are you there?" not in listed.stdout
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()[1:-1]) == (
        sorted(ids)
    )
    assert listed.stdout.splitlines()[-1] == (
        "(1 session with a prompt the model never answered not shown: --all lists them)"
    )
    every = _navi(tmp_path, "sessions", "list", "--all", "--db", str(path))
    assert "are you there?" in every.stdout
    with SQLiteStore(path) as store:  # the committed prompt is kept
        (failed,) = [i for i in store.list() if i.id not in ids]
        assert [m.text for m in store.load(failed.id).messages] == ["are you there?"]


def test_sessions_show_latest_shows_the_most_recently_used(tmp_path: Path) -> None:
    """``latest`` means what it means to ``run --session latest``."""
    db = tmp_path / "s.db"
    assert _navi(tmp_path, "sessions", "show", "latest", "--db", str(db)).stderr == (
        "error: there is no session yet\n"
    )
    store = SQLiteStore(db)
    try:
        older = _session(store, "the older prompt")
        newer = _session(store, "the newer prompt")
        _session(store, "the older prompt, again", older)  # used last
    finally:
        store.close()
    result = _navi(tmp_path, "sessions", "show", "latest", "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"session {older}\n")
    assert "the older prompt, again" in result.stdout
    assert newer not in result.stdout


def test_a_listing_fits_the_width_it_is_given(tmp_path: Path) -> None:
    """The chat's ``/sessions`` cuts the last prompt to the terminal's width; the
    command's listing keeps its own width."""
    store = SQLiteStore(tmp_path / "s.db")
    try:
        _session(store, "What is in the workspace? " * 8)
        infos = store.list()
    finally:
        store.close()
    for width in (80, 100, 120):
        rows = render_listing(infos, width).splitlines()
        assert all(len(row) <= width for row in rows[1:]), rows
        assert rows[1].endswith("…")
    wide = render_listing(infos).splitlines()[1]
    assert len(wide) > 100 and wide.endswith("…")

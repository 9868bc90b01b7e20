"""SQLite session locks: free after ``release()`` even with a forked child, and no
lock file left behind.

Before the fix ``release`` closed the descriptor without ``LOCK_UN``, so a forked child
that still held it kept the session locked after the parent's ``close()``; and every
session ever driven left a file under ``<db>.locks/``.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import time
import warnings
from pathlib import Path

import pytest

from navi_core import Agent, Scripted, SessionBusy, Text
from navi_core.store.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock and fork")


def _fork() -> int:
    """``os.fork()``; Python 3.12+ warns when other threads exist (none run here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _fork_sleeper() -> int:
    """A child that inherits every descriptor and waits to be killed."""
    pid = _fork()
    if pid == 0:  # pragma: no cover - the child
        time.sleep(30)
        os._exit(0)
    return pid


def _reap(pid: int) -> None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)


def test_closed_agent_frees_the_session_while_a_forked_child_lives(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "navi.db") as store:
        agent = Agent(Scripted([[Text("hi")]]), store=store)
        sid = agent.session_id
        child = _fork_sleeper()
        try:
            agent.close()
            with Agent(Scripted([[Text("again")]]), store=store, session=sid) as other:
                assert other.session_id == sid
        finally:
            _reap(child)


def test_a_forked_child_exiting_does_not_free_the_parents_lock(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "navi.db") as store:
        sid = store.create().id
        lock = store.lock(sid)
        pid = _fork()
        if pid == 0:  # pragma: no cover - the child releases its inherited copy
            lock.release()
            os._exit(0)
        os.waitpid(pid, 0)
        with pytest.raises(SessionBusy):
            store.lock(sid)
        assert (tmp_path / "navi.db.locks" / f"{sid}.lock").exists()
        lock.release()
        store.lock(sid).release()


def test_lock_files_are_removed(tmp_path: Path) -> None:
    locks = tmp_path / "navi.db.locks"
    with SQLiteStore(tmp_path / "navi.db") as store:
        ids = []
        for _ in range(40):
            with Agent(Scripted([[Text("hi")]]), store=store) as agent:
                ids.append(agent.session_id)
                assert [p.name for p in locks.iterdir()] == [f"{agent.session_id}.lock"]
        assert list(locks.iterdir()) == []
        # every session can be driven again, and again leaves nothing
        for sid in ids[:5]:
            store.lock(sid).release()
        assert list(locks.iterdir()) == []


def test_a_waiter_that_opened_the_old_file_does_not_share_the_session(
    tmp_path: Path,
) -> None:
    """The holder deletes the file before unlocking: a lock taken on the deleted
    file is given up and the path is locked again."""
    with SQLiteStore(tmp_path / "navi.db") as store:
        sid = store.create().id
        path = tmp_path / "navi.db.locks" / f"{sid}.lock"
        first = store.lock(sid)
        stale = os.open(path, os.O_RDWR)  # what a waiter opened before the release
        try:
            first.release()
            second = store.lock(sid)  # a new file at the path
            assert path.exists()
            fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the old inode: free
            assert os.fstat(stale).st_ino != os.stat(path).st_ino
            with pytest.raises(SessionBusy):
                store.lock(sid)
            second.release()
        finally:
            os.close(stale)


@pytest.mark.parametrize(
    "hostile", ["../victim", "../../victim", "a/b", "..", "x\x00y"]
)
def test_an_id_from_another_database_file_cannot_name_a_lock_outside_the_folder(
    tmp_path: Path, hostile: str
) -> None:
    """A database file from elsewhere may hold any text as a session id: its lock
    file stays inside ``<db>.locks``, it still excludes, and nothing outside that
    folder is created or deleted."""
    db = tmp_path / "dir" / "navi.db"
    db.parent.mkdir()
    with SQLiteStore(db) as store:
        sid = store.create().id
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE navi_sessions SET id = ? WHERE id = ?", (hostile, sid))
    conn.close()
    outside = [tmp_path / "victim.lock", tmp_path / "dir" / "victim.lock"]
    for path in outside:
        path.write_text("someone else's file\n")
    before = sorted(p for p in tmp_path.rglob("*") if "navi.db.locks" not in str(p))
    with SQLiteStore(db) as store:
        lock = store.lock(hostile)
        (held,) = (tmp_path / "dir" / "navi.db.locks").iterdir()
        assert held.name.startswith("id-") and held.name.endswith(".lock")
        with pytest.raises(SessionBusy):
            store.lock(hostile)
        lock.release()
        store.lock(hostile).release()
    after = sorted(p for p in tmp_path.rglob("*") if "navi.db.locks" not in str(p))
    assert after == before
    assert all(path.read_text() == "someone else's file\n" for path in outside)

"""SQLiteStore specifics: pragmas, migrations, clear errors, atomicity, process locks."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from storekit import EVERY_BLOCK, check_text_that_is_not_unicode, child_env

from navi_core.conversation import Message, Text, UserMessage, WireIdentity
from navi_core.errors import SessionBusy, SessionError
from navi_core.store import SQLiteStore

#: the schema version this navi_core writes
V = len(SQLiteStore.MIGRATIONS)


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_file_is_wal_with_schema_v1(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    with SQLiteStore(path) as store:
        store.create()
        raw = _raw(path)
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert raw.execute("PRAGMA user_version").fetchone() == (V,)
        assert V == 3  # v1 sessions and messages, v2 held approvals, v3 bound
        raw.close()
    assert repr(store) == f"SQLiteStore({str(path)!r})"


def _add_tags(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE navi_sessions ADD COLUMN tags TEXT NOT NULL DEFAULT ''")
    conn.execute("UPDATE navi_sessions SET tags = 'migrated'")


class _StoreV2(SQLiteStore):
    MIGRATIONS = (*SQLiteStore.MIGRATIONS, _add_tags)


def test_migration_to_a_later_version_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    with SQLiteStore(path) as v1:
        sid = v1.create().id
        v1.append(sid, [UserMessage("before"), EVERY_BLOCK])
    with _StoreV2(path) as v2:
        assert v2.load(sid).messages == [UserMessage("before"), EVERY_BLOCK]
        v2.append(sid, [UserMessage("after")])
    with _StoreV2(path):  # at v2 already: the step does not run twice
        pass
    raw = _raw(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (V + 1,)
    assert raw.execute("SELECT tags FROM navi_sessions").fetchall() == [("migrated",)]
    raw.close()
    with pytest.raises(
        SessionError, match=rf"schema v{V + 1}, newer than this navi_core knows"
    ):
        SQLiteStore(path)


def test_a_failing_migration_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    SQLiteStore(path).close()

    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE navi_extra (x)")
        raise RuntimeError("step failed")

    class Broken(SQLiteStore):
        MIGRATIONS = (*SQLiteStore.MIGRATIONS, half_done)

    with pytest.raises(RuntimeError, match="step failed"):
        Broken(path)
    raw = _raw(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (V,)
    tables = {
        r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    assert "navi_extra" not in tables
    raw.close()


def test_corrupt_file_is_a_session_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    junk = b"this is not a database " * 200
    path.write_bytes(junk)
    with pytest.raises(SessionError, match=r"notes\.db.*not a database") as info:
        SQLiteStore(path)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    assert path.read_bytes() == junk  # left as it was


def test_a_damaged_row_is_a_clear_error_and_spares_other_sessions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "navi.db"
    store = SQLiteStore(path)
    damaged, intact = store.create().id, store.create().id
    store.append(damaged, [UserMessage("soon garbage")])
    store.append(intact, [UserMessage("fine")])
    raw = _raw(path)
    raw.execute(
        'UPDATE navi_messages SET body = \'{"v": 1, "ro\' WHERE session_id = ?',
        (damaged,),
    )
    raw.execute(
        "UPDATE navi_messages SET body = json_set(body, '$.v', 99) WHERE session_id = ?",
        (intact,),
    )
    raw.close()
    with pytest.raises(SessionError, match=r"navi\.db.*not valid JSON"):
        store.load(damaged)
    with pytest.raises(SessionError, match="v99 is newer than this navi_core reads"):
        store.history(intact)
    assert store.get(damaged).message_count == 1  # listing still works
    store.close()


def test_unopenable_path_is_a_session_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="missing-dir"):
        SQLiteStore(tmp_path / "missing-dir" / "navi.db")


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="MemoryStore"):
        SQLiteStore(":memory:")
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStore(tmp_path / "x.db", synchronous="OFF")  # type: ignore[arg-type]


def test_closed_store_says_so(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "navi.db")
    store.close()
    with pytest.raises(SessionError, match="closed"):
        store.list()


def test_failure_inside_the_transaction_rolls_back_the_whole_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "navi.db"
    store = SQLiteStore(path)
    sid = store.create().id
    store.append(sid, [UserMessage("kept")])
    raw = _raw(path)
    raw.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON navi_messages "
        "WHEN NEW.body LIKE '%boom%' BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(SessionError, match="refused"):
        store.append(sid, [UserMessage("first of two"), UserMessage("boom")])
    with pytest.raises(SessionError, match="refused"):
        store.new_window(sid, [UserMessage("boom")])
    assert store.load(sid).messages == [UserMessage("kept")]
    info = store.get(sid)
    assert (info.message_count, info.last_user_message) == (1, "kept")
    raw.close()
    store.close()


def test_raw_file_holds_no_key(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    key = "sk-live-9f8e7d6c5b4a39281706"
    wire = WireIdentity(
        "openai_chat", f"https://me:{key}@api.example/v1?api_key={key}", "m"
    )
    store = SQLiteStore(path)
    sid = store.create().id
    store.append(
        sid, [UserMessage("hi"), Message("assistant", (Text("yo"),), wire=wire)]
    )
    data = path.read_bytes() + Path(f"{path}-wal").read_bytes()
    assert b"api.example" in data  # the row is there ...
    assert key.encode() not in data  # ... without the key
    store.close()


def test_text_that_is_not_unicode_is_stored_with_replacement_characters(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "navi.db") as store:
        check_text_that_is_not_unicode(store)


def test_every_name_of_one_file_shares_its_session_locks(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    path = real_dir / "navi.db"
    store = SQLiteStore(path)
    sid = store.create().id
    (tmp_path / "alias.db").symlink_to(path)
    (tmp_path / "linked").symlink_to(real_dir, target_is_directory=True)
    aliases = [
        SQLiteStore(tmp_path / "alias.db"),
        SQLiteStore(tmp_path / "linked" / "navi.db"),
        SQLiteStore(Path(os.path.relpath(path))),
    ]
    try:
        with store.lock(sid):
            for alias in aliases:
                with pytest.raises(SessionBusy, match=sid):
                    alias.lock(sid)
        for alias in aliases:
            alias.lock(sid).release()
    finally:
        for alias in aliases:
            alias.close()
        store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias.db", "linked", "real"]


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from navi_core.store import SQLiteStore
    lock = SQLiteStore(sys.argv[1]).lock(sys.argv[2])
    print("locked", flush=True)
    time.sleep(60)
    """
)


def test_lock_is_exclusive_across_processes_and_freed_when_holder_dies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "navi.db"
    store = SQLiteStore(path)
    sid = store.create().id
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), sid],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "locked\n"
        with pytest.raises(SessionBusy, match=sid):
            store.lock(sid)
        store.append(sid, [UserMessage("reading and writing still work")])
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    store.lock(sid).release()
    store.close()


def _open_new_files(
    folder: str,
    rounds: int,
    barrier: Any,
    errors: Any,  # multiprocessing proxies
) -> None:
    """In a child process: each round, with the other children, open one new store
    and one new control file (as serve workers starting together do)."""
    from navi_core.serve.control import SQLiteControl

    for r in range(rounds):
        barrier.wait(60)
        try:
            SQLiteStore(Path(folder) / f"s{r}.db").close()
            SQLiteControl(str(Path(folder) / f"c{r}.db"))
        except Exception as exc:  # reported to the parent, which fails
            errors.put(f"round {r}: {type(exc).__name__}: {exc}")


def test_processes_opening_one_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    # leaving rollback mode for WAL answered "database is locked" at once to ~5 % of
    # the opens of a new file by three processes, whatever the busy timeout
    ctx = multiprocessing.get_context("spawn")
    children, rounds = 3, 40
    barrier, errors = ctx.Barrier(children), ctx.Queue()
    procs = [
        ctx.Process(
            target=_open_new_files, args=(str(tmp_path), rounds, barrier, errors)
        )
        for _ in range(children)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * children
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    for r in range(rounds):
        raw = _raw(tmp_path / f"s{r}.db")
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        raw.close()

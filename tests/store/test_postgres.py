"""PostgresStore specifics: migrations, clear errors, atomicity, advisory locks."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from storekit import EVERY_BLOCK, check_text_that_is_not_unicode, child_env

from navi_core.conversation import Message, Text, UserMessage, WireIdentity
from navi_core.errors import SessionBusy, SessionError

pytest.importorskip("psycopg")
import psycopg

from navi_core.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresStore]:
    with PostgresStore(pg_dsn, max_size=2) as s:
        yield s


def _sql(dsn: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query)
        return cur.fetchall() if cur.description else []


def _add_tags(conn: psycopg.Connection[object]) -> None:
    conn.execute("ALTER TABLE navi_sessions ADD COLUMN tags text NOT NULL DEFAULT ''")
    conn.execute("UPDATE navi_sessions SET tags = 'migrated'")


class _StoreV2(PostgresStore):
    MIGRATIONS = (*PostgresStore.MIGRATIONS, _add_tags)


def test_migrations_run_once_and_keep_data(pg_dsn: str) -> None:
    with PostgresStore(pg_dsn) as v1:
        sid = v1.create().id
        v1.append(sid, [UserMessage("before"), EVERY_BLOCK])
    v = len(PostgresStore.MIGRATIONS)
    assert _sql(pg_dsn, "SELECT version FROM navi_schema") == [(v,)]
    with _StoreV2(pg_dsn) as v2:
        assert v2.load(sid).messages == [UserMessage("before"), EVERY_BLOCK]
    with _StoreV2(pg_dsn):
        pass
    assert _sql(pg_dsn, "SELECT version FROM navi_schema") == [(v + 1,)]
    assert _sql(pg_dsn, "SELECT tags FROM navi_sessions") == [("migrated",)]
    with pytest.raises(SessionError, match=f"schema v{v + 1}, newer than this"):
        PostgresStore(pg_dsn)


def test_a_failing_migration_changes_nothing(pg_dsn: str) -> None:
    PostgresStore(pg_dsn).close()

    def half_done(conn: psycopg.Connection[object]) -> None:
        conn.execute("CREATE TABLE navi_extra (x int)")
        raise RuntimeError("step failed")

    class Broken(PostgresStore):
        MIGRATIONS = (*PostgresStore.MIGRATIONS, half_done)

    with pytest.raises(RuntimeError, match="step failed"):
        Broken(pg_dsn)
    assert _sql(pg_dsn, "SELECT version FROM navi_schema") == [
        (len(PostgresStore.MIGRATIONS),)
    ]
    assert _sql(pg_dsn, "SELECT to_regclass('navi_extra')") == [(None,)]


def test_processes_opening_together_migrate_once(pg_dsn: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def open_close() -> None:
        barrier.wait()
        try:
            PostgresStore(pg_dsn, min_size=1, max_size=1).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_close) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _sql(pg_dsn, "SELECT version FROM navi_schema") == [
        (len(PostgresStore.MIGRATIONS),)
    ]


def test_failure_inside_the_transaction_rolls_back_the_whole_append(
    store: PostgresStore, pg_dsn: str
) -> None:
    sid = store.create().id
    store.append(sid, [UserMessage("kept")])
    _sql(
        pg_dsn,
        """CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN IF NEW.body::text LIKE '%boom%' THEN RAISE EXCEPTION 'refused'; END IF;
           RETURN NEW; END $$;
           CREATE TRIGGER refuse BEFORE INSERT ON navi_messages
           FOR EACH ROW EXECUTE FUNCTION refuse();""",
    )
    with pytest.raises(SessionError, match="refused"):
        store.append(sid, [UserMessage("first of two"), UserMessage("boom")])
    with pytest.raises(SessionError, match="refused"):
        store.new_window(sid, [UserMessage("boom")])
    assert store.load(sid).messages == [UserMessage("kept")]
    info = store.get(sid)
    assert (info.message_count, info.last_user_message) == (1, "kept")


def test_bodies_are_jsonb_except_when_jsonb_cannot_hold_them(
    store: PostgresStore, pg_dsn: str
) -> None:
    sid = store.create().id
    store.append(sid, [UserMessage("plain"), EVERY_BLOCK])  # EVERY_BLOCK holds a NUL
    rows = _sql(
        pg_dsn,
        "SELECT body ->> 'role', body_text IS NULL FROM navi_messages ORDER BY seq",
    )
    assert rows == [("user", True), (None, False)]
    assert store.load(sid).messages == [UserMessage("plain"), EVERY_BLOCK]


def test_text_that_is_not_unicode_is_stored_with_replacement_characters(
    store: PostgresStore,
) -> None:
    check_text_that_is_not_unicode(store)


def test_no_column_holds_a_key(store: PostgresStore, pg_dsn: str) -> None:
    key = "sk-live-9f8e7d6c5b4a39281706"
    wire = WireIdentity(
        "openai_chat", f"https://me:{key}@api.example/v1?key={key}", "m"
    )
    sid = store.create().id
    store.append(
        sid, [UserMessage("hi"), Message("assistant", (Text("yo"),), wire=wire)]
    )
    dump = "\n".join(
        str(row)
        for table in ("navi_sessions", "navi_messages", "navi_schema")
        for row in _sql(pg_dsn, f"SELECT t::text FROM {table} t")
    )
    assert "api.example" in dump
    assert key not in dump


def _chain(exc: BaseException | None) -> str:
    """Every message in an exception chain, as a traceback would show them."""
    text = []
    while exc is not None:
        text.append(f"{exc!s} {exc!r}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(text)


def test_password_is_never_shown(pg_dsn: str) -> None:
    secret = "pw-do-not-show-4711"
    from psycopg.conninfo import make_conninfo

    with PostgresStore(make_conninfo(pg_dsn, password=secret)) as store:
        assert secret not in repr(store)
        sid = store.create().id
        # A server error that quotes a value it was given, here the password.
        _sql(
            pg_dsn,
            f"""CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN RAISE EXCEPTION 'refused %', '{secret}'; END $$;
               CREATE TRIGGER refuse BEFORE INSERT ON navi_messages
               FOR EACH ROW EXECUTE FUNCTION refuse();""",
        )
        with pytest.raises(SessionError, match=r"refused \*\*\*") as info:
            store.append(sid, [UserMessage("hi")])
        assert str(info.value).startswith("PostgreSQL ")
        assert isinstance(info.value.__cause__, psycopg.Error)
        assert secret not in _chain(info.value)
    with pytest.raises(SessionError, match=r"\*\*\*") as info:
        # libpq quotes the option value it cannot parse: here, the password itself
        PostgresStore(f"host=127.0.0.1 port=1 sslmode={secret} password={secret}")
    assert secret not in _chain(info.value)
    with pytest.raises(SessionError, match="invalid PostgreSQL DSN") as info:
        PostgresStore(f"host=127.0.0.1 password={secret} {secret}")
    assert secret not in _chain(info.value)


def test_lock_is_freed_when_its_connection_dies(store: PostgresStore) -> None:
    sid = store.create().id
    lock = store.lock(sid)
    with pytest.raises(SessionBusy, match=sid):
        store.lock(sid)
    backend = lock._conn.info.backend_pid
    with store._tx() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
    store.lock(sid).release()
    lock.release()  # its connection is gone; releasing is still fine


_HOLDER = """
import sys, time
from navi_core.store.postgres import PostgresStore
lock = PostgresStore(sys.argv[1]).lock(sys.argv[2])
print("locked", flush=True)
time.sleep(60)
"""


def test_lock_is_freed_when_the_holding_process_is_killed(
    store: PostgresStore, pg_dsn: str, tmp_path: Path
) -> None:
    sid = store.create().id
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, pg_dsn, sid],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "locked\n"
        with pytest.raises(SessionBusy):
            store.lock(sid)
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    # The server notices the dropped socket at once; allow it a moment to clean up.
    for _ in range(50):
        try:
            store.lock(sid).release()
            break
        except SessionBusy:
            threading.Event().wait(0.1)
    else:
        pytest.fail("the lock outlived its holder")


def test_missing_dsn_fails_under_ci() -> None:
    env = child_env()
    env.pop("NAVI_TEST_POSTGRES_DSN", None)
    env["CI"] = "true"
    here = Path(__file__).parent
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{here / 'test_contract.py'}::test_new_session_is_empty_and_listed",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=here,
    )
    assert result.returncode == 1, result.stdout
    assert "NAVI_TEST_POSTGRES_DSN is not" in result.stdout

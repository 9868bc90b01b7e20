"""The suite's check for SQLite connections a test leaves open (see sqlite_watch.py):
it names the line that opened each one, on every Python, whether the connection is
still referenced, held by a reference cycle or already collected."""

from __future__ import annotations

import gc
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from sqlite_watch import SQLiteWatch

from navi_core.store.sqlite import SQLiteStore

HERE = "tests/test_sqlite_watch.py"


def line() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def test_a_store_left_open_is_named_by_the_line_that_opened_it(
    tmp_path: Path,
) -> None:
    with SQLiteWatch() as watch:
        store, at = SQLiteStore(tmp_path / "navi.db"), line()
        (left,) = watch.left_open()
        store.close()
        assert watch.left_open() == []
    assert left.startswith(f"{HERE}:{at} (via navi_core/store/sqlite.py:")


def test_a_connection_in_a_cycle_or_collected_unclosed_is_reported(
    tmp_path: Path,
) -> None:
    with SQLiteWatch() as watch:
        held: list[object] = [sqlite3.connect(tmp_path / "a.db"), line()]
        held.append(held)  # only the collector frees it
        cycle = f"{HERE}:{held[1]}"
        del held
        assert watch.left_open() == [cycle]
        gc.collect()  # collected unclosed: still reported, and closed without a warning
        assert watch.left_open() == [cycle]
        dropped, at = sqlite3.connect(tmp_path / "b.db"), line()
        del dropped
        assert watch.left_open() == [cycle, f"{HERE}:{at}"]


def test_closed_connections_and_a_callers_own_class_are_not_reported(
    tmp_path: Path,
) -> None:
    before = sqlite3.connect
    with SQLiteWatch() as watch:
        with SQLiteStore(tmp_path / "navi.db"):
            pass
        own = sqlite3.connect(tmp_path / "own.db", factory=sqlite3.Connection)
        assert type(own) is sqlite3.Connection
        own.close()
        assert watch.left_open() == []
    assert sqlite3.connect is before


def test_the_suite_fails_a_test_that_leaves_a_store_open(tmp_path: Path) -> None:
    """Through pytest with this suite's conftest, in a child process: the leak is an
    error of the test that made it, naming its line; the next test runs clean."""
    tests = Path(__file__).resolve().parent
    suite = tmp_path / "tests"
    (suite / "tools").mkdir(parents=True)
    shutil.copy(tests / "conftest.py", suite / "conftest.py")
    case = suite / "tools" / "test_leak.py"
    case.write_text(
        textwrap.dedent(
            f"""\
            from navi_core.store.sqlite import SQLiteStore

            KEEP = []

            def test_leaks():
                KEEP.append(SQLiteStore({str(tmp_path / "navi.db")!r}))

            def test_after():
                with SQLiteStore({str(tmp_path / "other.db")!r}):
                    pass
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=suite,
        env={**os.environ, "PYTHONPATH": str(tests)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 1, out
    assert "2 passed, 1 error" in out, out
    assert "ERROR tools/test_leak.py::test_leaks" in out, out
    assert f"opened at: {case}:6 (via navi_core/store/" in out, out

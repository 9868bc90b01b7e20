"""Which SQLite connections a test opened and never closed, the same on every Python.

Python 3.13 warns about a connection collected unclosed (``ResourceWarning``) and
earlier versions close it silently; a connection held by a reference cycle warns only
when a later test happens to run the collector, so the warning names the wrong test.
While a ``SQLiteWatch`` is on, every ``sqlite3.connect`` is recorded with where it was
called from, so a leak is told at the end of the test that made it.

    with SQLiteWatch() as watch:
        ...  # the test
    assert not watch.left_open()
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sysconfig
import traceback
import weakref
from collections.abc import Callable
from typing import Any

import navi_core

__all__ = ["SQLiteWatch"]

_TESTS = os.path.dirname(os.path.abspath(__file__))
#: where frames are not the test's own: navi_core and the installed libraries
_LIBRARIES = tuple(
    os.path.abspath(p) + os.sep
    for p in {
        os.path.dirname(navi_core.__file__),
        *(
            sysconfig.get_paths()[k]
            for k in ("stdlib", "platstdlib", "purelib", "platlib")
        ),
    }
)


class _Watched(sqlite3.Connection):
    """A connection that knows whether it was closed and where it was opened."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.closed = True  # until the database is open
        self.opened_at = ""
        self.dropped: list[str] | None = None
        super().__init__(*args, **kwargs)
        self.closed = False

    def close(self) -> None:
        super().close()
        self.closed = True

    def __del__(self) -> None:
        if self.closed:
            return
        if self.dropped is not None:
            self.dropped.append(self.opened_at)
        # reported once, here, not again by 3.13's warning (a connection bound to
        # another thread cannot be closed here: its warning stays)
        with contextlib.suppress(sqlite3.Error):
            self.close()


def _caller() -> str:
    """The innermost line outside navi_core and Python's own libraries (the test's),
    and the line that called ``connect``."""
    frames = [f for f in traceback.extract_stack() if f.filename != __file__]
    if not frames:
        return "<unknown>"
    direct = frames[-1]
    test = next((f for f in reversed(frames) if not _library(f.filename)), direct)
    where = f"{_short(test.filename)}:{test.lineno}"
    if test is not direct:
        where += f" (via {_short(direct.filename)}:{direct.lineno})"
    return where


def _library(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_LIBRARIES) or not os.path.isabs(filename)


def _short(filename: str) -> str:
    path = os.path.abspath(filename)
    root = os.path.dirname(_TESTS) + os.sep
    return path[len(root) :] if path.startswith(root) else path


class SQLiteWatch:
    """Records the SQLite connections opened while it is on (a context manager)."""

    def __init__(self) -> None:
        self._opened: weakref.WeakSet[_Watched] = weakref.WeakSet()
        self._dropped: list[str] = []
        self._saved: Callable[..., sqlite3.Connection] | None = None

    def __enter__(self) -> SQLiteWatch:
        original: Callable[..., sqlite3.Connection] = sqlite3.connect
        self._saved = original

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            if "factory" in kwargs or len(args) > 5:  # the caller's own class
                return original(*args, **kwargs)
            conn = original(*args, factory=_Watched, **kwargs)
            assert isinstance(conn, _Watched)
            conn.opened_at = _caller()
            conn.dropped = self._dropped
            self._opened.add(conn)
            return conn

        sqlite3.connect = connect  # type: ignore[assignment]
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._saved is not None:
            sqlite3.connect = self._saved  # type: ignore[assignment]
            self._saved = None

    def left_open(self) -> list[str]:
        """Where each connection that is still open, or was collected unclosed,
        was opened."""
        still = [c.opened_at for c in list(self._opened) if not c.closed]
        return [*self._dropped, *still]

    def close_all(self) -> None:
        """Close what is still open, so one leak is reported once."""
        for conn in list(self._opened):
            if not conn.closed:
                with contextlib.suppress(sqlite3.Error):  # bound to another thread
                    conn.close()

"""A Ctrl-C that lands between SQLite's BEGIN and the code that ends the transaction.

A signal's ``KeyboardInterrupt`` surfaces when a C call returns, so it can arrive
right after ``BEGIN IMMEDIATE`` opened the write transaction. The store must roll
that transaction back: left open, every later call of the store fails and the
database stays write-locked against every other process.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from navi_core import Agent, Scripted, Text
from navi_core.store.sqlite import SQLiteStore


class _InterruptedConnection(sqlite3.Connection):
    """Raises ``KeyboardInterrupt`` once, as the next ``BEGIN IMMEDIATE`` returns
    (after it opened the transaction), when armed."""

    armed = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        cursor = super().execute(sql, *args)
        if sql == "BEGIN IMMEDIATE" and _InterruptedConnection.armed:
            _InterruptedConnection.armed = False
            raise KeyboardInterrupt
        return cursor


def test_ctrl_c_right_after_begin_leaves_no_transaction_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return real_connect(*args, factory=_InterruptedConnection, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    db = tmp_path / "navi.db"
    with SQLiteStore(db) as store:
        agent = Agent(Scripted([[Text("The answer.")]]), store=store)
        stream = agent.run("question")
        _InterruptedConnection.armed = True
        with pytest.raises(KeyboardInterrupt):
            while stream.next() is not None:
                pass
        assert not _InterruptedConnection.armed  # it fired inside the turn
        stream.close()
        agent.close()  # the store still works: no "transaction within a transaction"
        with Agent(Scripted([[Text("Again.")]]), store=store) as again:
            assert again.run("and now?").result().response == "Again."
        # another process can write the database: no write lock was left behind
        other = subprocess.run(
            [sys.executable, "-c", _OTHER_PROCESS, str(db)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.returncode == 0, other.stderr
        assert other.stdout.strip() == "written"


_OTHER_PROCESS = """
import sys
from navi_core.store.sqlite import SQLiteStore
with SQLiteStore(sys.argv[1], timeout=2) as store:
    store.create()
print("written")
"""

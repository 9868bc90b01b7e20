"""``run()`` that the store refused, then ``run()`` again: the prompt exists once.

Before the fix ``run()`` appended the prompt to the conversation before persisting it
and never took it back: the retry sent and stored the prompt twice. Now the prompt
joins the conversation only once the store accepted it. The store failure is real:
another connection holds SQLite's write lock past the store's timeout.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from faultkit import drive

from navi_core import Agent, Scripted, SessionError, Text
from navi_core.store.sqlite import SQLiteStore


def test_run_after_a_refused_run_stores_the_prompt_once(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    provider = Scripted([[Text("The answer.")]])
    with SQLiteStore(path, timeout=0.2) as store:
        agent = Agent(provider, store=store, system="Be brief.")
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(SessionError, match="locked"):
                agent.run("What is 6 x 7?")
            assert [m.role for m in agent.conversation.messages] == ["system"]
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        _, done = drive(agent.run("What is 6 x 7?"))
        assert done.response == "The answer."
        sid = agent.session_id
        agent.close()
        stored = store.load(sid).messages
    assert [(m.role, m.text) for m in stored] == [
        ("system", ""),
        ("user", "What is 6 x 7?"),
        ("assistant", "The answer."),
    ]
    # the provider saw the prompt once as well
    (request,) = provider.requests
    assert [m.text for m in request if m.role == "user"] == ["What is 6 x 7?"]


def test_buffered_messages_go_with_the_prompt(tmp_path: Path) -> None:
    """A refused run() keeps nothing; what was committed before it is stored once."""
    path = tmp_path / "navi.db"
    with SQLiteStore(path, timeout=0.2) as store:
        agent = Agent(Scripted([[Text("one")], [Text("two")]]), store=store)
        drive(agent.run("first"))
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            for _ in range(3):
                with pytest.raises(SessionError):
                    agent.run("second")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        drive(agent.run("second"))
        sid = agent.session_id
        agent.close()
        texts = [m.text for m in store.load(sid).messages]
    assert texts == ["first", "one", "second", "two"]

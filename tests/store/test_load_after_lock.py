"""``Agent.__init__`` loads the session after taking its lock, not before.

Before the fix the message count was read before the lock: a driver that wrote its
last messages in between (and then let go) left the new agent with an empty
conversation, and its next writes went on top of messages it never saw. The store
below lets another real SQLite connection write at exactly that moment.
"""

from __future__ import annotations

from pathlib import Path

from faultkit import drive

from navi_core import Agent, Message, Scripted, Text, UserMessage
from navi_core.store.sqlite import SQLiteLock, SQLiteStore


class LateWriterStore(SQLiteStore):
    """A store where another driver finishes writing just before ``lock`` is taken."""

    def __init__(self, path: Path, writer: SQLiteStore) -> None:
        super().__init__(path)
        self.writer = writer

    def lock(self, session_id: str) -> SQLiteLock:
        sid = self.get(session_id).id
        self.writer.append(
            sid,
            [
                UserMessage("Where is the config?"),
                Message("assistant", (Text("/etc"),)),
            ],
        )
        return super().lock(sid)


def test_resumed_agent_sees_what_was_written_before_its_lock(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    with SQLiteStore(path) as writer:
        sid = writer.create().id
        with LateWriterStore(path, writer) as store:
            agent = Agent(Scripted([[Text("Yes.")]]), store=store, session=sid)
            assert [m.text for m in agent.conversation.messages] == [
                "Where is the config?",
                "/etc",
            ]
            drive(agent.run("Is it readable?"))
            agent.close()
        texts = [m.text for m in writer.load(sid).messages]
    assert texts == ["Where is the config?", "/etc", "Is it readable?", "Yes."]


def test_latest_session_is_loaded_after_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    with SQLiteStore(path) as writer:
        sid = writer.create().id
        with (
            LateWriterStore(path, writer) as store,
            Agent(Scripted([]), store=store, session="latest") as agent,
        ):
            assert agent.session_id == sid
            assert len(agent.conversation.messages) == 2

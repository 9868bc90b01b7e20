"""Session and turn ids: what ``uuid.uuid4().hex`` gives, made more cheaply."""

from __future__ import annotations

import uuid

from navi_core import Agent, NullStore, Scripted, Text, TurnComplete
from navi_core.ids import new_id


def test_ids_are_version_4_uuids_in_hex_and_do_not_repeat() -> None:
    ids = [new_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for h in ids:
        u = uuid.UUID(h)
        assert (u.version, u.variant, u.hex) == (4, uuid.RFC_4122, h)


def test_turns_and_sessions_get_such_ids() -> None:
    agent = Agent(Scripted([[Text("hi")]]), store=NullStore())
    stream = agent.run("go")
    done = list(stream)[-1]
    assert isinstance(done, TurnComplete) and done.turn_id == stream.turn_id
    session_id = agent.conversation.session_id
    assert session_id is not None
    for h in (stream.turn_id, session_id):
        assert uuid.UUID(h).version == 4 and len(h) == 32

"""Session and turn ids: what ``uuid.uuid4().hex`` gives, made more cheaply."""

from __future__ import annotations

import uuid

from navi_core import Agent, NullStore, Scripted, Text, TurnComplete
from navi_core._ids import new_id


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


def test_an_id_reads_no_random_bytes_from_the_system(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``os.urandom`` is a system call that gives the GIL away: once per process."""

    def refuse(n: int) -> bytes:
        raise AssertionError("os.urandom called for an id")

    monkeypatch.setattr("os.urandom", refuse)
    assert len({new_id() for _ in range(100)}) == 100


def test_ids_look_random_bit_for_bit() -> None:
    """Every free bit is set in about half the ids: a counter in hex would fail."""
    ids = [int(new_id(), 16) for _ in range(4000)]
    fixed = {48, 49, 50, 51, 64, 65}  # from the top: the version nibble, the variant
    for bit in range(128):
        if 127 - bit in fixed:
            continue
        share = sum(i >> bit & 1 for i in ids) / len(ids)
        assert 0.43 < share < 0.57, (bit, share)


def test_a_forked_child_repeats_none_of_its_parents_ids() -> None:
    import os

    import pytest

    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, ",".join(new_id() for _ in range(50)).encode())
        finally:
            os._exit(0)
    os.close(write)
    mine = {new_id() for _ in range(50)}
    with os.fdopen(read, "rb") as f:
        theirs = set(f.read().decode().split(","))
    os.waitpid(pid, 0)
    assert len(theirs) == 50 and not mine & theirs

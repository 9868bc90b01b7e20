"""Many processes drive their own sessions on one store; nothing is lost or doubled.

Eight worker processes each drive five sessions with the offline ``Scripted``
provider, three tool calls per turn, 200 turns in all, against one SQLite file and
against PostgreSQL. Each worker interleaves its sessions, so every store sees
concurrent appends from many processes. Then: a second driver of a busy session gets
``SessionBusy`` at once, and the lock comes free when its holder is killed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from navi_core import Agent, Message, Scripted
from navi_core.errors import SessionBusy
from navi_core.store import SessionStore, SQLiteStore

sys.path.insert(0, str(Path(__file__).parent / "store"))
# tests/store is on sys.path (line above) but not on the MYPYPATH of this directory
from storekit import child_env, fresh_schema

pytestmark = pytest.mark.slow

WORKERS, SESSIONS, TURNS = 8, 5, 5  # 8 * 5 * 5 = 200 turns

_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from navi_core import Agent, Scripted, Text, ToolUse, tool

    spec, worker, sessions, turns, go = sys.argv[1:6]
    worker, sessions, turns, go = int(worker), int(sessions), int(turns), Path(go)

    def open_store():
        kind, _, where = spec.partition(":")
        if kind == "sqlite":
            from navi_core.store import SQLiteStore
            return SQLiteStore(where)
        from navi_core.store.postgres import PostgresStore
        return PostgresStore(where, max_size=2)

    @tool
    def echo(text: str) -> str:
        \"\"\"Give the text back.\"\"\"
        return "echo " + text

    def call(tag):
        return ToolUse(tag, "echo", json.dumps({"text": tag}))

    while not go.exists():
        time.sleep(0.005)
    store = open_store()
    agents = [Agent(Scripted(), tools=[echo], store=store) for _ in range(sessions)]
    for t in range(turns):
        for s, agent in enumerate(agents):
            tag = f"w{worker}s{s}t{t}"
            agent.provider.add(
                [call(tag + "a"), call(tag + "b")], [call(tag + "c")], [Text(tag + " done")]
            )
            with agent.run(tag + " go") as stream:
                for _ in stream:
                    pass
    print(json.dumps([[f"w{worker}s{s}", a.session_id] for s, a in enumerate(agents)]))
    for agent in agents:
        agent.close()
    store.close()
    """
)


def _expected(prefix: str) -> list[tuple[object, ...]]:
    """What a session driven by the worker script holds, message by message."""
    out: list[tuple[object, ...]] = []
    for t in range(TURNS):
        tag = f"{prefix}t{t}"
        out += [
            ("user", tag + " go", (), ()),
            ("assistant", "", (tag + "a", tag + "b"), ()),
            (
                "user",
                "",
                (),
                ((tag + "a", f"echo {tag}a"), (tag + "b", f"echo {tag}b")),
            ),
            ("assistant", "", (tag + "c",), ()),
            ("user", "", (), ((tag + "c", f"echo {tag}c"),)),
            ("assistant", tag + " done", (), ()),
        ]
    return out


def _shape(m: Message) -> tuple[object, ...]:
    return (
        m.role,
        m.text,
        tuple(u.id for u in m.tool_uses),
        tuple((r.tool_use_id, r.text) for r in m.tool_results),
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, Callable[[], SessionStore]]]:
    """(spec for the workers, opener for this process) of one store."""
    if request.param == "sqlite":
        path = tmp_path / "shared.db"
        yield f"sqlite:{path}", lambda: SQLiteStore(path)
        return
    from navi_core.store.postgres import PostgresStore

    with fresh_schema() as dsn:
        yield f"postgres:{dsn}", lambda: PostgresStore(dsn, max_size=2)


def test_workers_lose_and_double_nothing(
    backend: tuple[str, Callable[[], SessionStore]], tmp_path: Path
) -> None:
    spec, open_store = backend
    open_store().close()  # create the schema once, before the race
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                spec,
                str(w),
                str(SESSIONS),
                str(TURNS),
                str(go),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for w in range(WORKERS)
    ]
    go.touch()
    sessions: dict[str, str] = {}
    for w in workers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
        sessions.update(json.loads(out))
    assert len(sessions) == WORKERS * SESSIONS

    store = open_store()
    try:
        listed = {i.id: i for i in store.list()}
        assert set(listed) == set(sessions.values())
        for prefix, sid in sessions.items():
            messages = store.load(sid).messages
            assert [_shape(m) for m in messages] == _expected(prefix), prefix
            assert listed[sid].message_count == len(messages) == TURNS * 6
            assert listed[sid].last_user_message == f"{prefix}t{TURNS - 1} go"
    finally:
        store.close()


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from navi_core import Agent, Scripted
    from navi_core.store import SQLiteStore

    kind, _, where = sys.argv[1].partition(":")
    if kind == "sqlite":
        store = SQLiteStore(where)
    else:
        from navi_core.store.postgres import PostgresStore
        store = PostgresStore(where)
    agent = Agent(Scripted(), store=store, session=sys.argv[2])
    print("driving", flush=True)
    time.sleep(60)
    """
)


def test_second_driver_is_refused_until_the_first_dies(
    backend: tuple[str, Callable[[], SessionStore]],
) -> None:
    spec, open_store = backend
    store = open_store()
    try:
        sid = store.create().id
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, spec, sid],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "driving\n"
            with pytest.raises(SessionBusy, match=sid):
                Agent(Scripted(), store=store, session=sid)
        finally:
            holder.kill()
            holder.wait()
            assert holder.stdout is not None
            holder.stdout.close()
        # The kernel closes the dead holder's file and socket; the server may need a
        # moment to notice the socket, so retry briefly rather than sleep blindly.
        deadline = time.monotonic() + 10
        while True:
            try:
                Agent(Scripted(), store=store, session=sid).close()
                break
            except SessionBusy:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        store.close()

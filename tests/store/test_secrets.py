"""After a real turn with a keyed provider, no byte of the database holds the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopback import LoopbackServer, Reply

from navi_core import Agent, TurnComplete, tool
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store import SessionStore, SQLiteStore

KEY = "sk-navi-SECRET-7c1e5a9d3b2f"
SSE = Path(__file__).parent.parent / "data" / "sse"


@tool
def get_weather(city: str = "", location: str = "") -> str:
    """The weather in a city."""
    return f"sunny in {city or location}"


def _turn(store: SessionStore, loopback: LoopbackServer, api: str) -> str:
    """Run one tool-using turn against the loopback server; return the session id."""
    if api == "openai":
        first, second = "openai/tool_call_single.sse", "openai/text_with_usage.sse"
        provider: OpenAIChat | Anthropic = OpenAIChat(
            "gpt-4o", loopback.url + "/v1", KEY
        )
    else:
        first, second = "anthropic/tool_use.sse", "anthropic/text_basic.sse"
        provider = Anthropic("claude-test", loopback.url, KEY)
    loopback.add(
        Reply.sse((SSE / first).read_bytes()), Reply.sse((SSE / second).read_bytes())
    )
    with provider, Agent(provider, tools=[get_weather], store=store) as agent:
        with agent.run("What is the weather?") as stream:
            events = list(stream)
        assert isinstance(events[-1], TurnComplete)
        assert events[-1].tool_calls == 1
        session_id = agent.session_id
    sent = loopback.requests[0].headers
    assert KEY in sent.get("authorization", "") + sent.get("x-api-key", "")
    return session_id


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_sqlite_file_and_wal_hold_no_key(
    api: str, loopback: LoopbackServer, tmp_path: Path
) -> None:
    path = tmp_path / "navi.db"
    store = SQLiteStore(path)
    sid = _turn(store, loopback, api)
    assert len(store.load(sid).messages) == 4
    raw = path.read_bytes() + Path(f"{path}-wal").read_bytes()
    store.close()
    raw += path.read_bytes()  # after the checkpoint on close, too
    assert b"127.0.0.1" in raw  # the wire identity is stored ...
    assert KEY.encode() not in raw  # ... and the key is not


@pytest.mark.postgres
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_postgres_columns_hold_no_key(
    api: str, loopback: LoopbackServer, pg_dsn: str
) -> None:
    import psycopg

    from navi_core.store.postgres import PostgresStore

    with PostgresStore(pg_dsn) as store:
        sid = _turn(store, loopback, api)
        assert len(store.load(sid).messages) == 4
    with psycopg.connect(pg_dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        ]
        assert {"navi_sessions", "navi_messages"} <= set(tables)
        dump = "\n".join(
            str(row[0])
            for table in tables
            for row in conn.execute(f'SELECT t::text FROM "{table}" t')
        )
    assert "127.0.0.1" in dump
    assert KEY not in dump

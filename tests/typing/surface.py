"""Checked by mypy --strict in tests/test_typing.py (never run): the public surface is
typed for user code."""

from __future__ import annotations

from typing_extensions import assert_type

from navi_core import (
    Agent,
    Anthropic,
    AnyEvent,
    CompactionResult,
    Config,
    Media,
    MessageComplete,
    OpenAIChat,
    Phase,
    PostgresStore,
    Scripted,
    Session,
    SQLiteStore,
    StopReason,
    Stream,
    TextDelta,
    ToolCallStart,
    TurnComplete,
    Usage,
)

agent = Agent(
    OpenAIChat(model="m", base_url="http://127.0.0.1:1/v1"),
    store=SQLiteStore("navi.db"),
    session="latest",
)
assert_type(Anthropic(model="m"), Anthropic)
assert_type(PostgresStore("postgresql://localhost/db"), PostgresStore)
assert_type(Media(b"\x89PNG"), Media)
assert_type(agent.session, Session)
assert_type(agent.session_id, str)
assert_type(agent.config, Config)
assert_type(agent.compact(), CompactionResult)

stream = agent.run("hello")
assert_type(stream, Stream)
assert_type(stream.phase, Phase)
assert_type(stream.usage, Usage)
ev = stream.next()
assert_type(ev, AnyEvent | None)
match ev:
    case TextDelta(text=text):
        assert_type(text, str)
    case ToolCallStart(index=index, name=name):
        assert_type(index, int)
        assert_type(name, str)
    case MessageComplete(usage=usage):
        assert_type(usage, Usage)
    case TurnComplete(stop_reason=reason, response=response):
        assert_type(reason, StopReason)
        assert_type(response, str)
for event in agent.run("again"):
    assert_type(event, AnyEvent)

offline = Agent(Scripted(["hi"]))
assert_type(offline.resume(), Stream)

"""Helpers shared by the store tests: a message using every block type, and PostgreSQL.

PostgreSQL tests read ``NAVI_TEST_POSTGRES_DSN`` (``. .ci/postgres.sh`` starts a
throwaway server and sets it). Without it they are skipped, visibly; under ``CI=true``
they fail instead, so CI cannot pass by skipping them. Each test gets its own schema.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import navi_core
from navi_core.conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    RedactedThinking,
    System,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
    UserMessage,
    WireIdentity,
)
from navi_core.store import SessionStore

__all__ = [
    "EVERY_BLOCK",
    "check_text_that_is_not_unicode",
    "child_env",
    "fresh_schema",
    "postgres_dsn",
]

EVERY_BLOCK = Message(
    "assistant",
    (
        Text("héllo \x00 \u2028 😀"),
        Thinking("let me think", "sig=="),
        Thinking("unsigned"),
        RedactedThinking("opaque=="),
        ToolUse("call_1", "read_file", '{"path": "a b.txt" ,"n":1.50}'),
        ToolResult(
            "call_1", (TextPart("line"), MediaPart("image/png", "iVBORw0K")), True
        ),
        ToolResult("call_2", ()),
        System("be brief", "replace"),
        CompactionSummary("earlier: the user asked things"),
    ),
    Usage(11, 22, 33, 44, 5),
    "tool_use",
    WireIdentity("openai_chat", "http://127.0.0.1:11434/v1", "qwen2.5"),
)


def postgres_dsn() -> str:
    """The test server's DSN; skips (or fails under CI) when none is configured."""
    dsn = os.environ.get("NAVI_TEST_POSTGRES_DSN")
    if not dsn:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(
                "CI is set but NAVI_TEST_POSTGRES_DSN is not: source .ci/postgres.sh"
            )
        pytest.skip("PostgreSQL tests need NAVI_TEST_POSTGRES_DSN (. .ci/postgres.sh)")
    return dsn


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A DSN whose search_path is a new schema, dropped on exit."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    base = postgres_dsn()
    schema = f"navi_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield make_conninfo(base, options=f"-c search_path={schema}")
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def child_env() -> dict[str, str]:
    """The environment for a child Python that must import this checkout's navi_core."""
    root = str(Path(navi_core.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def check_text_that_is_not_unicode(store: SessionStore) -> None:
    """A persistent ``store`` writes lone surrogates as U+FFFD: body, wire and listing."""
    name = "notes-\udce9.txt"  # os.listdir's name for a file named in Latin-1
    wire = WireIdentity("openai_chat", "http://h:1/v1", "m\udcff")
    sid = store.create().id
    store.append(
        sid,
        [
            UserMessage(f"read {name}"),
            Message("assistant", (Text(f"{name} is empty"),), wire=wire),
        ],
    )
    prompt, answer = store.load(sid).messages
    assert prompt == UserMessage("read notes-\ufffd.txt")
    assert answer.text == "notes-\ufffd.txt is empty"
    assert answer.wire == WireIdentity("openai_chat", "http://h:1/v1", "m\ufffd")
    info = store.get(sid)
    assert (info.last_user_message, info.model) == ("read notes-\ufffd.txt", "m\ufffd")

"""The secret hunt: sentinel credentials pushed through every path, found nowhere.

A key, a base-URL password, an ``?api-key=`` and an Azure ``?code=`` each hold the
marker ``SENTINEL``. A real loopback server echoes them in error bodies, a reason
phrase, an in-stream error object, a 200 JSON error ``code`` and response headers;
a closed port makes a transport error. Everything that leaves the library is then
searched: raised errors (message, repr, full traceback with causes), every event's
repr, every log record of ``navi_core``, ``httpx`` and ``httpcore`` at DEBUG (with
tracebacks), reprs of provider, agent and store, and the bytes of every file the
SQLite store and a cassette ``Recorder`` (the turns are recorded) wrote.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
import uuid
from pathlib import Path

import pytest
from faultkit import chunk, openai_stream
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    Config,
    Event,
    ProviderError,
    ProviderRetry,
    RetryPolicy,
    SessionError,
)
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore
from navi_core.testing import Recorder

MARK = "SENTINEL"
KEY = f"sk-live-{MARK}-4f3e2d1c0b"
PASSWORD = f"pw/{MARK}+x"
QUERY_KEY = f"qk {MARK}&="  # needs percent-encoding in a URL
AZURE_CODE = f"az-{MARK}-code=="
LOGGERS = ("navi_core", "httpx", "httpcore")
#: the key as a header: ``api_key=`` beside URL user info is refused (httpx would send
#: the user info in its place), and the hunt sends both
BEARER = {"authorization": f"Bearer {KEY}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _url(root: str) -> str:
    from urllib.parse import quote

    creds = root.replace("://", f"://alice:{quote(PASSWORD, safe='')}@")
    return f"{creds}/v1?api-key={quote(QUERY_KEY, safe='')}&code={AZURE_CODE}"


def _text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


def _replies() -> list[Reply]:
    echo = f"{KEY} {PASSWORD} {QUERY_KEY} {AZURE_CODE}"
    return [
        Reply.json(
            500,
            {"error": {"message": f"upstream said: {echo}", "type": "server_error"}},
            headers=[("x-echo-key", KEY)],
        ),
        Reply(status=503, headers=(), chunked=False, reason=f"Down for {KEY}"),
        Reply.sse(
            chunk({"error": {"message": f"stream broke for {echo}", "type": "x"}})
        ),
        Reply.json(200, {"error": {"message": "", "code": KEY}}),
        Reply.sse(
            openai_stream("All fine."),
            headers=[
                ("content-type", "text/event-stream"),
                ("x-request-token", PASSWORD),
            ],
        ),
        Reply.json(401, {"error": {"message": f"invalid key {echo}"}}),
    ]


def test_no_secret_leaves_the_library(
    loopback: LoopbackServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []
    events: list[Event] = []
    loopback.add(*_replies())
    config = Config(retry=RetryPolicy(max_attempts=5, initial_delay_ms=1, jitter=False))
    with caplog.at_level(logging.DEBUG):
        for name in LOGGERS:
            logging.getLogger(name).setLevel(logging.DEBUG)
        try:
            with (
                OpenAIChat("m", _url(loopback.url), headers=BEARER) as provider,
                SQLiteStore(tmp_path / "navi.db") as store,
            ):
                recorder = Recorder(provider, tmp_path / "hunt.jsonl")
                agent = Agent(recorder, store=store, system="Be brief.", config=config)
                with agent.run("first question") as stream:
                    events.extend(stream)
                retries = [e for e in events if isinstance(e, ProviderRetry)]
                with pytest.raises(ProviderError) as failed, agent.run("second") as s:
                    events.extend(s)
                seen.append(_text(failed.value))
                seen.append(repr(provider) + repr(agent) + repr(store))
                seen.extend(repr(m) for m in agent.conversation.messages)
                agent.close()
            # a transport error to a closed port, credentials in its URL
            closed = _url(f"http://127.0.0.1:{_free_port()}")
            with (
                Anthropic("m", closed, headers={"x-api-key": KEY}) as dead,
                Agent(dead, config=config) as agent2,
                pytest.raises(ProviderError) as down,
                agent2.run("hello") as s2,
            ):
                events.extend(s2)
            seen.append(_text(down.value))
            for bad in (KEY + "\n", KEY + "é"):
                with pytest.raises(ValueError) as refused:
                    OpenAIChat("m", loopback.url + "/v1", bad)
                seen.append(_text(refused.value))
        finally:
            for name in LOGGERS:
                logging.getLogger(name).setLevel(logging.NOTSET)
        log_text = caplog.text

    assert len(retries) == 4  # 500, 503, the in-stream error, the 200 error body
    assert "All fine." in repr(events)
    assert "HTTP Request: POST" in log_text  # httpx logged each request
    assert "receive_response_headers" in log_text  # httpcore traced at DEBUG
    seen.append(repr(events))
    seen.append(log_text)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "navi.db" for p in files)
    cassette = (tmp_path / "hunt.jsonl").read_text()
    assert cassette.count("\n") == 7  # the head, then each of the six responses
    assert "upstream said: [REDACTED]" in cassette
    blob = "\n".join(seen) + "".join(p.read_bytes().decode("latin-1") for p in files)
    assert MARK not in blob
    assert MARK.lower() not in blob.lower()
    # ...while the credentials did go where they belong: to the server (httpx sends
    # user info as Basic credentials in place of the key)
    first = loopback.requests[0]
    assert first.headers["authorization"].startswith("Basic ")
    assert "api-key=" in first.path and "code=" in first.path
    secrets = provider_secrets(_url(loopback.url), KEY)
    assert first.headers["authorization"].split()[1] in secrets


def provider_secrets(url: str, key: str) -> set[str]:
    from navi_core._secrets import public_url, request_secrets

    return set(
        request_secrets({"authorization": f"Bearer {key}"}, url, public_url(url))
    )


@pytest.mark.postgres
def test_no_secret_in_postgres(
    loopback: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The same hunt over PostgreSQL: rows, listing columns, reprs, errors, logs.

    The DSN carries a sentinel password too (the CI server trusts local connections,
    so it is sent and ignored).
    """
    base = os.environ.get("NAVI_TEST_POSTGRES_DSN")
    if not base:
        pytest.skip("PostgreSQL tests need NAVI_TEST_POSTGRES_DSN (. .ci/postgres.sh)")
    psycopg = pytest.importorskip("psycopg")
    from psycopg.conninfo import make_conninfo

    from navi_core.store.postgres import PostgresStore

    schema = f"navi_h_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = make_conninfo(
        base, options=f"-c search_path={schema}", password=f"db-{MARK}-pw"
    )
    seen: list[str] = []
    try:
        loopback.add(*_replies()[:5])
        config = Config(
            retry=RetryPolicy(max_attempts=5, initial_delay_ms=1, jitter=False)
        )
        with caplog.at_level(logging.DEBUG):
            with (
                OpenAIChat("m", _url(loopback.url), headers=BEARER) as provider,
                PostgresStore(dsn) as store,
            ):
                with Agent(provider, store=store, config=config) as agent:
                    with agent.run("first question") as stream:
                        seen.append(repr(list(stream)))
                    sid = agent.session_id
                seen.append(repr(store) + repr(store.list()) + repr(store.load(sid)))
            with pytest.raises(SessionError) as closed:
                store.list()
            seen.append(_text(closed.value))
            log_text = caplog.text
        with psycopg.connect(base, autocommit=True) as conn:
            for table in ("navi_sessions", "navi_messages"):
                rows = conn.execute(f"SELECT * FROM {schema}.{table}").fetchall()
                seen.append(repr(rows))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    blob = "\n".join(seen) + log_text
    assert "All fine." in blob
    assert MARK not in blob

"""Context-overflow wording of LM Studio, Gemini, xAI and TGI leads to compaction.

Before the fix each of these became ``BadRequest``: no compaction, the turn failed.
The responses are ``errormap.OVERFLOW_WORDING``, each with its source; every one goes
through the real HTTP path and the turn compacts, then answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faultkit import drive, openai_stream
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    Compacted,
    CompactionConfig,
    Config,
    ContextOverflow,
    Message,
    ProviderRetry,
    Text,
    UserMessage,
)
from navi_core.providers.errormap import (
    OVERFLOW_WORDING,
    OverflowWording,
    is_context_overflow,
)
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore

HISTORY = [
    UserMessage("Which port does staging use?"),
    Message("assistant", (Text("8443 behind nginx."),)),
    UserMessage("And the database?"),
    Message("assistant", (Text("PostgreSQL on db-staging:5432."),)),
]


def _reply(case: OverflowWording) -> Reply:
    return Reply(
        status=case.status,
        body=(case.body.encode(),),
        headers=(("content-type", "application/json"),),
        chunked=False,
    )


def test_every_recorded_wording_is_an_overflow() -> None:
    servers = {case.server.partition(" ")[0] for case in OVERFLOW_WORDING}
    assert servers == {"LM", "Gemini", "xAI", "TGI"}
    for case in OVERFLOW_WORDING:
        assert case.source
        assert is_context_overflow(case.body), case.server


def test_near_misses_stay_bad_requests() -> None:
    for text in (
        "max_tokens must be <= 4096",
        "The input is not valid JSON",
        "unknown model: grok-9",
    ):
        assert not is_context_overflow(text)


@pytest.mark.parametrize(
    "case",
    OVERFLOW_WORDING,
    ids=[f"{c.server}-{i}" for i, c in enumerate(OVERFLOW_WORDING)],
)
def test_overflow_compacts_over_http(
    loopback: LoopbackServer, tmp_path: Path, case: OverflowWording
) -> None:
    loopback.add(
        _reply(case),
        Reply.sse(openai_stream("Staging: 8443 via nginx; db on 5432.")),
        Reply.sse(openai_stream("Restart nginx.")),
    )
    config = Config(compaction=CompactionConfig(keep_verbatim=10, prompt="Summarise."))
    with (
        OpenAIChat("m", loopback.url + "/v1", "sk-test-overflow") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        sid = store.create().id
        store.append(sid, [m.with_wire(provider.wire) for m in HISTORY])
        with Agent(provider, store=store, session=sid, config=config) as agent:
            events, done = drive(agent.run("How do I restart it?"))
    assert any(isinstance(e, Compacted) for e in events)
    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert retry.error == ContextOverflow.__name__ and retry.compaction
    assert retry.status_code == case.status
    assert done.response == "Restart nginx."
    assert len(loopback.requests) == 3

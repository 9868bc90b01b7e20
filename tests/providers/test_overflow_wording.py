"""Context-overflow wording of LM Studio, Gemini, xAI and TGI leads to compaction.

Before the fix each of these became ``BadRequest``: no compaction, the turn failed.
The responses are ``errormap.OVERFLOW_WORDING``, each with its source; every one goes
through the real HTTP path and the turn compacts, then answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faultkit import drive, openai_stream
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    BadRequest,
    Compacted,
    CompactionConfig,
    CompactionStarted,
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
    error_for_status,
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


@contextmanager
def _seeded_agent(loopback: LoopbackServer, tmp_path: Path) -> Iterator[Agent]:
    """An agent on ``HISTORY`` (stored in SQLite) over the loopback server, with a
    summary prompt: an overflow can compact."""
    config = Config(compaction=CompactionConfig(keep_verbatim=10, prompt="Summarise."))
    with (
        OpenAIChat("m", loopback.url + "/v1", "sk-test-overflow") as provider,
        SQLiteStore(tmp_path / "navi.db") as store,
    ):
        sid = store.create().id
        store.append(sid, [m.with_wire(provider.wire) for m in HISTORY])
        with Agent(provider, store=store, session=sid, config=config) as agent:
            yield agent


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


_VLLM_OUTPUT = (
    "'max_tokens' or 'max_completion_tokens' is too large: {out}. This model's "
    "maximum context length is 4096 tokens and your request has {prompt} input tokens "
    "({out} > 4096 - {prompt})."
)
_TGI_OUTPUT = (
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
    "Given: {prompt} `inputs` tokens and {out} `max_new_tokens`"
)


@pytest.mark.parametrize("wording", [_VLLM_OUTPUT, _TGI_OUTPUT])
def test_an_output_limit_that_alone_fills_the_window_is_a_bad_request(
    wording: str,
) -> None:
    """Compaction cannot help when ``max_tokens`` alone is the window or more; when
    the prompt is what pushes the sum over, it can."""
    too_big = wording.format(out=5000, prompt=100)
    assert not is_context_overflow(too_big)
    assert type(error_for_status(400, too_big)) is BadRequest
    tight = wording.format(out=1000, prompt=3500)
    assert is_context_overflow(tight)
    assert type(error_for_status(400, tight)) is ContextOverflow


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
    with _seeded_agent(loopback, tmp_path) as agent:
        events, done = drive(agent.run("How do I restart it?"))
    assert any(isinstance(e, Compacted) for e in events)
    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert retry.error == ContextOverflow.__name__ and retry.compaction
    assert retry.status_code == case.status
    assert done.response == "Restart nginx."
    assert len(loopback.requests) == 3


def test_a_vllm_output_limit_error_fails_the_turn_without_compacting(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """vLLM's 400 for a ``max_tokens`` above the window: one request, no summary
    request, and the turn fails with the server's words."""
    body = {
        "object": "error",
        "message": _VLLM_OUTPUT.format(out=5000, prompt=100),
        "type": "BadRequestError",
        "code": 400,
    }
    loopback.add(Reply.json(400, body))
    with _seeded_agent(loopback, tmp_path) as agent:
        stream = agent.run("How do I restart it?")
        with pytest.raises(BadRequest, match="is too large: 5000"), stream:
            for event in stream:
                assert not isinstance(event, CompactionStarted)
    assert len(loopback.requests) == 1

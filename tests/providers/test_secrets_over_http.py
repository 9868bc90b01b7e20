"""Keys in the forms redaction used to miss, over real loopback HTTP.

Before the fix: a key with a trailing newline made httpx raise ``Illegal header
value b'Bearer sk-...\\n'`` (the key in the message, repr, traceback, logs and every
``ProviderRetry``; retried four times); a key in a reason phrase with no body, or as
the ``code`` of a 200 JSON error body, was shown as is; a non-ASCII key raised a raw
``UnicodeEncodeError`` holding it; credentials in a base URL (user info,
``?api-key=``, ``;token=``, Azure's ``?code=``) were printed by httpx's INFO line.
"""

from __future__ import annotations

import logging
import traceback

import pytest
from faultkit import openai_stream, run_turn
from loopback import LoopbackServer, Reply

from navi_core import Agent, AuthFailed, Config, ProviderError, RetryPolicy
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat

KEY = "sk-proj-SENTINEL9f8e7d6c5b4a"
FAST = Config(retry=RetryPolicy(max_attempts=2, initial_delay_ms=1, jitter=False))


def _everything(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


@pytest.mark.parametrize(
    "key", [KEY + "\n", KEY + "\r\n", " " + KEY, KEY + "\x00", "sk-clé-" + KEY]
)
@pytest.mark.parametrize("make", [OpenAIChat, Anthropic])
def test_a_bad_key_fails_when_the_provider_is_made(key: str, make: type) -> None:
    with pytest.raises(ValueError, match="the value is not shown") as info:
        make("m", "http://127.0.0.1:9/v1", key)
    text = _everything(info.value)
    assert KEY not in text
    assert "SENTINEL" not in text


def test_a_bad_extra_header_value_fails_too() -> None:
    with pytest.raises(ValueError, match="x-team-token") as info:
        OpenAIChat("m", "http://127.0.0.1:9/v1", headers={"X-Team-Token": KEY + "\n"})
    assert "SENTINEL" not in _everything(info.value)
    with pytest.raises(ValueError, match="header name"):
        OpenAIChat("m", "http://127.0.0.1:9/v1", headers={"bad name": "x"})


def _fail_turn(server: LoopbackServer, provider: OpenAIChat) -> ProviderError:
    with Agent(provider, config=FAST) as agent, pytest.raises(ProviderError) as info:
        run_turn(agent, "hi")
    return info.value


def test_a_key_in_a_reason_phrase_with_no_body(loopback: LoopbackServer) -> None:
    loopback.add(
        Reply(status=401, headers=(), chunked=False, reason=f"Unauthorized key {KEY}")
    )
    with OpenAIChat("m", loopback.url + "/v1", KEY) as provider:
        error = _fail_turn(loopback, provider)
    assert isinstance(error, AuthFailed)
    assert "Unauthorized key [REDACTED]" in error.message
    assert "SENTINEL" not in _everything(error)


def test_a_key_as_the_code_of_a_200_error_body(loopback: LoopbackServer) -> None:
    body = {"error": {"message": "", "code": KEY, "type": "invalid_api_key"}}
    loopback.add(Reply.json(200, body), Reply.json(200, body))
    with OpenAIChat("m", loopback.url + "/v1", KEY) as provider:
        error = _fail_turn(loopback, provider)
    assert "SENTINEL" not in _everything(error)


@pytest.mark.parametrize(
    ("suffix", "secret"),
    [
        ("/v1?api-key={k}", KEY),
        ("/v1;token={k}", KEY),
        ("/api/v1?code={k}", KEY),  # Azure Functions
        ("/v1?api-key={k}&region=eu", KEY),
    ],
)
def test_credentials_in_a_base_url_stay_out_of_httpx_logs(
    loopback: LoopbackServer,
    caplog: pytest.LogCaptureFixture,
    suffix: str,
    secret: str,
) -> None:
    loopback.add(Reply.sse(openai_stream("ok")))
    base = loopback.url.replace("://", "://alice:pw-SENTINEL-user@") + suffix.format(
        k=secret
    )
    with (
        caplog.at_level(logging.DEBUG),
        OpenAIChat("m", base) as provider,
        Agent(provider) as agent,
    ):
        _, done = run_turn(agent, "hi")
        shown = repr(provider) + repr(agent) + provider.base_url
    assert done.response == "ok"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "HTTP Request: POST" in logged  # httpx's INFO line was written
    assert "SENTINEL" not in logged + shown
    # the request itself still carried every credential
    (request,) = loopback.requests
    assert secret in request.path

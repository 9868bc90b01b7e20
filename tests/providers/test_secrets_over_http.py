"""Keys in the forms redaction used to miss, over real loopback HTTP.

Before the fix: a key with a trailing newline made httpx raise ``Illegal header
value b'Bearer sk-...\\n'`` (the key in the message, repr, traceback, logs and every
``ProviderRetry``; retried four times); a key in a reason phrase with no body, or as
the ``code`` of a 200 JSON error body, was shown as is; a non-ASCII key raised a raw
``UnicodeEncodeError`` holding it; credentials in a base URL (user info,
``?api-key=``, ``;token=``, Azure's ``?code=``) were printed by httpx's INFO line;
a proxy's credentials (``HTTP_PROXY=http://user:pass@...``, or a ``client=`` with a
proxy) that the proxy echoed in its error reached the error, ``navi-core run``'s
output and a cassette; ``api_key=`` beside a base URL with user info was silently
replaced by the URL's Basic credentials.
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import httpx
import pytest
from echo_proxy import proxy_leaks
from faultkit import openai_stream, run_turn
from loopback import LoopbackServer, Reply

from navi_core import Agent, AuthFailed, Config, ProviderError, RetryPolicy
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.providers.openai_responses import OpenAIResponses
from navi_core.testing import Recorder

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


# -- a proxy's credentials ------------------------------------------------------------

#: goes through the proxy: the name never resolves, the proxy answers for it
BEHIND_PROXY = "http://api.example.invalid/v1"


@pytest.mark.parametrize(
    "how", ["HTTP_PROXY", "ALL_PROXY", "client proxy=", "client transport="]
)
def test_a_proxy_s_credentials_stay_out_of_errors_and_cassettes(
    echo_proxy: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    client: httpx.Client | None = None
    if how.isupper():
        monkeypatch.setenv(how, echo_proxy)
    elif how == "client proxy=":
        client = httpx.Client(proxy=echo_proxy)
    else:
        client = httpx.Client(transport=httpx.HTTPTransport(proxy=echo_proxy))
    cassette = tmp_path / "proxied.jsonl"
    try:
        with (
            OpenAIChat("m", BEHIND_PROXY, KEY, client=client) as provider,
            Agent(Recorder(provider, cassette), config=FAST) as agent,
            pytest.raises(ProviderError) as info,
        ):
            run_turn(agent, "hi")
    finally:
        if client is not None:
            client.close()
    error = info.value
    recorded = cassette.read_text()
    for text in (str(error), recorded):
        assert "proxy refused: " in text and "[REDACTED]" in text
    assert proxy_leaks(str(error) + repr(error) + recorded) == []


def test_run_prints_a_proxy_s_error_without_its_credentials(
    echo_proxy: str, tmp_path: Path
) -> None:
    env = {**os.environ, "HTTP_PROXY": echo_proxy, "OPENAI_API_KEY": KEY}
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    flags = ["--model", "m", "--base-url", BEHIND_PROXY, "--db", str(tmp_path / "n.db")]
    result = subprocess.run(
        [sys.executable, "-m", "navi_core", "run", "hi", *flags],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "proxy refused: " in result.stderr and "[REDACTED]" in result.stderr
    assert proxy_leaks(result.stdout + result.stderr) == []


# -- a base URL's user info --------------------------------------------------------------


@pytest.mark.parametrize(
    "userinfo", ["gw:gw-SENTINEL-pw", "gw-SENTINEL-token"], ids=["password", "user"]
)
@pytest.mark.parametrize("make", [OpenAIChat, OpenAIResponses, Anthropic])
def test_url_credentials_beside_an_api_key_are_refused(
    make: type, userinfo: str
) -> None:
    """httpx would send the user info as Basic credentials in place of the key (or
    beside Anthropic's x-api-key): refused when the provider is made."""
    url = f"http://{userinfo}@gateway.example/v1"
    with pytest.raises(ValueError, match="Give one of them") as info:
        make("m", base_url=url, api_key=KEY)
    message = str(info.value)
    assert "headers=" in message and "'http://gateway.example/v1'" in message
    assert "SENTINEL" not in _everything(info.value)


def test_url_credentials_alone_go_as_basic_credentials(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a key the URL's user info is the credential: sent as httpx sends it
    (a provider's own plain-http client leaves such a URL to httpx)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    loopback.add(Reply.sse(openai_stream("ok")))
    base = loopback.url.replace("://", "://gw:gw%2Fpw@") + "/v1"
    with OpenAIChat("m", base) as provider, Agent(provider) as agent:
        _, done = run_turn(agent, "hi")
    assert done.response == "ok"
    (request,) = loopback.requests
    basic = base64.b64encode(b"gw:gw/pw").decode()
    assert request.headers["authorization"] == f"Basic {basic}"

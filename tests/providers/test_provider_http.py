"""HTTP plumbing and error mapping: retry hints, error bodies, statuses, transport."""

from __future__ import annotations

import email.utils
import sys

import httpx
import pytest

from navi_core._secrets import (
    MAX_MESSAGE_CHARS,
    SECRET_WORDS,
    looks_secret,
    public_url,
    redact,
    request_secrets,
)
from navi_core.config import Timeout
from navi_core.errors import (
    AuthFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    RateLimited,
    ServerError,
    TransportError,
)
from navi_core.providers._http import (
    MAX_RETRY_AFTER_MS,
    json_object,
    make_client,
    map_transport_errors,
    parse_retry_after,
    to_httpx_timeout,
)
from navi_core.providers.errormap import error_from_body, provider_message

NOW = 1_700_000_000.0


class TestRetryAfter:
    @pytest.mark.parametrize(
        ("headers", "expected"),
        [
            ({"retry-after-ms": "250"}, 250),
            ({"Retry-After-Ms": "12.5"}, 13),
            ({"retry-after": "0"}, 0),
            ({"Retry-After": "7"}, 7000),
            ({"retry-after": "1.5"}, 1500),
            ({"retry-after": " 2 "}, 2000),
            ({"retry-after-ms": "100", "retry-after": "9"}, 100),
            ({"retry-after-ms": "soon", "retry-after": "3"}, 3000),
            ({}, None),
            ({"retry-after": "-1"}, None),
            ({"retry-after": "later"}, None),
            ({"retry-after": "nan"}, None),
        ],
    )
    def test_values(self, headers: dict[str, str], expected: int | None) -> None:
        assert parse_retry_after(headers, now=NOW) == expected

    def test_http_date_is_the_wait_until_then(self) -> None:
        date = email.utils.formatdate(NOW + 30, usegmt=True)
        assert parse_retry_after({"Retry-After": date}, now=NOW) == 30_000

    def test_http_date_in_the_past_is_zero(self) -> None:
        date = email.utils.formatdate(NOW - 30, usegmt=True)
        assert parse_retry_after({"retry-after": date}, now=NOW) == 0

    def test_httpx_headers(self) -> None:
        assert parse_retry_after(httpx.Headers({"Retry-After": "4"})) == 4000

    @pytest.mark.parametrize(
        "headers",
        [
            {"retry-after": "9" * 400},  # float("9" * 400) is inf
            {"retry-after-ms": "9" * 400},
            {"retry-after": "1" + "0" * 300 + ".5"},
            {"retry-after": "86401"},
            {"retry-after-ms": "86400001"},
            {"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"},
        ],
    )
    def test_huge_hints_are_capped_at_one_day(self, headers: dict[str, str]) -> None:
        assert parse_retry_after(headers, now=NOW) == MAX_RETRY_AFTER_MS == 86_400_000

    def test_one_day_itself_is_kept(self) -> None:
        assert parse_retry_after({"retry-after": "86400"}, now=NOW) == 86_400_000
        assert parse_retry_after({"retry-after": "86399.5"}, now=NOW) == 86_399_500


class TestProviderMessage:
    def test_openai_error_object(self) -> None:
        body = (
            b'{"error": {"message": "Rate limit reached", "type": "requests",'
            b' "param": null, "code": "rate_limit_exceeded"}}'
        )
        assert provider_message(body) == ("Rate limit reached", "rate_limit_exceeded")

    def test_anthropic_error_object(self) -> None:
        body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
        assert provider_message(body) == ("Overloaded", "overloaded_error")

    def test_vllm_flat_error(self) -> None:
        body = b'{"object":"error","message":"bad","type":"BadRequestError","code":400}'
        assert provider_message(body) == ("bad", "BadRequestError")

    def test_ollama_string_error(self) -> None:
        assert provider_message(b'{"error":"model not found"}') == (
            "model not found",
            None,
        )

    def test_fastapi_detail(self) -> None:
        message, kind = provider_message(b'{"detail":[{"msg":"field required"}]}')
        assert "field required" in message and kind is None

    def test_plain_text_and_bad_utf8(self) -> None:
        assert provider_message(b"  upstream \xff down\n") == (
            "upstream \ufffd down",
            None,
        )

    def test_cut_to_size(self) -> None:
        message, _ = provider_message(b"<html>" + b"x" * 10_000 + b"</html>")
        assert len(message) <= MAX_MESSAGE_CHARS and "characters cut]" in message
        assert message.startswith("<html>x") and message.endswith("x</html>")

    def test_secret_redacted_before_cutting(self) -> None:
        key = "sk-live-0123456789abcdef"
        body = b"y" * (MAX_MESSAGE_CHARS - 10) + key.encode()
        message, _ = provider_message(body, (key,))
        assert "sk-live" not in message and "0123" not in message

    def test_redact_ignores_placeholders(self) -> None:
        assert redact("a x b", ("x",)) == "a x b"
        assert redact("key=abcdef!", ("abcdef",)) == "key=[REDACTED]!"


class TestStatusMapping:
    @pytest.mark.parametrize(
        ("status", "body", "cls"),
        [
            (429, b'{"error":{"message":"slow down"}}', RateLimited),
            (
                529,
                b'{"type":"error","error":{"type":"overloaded_error","message":"o"}}',
                Overloaded,
            ),
            (
                500,
                b'{"type":"error","error":{"type":"overloaded_error","message":"o"}}',
                Overloaded,
            ),
            (500, b"boom", ServerError),
            (502, b"", ServerError),
            (503, b"", ServerError),
            (504, b"", ServerError),
            (401, b'{"error":{"message":"no key"}}', AuthFailed),
            (403, b"forbidden", AuthFailed),
            (404, b'{"error":{"message":"no such model"}}', BadRequest),
            (400, b'{"error":{"message":"bad field"}}', BadRequest),
            (408, b"Request Timeout", TransportError),
            (409, b'{"error":{"message":"lock timeout"}}', ServerError),
            (410, b"gone", BadRequest),
        ],
    )
    def test_class(self, status: int, body: bytes, cls: type) -> None:
        error = error_from_body(status, "Reason", body, retry_after_ms=2000)
        assert type(error) is cls
        assert error.status_code == status
        assert error.retry_after_ms == 2000

    @pytest.mark.parametrize("status", [408, 409])
    def test_timeout_and_conflict_are_retried(self, status: int) -> None:
        # Both vendors' SDKs retry these; a 409 is a lock or race on their side.
        assert error_from_body(status, "Reason", b"").retryable

    def test_empty_body_names_the_status(self) -> None:
        error = error_from_body(502, "Bad Gateway", b"")
        assert error.message == "HTTP 502 Bad Gateway"

    @pytest.mark.parametrize(
        ("status", "body"),
        [
            # OpenAI: the code says it even when the message is reworded.
            (
                400,
                b'{"error":{"message":"Input too big.","type":"invalid_request_error","code":"context_length_exceeded"}}',
            ),
            (
                400,
                b'{"error":{"message":"This model\'s maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}',
            ),
            # Anthropic
            (
                400,
                b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}',
            ),
            # vLLM, old flat and new nested shapes
            (
                400,
                b'{"object":"error","message":"This model\'s maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}',
            ),
            (
                400,
                b'{"error":{"message":"The decoder prompt (length 8825) is longer than the maximum model length of 8192.","type":"BadRequestError","code":400}}',
            ),
            # llama.cpp, old and new wording
            (
                400,
                b'{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}',
            ),
            (
                400,
                b'{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error"}}',
            ),
            # Ollama, native and OpenAI-compatible endpoints
            (
                400,
                b'{"error":"prompt too long; exceeded max context length by 17 tokens"}',
            ),
            (500, b'{"error":"the input length exceeds the context length"}'),
            (
                400,
                b'{"error":{"message":"prompt too long; exceeded max context length by 42 tokens","type":"api_error","param":null,"code":null}}',
            ),
        ],
    )
    def test_context_overflow(self, status: int, body: bytes) -> None:
        error = error_from_body(status, "Bad Request", body)
        assert isinstance(error, ContextOverflow)
        assert not error.retryable


class TestTransport:
    def test_httpx_errors_become_transport_errors(self) -> None:
        original = httpx.ConnectError("[Errno 111] Connection refused")
        with pytest.raises(TransportError) as info, map_transport_errors():
            raise original
        assert info.value.__cause__ is original
        assert "ConnectError" in info.value.message and "refused" in info.value.message

    def test_timeouts_say_so(self) -> None:
        with (
            pytest.raises(TransportError, match="timed out: ReadTimeout"),
            map_transport_errors(),
        ):
            raise httpx.ReadTimeout("read")

    def test_secrets_stay_out(self) -> None:
        with (
            pytest.raises(TransportError) as info,
            map_transport_errors(("sk-abcdef123",)),
        ):
            raise httpx.LocalProtocolError("bad header value 'Bearer sk-abcdef123'")
        assert "sk-abcdef123" not in str(info.value)

    def test_other_exceptions_pass_through(self) -> None:
        with pytest.raises(KeyError), map_transport_errors():
            raise KeyError("x")


def test_timeout_conversion() -> None:
    converted = to_httpx_timeout(Timeout(connect=1.0, read=None, write=3.0, pool=4.0))
    assert converted == httpx.Timeout(connect=1.0, read=None, write=3.0, pool=4.0)


def test_http2_without_h2_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "h2", None)
    with pytest.raises(ImportError, match=r"\[http2\]"):
        make_client(Timeout(), http2=True)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("{}", {}),
        ('{"path": "/tm', None),
        ("[1, 2]", None),
        ("", None),
        ("null", None),
    ],
)
def test_json_object(raw: str, expected: dict[str, int] | None) -> None:
    assert json_object(raw) == expected


class TestSecrets:
    """One list of secret-looking names serves URLs, headers and error text alike."""

    @pytest.mark.parametrize("word", SECRET_WORDS)
    def test_every_word_is_secret_in_a_url_and_a_header(self, word: str) -> None:
        name = f"X-{word.upper()}-1"
        assert looks_secret(name)
        url = f"https://host/v1?{name}=s3cret-value&v=2"
        assert public_url(url) == "https://host/v1?v=2"
        found = request_secrets({name.lower(): "h3ader-value"}, url, public_url(url))
        assert set(found) == {"s3cret-value", "h3ader-value"}

    def test_request_secrets_longest_first_with_both_url_spellings(self) -> None:
        url = "https://user:p%40ss-word@host/v1?sig=a%2Fb%2Fcdef"
        headers = {
            "authorization": "Bearer tok-123456",
            "x-custom": "Basic dXNlcjpwdw==",
            "accept": "text/event-stream",
        }
        found = request_secrets(headers, url, public_url(url))
        assert public_url(url) == "https://host/v1"
        assert {"Bearer tok-123456", "tok-123456", "dXNlcjpwdw=="} <= set(found)
        assert {"p%40ss-word", "p@ss-word", "a/b/cdef", "a%2Fb%2Fcdef"} <= set(found)
        assert "text/event-stream" not in found
        assert [len(s) for s in found] == sorted((len(s) for s in found), reverse=True)
        text = redact(f"GET {url} with Bearer tok-123456", found)
        assert "tok-123456" not in text and "p@ss" not in text and "cdef" not in text

"""Errors that name the problem: a refused or silent server is named by its URL
(never a credential or a query), and a long error body keeps what says what is wrong."""

from __future__ import annotations

import json
import socket
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from faultkit import run_turn
from loopback import LoopbackServer, Reply
from wire_streams import drain, openai_body, request

from navi_core import Agent, OpenAIChat
from navi_core._secrets import environment_proxy
from navi_core.config import Config, RetryPolicy, Timeout
from navi_core.errors import (
    BadRequest,
    MalformedStream,
    NotAnEventStream,
    ProviderError,
    RateLimited,
    ServerError,
    TransportError,
)
from navi_core.providers.errormap import error_fields, provider_message, shorten

KEY = "sk-test-secret-key-123456"


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_names_the_url_without_credentials() -> None:
    port = _dead_port()
    base = f"http://me:hunter2pass@127.0.0.1:{port}/v1?api_key={KEY}"
    with (
        OpenAIChat("m", base) as provider,  # the key in the query string
        pytest.raises(TransportError) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert message.startswith(
        f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: ConnectError"
    )
    assert "refused" in message.lower()
    assert KEY not in message and "hunter2pass" not in message
    assert "?" not in message


@pytest.fixture
def clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_a_dead_proxy_is_named_as_the_one_that_refused(
    clean_proxy_env: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    """The model server is up; the proxy the environment names is not: the error says
    the proxy refused, and shows neither the proxy's password nor the key."""
    proxy_port = _dead_port()
    clean_proxy_env.setenv(
        "HTTP_PROXY", f"http://me:proxy-pw-77@127.0.0.1:{proxy_port}"
    )
    with (
        OpenAIChat("m", loopback.url + "/v1", api_key=KEY) as provider,
        pytest.raises(TransportError) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert message.startswith(
        f"cannot connect to the proxy http://127.0.0.1:{proxy_port} "
        f"(for {loopback.url}/v1/chat/completions; NO_PROXY can exempt its host): "
        "ConnectError"
    )
    assert "proxy-pw-77" not in message and KEY not in message
    assert loopback.requests == []  # nothing reached the model server


def test_a_host_no_proxy_names_goes_direct_and_names_the_server(
    clean_proxy_env: pytest.MonkeyPatch,
) -> None:
    port = _dead_port()
    clean_proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{_dead_port()}")
    clean_proxy_env.setenv("NO_PROXY", "127.0.0.1")
    with (
        OpenAIChat("m", f"http://127.0.0.1:{port}/v1", api_key=KEY) as provider,
        pytest.raises(TransportError) as caught,
    ):
        drain(provider, request("hi"))
    assert str(caught.value).startswith(
        f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: ConnectError"
    )


def test_a_proxy_host_that_does_not_resolve_is_named(
    clean_proxy_env: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    clean_proxy_env.setenv("HTTP_PROXY", "http://no-such-proxy.invalid:3128")
    with (
        OpenAIChat("m", loopback.url + "/v1", api_key=KEY) as provider,
        pytest.raises(TransportError) as caught,
    ):
        drain(provider, request("hi"))
    assert str(caught.value).startswith(
        "cannot resolve the proxy's host 'no-such-proxy.invalid' "
        f"(for {loopback.url}/v1/chat/completions; NO_PROXY can exempt its host) "
        "(DNS lookup failed"
    )


@pytest.mark.parametrize(
    ("environment", "url", "expected"),
    [
        ({"HTTPS_PROXY": "http://p:3128"}, "https://api.x.com/v1", "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, "http://api.x.com/v1", None),
        ({"ALL_PROXY": "http://p:3128"}, "http://api.x.com/v1", "http://p:3128"),
        ({"HTTP_PROXY": "http://p"}, "http://api.x.com/v1", "http://p:80"),
        ({"HTTP_PROXY": "p:3128"}, "http://api.x.com/v1", "http://p:3128"),
        ({"HTTP_PROXY": "http://u:pw@p:3128/"}, "http://a.com/", "http://p:3128"),
        ({"HTTP_PROXY": "http://[::1]:3128"}, "http://a.com/", "http://[::1]:3128"),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "a.com"}, "http://a.com/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "a.com"}, "http://w.a.com/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "a.com"}, "http://wa.com/", "http://p:1"),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": ".a.com"}, "http://a.com/", "http://p:1"),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": ".a.com"}, "http://w.a.com/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "x.com,*"}, "http://a.com/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "x.com, localhost"}, "http://localhost:8/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "127.0.0.1"}, "http://127.0.0.1:8/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "::1"}, "http://[::1]:8/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "https://a.com"}, "http://a.com/", "http://p:1"),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "http://a.com"}, "http://a.com/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "all://a.com:8"}, "http://a.com:8/", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "all://a.com:8"}, "http://a.com:9/", "http://p:1"),
        ({}, "http://a.com/", None),
    ],
)  # fmt: skip
def test_the_proxy_named_is_the_one_httpx_routes_through(
    clean_proxy_env: pytest.MonkeyPatch,
    environment: dict[str, str],
    url: str,
    expected: str | None,
) -> None:
    """``environment_proxy`` follows the environment as httpx does: checked against
    the proxy an httpx client really mounts for the URL."""
    for name, value in environment.items():
        clean_proxy_env.setenv(name, value)
    assert environment_proxy(url) == expected
    with httpx.Client() as client:
        transport: Any = client._transport_for_url(httpx.URL(url))  # a test may peek
        pool = transport._pool
        routed = getattr(pool, "_proxy_url", None)
    assert (routed is None) == (expected is None)
    if routed is not None:
        assert (routed.host.decode(), routed.port or 80) == (
            urlsplit(expected).hostname,
            urlsplit(expected).port,
        )


def test_a_callers_client_routes_as_it_was_told(
    clean_proxy_env: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    """A client passed in may have a proxy or transport of its own: navi_core cannot
    tell which, so the error names the server, as before, not the environment's."""
    clean_proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{_dead_port()}")
    port = _dead_port()
    client = httpx.Client(transport=httpx.HTTPTransport())
    with (
        OpenAIChat("m", f"http://127.0.0.1:{port}/v1", api_key=KEY, client=client) as p,
        pytest.raises(TransportError) as caught,
    ):
        drain(p, request("hi"))
    assert str(caught.value).startswith(
        f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: ConnectError"
    )


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections and reads, but never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_a_timeout_names_the_url(silent_server: int) -> None:
    base = f"http://127.0.0.1:{silent_server}/v1"
    with (
        OpenAIChat("m", base, timeout=Timeout(read=0.3)) as provider,
        pytest.raises(TransportError) as caught,
    ):
        drain(provider, request("hi"))
    assert str(caught.value).startswith(
        f"timed out talking to http://127.0.0.1:{silent_server}/v1/chat/completions: "
        "ReadTimeout"
    )


def test_a_long_json_body_keeps_the_message_and_the_param(
    loopback: LoopbackServer,
) -> None:
    body = {
        "error": {
            "message": "Invalid value for 'content': expected a string, got null. "
            + "x" * 2000
            + " See the messages reference.",
            "type": "invalid_request_error",
            "param": "messages[3].content",
            "code": None,
        }
    }
    loopback.add(Reply.json(400, body))
    with (
        OpenAIChat("m", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert len(message) <= 500
    assert message.startswith("Invalid value for 'content': expected a string")
    assert message.endswith("See the messages reference. (param: messages[3].content)")
    assert "characters cut]" in message


def test_a_long_text_body_keeps_its_head_and_its_end(
    loopback: LoopbackServer,
) -> None:
    text = "Traceback (most recent call last):\n" + "  frame\n" * 400
    text += "RuntimeError: CUDA out of memory"
    loopback.add(Reply.text(500, text))
    with (
        OpenAIChat("m", loopback.url + "/v1") as provider,
        pytest.raises(ServerError) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert len(message) <= 500
    assert message.startswith("Traceback (most recent call last):")
    assert message.endswith("RuntimeError: CUDA out of memory")


def test_error_fields_read_validation_lists_and_unknown_objects() -> None:
    fastapi = (
        b'{"detail": [{"loc": ["body", "messages", 0, "role"], "msg": "field '
        b'required", "type": "missing"}, {"loc": ["body", "model"], "msg": "str '
        b'type expected", "type": "type_error"}]}'
    )
    assert error_fields(fastapi) == (
        "body.messages.0.role: field required; body.model: str type expected",
        None,
    )
    odd = b'{"status": "failed", "reason": "' + b"r" * 3000 + b'", "id": 7}'
    assert error_fields(odd) == (None, None)  # no message field: not an error object
    message, kind = provider_message(odd)
    assert kind is None
    assert message.startswith("status: failed; reason: rrr")
    assert message.endswith("; id: 7") and len(message) < 500


def test_shorten_marks_what_it_cut() -> None:
    text = "head " + "." * 1000 + " tail"
    short = shorten(text)
    assert 490 <= len(short) <= 500
    assert short.startswith("head ") and short.endswith(" tail")
    cut = int(short.split("…[")[1].split(" ")[0])
    assert len(short) - len(f" …[{cut} characters cut]… ") + cut == len(text)
    assert shorten("short") == "short"


def test_a_long_body_without_a_message_never_shows_part_of_the_key() -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    fields = {f"field{n}": "x" * 30 for n in range(20)}
    body = json.dumps({**fields, "echo": key}).encode()
    message, _ = provider_message(body, [key])
    assert "sk-proj" not in message and "ABCDEFGHIJ" not in message
    assert "echo:" in message


# A 200 that is a web page, and an error body that says nothing: over real loopback
# HTTP, through navi_core's own plain-HTTP connections and through an httpx.Client.

SECRET = "sk-test-SECRET123"
CLIENTS = ["own connections", "an httpx.Client"]


def _everything(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


@contextmanager
def _provider(loopback: LoopbackServer, through: str) -> Iterator[OpenAIChat]:
    """An OpenAIChat with the key ``SECRET``, sending through its own connections
    (the plain-HTTP client) or through an ``httpx.Client`` passed as ``client=``."""
    client = httpx.Client() if through == "an httpx.Client" else None
    try:
        with OpenAIChat(
            "m", loopback.url + "/v1", api_key=SECRET, client=client
        ) as provider:
            assert (provider._plain is None) == (client is not None)  # the path tested
            yield provider
    finally:
        if client is not None:
            client.close()


def _page(text: str, ctype: str = "text/html; charset=utf-8") -> Reply:
    return Reply(body=(text.encode(),), headers=(("content-type", ctype),))


#: a captive portal's login page, echoing the key it saw (scripts and styles are no text)
PORTAL = (
    "<!DOCTYPE html><html><head><style>body { color: red }</style>"
    "<script>var token = 'sk-test-SECRET123';</script></head>"
    "<body><h1>Please log in to the Wi-Fi</h1>"
    "<p>Your request (<b>Bearer sk-test-SECRET123</b>) was held &amp; kept.</p>"
    "</body></html>"
)


@pytest.mark.parametrize("through", CLIENTS)
def test_a_web_page_instead_of_a_stream_is_named_and_not_retried(
    loopback: LoopbackServer, through: str
) -> None:
    """A captive portal's page sent with a 200 was an ``IncompleteResponse``
    ("response ended before its terminator"), retried as a cut-off stream."""
    loopback.add(*[_page(PORTAL)] * 4)
    config = Config(retry=RetryPolicy(max_attempts=4, initial_delay_ms=1, jitter=False))
    with (
        _provider(loopback, through) as provider,
        Agent(provider, config=config) as agent,
        pytest.raises(ProviderError) as caught,
    ):
        run_turn(agent, "hi")
    error = caught.value
    assert type(error) is NotAnEventStream
    assert error.message == (
        f"expected an event stream, got text/html from POST {loopback.url}"
        '/v1/chat/completions: "Please log in to the Wi-Fi Your request '
        '([REDACTED]) was held & kept."'
    )
    assert error.status_code == 200
    assert not error.retryable
    assert len(loopback.requests) == 1  # not retried
    assert "SECRET123" not in _everything(error)


@pytest.mark.parametrize("through", CLIENTS)
@pytest.mark.parametrize(
    ("ctype", "body", "shown", "excerpt", "encoding"),
    [
        pytest.param(
            "application/xhtml+xml",
            "<html><body><p>Sign in to continue</p></body></html>",
            "application/xhtml+xml",
            "Sign in to continue",
            "utf-8",
            id="xhtml",
        ),
        pytest.param(
            "application/xml",
            '<?xml version="1.0"?><Error><Code>AccessDenied</Code>'
            "<Message>Access Denied</Message></Error>",
            "application/xml",
            "AccessDenied Access Denied",
            "utf-8",
            id="xml",
        ),
        pytest.param(
            "text/xml; charset=utf-8",
            "<error><reason>maintenance window</reason></error>",
            "text/xml",
            "maintenance window",
            "utf-8",
            id="text-xml",
        ),
        pytest.param(
            "application/problem+xml",
            "<problem><title>Forbidden</title></problem>",
            "application/problem+xml",
            "Forbidden",
            "utf-8",
            id="problem-xml",
        ),
        pytest.param(
            "Text/HTML;charset=ISO-8859-1",
            "<html><body>Accès refusé " + "word " * 200 + "</body></html>",
            "text/html",
            "Accès refusé " + "word " * 28 + "word…",  # cut after a whole word
            "latin-1",
            id="html-latin-1-long",
        ),
        pytest.param(
            "text/html",
            "<html><body>  </body></html>",
            "text/html",
            None,
            "utf-8",
            id="blank",
        ),
        pytest.param(  # no charset: its byte order mark says UTF-16
            "text/html",
            "<p>Log in: système</p>",
            "text/html",
            "Log in: système",
            "utf-16",
            id="html-utf-16-bom",
        ),
    ],
)
def test_markup_is_refused_and_real_streams_still_pass(
    loopback: LoopbackServer,
    through: str,
    ctype: str,
    body: str,
    shown: str,
    excerpt: str | None,
    encoding: str,
) -> None:
    """Only content types that cannot be an event stream are refused: a stream sent as
    text/plain, application/octet-stream or with no content type is read as before."""
    loopback.add(
        Reply(body=(body.encode(encoding),), headers=(("content-type", ctype),)),
        Reply.sse(openai_body(["plain"]), headers=(("content-type", "text/plain"),)),
        Reply.sse(openai_body(["none"]), headers=()),
        Reply.sse(
            openai_body(["octets"]),
            headers=(("content-type", "application/octet-stream"),),
        ),
        Reply.sse(openai_body(["sse"])),
    )
    with _provider(loopback, through) as provider:
        with pytest.raises(MalformedStream) as caught:
            provider.open(request("hi"))
        assert type(caught.value) is NotAnEventStream
        assert not caught.value.retryable
        expected = (
            f"expected an event stream, got {shown} from POST {loopback.url}"
            "/v1/chat/completions"
        )
        if excerpt is not None:
            expected += f': "{excerpt}"'
        assert caught.value.message == expected
        answers = [drain(provider, request("hi"))[1] for _ in range(4)]
    assert [a.text for a in answers] == ["plain", "none", "octets", "sse"]


@pytest.mark.parametrize("through", CLIENTS)
@pytest.mark.parametrize(
    ("reply", "kind", "said"),
    [
        pytest.param(Reply.json(429, {}), RateLimited, "", id="429-empty-object"),
        pytest.param(
            Reply.json(400, {"error": {}}), BadRequest, "", id="400-empty-error"
        ),
        pytest.param(
            Reply.json(503, {"error": None, "detail": ""}),
            ServerError,
            "",
            id="503-null-error",
        ),
        pytest.param(
            Reply.json(
                400, {"error": {"message": "", "type": "invalid_request_error"}}
            ),
            BadRequest,
            ": type: invalid_request_error",
            id="400-no-message-but-a-type",
        ),
        pytest.param(
            Reply.json(
                429,
                {
                    "type": "error",
                    "error": {"type": "rate_limit_error", "code": None},
                    "echo": SECRET,
                },
            ),
            RateLimited,
            ": type: rate_limit_error; echo: [REDACTED]",
            id="429-anthropic-shape-echoing-the-key",
        ),
        pytest.param(
            Reply(status=400, body=(b"[]",), headers=(), chunked=False),
            BadRequest,
            "",
            id="400-empty-list",
        ),
    ],
)
def test_an_error_body_without_a_message_gives_the_status_and_the_url(
    loopback: LoopbackServer,
    through: str,
    reply: Reply,
    kind: type[ProviderError],
    said: str,
) -> None:
    """``{}`` was ``RateLimited: {}`` and ``{"error": {}}`` ``BadRequest: error: {}``;
    a real message stays as it is, and neither shows the key."""
    real = {"error": {"message": "Rate limit reached for gpt-4o"}}
    loopback.add(reply, Reply.json(429, real))
    with _provider(loopback, through) as provider:
        with pytest.raises(ProviderError) as bare:
            provider.open(request("hi"))
        with pytest.raises(RateLimited) as kept:
            provider.open(request("hi"))
    reason = HTTPStatus(reply.status).phrase
    assert type(bare.value) is kind
    assert bare.value.message == (
        f"HTTP {reply.status} {reason}{said} (POST {loopback.url}/v1/chat/completions)"
    )
    assert kept.value.message == "Rate limit reached for gpt-4o"
    for error in (bare.value, kept.value):
        assert "SECRET123" not in _everything(error)
    assert len(loopback.requests) == 2


@pytest.mark.parametrize("through", CLIENTS)
def test_a_key_in_the_reason_phrase_of_a_bare_error_is_redacted(
    loopback: LoopbackServer, through: str
) -> None:
    loopback.add(
        Reply(
            status=429,
            body=(b"{}",),
            headers=(),
            chunked=False,
            reason=f"Slow {SECRET}",
        ),
        Reply(status=404, body=(b'{"error": {}}',), headers=(), chunked=False),
    )
    with _provider(loopback, through) as provider:
        with pytest.raises(RateLimited) as limited:
            provider.open(request("hi"))
        with pytest.raises(BadRequest) as missing:
            provider.open(request("hi"))
    url = f"{loopback.url}/v1/chat/completions"
    assert limited.value.message == f"HTTP 429 Slow [REDACTED] (POST {url})"
    assert "SECRET123" not in _everything(limited.value)
    # a 404 says where it went once, with its base-URL hint
    assert missing.value.message == (
        f"HTTP 404 Not Found (POST {url}): check base_url: the server has no endpoint"
        " at this URL (base_url + /chat/completions)"
    )

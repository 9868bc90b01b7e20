"""Errors that name the problem: a refused or silent server is named by its URL
(never a credential or a query), and a long error body keeps what says what is wrong."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import drain, request

from navi_core import OpenAIChat
from navi_core._secrets import environment_proxy
from navi_core.config import Timeout
from navi_core.errors import BadRequest, ServerError, TransportError
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
        OpenAIChat("m", base, api_key=KEY) as provider,
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

"""The plain-HTTP/1.1 client a provider uses for its own ``http://`` requests.

Framing is checked on random bodies cut at random read boundaries (hypothesis, through
a stream that returns the pieces it is given); the client itself over real loopback
sockets: keep-alive, a connection the server closed, interim responses, malformed
responses, and where httpx serves instead (HTTP/2, a proxy, a caller's own client).
"""

from __future__ import annotations

import gc
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings, strategies as st
from loopback import LoopbackServer, Reply
from wire_streams import drain, openai_body, request

from navi_core.config import Timeout
from navi_core.errors import ContextOverflow, TransportError
from navi_core.providers import _sockets
from navi_core.providers._plain_http import PlainHTTP, PlainResponse
from navi_core.providers.openai_chat import OpenAIChat

TIMEOUT = httpx.Timeout(5.0)


class _Pieces:
    """A connection's stream that returns the given pieces, then end of stream."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self._pieces = list(pieces)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._pieces.pop(0) if self._pieces else b""

    def close(self) -> None:
        self.closed = True


class _Keeper:
    """Stands in for the client: records the connections given back."""

    def __init__(self) -> None:
        self.kept: list[Any] = []

    def give_back(self, connection: Any) -> None:
        self.kept.append(connection)


def _response(raw: bytes, cuts: Sequence[int]) -> tuple[PlainResponse, _Keeper]:
    points = sorted({c for c in cuts if 0 < c < len(raw)})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    keeper = _Keeper()
    connection = SimpleNamespace(stream=_Pieces(pieces))
    response = PlainResponse(keeper, connection, 1.0)  # type: ignore[arg-type]
    response.read_head()
    return response, keeper


def _chunked(
    body: bytes, sizes: Sequence[int], extension: bool, trailer: bool
) -> bytes:
    out, i = [], 0
    for size in [*sizes, len(body)]:
        piece = body[i : i + max(1, size)]
        if not piece:
            break
        ext = b";name=value" if extension else b""
        out.append(b"%x%s\r\n%s\r\n" % (len(piece), ext, piece))
        i += len(piece)
    out.append(b"0\r\nx-trailer: yes\r\n\r\n" if trailer else b"0\r\n\r\n")
    return b"".join(out)


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=600),
    sizes=st.lists(st.integers(1, 80), max_size=20),
    cuts=st.lists(st.integers(0, 2000), max_size=30),
    extension=st.booleans(),
    trailer=st.booleans(),
    interim=st.booleans(),
)
def test_a_chunked_body_reads_whole_at_any_read_boundaries(
    body: bytes,
    sizes: list[int],
    cuts: list[int],
    extension: bool,
    trailer: bool,
    interim: bool,
) -> None:
    raw = (b"HTTP/1.1 100 Continue\r\n\r\n" if interim else b"") + HEAD
    raw += b"transfer-encoding: chunked\r\n\r\n" + _chunked(
        body, sizes, extension, trailer
    )
    response, keeper = _response(raw, cuts)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert b"".join(response.iter_raw()) == body
    assert len(keeper.kept) == 1  # read to its end: the connection is kept


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=400), cuts=st.lists(st.integers(0, 800), max_size=20))
def test_a_sized_body_and_a_body_read_to_the_close_read_whole(
    body: bytes, cuts: list[int]
) -> None:
    sized = HEAD + b"content-length: %d\r\n\r\n" % len(body) + body
    response, keeper = _response(sized, cuts)
    assert b"".join(response.iter_raw()) == body and len(keeper.kept) == 1

    unframed = HEAD + b"connection: close\r\n\r\n" + body
    response, keeper = _response(unframed, cuts)
    assert b"".join(response.iter_raw()) == body and keeper.kept == []


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (
            HEAD + b"transfer-encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
            "chunk size",
        ),
        (HEAD + b"transfer-encoding: chunked\r\n\r\n2\r\nabXX0\r\n\r\n", "CRLF"),
        (
            HEAD + b"transfer-encoding: chunked\r\n\r\n5\r\nab",
            "without sending complete",
        ),
        (HEAD + b"transfer-encoding: chunked\r\n\r\n" + b"1" * 5000, "too long"),
        (HEAD + b"content-length: 10\r\n\r\nabc", "without sending complete"),
    ],
)
def test_a_body_that_breaks_its_framing_is_a_protocol_error(
    raw: bytes, words: str
) -> None:
    response, keeper = _response(raw, [])
    with pytest.raises(httpx.RemoteProtocolError, match=words):
        b"".join(response.iter_raw())
    assert keeper.kept == []


@pytest.mark.parametrize(
    "raw",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2OO OK\r\n\r\n",
        HEAD + b"bad line\r\n\r\n",
    ],
)
def test_a_head_that_is_not_http_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(Exception, match=r"HTTP/1\.x|malformed header"):
        _response(raw, [])


class _RawServer:
    """A loopback TCP server that answers each request with the next scripted bytes
    (a callable gets the connection and does what it likes)."""

    def __init__(
        self,
        answers: Sequence[bytes | Callable[[socket.socket], None]],
        *,
        head_only: bool = False,
    ) -> None:
        self._answers = list(answers)
        self._head_only = head_only  # answer once a request's head is in
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _run(self) -> None:
        while self._answers:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                while self._answers and self._read_request(conn):
                    answer = self._answers.pop(0)
                    if callable(answer):
                        answer(conn)
                        break
                    conn.sendall(answer)

    def _read_request(self, conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return False
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length and not self._head_only:
            body += conn.recv(65536)
        self.requests += 1
        return True

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def raw_server() -> Iterator[Callable[..., _RawServer]]:
    made: list[_RawServer] = []

    def make(
        *answers: bytes | Callable[[socket.socket], None], head_only: bool = False
    ) -> _RawServer:
        made.append(_RawServer(answers, head_only=head_only))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _sse(text: str) -> bytes:
    body = openai_body([text])
    return (
        HEAD
        + b"transfer-encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )


def _text(provider: OpenAIChat) -> str:
    return "".join(getattr(e, "text", "") for e in drain(provider, request("hi")))


def test_requests_share_one_kept_alive_connection(loopback: LoopbackServer) -> None:
    loopback.add(*(Reply.sse(openai_body([f"answer {i}"])) for i in range(3)))
    with OpenAIChat("m", loopback.url + "/v1", "sk-test") as provider:
        assert [_text(provider) for _ in range(3)] == [f"answer {i}" for i in range(3)]
    assert {r.connection for r in loopback.requests} == {
        loopback.requests[0].connection
    }
    sent = loopback.requests[0]
    assert sent.headers["content-length"] == str(len(sent.body))
    assert sent.headers["authorization"] == "Bearer sk-test"


def test_a_client_nobody_closed_closes_its_kept_connections_when_collected(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    loopback.add(Reply.sse(openai_body(["kept"])))
    provider = OpenAIChat("m", loopback.url + "/v1", "sk-test")
    assert _text(provider) == "kept"  # its connection is kept, idle
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del provider
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert unraisable == []


def test_a_connection_the_server_closed_while_idle_is_replaced(
    raw_server: Callable[..., _RawServer],
) -> None:
    def answer_then_close(conn: socket.socket) -> None:
        conn.sendall(_sse("first"))  # keep-alive promised, then closed while idle
        time.sleep(0.05)

    server = raw_server(answer_then_close, _sse("second"))
    with OpenAIChat("m", server.url, "sk-test") as provider:
        assert _text(provider) == "first"
        time.sleep(0.3)  # the close reaches the client while the connection is idle
        assert _text(provider) == "second"
    assert server.connections == 2


def test_a_connection_just_read_from_is_reused_without_a_poll_until_one_fails(
    raw_server: Callable[..., _RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # "just read from" is under 0.25 s: a loaded machine could take longer between
    # the steps below, so the test widens it
    monkeypatch.setattr(_sockets, "_FRESH", 5.0)

    def answer_then_close(text: str) -> Callable[[socket.socket], None]:
        return lambda conn: conn.sendall(_sse(text))  # keep-alive promised, closed

    server = raw_server(
        answer_then_close("first"), answer_then_close("second"), _sse("third")
    )
    with OpenAIChat("m", server.url, "sk-test") as provider:
        assert _text(provider) == "first"
        time.sleep(0.05)  # the close is in, the connection was read from 50 ms ago
        with pytest.raises(TransportError):  # taken as open: the request met the close
            _text(provider)
        assert _text(provider) == "second"  # on a new connection
        time.sleep(0.05)
        # after that failure the client polls: the closed connection is replaced
        assert _text(provider) == "third"
    assert (server.connections, server.requests) == (3, 3)


def test_a_request_the_server_read_is_never_sent_again(
    raw_server: Callable[..., _RawServer],
) -> None:
    def read_then_hang_up(conn: socket.socket) -> None:
        time.sleep(0.2)  # it read the request (and may have acted on it), then closes

    server = raw_server(_sse("first"), read_then_hang_up, _sse("never asked"))
    with OpenAIChat("m", server.url, "sk-test") as provider:
        assert _text(provider) == "first"
        with pytest.raises(TransportError):
            _text(provider)
    assert server.requests == 2


def test_an_answer_sent_before_the_body_was_read_is_the_response(
    raw_server: Callable[..., _RawServer],
) -> None:
    error = orjson.dumps(
        {
            "error": {
                "message": "maximum context length exceeded",
                "code": "context_length_exceeded",
            }
        }
    )

    def refuse_early(conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(error), error)
        )
        conn.shutdown(socket.SHUT_WR)
        time.sleep(0.2)  # then closed with the body unread: a reset

    server = raw_server(refuse_early, head_only=True)
    huge = request("x" * (8 * 1024 * 1024))
    with (
        OpenAIChat("m", server.url, "sk-test") as provider,
        pytest.raises(ContextOverflow),
    ):
        provider.open(huge)


def test_a_closed_provider_sends_nothing(loopback: LoopbackServer) -> None:
    provider = OpenAIChat("m", loopback.url + "/v1", "sk-test")
    provider.close()
    with pytest.raises(RuntimeError, match="closed"):
        provider.open(request("hi"))
    assert loopback.requests == []


def test_an_interim_response_is_skipped(raw_server: Callable[..., _RawServer]) -> None:
    server = raw_server(
        b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" + _sse("after")
    )
    with OpenAIChat("m", server.url, "sk-test") as provider:
        assert _text(provider) == "after"


def test_a_server_that_answers_garbage_is_a_transport_error_naming_it(
    raw_server: Callable[..., _RawServer],
) -> None:
    server = raw_server(b"SSH-2.0-OpenSSH_9.6\r\n\r\n", b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    provider = OpenAIChat("m", server.url, "sk-secret-key")
    with provider, pytest.raises(TransportError) as caught:
        provider.open(request("hi"))
    assert "not an HTTP/1.x response" in str(caught.value)
    assert "sk-secret-key" not in str(caught.value)


def test_a_refused_connection_names_the_server(
    raw_server: Callable[..., _RawServer],
) -> None:
    server = raw_server()
    server.close()
    provider = OpenAIChat("m", server.url, "sk-test")
    with provider, pytest.raises(TransportError, match=f"127.0.0.1:{server.port}"):
        provider.open(request("hi"))


@pytest.mark.parametrize(
    ("url", "http2", "served"),
    [
        ("http://127.0.0.1:8080/v1/chat/completions", False, True),
        ("http://localhost/v1/chat/completions?api-version=1", False, True),
        ("http://127.0.0.1:8080/v1/chat/completions", True, False),
        ("https://api.openai.com/v1/chat/completions", False, False),
        ("http://user:pw@127.0.0.1:8080/v1/chat/completions", False, False),
        ("http://127.0.0.1:8080/v1/ch at", False, False),
        ("http://bücher.invalid/v1/chat/completions", False, False),
    ],
)
def test_httpx_serves_what_the_plain_client_does_not(
    url: str, http2: bool, served: bool
) -> None:
    assert PlainHTTP.serves(url, http2=http2) is served


@pytest.mark.parametrize(
    ("environment", "served"),
    [
        ({"HTTP_PROXY": "http://127.0.0.1:3128"}, False),
        ({"http_proxy": "http://127.0.0.1:3128"}, False),
        ({"ALL_PROXY": "http://127.0.0.1:3128"}, False),
        ({"HTTPS_PROXY": "http://127.0.0.1:3128"}, True),  # not for http:// requests
        ({"HTTP_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "10.0.0.5"}, True),
        ({"HTTP_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "*"}, True),
    ],
)
def test_a_proxy_the_environment_applies_leaves_the_request_to_httpx(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], served: bool
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    url = "http://10.0.0.5:8000/v1/chat/completions"
    assert PlainHTTP.serves(url, http2=False) is served


def test_a_server_of_another_protocol_fails_at_once_not_at_the_timeout(
    raw_server: Callable[..., _RawServer],
) -> None:
    hold = threading.Event()

    def banner_then_wait(conn: socket.socket) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
        hold.wait(10)  # never closes by itself

    server = raw_server(banner_then_wait)
    provider = OpenAIChat("m", server.url, "sk-test", timeout=Timeout(read=30))
    started = time.monotonic()
    with provider, pytest.raises(TransportError, match=r"not an HTTP/1\.x response"):
        provider.open(request("hi"))
    hold.set()
    assert time.monotonic() - started < 5


def test_a_callers_own_client_sends_the_request(loopback: LoopbackServer) -> None:
    seen: list[str] = []
    client = httpx.Client(event_hooks={"request": [lambda r: seen.append(str(r.url))]})
    loopback.add(Reply.sse(openai_body(["via httpx"])))
    with OpenAIChat("m", loopback.url + "/v1", "sk-test", client=client) as provider:
        assert _text(provider) == "via httpx"
    assert seen == [loopback.url + "/v1/chat/completions"]
    client.close()

"""The HTTP providers over real HTTP/2: TLS, ALPN ``h2``, DATA frames, RST_STREAM.

The server (``tests/h2server.py``) runs on the ``h2`` state machine behind a
certificate from a throwaway CA that the client trusts, either through
``SSL_CERT_FILE`` (the provider's own ``http2=True`` client honours it) or through a
client passed in with ``verify=``. It offers only ``h2``, so a client that fell back
to HTTP/1.1 would get no response at all.
"""

from __future__ import annotations

import ssl
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip(
    "h2", reason="HTTP/2 needs the h2 package: pip install 'navi-core[http2]'"
)

import h2.errors
import trustme
from h2server import H2Reply, H2Server
from wire_streams import anthropic_body, openai_body, request

from navi_core import (
    Agent,
    Config,
    MemoryStore,
    ProviderRetry,
    RetryPolicy,
    TextDelta,
    TurnComplete,
    Usage,
    tool,
)
from navi_core.config import Timeout
from navi_core.conversation import Message, Thinking
from navi_core.events import Event, MessageComplete
from navi_core.providers._http import HTTPProvider
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.delta_stream import DeltaStream
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.stream import Stream

FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=20, jitter=False))
# Bounded client-side waits: a server that stops answering fails the test in seconds.
BOUNDED = Timeout(connect=5.0, read=10.0, write=5.0, pool=5.0)
_ENV = (
    "SSL_CERT_DIR",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
)


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A throwaway certificate authority, for this module only."""
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CA certificate as a PEM file, for ``SSL_CERT_FILE``."""
    path = tmp_path_factory.mktemp("h2-ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def trusted(ca_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients made from here on trust the CA (``SSL_CERT_FILE``) and use no proxy."""
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server(ca: trustme.CA) -> Iterator[H2Server]:
    """A fresh HTTP/2 server per test; it must end without a protocol error."""
    with H2Server(ca) as srv:
        yield srv
    assert srv.errors == []


def _events(stream: Stream) -> list[Event]:
    with stream:
        return list(stream)


def _produce(stream: DeltaStream) -> Message:
    """Produce an open response to its end; the finished assistant message."""
    queue: deque[Event] = deque()
    try:
        while not stream.produce(queue):
            pass
    finally:
        stream.close()
    last = queue[-1]
    assert isinstance(last, MessageComplete)
    return last.message


def _one_h2_connection(server: H2Server) -> None:
    (conn,) = server.connections
    assert (conn.protocol, conn.preface) == ("h2", True)
    assert {r.connection for r in server.requests} == {1}
    assert server.unscripted == 0


def test_openai_turn_with_a_tool_call(server: H2Server, trusted: None) -> None:
    calls = [("call_1", "add", ['{"a": 2', ', "b": 40}'])]
    first = openai_body(
        tool_calls=calls, usage={"prompt_tokens": 30, "completion_tokens": 8}
    )
    second = openai_body(
        ["The sum ", "is ", "42."],
        usage={
            "prompt_tokens": 50,
            "completion_tokens": 6,
            "prompt_tokens_details": {"cached_tokens": 20},
        },
    )
    server.add(
        H2Reply.sse(first, pieces=5, pause=0.005),
        H2Reply.sse(second, pieces=4, pause=0.005),
    )
    url = server.url + "/v1"
    with OpenAIChat("gpt-test", url, "sk-h2", http2=True, timeout=BOUNDED) as p:
        agent = Agent(p, tools=[add], config=FAST)
        events = _events(agent.run("2 + 40?"))

    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, done.iterations, done.tool_calls) == ("The sum is 42.", 2, 1)
    assert done.usage == Usage(input=60, output=14, cache_read=20)
    assert [m.role for m in agent.conversation.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    _one_h2_connection(server)
    assert [r.stream_id for r in server.requests] == [1, 3]
    assert server.connections[0].data_frames == {1: 5, 3: 4}
    head = server.requests[0].headers
    assert (head[":method"], head[":scheme"], head[":path"]) == (
        "POST",
        "https",
        "/v1/chat/completions",
    )
    assert head["authorization"] == "Bearer sk-h2"
    assert server.requests[0].json["stream"] is True
    tool_message = server.requests[1].json["messages"][2]
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": "42"}


def test_anthropic_turn_with_thinking(server: H2Server, trusted: None) -> None:
    body = anthropic_body(
        [("thinking", (["Adding ", "up."], "sig-h2")), ("text", ["It is ", "42."])],
        usage={"input_tokens": 25, "cache_read_input_tokens": 100, "output_tokens": 1},
        output_tokens=9,
    )
    server.add(H2Reply.sse(body, pieces=6, pause=0.005))
    with Anthropic(
        "claude-test", server.url, "ak-h2", http2=True, timeout=BOUNDED
    ) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("2 + 40?"))

    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, done.iterations) == ("It is 42.", 1)
    assert done.usage == Usage(input=25, output=9, cache_read=100)
    answer = agent.conversation.messages[-1]
    (thinking,) = [b for b in answer.content if isinstance(b, Thinking)]
    assert (thinking.text, thinking.signature) == ("Adding up.", "sig-h2")
    _one_h2_connection(server)
    assert server.connections[0].data_frames == {1: 6}
    head = server.requests[0].headers
    assert (head[":method"], head[":path"]) == ("POST", "/v1/messages")
    assert (head["x-api-key"], head["anthropic-version"]) == ("ak-h2", "2023-06-01")


def test_two_responses_in_flight_share_one_connection(
    server: H2Server, ca: trustme.CA
) -> None:
    """The first body is held until the second request arrives on its connection:
    over HTTP/1.1 the second request would need a connection of its own, and the
    first response would never finish."""
    versions: list[str] = []

    def seen(response: httpx.Response) -> None:
        versions.append(response.http_version)

    server.add(
        H2Reply.sse(openai_body(["one ", "two"]), pieces=3, after_requests=2),
        H2Reply.sse(anthropic_body([("text", ["three"])]), pieces=3),
    )
    verify = ssl.create_default_context()
    ca.configure_trust(verify)
    client = httpx.Client(http2=True, verify=verify, event_hooks={"response": [seen]})
    providers: list[HTTPProvider] = [
        OpenAIChat("gpt-test", server.url + "/v1", client=client, timeout=BOUNDED),
        Anthropic("claude-test", server.url, client=client, timeout=BOUNDED),
    ]
    with client:
        first, second = (p.open(request("hi")) for p in providers)
        assert _produce(first).text == "one two"
        assert _produce(second).text == "three"

    assert versions == ["HTTP/2", "HTTP/2"]
    _one_h2_connection(server)
    assert [(r.stream_id, r.concurrent) for r in server.requests] == [
        (1, ()),
        (3, (1,)),
    ]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_rst_stream_mid_body_is_retried_without_duplicates(
    server: H2Server, trusted: None, api: str
) -> None:
    if api == "openai":
        body = openai_body(["Hello ", "world", "!"])
        provider: HTTPProvider = OpenAIChat(
            "gpt-test", server.url, http2=True, timeout=BOUNDED
        )
    else:
        body = anthropic_body([("text", ["Hello ", "world", "!"])])
        provider = Anthropic("claude-test", server.url, http2=True, timeout=BOUNDED)
    cut = body.index(b"world")
    server.add(
        H2Reply(
            body=(body[: cut // 2], 0.005, body[cut // 2 : cut]),
            reset=h2.errors.ErrorCodes.INTERNAL_ERROR,
        ),
        H2Reply.sse(body, pieces=3),
    )
    store = MemoryStore()
    with provider:
        agent = Agent(provider, store=store, config=FAST)
        events = _events(agent.run("hi"))

    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert (retry.attempt, retry.error) == (1, "TransportError")
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["Hello ", "Hello ", "world", "!"]  # the reset attempt's, then all
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.response == "Hello world!"
    assert [m.text for m in agent.conversation.messages] == ["hi", "Hello world!"]
    stored = store.load(agent.session_id).messages
    assert [m.text for m in stored] == ["hi", "Hello world!"]
    # A reset ends one stream, not the connection: the retry is the next stream on it.
    _one_h2_connection(server)
    assert server.connections[0].resets_sent == [1]
    assert [r.stream_id for r in server.requests] == [1, 3]

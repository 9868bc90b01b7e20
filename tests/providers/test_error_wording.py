"""Errors that name the problem: a refused or silent server is named by its URL
(never a credential or a query), and a long error body keeps what says what is wrong."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import drain, request

from navi_core import OpenAIChat
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

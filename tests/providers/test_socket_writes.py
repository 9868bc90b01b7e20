"""A request goes out in one write, and a connection just read from is not polled.

Real TCP sockets on loopback, through the providers' network backend: the server side
reads without waiting, so what it finds shows what the client wrote and when.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpcore
import pytest

from navi_core.providers._sockets import InterruptibleBackend

HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 11\r\n\r\n"
)
BODY = b'{"a": true}'


@pytest.fixture
def pair() -> Iterator[tuple[httpcore.NetworkStream, socket.socket]]:
    """A client stream from the backend and the server's end of its connection."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        stream = InterruptibleBackend().connect_tcp("127.0.0.1", port, timeout=5)
        server, _ = listener.accept()
        server.setblocking(False)
        try:
            yield stream, server
        finally:
            stream.close()
            server.close()


def waiting(server: socket.socket) -> bytes:
    """What the client has written so far (without waiting for more)."""
    time.sleep(0.05)
    try:
        return server.recv(65536)
    except BlockingIOError:
        return b""


def test_a_head_goes_out_with_its_body(
    pair: tuple[httpcore.NetworkStream, socket.socket],
) -> None:
    stream, server = pair
    stream.write(HEAD)
    assert waiting(server) == b""  # held for its body
    stream.write(BODY)
    stream.write(b"")  # httpcore's end of a sized body
    assert waiting(server) == HEAD + BODY


def test_a_head_without_a_body_goes_out_at_once(
    pair: tuple[httpcore.NetworkStream, socket.socket],
) -> None:
    stream, server = pair
    get = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    stream.write(get)
    assert waiting(server) == get
    empty = HEAD.replace(b"Content-Length: 11", b"Content-Length: 0")
    stream.write(empty)
    assert waiting(server) == empty


def test_a_held_head_is_sent_before_a_read(
    pair: tuple[httpcore.NetworkStream, socket.socket],
) -> None:
    stream, server = pair
    stream.write(HEAD)
    server.setblocking(True)
    server.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    assert stream.read(65536, timeout=5).startswith(b"HTTP/1.1 400")
    server.setblocking(False)
    assert waiting(server) == HEAD


def test_a_large_body_is_not_copied_to_join_its_head(
    pair: tuple[httpcore.NetworkStream, socket.socket],
) -> None:
    stream, server = pair
    body = b"x" * (1 << 20)
    head = HEAD.replace(b"Content-Length: 11", b"Content-Length: %d" % len(body))
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    received = bytearray()
    stream.write(head)

    def drain() -> None:
        server.setblocking(True)
        while len(received) < len(head) + len(body):
            received.extend(server.recv(1 << 20))

    reader = threading.Thread(target=drain)
    reader.start()
    stream.write(body)
    reader.join(timeout=10)
    assert bytes(received) == head + body


def test_a_connection_just_read_from_is_not_polled(
    pair: tuple[httpcore.NetworkStream, socket.socket],
) -> None:
    stream, server = pair
    server.setblocking(True)
    server.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert stream.read(65536, timeout=5)
    server.close()  # the server went away: a poll would see it
    assert stream.get_extra_info("is_readable") is False  # just used: taken as open
    time.sleep(0.4)
    assert stream.get_extra_info("is_readable") is True  # idle a while: polled

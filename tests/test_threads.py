"""Many streams in one process: concurrent turns over loopback, each complete and in
order, each still cancellable while blocked on its socket.

The server is ``bench/server.py`` in its own process: thousands of chunks sent in
256 KiB writes, so every read fills its buffer and the provider parses it in slices
whose edges fall inside events.
"""

from __future__ import annotations

import importlib.util
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpcore
import orjson
import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import openai_body

from navi_core import Agent, NullStore, StopReason, TextDelta, TurnComplete
from navi_core.events import AnyEvent
from navi_core.providers import _body
from navi_core.providers._sockets import InterruptibleBackend
from navi_core.providers.openai_chat import OpenAIChat

BENCH = Path(__file__).resolve().parents[1] / "bench"
CHUNKS = 3_000
THREADS = 32
TURNS = 3


def _bench_server() -> ModuleType:
    """``bench/server.py`` as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_server", BENCH / "server.py")
    assert spec is not None and spec.loader is not None
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    return server


def _expected_text() -> str:
    """The text the bench server streams, from its own event generator."""
    parts = []
    for event in _bench_server().openai_events(CHUNKS):
        payload = event.removeprefix(b"data: ").strip()
        if payload == b"[DONE]":
            continue
        for choice in orjson.loads(payload)["choices"]:
            parts.append(choice["delta"].get("content") or "")
    return "".join(parts)


@pytest.fixture(scope="module")
def bench_url() -> Iterator[str]:
    with _bench_server().spawn(CHUNKS) as url:
        yield f"{url}/v1"


def _turns(url: str, turns: int) -> list[tuple[str, list[AnyEvent], str]]:
    """``turns`` turns on one provider, a new Agent each: (deltas joined, events,
    the final message's text)."""
    out = []
    with OpenAIChat("gpt-4o", url, "sk-test-1234567890") as provider:
        for _ in range(turns):
            agent = Agent(provider, store=NullStore())
            events = list(agent.run("Tell me a long story."))
            text = "".join(e.text for e in events if isinstance(e, TextDelta))
            out.append((text, events, agent.conversation.messages[-1].text))
    return out


def test_concurrent_turns_each_get_every_event_in_order(bench_url: str) -> None:
    expected = _expected_text()
    results: dict[int, list[tuple[str, list[AnyEvent], str]]] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            results[k] = _turns(bench_url, TURNS)
        except BaseException as exc:  # reported below, with the thread's traceback
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads), "a turn did not end"
    assert sorted(results) == list(range(THREADS))
    for turns in results.values():
        assert len(turns) == TURNS
        for text, events, final in turns:
            assert text == expected  # every delta, none twice, in order
            assert final == expected
            done = events[-1]
            assert isinstance(done, TurnComplete)
            assert done.stop_reason is StopReason.END_TURN
            assert sum(isinstance(e, TurnComplete) for e in events) == 1


@pytest.mark.parametrize("parse_bytes", [1, 7, 4096])
def test_any_parse_slice_gives_the_same_turn(
    bench_url: str, parse_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_body, "PARSE_BYTES", parse_bytes)
    [(text, events, final)] = _turns(bench_url, 1)
    assert text == final == _expected_text()
    assert sum(isinstance(e, TextDelta) for e in events) == CHUNKS


def test_concurrent_turns_blocked_on_silent_servers_all_cancel(
    loopback: LoopbackServer,
) -> None:
    streams = 8
    body = openai_body(["never ", "finished"])
    loopback.add(*(Reply(body=(body[:120], 60.0, body[120:])) for _ in range(streams)))
    providers = [
        OpenAIChat("gpt-4o", loopback.url + "/v1", "sk-test-1234567890")
        for _ in range(streams)
    ]
    runs = [Agent(p, store=NullStore()).run("hi") for p in providers]
    ends: list[TurnComplete] = []
    started = threading.Barrier(streams + 1)

    def drain(k: int) -> None:
        stream = runs[k]
        started.wait()
        events = list(stream)
        assert isinstance(events[-1], TurnComplete)
        ends.append(events[-1])

    threads = [threading.Thread(target=drain, args=(k,)) for k in range(streams)]
    try:
        for t in threads:
            t.start()
        started.wait()
        deadline = time.monotonic() + 30
        while len(loopback.requests) < streams and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # every reader is now blocked on its socket
        for stream in runs:
            stream.cancel()
        for t in threads:
            t.join(timeout=20)
        assert not any(t.is_alive() for t in threads), "a cancel did not end a read"
        assert len(ends) == streams
        assert all(e.stop_reason is StopReason.CANCELLED for e in ends)
    finally:
        for p in providers:
            p.close()


def test_socket_timeouts_per_direction_and_blocking_reads() -> None:
    """Read and write timeouts are kept apart, a timed-out read says so, and a read
    without a limit waits for the peer (the socket never leaves blocking mode)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    backend = InterruptibleBackend()
    stream = backend.connect_tcp("127.0.0.1", port, timeout=5.0)
    peer, _ = listener.accept()
    try:
        start = time.monotonic()
        with pytest.raises(httpcore.ReadTimeout, match="timed out"):
            stream.read(65536, timeout=0.2)
        assert time.monotonic() - start < 3.0
        stream.write(b"ping", timeout=30.0)
        assert peer.recv(16) == b"ping"
        stream.write(b"", timeout=30.0)  # nothing to send: no error, nothing sent
        payload = bytes(range(256)) * 1200  # 300 KiB, more than one read of httpcore's
        threading.Timer(0.3, peer.sendall, args=(payload,)).start()
        got = bytearray()
        while len(got) < len(payload):
            got += stream.read(65536, timeout=None)
        assert bytes(got) == payload
        with pytest.raises(httpcore.ReadTimeout):
            stream.read(65536, timeout=0.1)  # the limit comes back after None
        if sys.platform.startswith("linux"):  # kernel timeouts, no poll per read
            assert stream.get_extra_info("socket").gettimeout() is None
    finally:
        stream.close()
        peer.close()
        listener.close()


@pytest.fixture
def connected() -> Iterator[tuple[httpcore.NetworkStream, socket.socket]]:
    """A backend stream to a loopback peer: (ours, the peer's socket)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stream = InterruptibleBackend().connect_tcp(
        "127.0.0.1", listener.getsockname()[1], timeout=5.0
    )
    peer, _ = listener.accept()
    listener.close()
    try:
        yield stream, peer
    finally:
        stream.close()
        peer.close()


def _read_all(stream: httpcore.NetworkStream) -> bytes:
    got = bytearray()
    while data := stream.read(65536, timeout=10.0):
        got += data
    return bytes(got)


def test_a_fast_body_is_read_whole_and_in_order(connected, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Reads that fill their buffer are followed by reads that take what is waiting
    without a wait; the bytes are the peer's, in order, then the end."""
    from navi_core import core
    from navi_core.providers import _sockets
    from navi_core.providers._sockets import READ_BYTES

    stream, peer = connected
    payload = bytes(range(251)) * (3 * READ_BYTES // 251 + 17)
    ready: list[int] = []

    def counted(sock: socket.socket, size: int) -> bytes | None:
        data = core.recv_ready(sock, size)
        ready.append(-1 if data is None else len(data))
        return data

    monkeypatch.setattr(_sockets, "recv_ready", counted)
    threading.Thread(target=lambda: (peer.sendall(payload), peer.close())).start()
    time.sleep(0.3)  # most of it is waiting when the reads begin
    assert _read_all(stream) == payload
    assert any(n > 0 for n in ready), "no read took waiting bytes without a wait"


def test_a_read_returns_at_most_what_was_asked(connected) -> None:  # type: ignore[no-untyped-def]
    """``read(n)`` gives at most ``n`` bytes, and at most ``READ_BYTES`` whatever is
    asked: a read's buffer stays small even when much more is waiting."""
    from navi_core.providers._sockets import READ_BYTES

    stream, peer = connected
    payload = bytes(range(256)) * (4 * READ_BYTES // 256)
    sender = threading.Thread(target=peer.sendall, args=(payload,))
    sender.start()
    time.sleep(0.2)  # much more than one read's worth is waiting
    first = stream.read(1000, timeout=10.0)
    assert first == payload[:1000]
    sizes = []
    got = bytearray(first)
    while len(got) < len(payload):
        data = stream.read(1 << 20, timeout=10.0)
        sizes.append(len(data))
        got += data
    sender.join()
    assert bytes(got) == payload
    assert max(sizes) <= READ_BYTES


def test_a_read_after_a_full_buffer_still_waits_for_late_bytes(connected) -> None:  # type: ignore[no-untyped-def]
    from navi_core.providers._sockets import READ_BYTES

    stream, peer = connected
    first = b"a" * READ_BYTES
    peer.sendall(first)
    got = bytearray()
    while len(got) < len(first):
        got += stream.read(65536, timeout=10.0)
    threading.Timer(0.3, peer.sendall, args=(b"late",)).start()
    start = time.monotonic()
    assert stream.read(65536, timeout=10.0) == b"late"  # nothing waiting: it waits
    assert time.monotonic() - start >= 0.2
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.sendall(b"b" * READ_BYTES)
    got = bytearray()
    while len(got) < READ_BYTES:
        got += stream.read(65536, timeout=10.0)
    peer.close()  # an RST: the next read fails as a read, not as a hang
    with pytest.raises(httpcore.ReadError):
        for _ in range(3):
            stream.read(65536, timeout=10.0)


def test_a_large_request_goes_out_whole_to_a_slow_reader(connected) -> None:  # type: ignore[no-untyped-def]
    """What the socket's buffer does not take at once is sent waiting, in order."""
    stream, peer = connected
    body = bytes(range(256)) * (8 * 1024 * 1024 // 256)
    got = bytearray()

    def slow_reader() -> None:
        time.sleep(0.2)
        while len(got) < len(body) + 5 and (data := peer.recv(1 << 16)):
            got.extend(data)

    reader = threading.Thread(target=slow_reader)
    reader.start()
    stream.write(b"head:", timeout=30.0)
    stream.write(body, timeout=30.0)
    reader.join(timeout=30)
    assert bytes(got) == b"head:" + body


def test_a_write_no_one_reads_times_out(connected) -> None:  # type: ignore[no-untyped-def]
    stream, _ = connected
    start = time.monotonic()
    with pytest.raises(httpcore.WriteTimeout):
        stream.write(b"x" * (64 * 1024 * 1024), timeout=0.3)
    assert time.monotonic() - start < 10


def test_an_idle_connection_reads_as_closed_once_the_server_closes(connected) -> None:  # type: ignore[no-untyped-def]
    stream, peer = connected
    assert stream.get_extra_info("is_readable") is False
    peer.close()
    deadline = time.monotonic() + 5
    while not stream.get_extra_info("is_readable"):
        assert time.monotonic() < deadline
        time.sleep(0.01)

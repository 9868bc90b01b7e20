"""Socket calls that never wait (``recv_ready``, ``send_ready``, ``readable``): the same
results on both twins, on real sockets, and never a wait."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from navi_core import _core_py

FIXTURE_SAFE = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    deadline=None,
    max_examples=60,
)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A loopback TCP connection: (ours, the peer's)."""
    listener = socket.create_server(("127.0.0.1", 0))
    ours = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    listener.close()
    try:
        yield ours, peer
    finally:
        ours.close()
        peer.close()


def _arrived(sock: socket.socket) -> None:
    """Wait until data sent to ``sock`` over loopback can be read."""
    deadline = time.monotonic() + 5
    while not _core_py.readable(sock):
        assert time.monotonic() < deadline, "loopback data never arrived"
        time.sleep(0.001)


def test_nothing_waiting_is_none_and_no_wait(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    ours, _ = pair
    ours.settimeout(None)  # blocking: a recv that waited would hang here
    start = time.monotonic()
    assert core.recv_ready(ours, 1024) is None
    assert core.readable(ours) is False
    assert time.monotonic() - start < 1.0


def test_waiting_bytes_come_in_order_and_by_size(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    ours, peer = pair
    peer.sendall(b"0123456789")
    _arrived(ours)
    assert core.readable(ours) is True
    assert core.recv_ready(ours, 4) == b"0123"
    assert core.recv_ready(ours, 100) == b"456789"
    assert core.recv_ready(ours, 100) is None
    assert core.recv_ready(ours, 0) == _core_py.recv_ready(ours, 0) == b""


def test_end_of_stream_is_empty_bytes_and_readable(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    ours, peer = pair
    peer.sendall(b"last")
    peer.close()
    _arrived(ours)
    assert core.recv_ready(ours, 100) == b"last"
    assert core.readable(ours) is True
    assert core.recv_ready(ours, 100) == b""


def test_a_reset_connection_raises_connection_reset(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    ours, peer = pair
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()  # linger 0: an RST, not a FIN
    _arrived(ours)
    with pytest.raises(ConnectionResetError):
        core.recv_ready(ours, 100)


def test_a_closed_socket_raises_and_reads_as_readable(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    ours, _ = pair
    ours.close()
    with pytest.raises(OSError):
        core.recv_ready(ours, 100)
    with pytest.raises(OSError):
        core.send_ready(ours, b"x")
    assert core.readable(ours) is True


def test_send_ready_sends_what_fits_and_never_waits(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    ours, peer = pair
    assert core.send_ready(ours, b"") == 0
    assert core.send_ready(ours, b"hello") == 5
    assert core.send_ready(ours, bytearray(b" big")) == 4
    assert core.send_ready(ours, memoryview(b" world")[1:]) == 5
    got = b""
    while len(got) < 14:
        got += peer.recv(100)
    assert got == b"hello bigworld"
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    chunk = b"x" * 65536
    sent, start = 0, time.monotonic()
    while (n := core.send_ready(ours, chunk)) > 0:  # the peer reads nothing
        sent += n
        assert time.monotonic() - start < 10, "send_ready never filled the buffer"
    assert sent > 0 and n == 0
    assert time.monotonic() - start < 10


def test_sending_to_a_closed_peer_raises_not_a_signal(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    ours, peer = pair
    peer.close()
    deadline = time.monotonic() + 5
    with pytest.raises((BrokenPipeError, ConnectionResetError)):
        while time.monotonic() < deadline:  # the first send may still be taken
            core.send_ready(ours, b"x" * 1024)
            time.sleep(0.005)


def test_negative_size_is_refused(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        core.recv_ready(pair[0], -1)


def test_the_compiled_calls_keep_the_gil(core: ModuleType, pair) -> None:  # type: ignore[no-untyped-def]
    """No other thread runs during the compiled calls: they give nothing away."""
    if core is _core_py:
        pytest.skip("the pure twin's socket calls give the GIL away")
    import sys
    import threading

    ours, peer = pair
    peer.sendall(b"z" * 10)
    _arrived(ours)
    ticks = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            ticks[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.25)
    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        while ticks[0] == 0:
            time.sleep(0.001)
        time.sleep(
            0.001
        )  # the GIL comes back by a forced switch: 0.25 s before the next
        before = ticks[0]
        for _ in range(100):
            core.readable(ours)
            core.recv_ready(ours, 1)
            core.send_ready(ours, b"")
        core.send_ready(ours, b"x")
        after = ticks[0]
    finally:
        stop.set()
        sys.setswitchinterval(old)
        spinner.join()
    assert after == before


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.binary(min_size=1, max_size=3000)),
        st.tuples(st.just("recv"), st.integers(min_value=1, max_value=4000)),
        st.tuples(st.just("poll"), st.just(0)),
    ),
    max_size=25,
)


def _play(core: ModuleType, ops: list[tuple[str, object]]) -> list[object]:
    listener = socket.create_server(("127.0.0.1", 0))
    ours = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    listener.close()
    out: list[object] = []
    try:
        for op, arg in ops:
            if op == "send":  # the peer sends; wait until it all can be read
                peer.sendall(arg)  # type: ignore[arg-type]
                _arrived(ours)
                out.append(("sent", len(arg)))  # type: ignore[arg-type]
            elif op == "recv":
                out.append(core.recv_ready(ours, arg))
            else:
                out.append(core.readable(ours))
        out.append(core.send_ready(ours, b"ping"))
        got = peer.recv(16)
        out.append(got)
    finally:
        ours.close()
        peer.close()
    return out


@FIXTURE_SAFE
@given(ops=_OPS)
def test_differential_the_twins_give_the_same_results(core: ModuleType, ops) -> None:  # type: ignore[no-untyped-def]
    """Random sends of the peer and reads of ours: byte for byte alike on both twins
    (``core`` is either; the reference is the pure twin)."""
    assert _play(core, ops) == _play(_core_py, ops)

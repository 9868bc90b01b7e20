"""Socket calls that never wait: what a connection can do at once, with no give-away.

Each socket call made from Python gives the GIL away, and while many streams share a
process each give-away is a thread switch: the thread that gave it waits its turn to
get it back, behind every other thread that wants it. A call that cannot wait has no
reason to give it away, so the compiled twin (``csrc/_sockio.pxi``) makes these with
the GIL held. This twin gives the same results through ``socket`` (which gives the GIL
away); ``providers/_sockets.py`` uses them on plain TCP sockets only.
"""

from __future__ import annotations

import select
import socket

__all__ = ["readable", "recv_ready", "send_ready"]

_DONTWAIT: int = getattr(socket, "MSG_DONTWAIT", 0)
_NOSIGNAL: int = getattr(socket, "MSG_NOSIGNAL", 0)


def recv_ready(sock: socket.socket, size: int) -> bytes | None:
    """Up to ``size`` bytes already waiting on ``sock`` (``b""`` at end of stream),
    or None when none are: a read that would have to wait is not made.

    Raises:
        OSError: the connection failed (reset, or the socket is closed).
    """
    if not _DONTWAIT:
        return None
    try:
        return sock.recv(size, _DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return None


def send_ready(sock: socket.socket, data: bytes | bytearray | memoryview) -> int:
    """Send what of ``data`` the socket takes now; the count sent (0: none).

    Raises:
        OSError: the connection failed (reset, or the peer closed it).
    """
    if not _DONTWAIT or not data:
        return 0
    try:
        return sock.send(data, _DONTWAIT | _NOSIGNAL)
    except (BlockingIOError, InterruptedError):
        return 0


def readable(sock: socket.socket) -> bool:
    """True when a read of ``sock`` would not wait: data, end of stream or an error is
    waiting (as ``select`` reports it)."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)

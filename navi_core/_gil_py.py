"""Where the GIL goes around a call that may block: socket calls that never wait keep
it, and a hand-off between two threads lets it go before it wakes the other one.

Each socket call made from Python gives the GIL away, and while many streams share a
process each give-away is a thread switch: the thread that gave it waits its turn to
get it back, behind every other thread that wants it. A call that cannot wait has no
reason to give it away, so the compiled twin (``csrc/_gil.pxi``) makes these with
the GIL held. This twin gives the same results through ``socket`` (which gives the GIL
away); ``providers/_sockets.py`` uses them on plain TCP sockets only.

A thread that wakes another and then waits (a tool call handed to a pool thread, its
result handed back) wakes it while it still holds the GIL: the woken thread finds the
GIL taken, sleeps again until it is let go, and each such round is two more system
calls and a thread switch. ``hand_off`` gives a ``Signal`` and waits for another; the
compiled twin lets the GIL go first, so the woken thread runs at once. This twin gives
the same results with ``threading`` locks (waking the other thread before it lets the
GIL go).
"""

from __future__ import annotations

import select
import socket
import threading

__all__ = ["Signal", "hand_off", "readable", "recv_ready", "send_ready"]

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


class Signal:
    """A wake-up that one thread waits for and any thread gives: a binary semaphore.

    Gives that come before a wait are one (the wait returns at once, the next one
    waits); a give that comes while the waiter is waking is part of that wake. So a
    waiter looks again at what it waits for after every wake, and a giver makes what
    it gives visible (appends it to a queue) before it gives.
    """

    __slots__ = ("_cond", "_given")

    def __init__(self) -> None:
        # one flag under one lock: an exception (Ctrl-C) between two steps of a wait
        # or a give cannot leave the two out of step
        self._cond = threading.Condition(threading.Lock())
        self._given = False

    def give(self) -> None:
        """Wake the waiter, or the next wait when none is waiting (any thread)."""
        with self._cond:
            if not self._given:
                self._given = True
                self._cond.notify()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a give, at most ``timeout`` seconds (None: for ever); False when
        the time ran out. Interruptible as a lock's ``acquire`` is (Ctrl-C).

        Raises:
            ValueError: ``timeout`` is negative or NaN.
            OverflowError: ``timeout`` is over ``threading.TIMEOUT_MAX``.
        """
        _check(timeout)
        with self._cond:
            taken = self._cond.wait_for(lambda: self._given, timeout)
            self._given = False
        return taken


def _check(timeout: float | None) -> None:
    if timeout is None:
        return
    if not timeout >= 0:  # also NaN
        raise ValueError("timeout must be None or a number of seconds from 0")
    if timeout > threading.TIMEOUT_MAX:
        raise OverflowError("timeout value is too large")


def hand_off(give: Signal | None, wait: Signal, timeout: float | None = None) -> bool:
    """Give ``give`` (unless None), then wait for ``wait`` as ``Signal.wait`` does
    (a bad ``timeout`` is refused before the give).

    Raises:
        ValueError: ``timeout`` is negative or NaN.
        OverflowError: ``timeout`` is over ``threading.TIMEOUT_MAX``.
    """
    _check(timeout)
    if give is not None:
        give.give()
    return wait.wait(timeout)

"""Interrupting blocked network I/O from another thread.

A ``Stream`` owns one ``Interrupter``. Before a step of the turn runs, the stream makes
it the *active* one of that thread (``set_active``, or ``active`` for a block); the HTTP
layer registers every socket it connects, reads or writes on that thread with it
(``watch_socket``). ``fire()``, called by ``cancel()`` or ``close()`` from any thread,
shuts those sockets down: a read blocked in the kernel returns at once and the provider
raises ``TransportError``, which the stream then reports as the cancel it was. The
stream forgets the sockets before each new request, so only the connection of the
cancelled turn is shut down.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

__all__ = ["Interrupter", "active", "current", "set_active", "watch_socket"]

_local = threading.local()


class Interrupter:
    """The sockets one turn is blocked on; ``fire()`` shuts them down (any thread)."""

    __slots__ = ("_fired", "_lock", "_socks")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._fired = False

    @property
    def fired(self) -> bool:
        """True once ``fire()`` was called; new sockets are shut down as they come."""
        return self._fired

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down on ``fire()`` (at once when it fired already)."""
        with self._lock:
            if self._fired:
                _shutdown(sock)
            elif not any(s is sock for s in self._socks):
                self._socks.append(sock)

    def forget(self) -> None:
        """Drop the watched sockets: the step using them ended."""
        with self._lock:
            self._socks.clear()

    def fire(self) -> None:
        """Shut down every watched socket, now and from now on (idempotent)."""
        with self._lock:
            self._fired = True
            socks, self._socks = self._socks, []
        for sock in socks:
            _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    # socket.socket.shutdown on the fd itself: an SSLSocket's own shutdown() would
    # try to unwrap TLS first, which needs the lock its blocked reader holds
    with contextlib.suppress(OSError, ValueError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def current() -> Interrupter | None:
    """The interrupter active on this thread, if any."""
    return getattr(_local, "interrupter", None)


def set_active(interrupter: Interrupter | None) -> None:
    """Make ``interrupter`` this thread's active one (one attribute write: per step)."""
    _local.interrupter = interrupter


def watch_socket(sock: socket.socket) -> None:
    """Register ``sock`` with this thread's active interrupter, if there is one."""
    interrupter: Interrupter | None = getattr(_local, "interrupter", None)
    if interrupter is not None:
        interrupter.watch(sock)


@contextlib.contextmanager
def active(interrupter: Interrupter) -> Iterator[Interrupter]:
    """Make ``interrupter`` this thread's active one for the block, then forget its
    sockets."""
    previous = getattr(_local, "interrupter", None)
    _local.interrupter = interrupter
    try:
        yield interrupter
    finally:
        _local.interrupter = previous
        interrupter.forget()

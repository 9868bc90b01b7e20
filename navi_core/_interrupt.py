"""Interrupting blocked network I/O from another thread.

A ``Stream`` owns one ``Interrupter``. While the turn makes a call that may block (an
open, a summary request), the interrupter is the *active* one of the calling thread
(``TurnControl.guarded``; the stream's worker thread keeps it active, ``set_active``),
and the HTTP layer holds each socket with it for the length of one blocking call on it
(connect, read, write: ``hold``/``release``); an open HTTP response holds its socket
with it until it is closed (``ResponseStream.hold_with``). ``fire()``, called by
``cancel()`` or ``close()`` from any thread, shuts the held sockets down: a read blocked
in the kernel returns at once and the provider raises ``TransportError``, which the
stream then reports as the cancel it was. A socket is held only while this turn uses
it, so a pooled connection that serves another turn next is never touched.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["THREAD", "Interrupter", "current", "set_active"]

#: per thread: ``.interrupter``, the active one (the stream's hot path sets it directly)
THREAD = threading.local()
_local = THREAD


class Interrupter:
    """The sockets one turn is blocked on right now; ``fire()`` shuts them down (any
    thread) and every socket the turn blocks on after it."""

    __slots__ = ("_fired", "_lock", "_socks")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._fired = False

    @property
    def fired(self) -> bool:
        """True once ``fire()`` was called."""
        return self._fired

    def hold(self, sock: socket.socket) -> None:
        """A blocking call on ``sock`` starts: shut it down on ``fire()`` (at once when
        fired already, so the call fails fast)."""
        with self._lock:
            self._socks.append(sock)
            fired = self._fired
        if fired:
            _shutdown(sock)

    def release(self, sock: socket.socket) -> None:
        """The blocking call on ``sock`` ended: the socket is not this turn's to shut
        down any more (a pooled connection may serve another turn next)."""
        with self._lock:
            for i, s in enumerate(self._socks):
                if s is sock:
                    del self._socks[i]
                    break

    def fire(self) -> None:
        """Shut down every socket held now, and each one held from now on."""
        with self._lock:
            self._fired = True
            socks = list(self._socks)
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

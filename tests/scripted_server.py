"""The life cycle shared by the test servers: a listener on 127.0.0.1, a thread per
connection, a queue of scripted replies, and a ``close`` that cuts everything."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import deque
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ["ScriptedServer"]

R = TypeVar("R")
S = TypeVar("S", bound="ScriptedServer[Any]")


class ScriptedServer(Generic[R]):
    """Base of the loopback servers; subclasses serve one accepted connection."""

    scheme: ClassVar[str] = "http"
    join_timeout: ClassVar[float] = 5.0

    def __init__(self, no_reply: R) -> None:
        self.unscripted = 0
        self._no_reply = no_reply
        self._replies: deque[R] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: set[socket.socket] = set()
        self._listener: socket.socket | None = None

    @property
    def port(self) -> int:
        assert self._listener is not None, "server not started"
        return int(self._listener.getsockname()[1])

    @property
    def url(self) -> str:
        """``<scheme>://127.0.0.1:<port>``, no trailing slash."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def add(self: S, *replies: Any) -> S:
        """Queue replies; requests take them in order."""
        with self._lock:
            self._replies.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Replies not taken yet."""
        with self._lock:
            return len(self._replies)

    def start(self: S) -> S:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.settimeout(0.05)
        self._listener = sock
        self._spawn(self._accept_loop)
        return self

    def close(self) -> None:
        """Stop accepting, cut every open connection and join the threads."""
        self._stop.set()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in self._threads:
            t.join(timeout=self.join_timeout)
        if self._listener is not None:
            self._listener.close()

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _take_reply_locked(self) -> R:
        """The next scripted reply, or the "no reply left" one; hold ``_lock``."""
        if self._replies:
            return self._replies.popleft()
        self.unscripted += 1
        return self._no_reply

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._accepted(conn)

    def _accepted(self, conn: socket.socket) -> None:
        """Record the connection, add it to ``_socks`` and spawn its server thread."""
        raise NotImplementedError

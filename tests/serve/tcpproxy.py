"""A TCP proxy on 127.0.0.1 that can play a server restart.

``TcpProxy(port)`` forwards every connection to ``127.0.0.1:port``; ``outage(s)``
drops every connection at once and, for ``s`` seconds, closes new ones as soon as
they arrive: what a client sees while PostgreSQL restarts.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["TcpProxy"]


class TcpProxy:
    """The proxy, serving from construction until ``close()``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._down_until = 0.0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def outage(self, seconds: float) -> None:
        """Drop every connection; refuse new ones for ``seconds``."""
        with self._lock:
            self._down_until = time.monotonic() + seconds
            dropped, self._open = self._open, []
        for sock in dropped:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down = time.monotonic() < self._down_until
            if down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.outage(0)

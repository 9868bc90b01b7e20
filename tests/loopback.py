"""A real HTTP/1.1 server on 127.0.0.1, in a thread, that replies from a script.

Tests queue ``Reply`` values; each request takes the next one. A reply can stream its
body as chunks (chunked transfer encoding) with pauses between them, trickle it one
byte per chunk, or reset the TCP connection (RST) where its body stops. Every request
is recorded (method, path, headers, body) with the number of the TCP connection it
came on, so tests can check keep-alive.

    with LoopbackServer() as server:
        server.add(Reply.sse(b"data: ...\\n\\n"), Reply.json(429, {...}))
        ...  # point a client at server.url
        assert server.requests[0].json["stream"] is True
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson
from scripted_server import ScriptedServer

__all__ = ["LoopbackServer", "Recorded", "Reply"]

SSE_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
)
_REASONS = {529: "Site Overloaded"}
_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Reply:
    """One scripted response.

    ``body`` items are bytes (one chunk each) or floats (a pause in seconds); a
    generator works too, for bodies too large to build up front (chunked only).
    ``delay`` pauses before the status line. ``trickle`` sends each body byte as its
    own chunk. ``reset`` ends the exchange with a TCP reset where the body stops, so
    the client never sees the final chunk. ``chunked=False`` sends Content-Length.
    """

    status: int = 200
    body: Iterable[bytes | float] = ()
    headers: Sequence[tuple[str, str]] = SSE_HEADERS
    delay: float = 0.0
    trickle: bool = False
    reset: bool = False
    chunked: bool = True
    #: the status line's reason phrase; the standard one when None
    reason: str | None = None

    @classmethod
    def sse(cls, data: bytes, *, chunk: int | None = None, **kw: Any) -> Reply:
        """An event-stream reply; ``chunk`` cuts the bytes into pieces of that size."""
        if chunk is None:
            return cls(body=(data,), **kw)
        return cls(body=[data[i : i + chunk] for i in range(0, len(data), chunk)], **kw)

    @classmethod
    def json(
        cls,
        status: int,
        obj: Any,
        headers: Iterable[tuple[str, str]] = (),
        **kw: Any,
    ) -> Reply:
        """A JSON reply (typically an error body) with extra headers."""
        return cls(
            status=status,
            body=(orjson.dumps(obj),),
            headers=(("content-type", "application/json"), *headers),
            chunked=False,
            **kw,
        )

    @classmethod
    def text(
        cls, status: int, text: str, headers: Iterable[tuple[str, str]] = (), **kw: Any
    ) -> Reply:
        """A plain-text reply."""
        return cls(
            status=status,
            body=(text.encode(),),
            headers=(("content-type", "text/plain; charset=utf-8"), *headers),
            chunked=False,
            **kw,
        )


@dataclass(frozen=True)
class Recorded:
    """A request as the server received it; ``connection`` counts from 1."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return orjson.loads(self.body)


_NO_REPLY = Reply.json(
    500, {"error": {"message": "loopback: no scripted reply left", "type": "loopback"}}
)


class LoopbackServer(ScriptedServer[Reply]):
    """The server; ``start``/``close`` or use it as a context manager."""

    def __init__(self) -> None:
        super().__init__(_NO_REPLY)
        self.requests: list[Recorded] = []
        self.connections = 0

    def _accepted(self, conn: socket.socket) -> None:
        conn.settimeout(None)
        with self._lock:
            self.connections += 1
            number = self.connections
            self._socks.add(conn)
        self._spawn(self._serve, conn, number)

    def _serve(self, conn: socket.socket, number: int) -> None:
        reader = _Reader(conn)
        try:
            while not self._stop.is_set():
                request = reader.request(number)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                    reply = self._take_reply_locked()
                if not self._send(conn, reply):
                    return
                if request.headers.get("connection", "").lower() == "close":
                    return
        except OSError:
            return
        finally:
            with self._lock:
                self._socks.discard(conn)
            conn.close()

    def _send(self, conn: socket.socket, reply: Reply) -> bool:
        """Send one reply; False when the connection must not be used again."""
        if reply.delay and self._stop.wait(reply.delay):
            return False
        reason = reply.reason or _REASONS.get(reply.status)
        if reason is None:
            try:
                reason = HTTPStatus(reply.status).phrase
            except ValueError:
                reason = "Unknown"
        lines = [
            f"HTTP/1.1 {reply.status} {reason}",
            *(f"{k}: {v}" for k, v in reply.headers),
        ]
        if reply.chunked:
            lines.append("transfer-encoding: chunked")
        else:
            size = sum(len(b) for b in reply.body if isinstance(b, bytes))
            lines.append(f"content-length: {size}")
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        for item in reply.body:
            if isinstance(item, (int, float)):
                if self._stop.wait(item):
                    return False
                continue
            pieces = (
                [item[i : i + 1] for i in range(len(item))] if reply.trickle else [item]
            )
            for piece in pieces:
                if not piece:
                    continue
                if reply.chunked:
                    piece = b"%x\r\n%b\r\n" % (len(piece), piece)
                conn.sendall(piece)
        if reply.reset:
            # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            return False
        if reply.chunked:
            conn.sendall(b"0\r\n\r\n")
        return True


class _Reader:
    """Reads HTTP/1.1 requests (Content-Length or chunked bodies) off one socket."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buf = b""

    def _fill(self) -> bool:
        data = self._conn.recv(65536)
        self._buf += data
        return bool(data)

    def _until(self, marker: bytes) -> bytes | None:
        while (i := self._buf.find(marker)) < 0:
            if len(self._buf) > _MAX_HEAD or not self._fill():
                return None
        out, self._buf = self._buf[:i], self._buf[i + len(marker) :]
        return out

    def _exactly(self, n: int) -> bytes | None:
        while len(self._buf) < n:
            if not self._fill():
                return None
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def request(self, connection: int) -> Recorded | None:
        head = self._until(b"\r\n\r\n")
        if head is None:
            return None
        start, *fields = head.decode("latin-1").split("\r\n")
        method, path, _ = start.split(" ", 2)
        headers: dict[str, str] = {}
        for line in fields:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._chunked()
        else:
            body = self._exactly(int(headers.get("content-length", "0")))
        if body is None:
            return None
        return Recorded(method, path, headers, body, connection)

    def _chunked(self) -> bytes | None:
        parts: list[bytes] = []
        while True:
            size_line = self._until(b"\r\n")
            if size_line is None:
                return None
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                return b"".join(parts) if self._until(b"\r\n") is not None else None
            data = self._exactly(size + 2)
            if data is None:
                return None
            parts.append(data[:-2])

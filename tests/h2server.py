"""A real HTTP/2 server over TLS on 127.0.0.1, in a thread, that replies from a script.

Built on the ``h2`` state machine (server side) behind an ``ssl`` socket that offers
only ``h2`` through ALPN, with a certificate issued by a throwaway ``trustme`` CA.
Tests queue ``H2Reply`` values; each request takes the next one, whichever stream
and connection it came on. A reply's body goes out as one DATA frame per piece, with
pauses between pieces; it can be held until the connection has carried a number of
requests (to prove two streams share one connection), and it can end with
RST_STREAM instead of END_STREAM.

Every TCP connection is recorded with the ALPN protocol it negotiated and whether it
began with the HTTP/2 client preface; every request with its connection, stream id,
headers (pseudo-headers included), body, and the streams of that connection whose
responses were still open when it arrived. Every socket operation is bounded: the
handshake and writes by ``IO_TIMEOUT``, reads by short waits, and a connection that
stays idle for ``IDLE_TIMEOUT`` is closed.

    with H2Server(ca) as server:
        server.add(H2Reply.sse(b"data: ...\\n\\n", pieces=3))
        ...  # point a client that trusts ``ca`` at server.url
        assert server.connections[0].protocol == "h2"
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import orjson
import trustme
from scripted_server import ScriptedServer

__all__ = [
    "IDLE_TIMEOUT",
    "IO_TIMEOUT",
    "PREFACE",
    "H2Connection",
    "H2Reply",
    "H2Request",
    "H2Server",
]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
IO_TIMEOUT = 5.0
IDLE_TIMEOUT = 15.0
_POLL = 0.02
_SSE_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
)


@dataclass(frozen=True)
class H2Reply:
    """One scripted response.

    ``body`` items are bytes (one DATA frame each, split further only where flow
    control or the frame size demands) or floats (a pause in seconds). ``reset`` is an
    HTTP/2 error code: after the body the stream ends with RST_STREAM carrying it, and
    never with END_STREAM. ``after_requests`` holds the body (not the headers) until
    the connection has received that many requests.
    """

    status: int = 200
    body: Sequence[bytes | float] = ()
    headers: Sequence[tuple[str, str]] = _SSE_HEADERS
    reset: int | None = None
    after_requests: int = 0

    @classmethod
    def sse(
        cls, data: bytes, *, pieces: int = 1, pause: float = 0.0, **kw: Any
    ) -> H2Reply:
        """An event stream cut into ``pieces`` DATA frames ``pause`` seconds apart."""
        size = -(-len(data) // pieces)
        body: list[bytes | float] = []
        for start in range(0, len(data), size):
            if body and pause:
                body.append(pause)
            body.append(data[start : start + size])
        return cls(body=body, **kw)

    @classmethod
    def json(cls, status: int, obj: Any) -> H2Reply:
        """A JSON reply, typically an error body."""
        return cls(
            status=status,
            body=(orjson.dumps(obj),),
            headers=(("content-type", "application/json"),),
        )


@dataclass(frozen=True)
class H2Request:
    """A request as the server received it; ``connection`` counts from 1.

    ``concurrent`` holds the streams of the same connection whose responses were
    still being sent when this request arrived: non-empty means multiplexing.
    """

    connection: int
    stream_id: int
    headers: dict[str, str]
    body: bytes
    concurrent: tuple[int, ...]

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return orjson.loads(self.body)


@dataclass
class H2Connection:
    """One accepted TCP connection: what TLS negotiated and how HTTP/2 began."""

    number: int
    protocol: str | None = None
    preface: bool = False
    data_frames: dict[int, int] = field(default_factory=dict)
    resets_sent: list[int] = field(default_factory=list)


_NO_REPLY = H2Reply.json(
    500, {"error": {"message": "h2server: no scripted reply left", "type": "h2server"}}
)


@dataclass
class _Outgoing:
    """A response being sent: the body left and when the next piece may go."""

    reply: H2Reply
    items: deque[bytes | float]
    ready_at: float = 0.0


class H2Server(ScriptedServer[H2Reply]):
    """The server; ``start``/``close`` or use it as a context manager."""

    scheme = "https"
    join_timeout = IO_TIMEOUT

    def __init__(self, ca: trustme.CA) -> None:
        super().__init__(_NO_REPLY)
        self.requests: list[H2Request] = []
        self.connections: list[H2Connection] = []
        self.errors: list[str] = []
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.minimum_version = ssl.TLSVersion.TLSv1_2
        self._tls.set_alpn_protocols(["h2"])
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(self._tls)

    def _accepted(self, raw: socket.socket) -> None:
        raw.settimeout(IO_TIMEOUT)
        with self._lock:
            info = H2Connection(len(self.connections) + 1)
            self.connections.append(info)
            self._socks.add(raw)
        self._spawn(self._serve, raw, info)

    def _serve(self, raw: socket.socket, info: H2Connection) -> None:
        # wrap_socket takes over raw's descriptor: track the TLS socket instead, so
        # close() can still cut this connection, the handshake included.
        tls = self._tls.wrap_socket(
            raw, server_side=True, do_handshake_on_connect=False
        )
        with self._lock:
            self._socks.discard(raw)
            self._socks.add(tls)
        try:
            tls.do_handshake()
            info.protocol = tls.selected_alpn_protocol()
            if info.protocol == "h2":
                _Session(self, tls, info).run()
        except (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
            pass  # the client went away: an ordinary end
        except Exception as exc:
            if not self._stop.is_set():
                with self._lock:
                    self.errors.append(f"connection {info.number}: {exc!r}")
        finally:
            with self._lock:
                self._socks.discard(tls)
            tls.close()

    def _next_reply(self) -> H2Reply:
        with self._lock:
            return self._take_reply_locked()


class _Session:
    """The HTTP/2 exchange on one TLS connection, run by its own thread."""

    def __init__(self, server: H2Server, tls: ssl.SSLSocket, info: H2Connection):
        self._server = server
        self._tls = tls
        self._info = info
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self._h2 = h2.connection.H2Connection(config=config)
        self._headers: dict[int, dict[str, str]] = {}
        self._bodies: dict[int, bytearray] = {}
        self._out: dict[int, _Outgoing] = {}
        self._seen = 0
        self._head = b""
        self._last = time.monotonic()

    def run(self) -> None:
        self._h2.initiate_connection()
        self._flush()
        stop = self._server._stop
        while not stop.is_set():
            self._send_ready()
            self._flush()
            if time.monotonic() - self._last > IDLE_TIMEOUT:
                return
            if not self._readable(self._wait()):
                continue
            data = self._tls.recv(65536)
            if not data:
                return
            self._last = time.monotonic()
            if len(self._head) < len(PREFACE):
                self._head += data[: len(PREFACE) - len(self._head)]
                self._info.preface = self._head == PREFACE
            if not self._handle(self._h2.receive_data(data)):
                self._flush()
                return
            self._flush()

    def _readable(self, wait: float) -> bool:
        if self._tls.pending():
            return True
        readable, _, _ = select.select([self._tls], [], [], wait)
        return bool(readable)

    def _wait(self) -> float:
        """How long to wait for the client before a held piece may be sent."""
        now = time.monotonic()
        wait = _POLL
        for out in self._out.values():
            if out.items and out.reply.after_requests <= self._seen:
                wait = min(wait, max(0.0, out.ready_at - now))
        return wait

    def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data:
            self._tls.sendall(data)

    def _handle(self, events: list[h2.events.Event]) -> bool:
        """Apply the client's events; False once the client ended the connection."""
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                sid = event.stream_id
                assert sid is not None
                self._headers[sid] = {str(k): str(v) for k, v in (event.headers or [])}
                self._bodies[sid] = bytearray()
            elif isinstance(event, h2.events.DataReceived):
                sid = event.stream_id
                assert sid is not None
                self._bodies[sid] += event.data or b""
                self._h2.acknowledge_received_data(
                    event.flow_controlled_length or 0, sid
                )
            elif isinstance(event, h2.events.StreamEnded):
                assert event.stream_id is not None
                self._respond(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self._out.pop(event.stream_id or 0, None)
            elif isinstance(event, h2.events.ConnectionTerminated):
                return False
        return True

    def _respond(self, sid: int) -> None:
        request = H2Request(
            self._info.number,
            sid,
            self._headers.pop(sid),
            bytes(self._bodies.pop(sid)),
            tuple(sorted(self._out)),
        )
        with self._server._lock:
            self._server.requests.append(request)
        self._seen += 1
        reply = self._server._next_reply()
        self._h2.send_headers(
            sid,
            [(":status", str(reply.status)), *reply.headers],
        )
        self._out[sid] = _Outgoing(reply, deque(reply.body))

    def _send_ready(self) -> None:
        """Send at most one piece of every response that may go on now."""
        now = time.monotonic()
        for sid, out in list(self._out.items()):
            if out.reply.after_requests > self._seen or out.ready_at > now:
                continue
            try:
                if out.items:
                    self._send_piece(sid, out, now)
                if not out.items:
                    self._finish(sid, out.reply)
                    del self._out[sid]
            except h2.exceptions.StreamClosedError:
                del self._out[sid]  # the client reset it meanwhile

    def _send_piece(self, sid: int, out: _Outgoing, now: float) -> None:
        item = out.items.popleft()
        if isinstance(item, float):
            out.ready_at = now + item
            return
        room = min(
            self._h2.local_flow_control_window(sid), self._h2.max_outbound_frame_size
        )
        if room < len(item):
            out.items.appendleft(item[room:])
            item = item[:room]
            if not room:  # wait for the client's WINDOW_UPDATE
                out.ready_at = now + _POLL
        if item:
            self._h2.send_data(sid, item)
            frames = self._info.data_frames
            frames[sid] = frames.get(sid, 0) + 1

    def _finish(self, sid: int, reply: H2Reply) -> None:
        if reply.reset is None:
            self._h2.end_stream(sid)
        else:
            self._h2.reset_stream(sid, error_code=reply.reset)
            self._info.resets_sent.append(sid)

"""HTTP/1.1 over plain TCP, for a provider's own requests to an ``http://`` server.

A local model server (Ollama, vLLM, llama.cpp, LM Studio) is reached over plain HTTP
on loopback or a LAN. For those requests httpx, httpcore and h11 together spend several
times the CPU of everything else in a tool turn (``bench/bench_turn.py``: the row
"navi_core over httpx"), most of it per chunk of a chunked body. This client writes a
request in one system call and reads its response with a few calls per read, the
chunked coding removed by the compiled core (``core.Dechunker``). Everything else
(TLS, proxies, HTTP/2, a caller's own ``httpx.Client`` with its auth and hooks) stays
with httpx: ``HTTPProvider`` uses this client only where none of that applies
(``PlainHTTP.serves``).

Its connections are the same interruptible sockets httpx's are given here
(``_sockets.InterruptibleBackend``): a cancel shuts a blocked connect or read down
the same way. Failures raise the httpx exception of the same meaning, so the error
mapping (``_http_errors``) and everything after it cannot tell the two paths apart.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
import weakref
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from ..core import Dechunker, readable
from ._sockets import READ_BYTES, InterruptibleBackend

__all__ = ["PlainHTTP", "PlainResponse"]

#: the most a response head may take; a longer one is a protocol error
_MAX_HEAD = 64 * 1024
#: a request this short is joined into one buffer with its head: one write
_JOIN_BYTES = 256 * 1024
#: idle connections kept per client, and how long one is kept
_KEEP = 20
_KEEP_SECONDS = 5.0
#: headers this client writes itself from the body it sends
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding"})
_STATUS = re.compile(r"[1-5][0-9][0-9]")
_DIGITS = re.compile(r"[0-9]{1,18}")
_URL_SAFE = re.compile(r"[!-~]*")  # printable ASCII, no space

_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}


def _proxied(host: str) -> bool:
    """Whether the environment sends plain-http requests to ``host`` through a proxy
    (``HTTP_PROXY`` or ``ALL_PROXY``, unless ``NO_PROXY`` names the host)."""
    proxies = urllib.request.getproxies()
    if not (proxies.get("http") or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(host)


def _as_httpx(exc: Exception) -> httpx.TransportError:
    """The httpx exception for a socket-level failure, with the same message."""
    for kind, mapped in _ERRORS.items():
        if isinstance(exc, kind):
            return mapped(str(exc))
    return httpx.ReadError(str(exc))


class _Connection:
    """One kept-alive socket and when it went idle."""

    __slots__ = ("idle_since", "stream")

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self.stream = stream
        self.idle_since = 0.0

    def reusable(self, now: float, poll: bool) -> bool:
        """True when the connection is young enough and the server has not closed it
        (or sent anything unasked). Unless ``poll``, one a response was read from less
        than a quarter of a second ago is taken as open without a poll, as httpx's
        are (``is_readable``): servers close idle connections after seconds, and one
        that closes at once says so in its headers."""
        if now - self.idle_since > _KEEP_SECONDS:
            return False
        if poll:
            return not readable(self.stream.get_extra_info("socket"))
        return not self.stream.get_extra_info("is_readable")


class PlainHTTP:
    """A keep-alive HTTP/1.1 client for one ``http://`` origin (thread-safe).

    ``post`` sends a request in one write (a large body: its head and then its parts)
    and returns the response once its head has arrived; the body is read as the
    caller iterates ``PlainResponse.iter_raw``.

    A request that meets a kept connection the server closed unannounced fails as a
    ``TransportError`` (the turn retries it) and is never sent again here: the server
    may have read it. After one such failure the client polls every kept connection
    before it reuses it, however recently it was read from.

    A client that is never closed closes its kept connections when it is collected
    (or at exit): they are its own, not sockets the program left open.
    """

    __slots__ = (
        "__weakref__",
        "_backend",
        "_closed",
        "_host",
        "_idle",
        "_lock",
        "_origin",
        "_poll",
        "_port",
    )

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._host = parts.hostname or ""
        self._port = parts.port or 80
        self._origin = parts.netloc
        self._backend = InterruptibleBackend()
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._poll = False  # poll every kept connection (one closed unannounced)
        weakref.finalize(self, _close_all, self._idle)

    @staticmethod
    def serves(url: str, *, http2: bool) -> bool:
        """Whether a provider's own requests to ``url`` may go through this client:
        plain ``http``, an ASCII host, no credentials in the URL, a printable ASCII
        path, no HTTP/2 asked for, and no proxy the environment applies to the host
        (httpx honours those)."""
        if http2 or not url.startswith("http://"):
            return False
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            return False
        if not parts.hostname or "@" in parts.netloc or parts.fragment:
            return False
        if not parts.netloc.isascii():  # an IDN host: httpx encodes it
            return False
        if _URL_SAFE.fullmatch(parts.path + parts.query) is None:
            return False
        return not _proxied(parts.hostname)

    def post(
        self,
        target: str,
        headers: dict[str, str],
        parts: Sequence[bytes],
        timeout: httpx.Timeout,
    ) -> PlainResponse:
        """Send ``POST target`` with ``headers`` and the body ``parts``; the response
        with its head read.

        Raises:
            httpx.TransportError: the connect, the write or the head's read failed.
        """
        if self._closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        size = sum(map(len, parts))
        lines = [f"POST {target} HTTP/1.1\r\n"]
        if "host" not in headers:
            lines.append(f"host: {self._origin}\r\n")
        lines += [
            f"{name}: {value}\r\n"
            for name, value in headers.items()
            if name not in _FRAMING_HEADERS
        ]
        lines.append(f"content-length: {size}\r\n\r\n")
        head = "".join(lines).encode("ascii")
        connection = self._take()
        reused = connection is not None
        sent = False
        try:
            if connection is None:
                connection = _Connection(
                    self._backend.connect_tcp(self._host, self._port, timeout.connect)
                )
            response = PlainResponse(self, connection, timeout.read)
            try:
                self._send(connection.stream, head, parts, size, timeout.write)
            except httpcore.WriteError:
                # A server may answer before it has read the whole body (a 413, a
                # context-length error) and close: that answer is the response.
                try:
                    response.read_head()
                except (httpcore.NetworkError, httpcore.RemoteProtocolError):
                    pass
                else:
                    response.keep_alive = False  # the write broke the connection
                    return response
                raise
            sent = True
            response.read_head()
        except (httpcore.NetworkError, httpcore.RemoteProtocolError) as exc:
            if connection is not None:
                connection.stream.close()
            if reused and sent and not response.heard:
                self._poll = True  # this server closes kept connections unannounced
            if reused and not sent and isinstance(exc, httpcore.WriteError):
                # the server closed the kept connection before the request went out
                # whole, so it cannot have acted on it: send it on a new connection
                self._poll = True  # and it closes kept connections unannounced
                return self.post(target, headers, parts, timeout)
            raise _as_httpx(exc) from exc
        except httpcore.TimeoutException as exc:
            if connection is not None:
                connection.stream.close()
            raise _as_httpx(exc) from exc
        except BaseException:
            if connection is not None:
                connection.stream.close()
            raise
        return response

    @staticmethod
    def _send(
        stream: httpcore.NetworkStream,
        head: bytes,
        parts: Sequence[bytes],
        size: int,
        timeout: float | None,
    ) -> None:
        if size <= _JOIN_BYTES:
            stream.write(b"".join((head, *parts)), timeout)
            return
        stream.write(head, timeout)
        for part in parts:
            stream.write(part, timeout)

    def _take(self) -> _Connection | None:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                connection = self._idle.pop()
                if connection.reusable(now, self._poll):
                    return connection
                connection.stream.close()
        return None

    def give_back(self, connection: _Connection) -> None:
        """Keep ``connection`` for the next request (a response read to its end)."""
        connection.idle_since = time.monotonic()
        with self._lock:
            if not self._closed and len(self._idle) < _KEEP:
                self._idle.append(connection)
                return
        connection.stream.close()

    def close(self) -> None:
        """Close every idle connection; later responses close theirs when done."""
        with self._lock:
            self._closed = True
            idle = self._idle[:]
            self._idle.clear()
        _close_all(idle)


def _close_all(connections: list[_Connection]) -> None:
    """Close ``connections``, emptying the list."""
    while connections:
        connections.pop().stream.close()


class PlainResponse:
    """A response as ``HTTPProvider`` reads it: status, headers, raw body, close.

    ``headers`` maps lowercase names to values (repeated ones joined with ``", "``).
    ``iter_raw`` yields the body as it arrives, chunked encoding removed; a body read
    to its end gives the connection back for the next request when ``keep_alive``
    (the server did not ask to close, nothing came past the body), anything else
    closes it.
    """

    __slots__ = (
        "_buffer",
        "_client",
        "_connection",
        "_dechunker",
        "_done",
        "_framing",
        "_left",
        "_timeout",
        "extensions",
        "headers",
        "heard",
        "keep_alive",
        "reason_phrase",
        "status_code",
    )

    def __init__(
        self, client: PlainHTTP, connection: _Connection, timeout: float | None
    ) -> None:
        self._client = client
        self._connection: _Connection | None = connection
        self._timeout = timeout
        self._buffer = b""
        self._done = False
        self.heard = False  # a byte of the response arrived
        self.keep_alive = False
        self._framing = "close"  # "chunked", "length" or "close" (read to the end)
        self._left = 0  # bytes of a sized body still to come
        self._dechunker: Dechunker | None = None
        self.status_code = 0
        self.reason_phrase = ""
        self.headers: dict[str, str] = {}
        self.extensions: dict[str, Any] = {"network_stream": connection.stream}

    def _read(self) -> bytes:
        assert self._connection is not None
        return self._connection.stream.read(READ_BYTES, self._timeout)

    def read_head(self) -> None:
        """Read the status line and headers (an interim 1xx response is skipped).

        Raises:
            httpcore.NetworkError, httpcore.TimeoutException: the read failed.
            httpcore.RemoteProtocolError: the head is not HTTP/1.x or too long.
        """
        data = b""
        while True:
            end = data.find(b"\r\n\r\n")
            while end < 0:
                if len(data) > _MAX_HEAD:
                    raise httpcore.RemoteProtocolError("response head too long")
                more = self._read()
                if not more:
                    if data:
                        raise httpcore.RemoteProtocolError(
                            f"response head cut off: {data[:80]!r}"
                        )
                    raise httpcore.RemoteProtocolError(
                        "Server disconnected without sending a response."
                    )
                self.heard = True
                data += more
                if not data.startswith(b"HTTP/"[: len(data)]):  # another protocol
                    line = data.partition(b"\r\n")[0][:80]
                    raise httpcore.RemoteProtocolError(
                        f"not an HTTP/1.x response: {line.decode('latin-1')!r}"
                    )
                end = data.find(b"\r\n\r\n")
            head, data = data[:end], data[end + 4 :]
            self._parse_head(head)
            if not 100 <= self.status_code < 200 or self.status_code == 101:
                break
        self._buffer = data
        self._start_body()

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or _STATUS.fullmatch(code) is None:
            raise httpcore.RemoteProtocolError(
                f"not an HTTP/1.x response: {lines[0]!r}"
            )
        self.status_code = int(code)
        self.reason_phrase = reason
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise httpcore.RemoteProtocolError(f"malformed header line {line!r}")
            name, value = name.lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.headers = headers
        keep = version != "HTTP/1.0"
        tokens = headers.get("connection", "").lower()
        if "close" in tokens:
            keep = False
        elif "keep-alive" in tokens:
            keep = True
        self.keep_alive = keep

    def _start_body(self) -> None:
        headers = self.headers
        if self.status_code in (204, 304):
            self._framing, self._left, self._done = "length", 0, True
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._framing = "chunked"
            self._dechunker = Dechunker()
        elif "content-length" in headers:
            values = {v.strip() for v in headers["content-length"].split(",")}
            length = values.pop() if len(values) == 1 else ""
            if _DIGITS.fullmatch(length) is None:
                raise httpcore.RemoteProtocolError(
                    f"bad content-length {headers['content-length']!r}"
                )
            self._framing, self._left = "length", int(length)
            self._done = self._left == 0
        else:
            self._framing, self.keep_alive = "close", False

    def iter_raw(self) -> Iterator[bytes]:
        """The body's bytes as they arrive (chunked encoding removed).

        Raises:
            httpx.TransportError: a read failed or the body broke its framing.
        """
        try:
            data, self._buffer = self._buffer, b""
            while not self._done:
                if data:
                    out = self._take(data)
                    if out:
                        yield out
                    if self._done:
                        break
                data = self._read()
                if not data:
                    if self._framing == "close":
                        self._done = True
                        break
                    raise httpcore.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
        except (httpcore.NetworkError, httpcore.TimeoutException) as exc:
            self.close()
            raise _as_httpx(exc) from exc
        except httpcore.RemoteProtocolError as exc:  # a body that broke its framing
            self.close()
            raise _as_httpx(exc) from exc
        self._finish()

    def _take(self, data: bytes) -> bytes:
        """The body bytes of ``data``; sets ``_done`` at the body's end."""
        framing = self._framing
        if framing == "close":
            return data
        if framing == "length":
            left = self._left
            if len(data) >= left:
                self._done = True
                if len(data) > left:
                    self.keep_alive = (
                        False  # bytes past the body: not a clean connection
                    )
                self._left = 0
                return data[:left] if len(data) > left else data
            self._left = left - len(data)
            return data
        dechunker = self._dechunker
        assert dechunker is not None
        try:
            out = dechunker.feed(data)
        except ValueError as exc:
            raise httpcore.RemoteProtocolError(str(exc)) from exc
        if dechunker.done:
            self._done = True
            if dechunker.overrun:
                self.keep_alive = False  # bytes past the body: not a clean connection
        return out

    def _finish(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self.keep_alive:
            self._client.give_back(connection)
        else:
            connection.stream.close()

    def close(self) -> None:
        """Release the connection: kept when the body was read to its end, else closed
        (idempotent)."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._done and self.keep_alive:
            self._client.give_back(connection)
        else:
            connection.stream.close()

"""The connections under the HTTP providers: interruptible, with one shared TLS context.

``make_transport`` builds an ``httpx`` transport over an ``httpcore`` pool whose network
backend registers every socket with the interrupter active on the calling thread
(``navi_core._interrupt``), so ``Stream.cancel()`` from another thread can shut down a
read blocked waiting for headers or for the next chunk, and connects in short slices so
a cancel also ends a connect that hangs. The TLS context is built once per process and
CA configuration, and only for ``https`` URLs: making a provider for a plain ``http``
server costs no certificate loading at all.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import select
import socket
import ssl
import struct
import sys
import time
import typing
import urllib.request
from typing import Any

import httpcore
import httpx

from .._interrupt import current
from ..core import readable, recv_ready, send_ready

__all__ = [
    "READ_BYTES",
    "InterruptibleBackend",
    "make_transport",
    "shared_ssl_context",
]

_SLICE = 0.05  # seconds a connect waits before it looks at the interrupter again
#: seconds after a read during which an idle connection is taken as open, unpolled
_FRESH = 0.25
#: a write this short may be a request head to hold back for its body
_HEAD_BYTES = 16 * 1024
#: a head and body this short are joined into one write
_JOIN_BYTES = 256 * 1024
_BODY_FOLLOWS = re.compile(
    rb"\r\n(?:content-length:[ \t]*0*[1-9]|transfer-encoding:)", re.IGNORECASE
)


def _body_follows(data: bytes) -> bool:
    """True when ``data`` is a whole request head that announces a body."""
    return data.endswith(b"\r\n\r\n") and _BODY_FOLLOWS.search(data) is not None


@functools.lru_cache(maxsize=8)
def _ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=True)


def shared_ssl_context() -> ssl.SSLContext:
    """The process's TLS context for the CA settings now in the environment."""
    return _ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


#: bytes asked for per read (httpcore's own size). A read's buffer and h11's copies of
#: it are allocations of this size: at 256 KiB, several alive at once outgrew a
#: thread's malloc arena, which gave the pages back at each free, so every read took
#: new ones (23-143 page faults per turn at 8 and 64 threads, bench/bench_reads.py);
#: and until something frees a larger mapped block, 256 KiB is above glibc's mmap
#: threshold, so a read of one token's event mapped and unmapped its buffer (15 µs).
#: While a fast server's body is still arriving, the next read keeps the GIL
#: (``core.recv_ready``), so smaller reads cost no thread switches.
READ_BYTES = 64 * 1024

# Linux and macOS bound a blocking socket's recv/send with SO_RCVTIMEO/SO_SNDTIMEO (a
# struct timeval, two C longs on both). Elsewhere, ``socket.settimeout`` does it.
_SOCKOPT_TIMEOUTS = sys.platform.startswith("linux") or sys.platform == "darwin"
_UNSET = -1.0  # no timeout applied yet


def _timeval(timeout: float | None) -> bytes:
    if timeout is None:
        return struct.pack("@ll", 0, 0)  # zero: no limit
    usec = max(1, round(timeout * 1_000_000))  # zero would mean no limit
    return struct.pack("@ll", usec // 1_000_000, usec % 1_000_000)


class _SocketStream(httpcore.NetworkStream):
    """A socket as ``httpcore`` reads it, registered before every blocking call.

    Each system call made from Python gives the GIL away, and while many streams share
    a process each give-away is a thread switch. So a read is one ``recv`` of up to
    ``READ_BYTES``: the socket stays in blocking mode and its timeouts are kernel socket
    options, set only when they change (``settimeout`` before every read adds a mode
    switch and a ``poll``: three give-aways per read). TLS sockets keep
    ``settimeout``, called only when the timeout changes.

    On a plain socket, calls that cannot wait keep the GIL (``core.recv_ready``,
    ``core.send_ready``, ``core.readable``): a request that the socket's buffer takes
    whole, a read made while the last one filled its buffer (a fast server's body is
    still arriving) and the check of an idle pooled connection give nothing away; only
    a read that has to wait for the server does.

    A request is one write: a head that announces a body is held until the body's first
    part and sent with it (or alone, before the next read). A connection a response was
    read from less than ``_FRESH`` seconds ago is reused without polling it.
    """

    __slots__ = ("_flowing", "_head", "_plain", "_rcv", "_read_at", "_snd", "_sock")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._plain = _SOCKOPT_TIMEOUTS and not isinstance(sock, ssl.SSLSocket)
        self._flowing = False
        self._rcv: float | None = _UNSET
        self._snd: float | None = _UNSET
        self._head = b""  # a request head held back to go out with its body
        self._read_at = -_FRESH  # when a read last returned data (monotonic)

    def _read_timeout(self, timeout: float | None) -> None:
        if timeout == self._rcv:
            return
        if self._plain:
            self._sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(timeout)
            )
        else:
            self._sock.settimeout(timeout)
            self._snd = timeout
        self._rcv = timeout

    def _write_timeout(self, timeout: float | None) -> None:
        if timeout == self._snd:
            return
        if self._plain:
            self._sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(timeout)
            )
        else:
            self._sock.settimeout(timeout)
            self._rcv = timeout
        self._snd = timeout

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._head:  # no body came: the head goes alone
            self._send(b"", timeout)
        data = self._recv(max_bytes, timeout)
        if data:
            self._read_at = time.monotonic()
        return data

    def _recv(self, max_bytes: int, timeout: float | None) -> bytes:
        sock = self._sock
        size = min(max_bytes, READ_BYTES)
        interrupter = current()
        # the last read filled its buffer: more is likely waiting (unless cancelled)
        if self._flowing and (interrupter is None or not interrupter.fired):
            try:
                data = recv_ready(sock, size)
            except OSError as exc:
                raise httpcore.ReadError(str(exc)) from exc
            if data is not None:
                self._flowing = len(data) == size
                return data
        if interrupter is not None:
            interrupter.hold(sock)
        try:
            self._read_timeout(timeout)
            data = sock.recv(size)
        except (TimeoutError, BlockingIOError) as exc:  # the latter: SO_RCVTIMEO
            raise httpcore.ReadTimeout("timed out") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc
        finally:
            if interrupter is not None:
                interrupter.release(sock)
        self._flowing = self._plain and len(data) == size
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:  # httpcore writes the empty end of a sized body
            return
        if not self._head and len(buffer) <= _HEAD_BYTES and _body_follows(buffer):
            self._head = buffer  # sent with the body's first part: one write, not two
            return
        self._send(buffer, timeout)

    def _send(self, buffer: bytes, timeout: float | None) -> None:
        if self._head:
            head, self._head = self._head, b""
            if len(buffer) <= _JOIN_BYTES:
                buffer = head + buffer
            else:  # a large body: its copy would cost more than a second write
                self._send(head, timeout)
        sock = self._sock
        self._flowing = False  # what is read next answers this: it takes a wait
        interrupter = current()
        sent = 0
        if self._plain and (interrupter is None or not interrupter.fired):
            try:
                sent = send_ready(sock, buffer)
            except OSError as exc:
                raise httpcore.WriteError(str(exc)) from exc
            if sent == len(buffer):
                return
        if interrupter is not None:
            interrupter.hold(sock)
        try:
            self._write_timeout(timeout)
            sock.sendall(memoryview(buffer)[sent:] if sent else buffer)
        except (TimeoutError, BlockingIOError) as exc:  # the latter: SO_SNDTIMEO
            raise httpcore.WriteTimeout("timed out") from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc
        finally:
            if interrupter is not None:
                interrupter.release(sock)

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        interrupter = current()
        if interrupter is not None:
            interrupter.hold(self._sock)
        try:
            if self._plain:  # the TLS socket keeps the fd: clear the kernel limits
                for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
                    self._sock.setsockopt(socket.SOL_SOCKET, option, _timeval(None))
            self._sock.settimeout(timeout)
            tls = ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
        except TimeoutError as exc:
            self.close()
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            self.close()
            raise httpcore.ConnectError(str(exc)) from exc
        finally:
            if interrupter is not None:
                interrupter.release(self._sock)
        return _SocketStream(tls)

    def get_extra_info(self, info: str) -> Any:
        sock = self._sock
        if info == "socket":
            return sock
        if info == "ssl_object" and isinstance(sock, ssl.SSLSocket):
            return sock  # httpcore asks it for the negotiated ALPN protocol
        if info == "client_addr":
            return sock.getsockname()
        if info == "server_addr":
            return sock.getpeername()
        if info == "is_readable":  # an idle pooled connection: did the server close it?
            # A response read a moment ago: a server closes idle connections after
            # seconds, not at once (one that closes at once says so in its headers),
            # so the poll is skipped.
            if time.monotonic() - self._read_at < _FRESH:
                return False
            return readable(sock)
        return None


class InterruptibleBackend(httpcore.SyncBackend):
    """``httpcore``'s sync backend, with connects and sockets a cancel can interrupt."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
        last: BaseException | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                if local_address is not None:
                    sock.bind((local_address, 0))
                for option in socket_options or ():
                    sock.setsockopt(*option)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                _connect(sock, address, deadline)
            except httpcore.ConnectTimeout:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                last = exc
                continue
            sock.setblocking(True)
            return _SocketStream(sock)
        raise httpcore.ConnectError(str(last or f"cannot connect to {host}:{port}"))


def _connect(sock: socket.socket, address: Any, deadline: float | None) -> None:
    """A non-blocking connect waited for in slices, so an interrupter can end it."""
    sock.setblocking(False)
    err = sock.connect_ex(address)
    if err in (0, errno.EISCONN):
        return
    if err not in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
        raise OSError(err, os.strerror(err))
    interrupter = current()
    if interrupter is not None and interrupter.fired:
        raise OSError(errno.ECANCELED, "connect interrupted")
    while True:
        wait = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
        if wait <= 0:
            raise httpcore.ConnectTimeout("connect timed out")
        _, ready, failed = select.select([], [sock], [sock], wait)
        if ready or failed:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, os.strerror(err))
            return
        if interrupter is not None and interrupter.fired:
            raise OSError(errno.ECANCELED, "connect interrupted")


class _Transport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` over a pool built here (it reads only ``self._pool``)."""

    def __init__(self, pool: httpcore.ConnectionPool) -> None:  # no super(): see above
        self._pool = pool


def _env_proxies() -> bool:
    return any(k in ("http", "https", "all") for k in urllib.request.getproxies())


def make_transport(url: str, *, http2: bool) -> httpx.BaseTransport | None:
    """An interruptible transport for ``url``, or None where httpx's own must serve
    (a proxy configured in the environment, which httpx then honours)."""
    if _env_proxies():
        return None
    https = url.startswith("https://")
    pool = httpcore.ConnectionPool(
        ssl_context=shared_ssl_context() if https else None,
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        http1=True,
        http2=http2,
        network_backend=InterruptibleBackend(),
    )
    return _Transport(pool)

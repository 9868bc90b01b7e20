"""The gunicorn worker of ``navi-core serve``: a request is read whole before a thread
takes it, and turns run on threads of their own.

gunicorn's threaded worker gives a thread to each new connection (which waits there
for the first byte), then reads the head and body on it, blocking with no time
limit: a few clients that send slowly, or not at all, hold every thread. This worker
reads on its event loop instead, without blocking: a request reaches a thread only
once its head and body are in memory (``framing.RequestFramer``). A client that has
begun a request but not sent it within ``read_timeout`` seconds (the head, and again
the body) gets ``408`` and is cut, one that sent nothing is closed without an answer;
a head over 64 KiB gets ``431``. Idle connections cost no thread, only a socket and
what they sent; at most ``max_reading`` of them read at once, and accepting one more
cuts the oldest.

Turns and compactions, which stream or wait on the model for long, run on
``cfg.threads`` threads; every other request (cancel, steer, reads, the page) on
``control_threads`` threads of its own, so it never waits behind long turns. A turn
(a ``streamed`` route) is started on a control thread as soon as it is read, and only
its body waits for a turn thread: from then on it runs, for cancel and steer. Each
pool holds at most 64 waiting requests (or 4 per thread, if more); past that the
answer is ``503`` with ``Retry-After``. A client that stops reading its answer is cut
once a write has waited ``send_timeout`` seconds. The settings are class attributes,
set for the process by ``worker_class`` before gunicorn forks.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import selectors
import socket
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from gunicorn.http import RequestParser, wsgi
from gunicorn.http.errors import NoMoreData
from gunicorn.workers.base import Worker

from .framing import Frame, HeadTooLarge, RequestFramer
from .routes import route_kind

__all__ = ["ServeWorker", "worker_class"]

#: the longest request head read
MAX_HEAD: Final = 64 * 1024
#: how often deadlines are checked, in seconds
SWEEP: Final = 0.1
#: a closed connection's input is read and dropped this long, so the kernel does not
#: answer it with a reset that could destroy the end of the response
LINGER: Final = 2.0

_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


def _plain(status: str, extra: str = "") -> bytes:
    """A short answer the event loop writes itself, closing the connection."""
    return (
        f"HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: 0\r\n{extra}\r\n"
    ).encode()


_TIMEOUT: Final = _plain("408 Request Timeout")
_TOO_LARGE: Final = _plain("431 Request Header Fields Too Large")
_BUSY: Final = _plain("503 Service Unavailable", "Retry-After: 1\r\n")


class _Pool:
    """A thread pool and how many requests it holds (running or waiting)."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix=name)
        self.held = 0

    @property
    def full(self) -> bool:
        """True when as many requests wait as it may hold (each up to a body)."""
        return self.held >= self.threads + max(64, 4 * self.threads)


@dataclass(eq=False)
class _Conn:
    """One client connection and the request it is sending."""

    sock: socket.socket
    addr: Any
    server: Any
    framer: RequestFramer
    buf: bytearray = field(default_factory=bytearray)
    deadline: float = 0.0
    started: bool = False  # the read_timeout clock runs


@dataclass(eq=False)
class _Answer:
    """A request the app has answered, whose body is still to be written."""

    req: Any
    parser: Any
    resp: Any
    environ: dict[str, Any]
    body: Iterable[bytes]
    started: datetime


class ServeWorker(Worker):  # type: ignore[misc]
    """A gunicorn worker that reads requests on its event loop (see the module)."""

    #: seconds a client has to send a request's head, and again its body
    read_timeout: float = 10.0
    #: seconds a write to a client that does not read may wait before it is cut
    send_timeout: float = 60.0
    #: the largest body read before a thread takes the request (the app's limit)
    max_body: int = 1 << 20
    #: connections reading a request at once; one more cuts the oldest
    max_reading: int = 256
    #: threads for everything but turns and compactions
    control_threads: int = 2

    def init_process(self) -> None:
        self._poller = selectors.DefaultSelector()
        # (connection, pools it leaves, keep it | None while another thread serves it)
        self._done: queue.SimpleQueue[tuple[_Conn, tuple[_Pool, ...], bool | None]]
        self._done = queue.SimpleQueue()
        self._turns = _Pool(max(1, self.cfg.threads), "navi-turn")
        self._control = _Pool(self.control_threads, "navi-control")
        self._reading: dict[int, _Conn] = {}  # by fd, oldest first
        self._lingering: dict[int, tuple[socket.socket, float]] = {}
        self._busy = 0  # connections a thread holds or will
        self._swept = self._notified = 0.0
        super().init_process()

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.alive = False
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: the loop wakes anyway
            os.write(self.PIPE[1], b".")

    # -- the event loop ------------------------------------------------------------

    def run(self) -> None:
        for listener in self.sockets:
            listener.setblocking(False)
            self._poller.register(listener, selectors.EVENT_READ, self._accept)
        self._poller.register(self.PIPE[0], selectors.EVENT_READ, self._drain_wake)
        while self.alive:
            self._step()
            if os.getppid() != self.ppid:
                self.log.info("Parent changed, shutting down: %s", self)
                break
        self._stop()

    def _step(self, timeout: float = SWEEP) -> None:
        now = time.monotonic()
        if now - self._notified >= 0.5:
            self._notified = now
            self.notify()
        try:
            events = self._poller.select(timeout)
        except InterruptedError:
            events = []
        for key, _ in events:
            callback: Callable[[Any], None] = key.data
            callback(key.fileobj)
        self._finish_done()
        now = time.monotonic()
        if now - self._swept >= SWEEP:
            self._swept = now
            self._sweep(now)

    def _stop(self) -> None:
        """Stop accepting, drop idle connections, let running requests finish."""
        for listener in self.sockets:
            self._poller.unregister(listener)
        for conn in list(self._reading.values()):
            self._forget(conn)
            self._close(conn.sock)
        until = time.monotonic() + self.cfg.graceful_timeout
        while self._busy and time.monotonic() < until:
            self._step()
        for fd in list(self._lingering):
            self._close(self._lingering.pop(fd)[0])
        self._turns.executor.shutdown(wait=False)
        self._control.executor.shutdown(wait=False)
        self._poller.close()

    def _drain_wake(self, fileobj: Any) -> None:
        try:
            while os.read(self.PIPE[0], 4096):
                pass
        except OSError:
            pass

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(64):
            try:
                sock, addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS):
                    self._cut_oldest()  # make room rather than spin on the listener
                elif exc.errno != errno.ECONNABORTED:
                    raise
                return
            sock.setblocking(False)
            conn = _Conn(sock, addr, listener.getsockname(), self._framer())
            if len(self._reading) >= self.max_reading:
                self._cut_oldest()
            self._read_next(conn, time.monotonic() + self.read_timeout, started=True)

    def _framer(self) -> RequestFramer:
        return RequestFramer(MAX_HEAD, self.max_body)

    def _cut_oldest(self) -> None:
        for conn in self._reading.values():
            self._forget(conn)
            self._close(conn.sock)
            return

    def _read_next(self, conn: _Conn, deadline: float, *, started: bool) -> None:
        """Wait for the next request on ``conn`` until ``deadline``; ``started``: the
        read timeout runs already (else it starts with the first byte)."""
        conn.framer.reset()
        conn.started = started or bool(conn.buf)
        conn.deadline = deadline
        if conn.buf and not started:  # a pipelined request has begun already
            conn.deadline = time.monotonic() + self.read_timeout
        self._reading[conn.sock.fileno()] = conn
        self._poller.register(
            conn.sock, selectors.EVENT_READ, lambda _: self._read(conn)
        )
        if conn.buf:
            self._advance(conn)

    def _forget(self, conn: _Conn) -> None:
        self._reading.pop(conn.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self._poller.unregister(conn.sock)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._forget(conn)
            self._close(conn.sock)
            return
        if not conn.started:  # the first byte after a kept-alive answer
            conn.started = True
            conn.deadline = time.monotonic() + self.read_timeout
        conn.buf += data
        self._advance(conn)

    def _advance(self, conn: _Conn) -> None:
        """Hand the request to a thread once it is whole."""
        had_head = conn.framer.head_done
        try:
            frame = conn.framer.feed(conn.buf)
        except HeadTooLarge:
            self._refuse(conn, _TOO_LARGE)
            return
        if not had_head and conn.framer.head_done:
            conn.deadline = time.monotonic() + self.read_timeout  # now for the body
            if frame is None and conn.framer.expect_continue:
                self._send_quietly(conn.sock, _CONTINUE)
        if frame is not None:
            self._dispatch(conn, frame)

    def _dispatch(self, conn: _Conn, frame: Frame) -> None:
        self._forget(conn)
        del conn.buf[: frame.size]
        kind = route_kind(frame.method, frame.target)
        pool = self._turns if kind == "long" else self._control
        body_pool = self._turns if kind == "streamed" else None
        if pool.full or (body_pool is not None and body_pool.full):
            self._refuse(conn, _BUSY)
            return
        pool.held += 1
        if body_pool is not None:
            body_pool.held += 1  # the body's place, taken now so it cannot be refused
        self._busy += 1
        conn.sock.settimeout(self.send_timeout)  # blocking, each write bounded
        self._submit(
            pool, conn, lambda: self._handle(conn, frame, body_pool), body_pool
        )

    def _submit(
        self,
        pool: _Pool,
        conn: _Conn,
        job: Callable[[], bool | None],
        also_held: _Pool | None = None,
    ) -> None:
        """Run ``job`` on ``pool``; then the loop gives its place back and, unless it
        handed the connection on (None), keeps (True) or closes the connection. A job
        that does not hand it on gives back ``also_held``'s place too."""

        def done(f: Future[bool | None]) -> None:
            try:
                outcome = f.result()
            except BaseException:  # cancelled, or what the job let out: close
                outcome = False
            left: tuple[_Pool, ...] = (pool,)
            if outcome is not None and also_held is not None:
                left += (also_held,)
            self._done.put((conn, left, outcome))
            self._wake()

        pool.executor.submit(job).add_done_callback(done)

    def _finish_done(self) -> None:
        while True:
            try:
                conn, left, keep = self._done.get_nowait()
            except queue.Empty:
                return
            for pool in left:
                pool.held -= 1
            if keep is None:  # a thread of another pool writes its answer now
                continue
            self._busy -= 1
            if keep and self.alive:
                conn.sock.setblocking(False)
                idle = time.monotonic() + self.cfg.keepalive
                self._read_next(conn, idle, started=False)
            else:
                self._linger(conn.sock)

    def _sweep(self, now: float) -> None:
        """Cut connections past their deadline; end lingering closes."""
        for conn in [c for c in self._reading.values() if c.deadline <= now]:
            if conn.buf:  # part of a request came
                self._refuse(conn, _TIMEOUT)
            else:  # nothing sent: nothing to answer
                self._forget(conn)
                self._close(conn.sock)
        for fd, (sock, until) in list(self._lingering.items()):
            if until <= now:
                self._poller.unregister(sock)
                del self._lingering[fd]
                self._close(sock)

    # -- closing -------------------------------------------------------------------

    def _refuse(self, conn: _Conn, answer: bytes) -> None:
        """Answer from the loop (a short error) and close the connection."""
        self._forget(conn)
        self._send_quietly(conn.sock, answer)
        self._linger(conn.sock)

    @staticmethod
    def _send_quietly(sock: socket.socket, data: bytes) -> None:
        with contextlib.suppress(OSError):
            sock.send(data)  # a few bytes into an empty buffer: it all goes

    def _linger(self, sock: socket.socket) -> None:
        """Close after the client saw the answer: send FIN, drop its input a while."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
            fd = sock.fileno()
            self._poller.register(sock, selectors.EVENT_READ, self._discard)
        except (OSError, ValueError, KeyError):
            self._close(sock)
            return
        self._lingering[fd] = (sock, time.monotonic() + LINGER)

    def _discard(self, sock: socket.socket) -> None:
        try:
            if sock.recv(65536):
                return
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self._lingering.pop(sock.fileno(), None)
        self._poller.unregister(sock)
        self._close(sock)

    @staticmethod
    def _close(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.close()

    # -- in a thread ---------------------------------------------------------------

    def _handle(
        self, conn: _Conn, frame: Frame, body_pool: _Pool | None
    ) -> bool | None:
        """Serve one request whose bytes are all in ``frame``; True to keep the
        connection for another. With ``body_pool``, a body the app hands back unread
        (not a list) is written by a thread of that pool: None."""
        req = None
        try:
            parser = RequestParser(self.cfg, [frame.data], conn.addr)
            req = next(parser)
            answer = self._call_app(req, parser, conn, close=not frame.whole)
            if body_pool is None or isinstance(answer.body, (list, tuple)):
                return self._finish(conn, answer)
            try:
                self._submit(body_pool, conn, lambda: self._finish(conn, answer))
            except BaseException:  # the pool is shut down: nobody writes it
                self._close_body(answer)
                self._post_request(req, answer.environ, answer.resp)
                raise
            return None
        except Exception as exc:
            return self._failed(conn, req, exc)

    def _failed(self, conn: _Conn, req: Any, exc: Exception) -> bool:
        """Log what ``exc`` says about the request (a 500 when nothing was sent);
        False: the connection is closed."""
        if isinstance(exc, (NoMoreData, StopIteration)):
            self.log.debug("Incomplete request from %s", conn.addr)
        elif isinstance(exc, OSError):  # the client left, or stopped reading
            self.log.debug("Socket error serving %s: %s", conn.addr, exc)
        else:
            self.handle_error(req, conn.sock, conn.addr, exc)
        return False

    def _call_app(self, req: Any, parser: Any, conn: _Conn, *, close: bool) -> _Answer:
        """Run the app on ``req`` (gunicorn's own steps); ``close``: the connection
        may not serve another request."""
        environ: dict[str, Any] = {}
        resp = None
        try:
            self.cfg.pre_request(self, req)
            started = datetime.now()
            resp, environ = wsgi.create(
                req, conn.sock, conn.addr, conn.server, self.cfg
            )
            environ["wsgi.multithread"] = True
            self.nr += 1
            if self.nr >= self.max_requests and self.alive:
                self.log.info("Autorestarting worker after current request.")
                self.alive = False
                self._wake()
            if close or not self.alive or not self.cfg.keepalive:
                resp.force_close()
            body = self.wsgi(environ, resp.start_response)
        except BaseException:
            self._post_request(req, environ, resp)
            raise
        return _Answer(req, parser, resp, environ, body, started)

    def _finish(self, conn: _Conn, answer: _Answer) -> bool:
        """Write the answer's body; True when the connection may serve another
        request (the parser used exactly the framed bytes)."""
        try:
            keep = self._write(answer)
            if keep:
                while answer.req.body.read(65536):
                    pass
                keep = not answer.parser.unreader.buf.getvalue()
            return keep
        except Exception as exc:
            return self._failed(conn, answer.req, exc)

    def _write(self, answer: _Answer) -> bool:
        """Write the body out and close it (gunicorn's own steps); True unless the
        response must close the connection."""
        resp = answer.resp
        try:
            try:
                for chunk in answer.body:
                    resp.write(chunk)
                resp.close()
            finally:
                elapsed = datetime.now() - answer.started
                self.log.access(resp, answer.req, answer.environ, elapsed)
                self._close_body(answer)
            return not resp.should_close()
        except OSError:
            raise
        except Exception:
            if resp.headers_sent:  # too late for an error answer
                self.log.exception("Error handling request")
                return False
            raise
        finally:
            self._post_request(answer.req, answer.environ, resp)

    @staticmethod
    def _close_body(answer: _Answer) -> None:
        """Close the body as WSGI asks (a turn's frees its session there)."""
        close = getattr(answer.body, "close", None)
        if close is not None:
            close()

    def _post_request(self, req: Any, environ: dict[str, Any], resp: Any) -> None:
        """gunicorn's ``post_request`` hook; its failure is only logged."""
        try:
            self.cfg.post_request(self, req, environ, resp)
        except Exception:
            self.log.exception("Exception in post_request hook")


def worker_class(
    *,
    read_timeout: float,
    send_timeout: float,
    max_body: int,
    max_reading: int = 256,
    control_threads: int = 2,
) -> str:
    """Set ``ServeWorker``'s settings for this process (the workers it forks inherit
    them); its dotted name, for gunicorn's ``worker_class``."""
    ServeWorker.read_timeout = read_timeout
    ServeWorker.send_timeout = send_timeout
    ServeWorker.max_body = max_body
    ServeWorker.max_reading = max_reading
    ServeWorker.control_threads = control_threads
    return f"{__name__}.{ServeWorker.__name__}"

"""The long-lived stream an HTTP server sends what relates to no request on.

Each revision has its own, and only that one carries ``notifications/tools/list_changed``
over streamable HTTP:

- **2025-03-26 to 2025-11-25** (the initialize handshake): the *standalone GET
  stream*. The client may GET the MCP endpoint (``Accept: text/event-stream``, with
  the session); the server answers with an event stream, on which it sends requests
  and notifications unrelated to any request of the client, or with 405 when it
  offers none. A server may close it at any time, sending a ``retry`` first; the
  client then reconnects no sooner than that, with ``Last-Event-ID`` so a server that
  keeps its events can replay the lost ones.
- **2026-07-28**: the GET stream is gone, and a server must not send a change
  notification nobody asked for. The client POSTs a ``subscriptions/listen`` request
  naming the notifications it wants (``toolsListChanged``); its answer is an event
  stream that stays open: first ``notifications/subscriptions/acknowledged`` with the
  part of the filter the server honours, then the notifications. Nothing is replayed:
  a client that listens again lists again.

``Listener`` keeps one such stream open on a daemon thread, never in a turn's way: its
messages go to the transport (a notification to ``on_notify``, a request of the
server's answered with a POST). A refusal (405, any other 4xx, 501, an answer that is
not an event stream, an acknowledgment without ``toolsListChanged``) ends it for good.
Any other end (the server closed it, a 5xx, a broken or refused connection) is
followed by another try, ``FIRST_WAIT`` seconds later and twice as long each time (or
the server's ``retry``, when longer); after ``ATTEMPTS`` tries in a row that heard
nothing it gives up. A stream that carried a message, or stayed open ``HEALTHY``
seconds, starts the count again. Once it opened again, ``on_reopen`` is told: what
changed meanwhile was not heard. ``close()`` ends it at once: the socket is shut down
under the thread reading it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Protocol

import httpx
import orjson

from .. import core

__all__ = [
    "ATTEMPTS",
    "FIRST_WAIT",
    "HEALTHY",
    "IDLE",
    "THREAD_NAME",
    "Listener",
    "socket_stopper",
]

#: the name of a listener's thread
THREAD_NAME: Final = "navi-mcp-listen"
#: tries in a row that heard nothing, after which a listener gives up
ATTEMPTS: Final = 5
#: seconds before the first try again (then doubling, up to ``LAST_WAIT``)
FIRST_WAIT = 0.5
LAST_WAIT: Final = 30.0
#: seconds a stream stays open to count as one that worked
HEALTHY: Final = 10.0
#: seconds of silence after which the stream is opened again (a dead peer is noticed)
IDLE: Final = 300.0
#: seconds ``close()`` waits for the thread once its socket is shut down
_JOIN: Final = 1.0
#: ``subscriptions/listen``'s acknowledgment
_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"


class _Refused(Exception):
    """The server offers no such stream: listening ends for good."""


class ListenedTransport(Protocol):
    """What a ``Listener`` uses of the HTTP transport it listens for (``_http``)."""

    @property
    def endpoint(self) -> str: ...

    @property
    def listen_client(self) -> httpx.Client: ...

    @property
    def max_message_bytes(self) -> int: ...

    def session_headers(self) -> dict[str, str]: ...

    def next_id(self) -> int: ...

    def unsolicited(self, item: dict[str, Any]) -> None: ...


class Listener:
    """One long-lived stream of ``transport``'s server, kept open on a daemon thread.

    ``subscribe`` is the ``params`` of a ``subscriptions/listen`` request (2026-07-28);
    without it the stream is the standalone GET stream of the handshake revisions.
    """

    def __init__(
        self,
        transport: ListenedTransport,
        subscribe: Mapping[str, Any] | None,
        on_reopen: Callable[[], None],
    ) -> None:
        self._transport = transport
        self._subscribe = dict(subscribe) if subscribe is not None else None
        self._on_reopen = on_reopen
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[Callable[[], None]] = []  # shut down the open connection
        self._last_event_id: str | None = None
        self._retry: float | None = None  # seconds, from the server's ``retry``
        #: whether a stream is open now
        self.listening = False
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Whether it still listens or will try again."""
        return self._thread.is_alive()

    def close(self) -> None:
        """End the stream now (its socket is shut down) and wait a moment for the
        thread; it is a daemon, so even a stuck one holds nothing up."""
        self._stopped.set()
        with self._lock:
            stops = list(self._sockets)
        for stop in stops:
            with contextlib.suppress(Exception):
                stop()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_JOIN)

    # -- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        wait = FIRST_WAIT
        opened = False
        while not self._stopped.is_set():
            began = time.monotonic()
            heard = False
            try:
                for message in self._stream():
                    if message:
                        heard = True
                    elif opened:
                        self._on_reopen()  # what changed meanwhile went unheard
                    opened = True
            except _Refused:
                return
            except Exception:  # a broken stream, or one the server refused for now
                pass
            finally:
                self.listening = False
            if heard or time.monotonic() - began >= HEALTHY:
                failures, wait = 0, FIRST_WAIT
            else:
                failures += 1
                if failures >= ATTEMPTS:
                    return
            pause = max(wait, self._retry or 0.0)
            wait = min(wait * 2, LAST_WAIT)
            if self._stopped.wait(pause):
                return

    def _stream(self) -> Iterator[bool]:
        """Open the stream and route its messages; yields False once it opened and
        True after each message. Ends when the stream does; raises ``_Refused`` when the server
        offers none."""
        t = self._transport
        headers = t.session_headers()
        headers["accept"] = "text/event-stream"
        if self._subscribe is None:
            method = "GET"
            body = None
            headers.pop("content-type", None)
            if self._last_event_id is not None:
                headers["last-event-id"] = self._last_event_id
            listen_id: int | None = None
        else:
            method = "POST"
            headers["accept"] = "application/json, text/event-stream"
            headers["mcp-method"] = "subscriptions/listen"
            listen_id = t.next_id()
            body = orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": listen_id,
                    "method": "subscriptions/listen",
                    "params": self._subscribe,
                }
            )
        if self._stopped.is_set():
            return
        client = t.listen_client
        with client.stream(
            method,
            t.endpoint,
            content=body,
            headers=headers,
            timeout=httpx.Timeout(30.0, read=IDLE),
            extensions={"trace": self._connected},
        ) as response:
            self._keep(_stop_network(response))
            status = response.status_code
            kind = response.headers.get("content-type", "")
            if 400 <= status < 500 or status == 501:
                raise _Refused(status)
            if status >= 500:
                return
            if not kind.startswith("text/event-stream"):
                raise _Refused(
                    kind
                )  # a JSON answer: an error, or a server that never streams
            self.listening = True
            yield False
            yield from self._events(response, listen_id)

    def _events(
        self, response: httpx.Response, listen_id: int | None
    ) -> Iterator[bool]:
        decoder = core.SSEDecoder()
        limit = self._transport.max_message_bytes
        pending = 0
        for chunk in response.iter_raw():
            if self._stopped.is_set():
                return
            pending += len(chunk)
            for event in decoder.feed(chunk):
                pending = 0
                if event.id:
                    self._last_event_id = event.id
                if event.retry is not None:
                    self._retry = max(0.0, event.retry / 1000)
                if not event.data:
                    continue
                try:
                    message = orjson.loads(event.data)
                except orjson.JSONDecodeError:
                    continue
                self._route(message, listen_id)
                yield True
            if pending > limit:
                return  # an event past max_message_bytes: dropped with the stream

    def _route(self, message: Any, listen_id: int | None) -> None:
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict):
                continue
            if item.get("method") == _ACKNOWLEDGED:
                params = item.get("params")
                honoured = (
                    (params or {}).get("notifications")
                    if isinstance(params, dict)
                    else None
                )
                if not (
                    isinstance(honoured, dict) and honoured.get("toolsListChanged")
                ):
                    raise _Refused("tool list changes are not delivered")
                continue
            if "method" not in item and item.get("id") == listen_id:
                if "error" in item:  # the server refused the subscription
                    raise _Refused("subscriptions/listen failed")
                continue  # it ended the subscription: listened to again
            self._transport.unsolicited(item)

    # -- ending it from another thread ------------------------------------------------

    def _keep(self, stop: Callable[[], None]) -> None:
        with self._lock:
            self._sockets = [stop]
        if self._stopped.is_set():
            stop()

    def _connected(self, event: str, info: Mapping[str, Any]) -> None:
        """An httpcore trace hook: the connection's socket is known as soon as it is
        open, so ``close()`` ends a stream whose answer has not started yet."""
        if (
            event
            in (
                "connection.connect_tcp.complete",
                "connection.start_tls.complete",
            )
            and info.get("return_value") is not None
        ):
            self._keep(_stop_stream(info["return_value"]))


def _stop_network(response: httpx.Response) -> Callable[[], None]:
    return _stop_stream(response.extensions.get("network_stream"))


def _stop_stream(stream: Any) -> Callable[[], None]:
    return socket_stopper(stream)


def socket_stopper(stream: Any) -> Callable[[], None]:
    """Shuts down the socket under an httpcore network ``stream`` (when it has one)."""
    sock = stream.get_extra_info("socket") if stream is not None else None

    def stop() -> None:
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                # the plain socket's shutdown: an SSLSocket's own would clear its
                # SSL object under the thread still reading it
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    return stop

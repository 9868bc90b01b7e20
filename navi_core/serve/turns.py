"""One turn served as ``text/event-stream``, and the turns a worker is running.

A pump thread pulls the ``Stream`` (``next()`` blocks on the provider and the tools);
the WSGI body generator forwards what it pulled, one SSE event per navi_core event,
batching whatever is ready into one write. Between events the generator watches the
client's socket, the control bus and the shutdown grace period: a client that hangs
up, a ``cancel`` request from any worker or the end of the grace period cancels the
turn, and the session is released as soon as the turn stopped. Whatever the turn
committed is stored whichever way it ends.
"""

from __future__ import annotations

import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, Final

from ..agent import Agent
from ..errors import SteeringQueueFull
from ..events import Event
from ..stream import Stream
from .control import ControlBus
from .http import Response
from .wire import encode_event, error_frame

__all__ = ["RunningTurn", "TurnBody", "TurnRegistry", "peer_gone"]

#: how often the generator looks at the socket and the control bus, in seconds
POLL: Final = 0.05
#: an SSE comment is sent after this many seconds without an event
KEEPALIVE: Final = 15.0
_END: Final = object()


def peer_gone(sock: socket.socket | None) -> bool:
    """True when the client closed its end of ``sock`` (an EOF is waiting to be read)."""
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


class RunningTurn:
    """A turn being streamed to one client, from the worker that drives its session."""

    def __init__(
        self,
        agent: Agent,
        stream: Stream,
        control: ControlBus,
        on_end: Callable[[RunningTurn], None],
    ) -> None:
        self.agent = agent
        self.stream = stream
        self.session_id = agent.session_id
        self.control = control
        self._on_end = on_end
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pump = threading.Thread(
            target=self._pull, name=f"navi-turn-{self.session_id[:8]}", daemon=True
        )
        self.cancel_reason: str | None = None
        self.events_sent = 0
        self._finished = False

    def cancel(self, reason: str) -> None:
        """End the turn at its next step with ``StopReason.CANCELLED`` (any thread)."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
        self.stream.cancel()

    def steer(self, text: str) -> None:
        """Give the running turn a user message to apply before its next response."""
        self.agent.steer(text)

    def _pull(self) -> None:
        put = self._events.put
        try:
            while (ev := self.stream.next()) is not None:
                put(ev)
        except BaseException as exc:
            put(exc)
        finally:
            put(_END)

    def response(self, sock: socket.socket | None) -> Response:
        """The ``text/event-stream`` response; ``sock`` is the client's socket."""
        headers = [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-cache"),
            ("X-Accel-Buffering", "no"),
            ("X-Session-Id", self.session_id),
        ]
        return Response(200, self.body(sock), headers)

    def body(self, sock: socket.socket | None) -> TurnBody:
        """The WSGI body: SSE events as they come, the turn cancelled if the client
        leaves; closing it before the first chunk still frees the session."""
        return TurnBody(self, self._frames(sock))

    def _frames(self, sock: socket.socket | None) -> Generator[bytes, None, None]:
        self._pump.start()
        get = self._events.get
        connected = True
        last_write = last_poll = time.monotonic()
        try:
            # sent at once, so the client has the headers before the first event
            yield f": turn of session {self.session_id}\n\n".encode()
            while True:
                try:
                    item = get(timeout=POLL)
                except queue.Empty:
                    item = None
                out: list[bytes] = []
                ended = False
                while item is not None:
                    if item is _END:
                        ended = True
                        break
                    if isinstance(item, Event):
                        out.append(encode_event(item))
                    else:
                        out.append(error_frame(item))
                    try:
                        item = self._events.get_nowait()
                    except queue.Empty:
                        item = None
                now = time.monotonic()
                if connected and out:
                    self.events_sent += len(out)
                    last_write = now
                    yield b"".join(out)
                if ended:
                    return
                if now - last_poll >= POLL:
                    last_poll = now
                    connected = self._watch(sock, connected)
                if connected and now - last_write >= KEEPALIVE:
                    last_write = now
                    yield b": keep-alive\n\n"
        finally:
            # the client went away (GeneratorExit) or the turn ended: stop, then free
            if self._pump.is_alive():
                self.cancel(self.cancel_reason or "client disconnected")
                self._drain()
            self.finish()

    def _watch(self, sock: socket.socket | None, connected: bool) -> bool:
        """Apply control requests; cancel when the client hung up. Returns connected."""
        for kind, text in self.control.take(self.session_id):
            if kind == "cancel":
                self.cancel("cancel requested")
            elif kind == "steer":
                try:
                    self.steer(text)
                except SteeringQueueFull:  # the sender was told 202: keep it for later
                    self.control.post(self.session_id, "steer", text)
                    break
        if connected and peer_gone(sock):
            self.cancel("client disconnected")
            return False
        return connected

    def _drain(self) -> None:
        """Wait until the pump thread stopped (a cancelled turn stops at its next step).

        TODO(Stream.cancel within 100 ms, Turn control): until then a turn blocked in
        a silent provider read holds the session until that read returns.
        """
        while self._events.get() is not _END:
            pass
        self._pump.join()

    def finish(self) -> None:
        """Close the stream and the agent (the session is free), drop the turn."""
        if self._finished:
            return
        self._finished = True
        try:
            self.stream.close()
        finally:
            try:
                self.agent.close()
            finally:
                self._on_end(self)


class TurnBody:
    """The iterable a WSGI server writes out and closes."""

    def __init__(self, turn: RunningTurn, frames: Generator[bytes, None, None]) -> None:
        self._turn = turn
        self._frames = frames

    def __iter__(self) -> Iterator[bytes]:
        return self._frames

    def close(self) -> None:
        self._frames.close()  # a started generator cleans up here
        self._turn.finish()  # one that never started has nothing else to stop


class TurnRegistry:
    """The turns this worker is running, by session id (thread-safe)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._turns: dict[str, RunningTurn] = {}

    def add(self, turn: RunningTurn) -> None:
        with self._mutex:
            self._turns[turn.session_id] = turn

    def remove(self, turn: RunningTurn) -> None:
        with self._mutex:
            if self._turns.get(turn.session_id) is turn:
                del self._turns[turn.session_id]

    def get(self, session_id: str) -> RunningTurn | None:
        with self._mutex:
            return self._turns.get(session_id)

    def all(self) -> list[RunningTurn]:
        with self._mutex:
            return list(self._turns.values())

    def cancel_all_after(self, delay: float, reason: str) -> None:
        """Cancel every turn still running ``delay`` seconds from now."""

        def cancel() -> None:
            for turn in self.all():
                turn.cancel(reason)

        timer = threading.Timer(delay, cancel)
        timer.daemon = True
        timer.start()

    def __len__(self) -> int:
        with self._mutex:
            return len(self._turns)

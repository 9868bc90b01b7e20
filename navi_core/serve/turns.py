"""One turn served as ``text/event-stream``, and the turns a worker is running.

The request's own thread drives the ``Stream`` with ``next(timeout=POLL)``: between
events, and at least every ``POLL`` seconds, it forwards what the turn returned (one
SSE event per navi_core event, whatever is ready batched into one write), watches the
client's socket and polls the control bus. A client that hangs up, a ``cancel``
request from any worker or the end of the shutdown grace period cancels the turn,
which stops within milliseconds; the session is released right after. Whatever the
turn committed is stored whichever way it ends. A body that ends early for any other
reason (the store failing, a fault) still ends with an ``event: error`` frame; a
control bus that fails is retried while the turn goes on.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Final

from .._logs import get_logger
from .._turn.steering import SteerDisposition
from ..agent import Agent
from ..errors import SteeringQueueFull
from ..events import PENDING
from ..stream import Stream
from .control import ControlBus
from .http import Response
from .wire import encode_event, error_frame

__all__ = ["RunningTurn", "TurnBody", "TurnRegistry", "peer_gone"]

log = get_logger("navi_core.serve")

#: the longest wait for an event before the socket and the control bus are checked
POLL: Final = 0.05
#: an SSE comment is sent after this many seconds without an event
KEEPALIVE: Final = 15.0
#: at most this many events go into one write
BATCH: Final = 256
#: how long a cancelled turn may take to return its ``TurnComplete``
STOP_WAIT: Final = 5.0


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
        self.cancel_reason: str | None = None
        self.events_sent = 0
        self._finished = False
        self._reported = False  # an error frame went out
        self._control_failing = False

    def cancel(self, reason: str) -> None:
        """End the turn with ``StopReason.CANCELLED`` (any thread; it stops within ms)."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
        self.stream.cancel()

    def steer(self, text: str) -> SteerDisposition:
        """Give the turn a user message to apply before its next response.

        Raises:
            SteeringQueueFull: ``Config.max_steering`` messages wait already.
        """
        return self.agent.steer(text)

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

    def _pull(self, timeout: float) -> tuple[list[bytes], bool]:
        """The frames of the events ready within ``timeout``, and whether it ended."""
        out: list[bytes] = []
        try:
            ev = self.stream.next(timeout)
            while ev is not PENDING:
                if ev is None:
                    return out, True
                out.append(encode_event(ev))
                if len(out) >= BATCH:
                    break
                ev = self.stream.next(0)  # whatever else is ready now
        except Exception as exc:  # the turn failed: its last frame says how
            out.append(error_frame(exc))
            self._reported = True
            return out, True
        return out, False

    def _frames(self, sock: socket.socket | None) -> Generator[bytes, None, None]:
        """The body; whichever way it ends early (the store, the control bus, a
        fault), its last frame is ``event: error`` unless the client left."""
        last_write = time.monotonic()
        last_poll = -POLL  # the first look comes before the model is asked
        ended = False
        failure: Exception | None = None
        try:
            # sent at once, so the client has the headers before the first event
            yield f": turn of session {self.session_id}\n\n".encode()
            while not ended:
                # a turn that waited for a thread may have been cancelled or steered
                # from another worker meanwhile: that is taken before its first pull
                now = time.monotonic()
                if now - last_poll >= POLL:
                    last_poll = now
                    if not self._watch(sock):
                        self._stop(ended, "client disconnected")
                        return  # nobody to tell
                out, ended = self._pull(POLL)
                now = time.monotonic()
                if out:
                    self.events_sent += len(out)
                    last_write = now
                    yield b"".join(out)
                if now - last_write >= KEEPALIVE:
                    last_write = now
                    yield b": keep-alive\n\n"
        except GeneratorExit:  # the server closed the body: the client went away
            try:
                self._stop(ended, "client disconnected")
            except Exception:
                log.exception("stopping the turn of session %s failed", self.session_id)
            raise
        except Exception as exc:
            failure = exc
        try:
            self._stop(ended, "the response ended early")
        except Exception as exc:
            failure = failure or exc
        if failure is not None and not self._reported:
            self._reported = True
            yield error_frame(failure)

    def _stop(self, ended: bool, reason: str) -> None:
        """Cancel the turn if it still runs (for ``reason``), then free the session."""
        if not ended:
            self.cancel(self.cancel_reason or reason)
            self._drain()
        self.finish()

    def _watch(self, sock: socket.socket | None) -> bool:
        """Apply control requests; False when the client hung up.

        A control bus that fails (its database restarting) is retried at the next
        poll: the turn goes on, and cancel or steer requests wait until it is back.
        """
        try:
            for kind, text in self.control.take(self.session_id):
                if kind == "cancel":
                    self.cancel("cancel requested")
                elif kind == "steer":
                    try:
                        self.steer(text)
                    except SteeringQueueFull:  # the sender was told 202: keep it
                        self.control.post(self.session_id, "steer", text)
                        break
        except Exception:
            if not self._control_failing:
                log.warning(
                    "the control bus failed while session %s ran a turn; retrying",
                    self.session_id,
                    exc_info=True,
                )
            self._control_failing = True
        else:
            self._control_failing = False
        return not peer_gone(sock)

    def _drain(self) -> None:
        """Let a cancelled turn return its ``TurnComplete`` (committing what finished)."""
        deadline = time.monotonic() + STOP_WAIT
        try:
            while time.monotonic() < deadline:
                if self.stream.next(0.1) is None:
                    return
        except Exception:  # the turn failed while stopping: close() stores the rest
            return

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

"""Blocking calls a ``Stream`` runs off the host's thread, for ``next(timeout=...)``.

With a timeout, the stream hands each call that may block (opening a response,
reading its next chunk, a summary request) to its ``Worker`` thread as an ``Op`` and
waits for it only until the deadline; the op keeps running, and a later ``next()``
picks its result up. An op the turn no longer wants (after a cancel) is *abandoned*:
whatever it returns is handed to a cleanup function (closing a response) on the worker.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .._interrupt import Interrupter, set_active

__all__ = ["Op", "Worker"]

T = TypeVar("T")


class Op(Generic[T]):
    """One call on the worker: ``done`` once it returned or raised."""

    __slots__ = ("_cleanup", "_cv", "_fn", "_lock", "done", "error", "value")

    def __init__(self, fn: Callable[[], T], cv: threading.Condition) -> None:
        self._fn = fn
        self._cv = cv
        self._lock = threading.Lock()
        self._cleanup: Callable[[Op[T]], None] | None = None
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None

    def result(self) -> T:
        """The value, or the exception raised again."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]

    def abandon(self, cleanup: Callable[[Op[T]], None]) -> None:
        """Nobody will read the result: pass it to ``cleanup`` when it arrives."""
        with self._lock:
            if not self.done:
                self._cleanup = cleanup
                return
        cleanup(self)

    def run(self) -> None:
        """Run the call (on the worker) and wake whoever waits on the condition."""
        try:
            self.value = self._fn()
        except BaseException as exc:  # handed to the driver, which raises it
            self.error = exc
        with self._lock:
            self.done = True
            cleanup = self._cleanup
        if cleanup is not None:
            # releasing an abandoned result must not kill the worker
            with contextlib.suppress(Exception):
                cleanup(self)
        with self._cv:
            self._cv.notify_all()


class Worker:
    """A daemon thread running one stream's ops in order; ``stop()`` ends it."""

    __slots__ = ("_inbox", "_thread")

    def __init__(self, interrupter: Interrupter) -> None:
        self._inbox: queue.SimpleQueue[Op[Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._loop, args=(interrupter,), name="navi-stream", daemon=True
        )
        self._thread.start()

    def submit(self, op: Op[T]) -> Op[T]:
        """Queue ``op`` behind the others and return it."""
        self._inbox.put(op)
        return op

    def stop(self) -> None:
        """End the thread once the op it runs (if any) returns."""
        self._inbox.put(None)

    def _loop(self, interrupter: Interrupter) -> None:
        set_active(interrupter)
        get = self._inbox.get
        while (op := get()) is not None:
            op.run()
            del op  # idle, it keeps nothing of the turn (a response, its socket) alive

"""``DaemonPool``: the thread pool tool calls run on, on daemon threads shared by the
process.

The threads are daemons: a tool that hangs after its turn was cancelled never holds up
the exit of the host program, as the threads of a ``ThreadPoolExecutor`` would (they
are joined at interpreter exit). Idle threads are shared by every pool of the process,
so a new ``Agent`` starts no thread.

A worker waits for work, and a poller for reports (``Inbox``), on a ``core.Signal``:
the wake-up that ends either wait can be given with the GIL let go
(``core.hand_off``), so the thread it wakes does not find the GIL taken and sleep
again (two system calls and a thread switch less per hand-off).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from ..core import Signal, hand_off

__all__ = ["DaemonPool", "Inbox", "deliver_last"]


class Inbox:
    """Reports from pool threads to the one thread that polls them: a queue and the
    ``Signal`` its poller waits on. Items are never None."""

    __slots__ = ("_items", "signal")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self.signal = Signal()

    def put(self, item: Any) -> None:
        """Queue ``item`` and wake the poller (any thread)."""
        self._items.append(item)
        self.signal.give()

    def put_quiet(self, item: Any) -> Signal:
        """Queue ``item`` without waking the poller; the signal to give is returned."""
        self._items.append(item)
        return self.signal

    def get_nowait(self) -> Any:
        """The oldest item, or None when there is none."""
        try:
            return self._items.popleft()
        except IndexError:
            return None

    def get(self, timeout: float | None = None, wake: Signal | None = None) -> Any:
        """The oldest item, waiting at most ``timeout`` seconds (None: for ever) for one
        to come; None when none came. ``wake`` is given first, with the GIL let go
        before it when the poller waits (``hand_off``), and given however the call
        ends (an interrupt, a bad timeout): a wake-up lost would leave a pool thread
        waiting for the call it was lent for."""
        try:
            if self._items:
                return self.get_nowait()
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                woken = hand_off(wake, self.signal, timeout)
                wake = None
                item = self.get_nowait()  # also one that came as the time ran out
                if item is not None or not woken:
                    return item
                if deadline is not None:  # a wake for an item taken already: wait on
                    timeout = deadline - time.monotonic()
                    if timeout <= 0:
                        return None
        finally:
            if wake is not None:
                wake.give()


class _Mailbox:
    """An idle worker's: the pool it is lent to next, and the signal it waits on."""

    __slots__ = ("pool", "signal")

    def __init__(self) -> None:
        self.pool: DaemonPool | None = None
        self.signal = Signal()


class _Workers:
    """Idle daemon threads shared by every pool in the process.

    Starting a thread costs far more than a quick tool call, and a web app may build
    an ``Agent`` per request: a pool borrows a worker for as long as it has work and
    gives it back, so a new agent's first batch runs on threads that already exist.
    A worker busy with a hung tool is simply not given back until the tool returns.
    """

    _MAX_IDLE = 64

    def __init__(self) -> None:
        self._idle: list[_Mailbox] = []
        self._lock = threading.Lock()
        self._count = 0

    def lend(self, pool: DaemonPool, *, quiet: bool = False) -> Signal | None:
        """Have a worker run ``pool``'s queued work until the queue is empty. With
        ``quiet``, an idle worker's wake-up is returned for the caller to give (as it
        waits: ``hand_off``) instead of given now; None when given."""
        with self._lock:
            box = self._idle.pop() if self._idle else None
            if box is None:
                self._count += 1
                name = f"{pool.name}-{self._count}"
        if box is not None:
            box.pool = pool
            if quiet:
                return box.signal
            box.signal.give()
            return None
        box = _Mailbox()
        box.pool = pool
        box.signal.give()
        threading.Thread(
            target=self._serve, args=(box,), name=name, daemon=True
        ).start()
        return None

    def forget(self) -> None:
        """In a forked child: the parent's workers do not exist there, and the lock
        may have been held by one of its threads at the fork."""
        self._idle = []
        self._lock = threading.Lock()

    def _serve(self, box: _Mailbox) -> None:
        later: list[tuple[Inbox, Any]] = []
        _worker.later = later
        wake: Signal | None = None
        while True:
            hand_off(wake, box.signal)  # the last report's wake-up, given as it waits
            pool, box.pool = box.pool, None
            if pool is None:
                wake = None
                continue
            pool.drain()
            with self._lock:
                idle = len(self._idle) < self._MAX_IDLE
                if idle:
                    self._idle.append(box)
            wake = _deliver(later)
            if not idle:
                if wake is not None:
                    wake.give()
                return


_worker = threading.local()


def deliver_last(inbox: Inbox, item: Any) -> None:
    """Put ``item`` in ``inbox`` now, or on a pool worker as its last act before it
    waits for more work (or takes the next call): the poller it wakes then finds the
    worker done with Python and the GIL let go (``hand_off``), so the two do not
    contend for it."""
    later = getattr(_worker, "later", None)
    if later is None:
        inbox.put(item)
    else:
        later.append((inbox, item))


def _deliver(later: list[tuple[Inbox, Any]]) -> Signal | None:
    """Put the held reports; the wake-up of the last one's inbox is returned, not
    given (the others are given now)."""
    wake: Signal | None = None
    while later:
        inbox, item = later.pop(0)
        signal = inbox.put_quiet(item)
        if wake is not None and wake is not signal:
            wake.give()
        wake = signal
    return wake


_WORKERS = _Workers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WORKERS.forget)


class DaemonPool(Executor):
    """Runs calls on at most ``max_workers`` daemon threads at once, borrowed from
    the process's idle workers (``_Workers``) as work arrives.

    ``watched``: the poster waits for the results and calls ``catch_up`` as it does
    (``Dispatch.poll``), so a worker that takes a call does not borrow the next worker
    on the chance that the call blocks: calls that return at once all run on one
    thread, which only one wake-up reaches.
    """

    def __init__(
        self, max_workers: int, name: str = "navi-tool", *, watched: bool = False
    ) -> None:
        self._max = max(1, max_workers)
        self.name = name
        self._chain = not watched
        self._work: queue.SimpleQueue[
            tuple[
                Future[Any] | None, Callable[..., Any], tuple[Any, ...], dict[str, Any]
            ]
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # made by the first shutdown(wait=True): most pools are never waited for
        self._done: threading.Condition | None = None
        self._active = 0  # workers serving this pool now
        self._free = 0  # of those, the ones not inside a call (they take queued work)
        self._closed = False

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Future[Any]:
        """Run ``fn(*args, **kwargs)`` on a pool thread."""
        future: Future[Any] = Future()
        self._put(future, fn, args, kwargs)
        return future

    def post(self, fn: Callable[..., None], /, *args: Any) -> None:
        """Run ``fn(*args)`` on a pool thread, for a caller that takes no result
        (a tool batch reports through its own queue): no ``Future`` to make."""
        self._put(None, fn, args, {})

    def post_quiet(self, fn: Callable[..., None], /, *args: Any) -> Signal | None:
        """``post``, for a caller about to wait: the wake-up of the idle worker that
        will run it is returned for the caller to give as it waits (``hand_off``);
        None when there is none to give (a worker was free, or a new one started)."""
        return self._put(None, fn, args, {}, quiet=True)

    def _put(
        self,
        future: Future[Any] | None,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        quiet: bool = False,
    ) -> Signal | None:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._work.put((future, fn, args, kwargs))
            lend = self._lend_locked()
        if lend:
            return _WORKERS.lend(self, quiet=quiet)
        return None

    @property
    def chains(self) -> bool:
        """True unless ``watched``: a worker that takes a call borrows the next."""
        return self._chain

    @property
    def waiting(self) -> bool:
        """True while calls are queued (not taken by a worker yet)."""
        return not self._work.empty()

    @property
    def stalled(self) -> bool:
        """True while ``catch_up`` would borrow a worker: calls are queued that no free
        worker will take, and the pool has fewer than ``max_workers`` (a hint: the
        counts are read without the lock)."""
        return (
            not self._work.empty()
            and self._work.qsize() > self._free
            and self._active < self._max
        )

    def catch_up(self) -> None:
        """Borrow a worker for each queued call no free worker will take (up to
        ``max_workers``): the calls that wait behind calls still running start now."""
        if not self.stalled:
            return
        lend = 0
        with self._lock:
            while self._work.qsize() > self._free and self._active < self._max:
                self._active += 1
                self._free += 1
                lend += 1
        for _ in range(lend):
            _WORKERS.lend(self)

    def _lend_locked(self) -> bool:
        """Whether to borrow one more worker: only when none of this pool's is free to
        take queued work. Unwatched, a worker that takes a call while more wait borrows
        the next (a chain), so calls that return at once run on one or two threads
        instead of waking one each, and calls that block still all run at once."""
        if self._free or self._active >= self._max:
            return False
        self._active += 1
        self._free += 1
        return True

    def drain(self) -> None:
        """Run queued calls until none is left (on a borrowed worker)."""
        while True:
            with self._lock:
                self._free -= 1
                try:
                    future, fn, args, kwargs = self._work.get_nowait()
                except queue.Empty:
                    self._active -= 1
                    if self._done is not None:
                        self._done.notify_all()
                    return
                lend = self._chain and not self._work.empty() and self._lend_locked()
            if lend:
                _WORKERS.lend(self)
            if future is None:  # post(): the callable reports its own outcome;
                with contextlib.suppress(BaseException):  # the worker lives on
                    fn(*args)
            elif future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # the caller reads it from the future
                    future.set_exception(exc)
            del future, fn, args, kwargs
            with self._lock:
                self._free += 1  # looking for more work
                more = not self._work.empty()
            if more and (wake := _deliver(_worker.later)) is not None:
                wake.give()  # the reports of this call go out before the next call runs

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more work; with ``cancel_futures`` drop what has not started."""
        with self._lock:
            self._closed = True
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item[0] is not None:
                    item[0].cancel()
        if wait:
            with self._lock:
                if self._done is None:
                    self._done = threading.Condition(self._lock)
                while self._active:
                    self._done.wait()

"""``DaemonPool``: the thread pool tool calls run on, on daemon threads shared by the
process.

The threads are daemons: a tool that hangs after its turn was cancelled never holds up
the exit of the host program, as the threads of a ``ThreadPoolExecutor`` would (they
are joined at interpreter exit). Idle threads are shared by every pool of the process,
so a new ``Agent`` starts no thread.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["DaemonPool", "deliver_last"]


class _Workers:
    """Idle daemon threads shared by every pool in the process.

    Starting a thread costs far more than a quick tool call, and a web app may build
    an ``Agent`` per request: a pool borrows a worker for as long as it has work and
    gives it back, so a new agent's first batch runs on threads that already exist.
    A worker busy with a hung tool is simply not given back until the tool returns.
    """

    _MAX_IDLE = 64

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue[DaemonPool]] = []
        self._lock = threading.Lock()
        self._count = 0

    def lend(self, pool: DaemonPool) -> None:
        """Have a worker run ``pool``'s queued work until the queue is empty."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self._count += 1
                name = f"{pool.name}-{self._count}"
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(inbox,), name=name, daemon=True
            ).start()
        inbox.put(pool)

    def forget(self) -> None:
        """In a forked child: the parent's workers do not exist there, and the lock
        may have been held by one of its threads at the fork."""
        self._idle = []
        self._lock = threading.Lock()

    def _serve(self, inbox: queue.SimpleQueue[DaemonPool]) -> None:
        later: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        _worker.later = later
        while True:
            inbox.get().drain()
            with self._lock:
                idle = len(self._idle) < self._MAX_IDLE
                if idle:
                    self._idle.append(inbox)
            _deliver(later)
            if not idle:
                return


_worker = threading.local()


def deliver_last(fn: Callable[..., None], *args: Any) -> None:
    """Call ``fn(*args)`` now, or on a pool worker as its last act before it waits for
    more work (or takes the next call): a report that wakes a waiting thread then
    reaches it after this one stopped running Python, so the two do not contend for
    the GIL (a few system calls and a context switch less per tool call)."""
    later = getattr(_worker, "later", None)
    if later is None:
        fn(*args)
    else:
        later.append((fn, args))


def _deliver(later: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> None:
    while later:
        fn, args = later.pop(0)
        with contextlib.suppress(BaseException):
            fn(*args)


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

    def _put(
        self,
        future: Future[Any] | None,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._work.put((future, fn, args, kwargs))
            lend = self._lend_locked()
        if lend:
            _WORKERS.lend(self)

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
            if more:  # the reports of this call go out before the next call runs
                _deliver(_worker.later)

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

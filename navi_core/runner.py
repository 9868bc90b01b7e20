"""``ToolRunner``: the tool registry and the thread pool that tool batches run on.

The pool's threads are daemons (``DaemonPool``): a tool that hangs after its turn was
cancelled never holds up the exit of the host program, as the threads of a
``ThreadPoolExecutor`` would (they are joined at interpreter exit).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any

from .config import ImageLimits
from .conversation import ToolUse, WireIdentity
from .dispatch import Dispatch
from .tools import ToolRegistry

__all__ = ["DaemonPool", "ToolRunner"]


class DaemonPool(Executor):
    """A thread pool of daemon threads, started as work arrives, up to ``max_workers``."""

    def __init__(self, max_workers: int, name: str = "navi-tool") -> None:
        self._max = max(1, max_workers)
        self._name = name
        self._work: queue.SimpleQueue[
            tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]
            | None
        ] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Future[Any]:
        """Run ``fn(*args, **kwargs)`` on a pool thread."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._work.put((future, fn, args, kwargs))
            if (
                not self._idle.acquire(blocking=False)
                and len(self._threads) < self._max
            ):
                t = threading.Thread(
                    target=self._serve,
                    name=f"{self._name}-{len(self._threads)}",
                    daemon=True,
                )
                self._threads.append(t)
                t.start()
        return future

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # the caller reads it from the future
                    future.set_exception(exc)
            del item, future, fn, args, kwargs
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more work; with ``cancel_futures`` drop what has not started."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._work.put(None)
        if wait:
            for t in threads:
                t.join()


class ToolRunner:
    """The registry and the thread pool that tool batches run on.

    The pool is sized by ``Config.max_tool_threads`` of the batch that starts it and
    rebuilt when a later config asks for another size.
    """

    __slots__ = ("_executor", "_size", "registry")

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self._executor: DaemonPool | None = None
        self._size = 0

    def start(
        self,
        uses: Sequence[ToolUse],
        threads: int,
        limits: ImageLimits,
        wire: WireIdentity | None,
        session_id: str | None = None,
        factory: Callable[..., Dispatch] = Dispatch,
    ) -> Dispatch:
        """Start running ``uses`` on ``threads`` threads; the batch reports by ``poll``.

        ``factory`` builds the batch (``Dispatch`` or a subclass taking its arguments).
        """
        executor = self._executor
        if executor is None or self._size != threads:
            if executor is not None:
                executor.shutdown(wait=False)
            executor = self._executor = DaemonPool(threads)
            self._size = threads
        return factory(
            uses,
            self.registry,
            executor,
            limits,
            wire,
            session_id=session_id,
            on_abandon=self._abandon_pool,
        )

    def _abandon_pool(self) -> None:
        """Leave the threads of cancelled calls that still run to themselves: the next
        batch starts on a new pool, so hung tools never starve later turns."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop the pool; calls still running finish on their threads."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

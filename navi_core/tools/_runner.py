"""``ToolRunner``: the tool registry and the thread pool (``DaemonPool``) that tool
batches run on."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..config import ImageLimits
from ..conversation import ToolUse, WireIdentity
from ._dispatch import Dispatch
from ._pool import DaemonPool
from ._tool import ToolRegistry

__all__ = ["DaemonPool", "ToolRunner"]


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
            executor = self._executor = DaemonPool(threads, watched=True)
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

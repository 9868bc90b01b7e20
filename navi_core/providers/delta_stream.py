"""``DeltaStream``: the ``ProviderStream`` every provider returns, over core deltas.

Parsing is sans-IO (``navi_core.core`` parsers return delta tuples); a ``DeltaStream``
runs those deltas through a ``ResponseAssembler``, the same for every provider.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..conversation import Usage, WireIdentity
from ..errors import MalformedStream
from ..events import Event, MessageComplete
from .assembler import ResponseAssembler

__all__ = ["DeltaStream"]


class DeltaStream:
    """A ``ProviderStream`` over an iterator of delta batches.

    ``batches`` yields one list of core deltas per unit of input and must raise
    ``ProviderError`` subclasses for transport failures. Running out of batches before
    the terminator delta is a ``MalformedStream``. With ``coalesce``, adjacent deltas
    of one kind in one batch become one event.
    """

    __slots__ = ("_asm", "_batches", "_complete", "_core", "_on_close")

    def __init__(
        self,
        batches: Iterator[Sequence[tuple[Any, ...]]],
        wire: WireIdentity,
        *,
        on_close: Callable[[], None] | None = None,
        coalesce: bool = False,
    ) -> None:
        self._batches = batches
        self._asm = ResponseAssembler(wire, coalesce=coalesce)
        self._core = self._asm.core  # fed directly: one call per batch fewer
        self._complete = False
        self._on_close = on_close

    @property
    def complete(self) -> bool:
        """True once the ``MessageComplete`` event was queued."""
        return self._complete

    def produce(self, queue: deque[Event]) -> bool:
        """Push the events of the next batch; True once the message is complete.

        Raises:
            MalformedStream: the batches ran out before the terminator.
            ProviderError: whatever the batches raised.
        """
        if self._complete:
            return True
        core = self._core
        try:
            batch = next(self._batches)
        except StopIteration:
            raise MalformedStream(
                "response ended before its terminator", offset=None
            ) from None
        if batch:
            try:
                core.feed(batch, queue.append)
            except ValueError as exc:
                raise MalformedStream(str(exc)) from None
        if core.done:
            message = self._asm.finish()
            queue.append(MessageComplete(message, message.usage or _ZERO))
            self._complete = True
            self.close()
        return self._complete

    def shown(self) -> tuple[int, int, int]:
        """Characters of text and thinking, and tool calls, pushed so far: what a
        renderer removes when this response fails and is retried."""
        return self._asm.shown()

    def close(self) -> None:
        """Run ``on_close`` once (idempotent)."""
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


_ZERO = Usage()

"""``DeltaStream``: the ``ProviderStream`` every provider returns, over core deltas.

Parsing is sans-IO (``navi_core.core`` parsers return delta tuples); a ``DeltaStream``
runs those deltas through a ``ResponseAssembler``, the same for every provider.

Its feed is the interface the core's read loop (``produce`` and the ``Reader`` of
``Stream.next()``) is written against, and all it reads of a response: ``batches``
and ``core`` (taken once per response), then ``finish``, ``ended``, ``malformed``
and ``scrubbed`` at the end of the response or when it fails. A subclass changes what
its errors say by overriding ``scrubbed``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..conversation import Usage, WireIdentity
from ..core import produce as core_produce
from ..errors import IncompleteResponse, MalformedStream, ProviderError, ServerError
from ..events import Event, MessageComplete
from .assembler import ResponseAssembler

__all__ = ["DeltaStream"]


class DeltaStream:
    """A ``ProviderStream`` over an iterator of delta batches.

    ``batches`` yields one list of core deltas per unit of input and must raise
    ``ProviderError`` subclasses for transport failures. Running out of batches before
    the terminator delta is an ``IncompleteResponse``, and so is a terminator with no
    finish reason before it when ``require_finish`` (chat completions: ``[DONE]``
    alone is what a server that cut the answer sends). A finish reason ``"error"`` is
    a ``ServerError``. With ``coalesce``, adjacent deltas of one kind in one batch
    become one event.
    """

    __slots__ = ("_asm", "_complete", "_on_close", "_require_finish", "batches", "core")

    def __init__(
        self,
        batches: Iterator[Sequence[tuple[Any, ...]]],
        wire: WireIdentity,
        *,
        on_close: Callable[[], None] | None = None,
        coalesce: bool = False,
        require_finish: bool = False,
    ) -> None:
        #: the delta batches, read by the core's read loop
        self.batches = batches
        self._asm = ResponseAssembler(wire, coalesce=coalesce)
        #: the core ``Assembler`` the batches are fed to directly (a call per batch fewer)
        self.core = self._asm.core
        self._complete = False
        self._on_close = on_close
        self._require_finish = require_finish

    @property
    def complete(self) -> bool:
        """True once the ``MessageComplete`` event was queued."""
        return self._complete

    if TYPE_CHECKING:

        def produce(self, queue: deque[Event]) -> bool:
            """Push the events of the next batch; True once the message is complete.

            Raises:
                MalformedStream: the batches ran out before the terminator.
                ProviderError: whatever the batches raised, secrets redacted.
            """
            ...
    else:  # the core's: Stream.next() calls it without a frame of its own
        produce = core_produce

    def ended(self) -> MalformedStream:
        """The batches ran out before the terminator (``produce`` raises it)."""
        return IncompleteResponse("response ended before its terminator", offset=None)

    def malformed(self, exc: ValueError) -> MalformedStream:
        """The assembler refused a delta (``produce`` raises it)."""
        return MalformedStream(str(exc))

    def scrubbed(self, exc: ProviderError) -> ProviderError:
        """What ``produce`` raises for ``exc``: ``exc`` itself here; a response that
        knows secrets returns a redacted, clipped copy (``ResponseStream``)."""
        return exc

    def finish(self, queue: deque[Event]) -> None:
        """The terminator arrived: queue the ``MessageComplete`` and close.

        Raises:
            IncompleteResponse: ``require_finish`` and no finish reason came.
            ServerError: the finish reason is ``"error"`` with no error object
                before it (which would have raised its own error): the server says
                the response failed, as OpenRouter's shape with an object says.
        """
        reason = self._asm.finish_reason
        if self._require_finish and reason is None:
            raise IncompleteResponse(
                "response ended without a finish_reason: the server cut the answer "
                "short (OpenAIChat(require_finish_reason=False) accepts servers that "
                "never send one)",
                offset=None,
            )
        if reason == "error":
            raise ServerError(
                'the server ended the response with finish_reason "error" and no '
                "error object saying why"
            )
        message = self._asm.finish()
        queue.append(MessageComplete(message, message.usage or _ZERO))
        self._complete = True
        self.close()

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

"""The provider seam: what the Stream asks of a provider, and the shared plumbing.

A provider turns a ``ProviderRequest`` into a ``ProviderStream``. ``produce(queue)``
advances the response by one unit of input (a network chunk, a scripted batch), pushes
the events it yields and returns True once the ``MessageComplete`` event is queued.
Parsing is sans-IO (``navi_core.core`` parsers return delta tuples); ``DeltaStream``
runs those deltas through a ``ResponseAssembler`` for every provider alike.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..config import Config
from ..conversation import Message, Usage, WireIdentity
from ..errors import MalformedStream
from ..events import Event, MessageComplete
from .assembler import ResponseAssembler
from .errormap import error_for_status, error_for_stream, is_context_overflow

__all__ = [
    "DeltaStream",
    "Provider",
    "ProviderRequest",
    "ProviderStream",
    "ToolSpec",
    "error_for_status",
    "error_for_stream",
    "is_context_overflow",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool declaration as sent to the model: name, description, JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any] = field(hash=False)


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """Everything one response needs: the dialogue, system prompt, tools and config."""

    messages: tuple[Message, ...]
    system: str | None
    tools: tuple[ToolSpec, ...]
    config: Config


@runtime_checkable
class ProviderStream(Protocol):
    """One open response."""

    def produce(self, queue: deque[Event]) -> bool:
        """Push the events of the next unit of input; True once the message is complete.

        Raises:
            ProviderError: the response failed; nothing of it was committed.
        """
        ...

    def close(self) -> None:
        """Release the response (idempotent)."""
        ...


@runtime_checkable
class Provider(Protocol):
    """A model endpoint."""

    @property
    def wire(self) -> WireIdentity:
        """The API style, base URL and model this provider talks to."""
        ...

    def open(self, request: ProviderRequest) -> ProviderStream:
        """Send the request and return the open response.

        Raises:
            ProviderError: the request was refused or could not be sent.
        """
        ...

    def close(self) -> None:
        """Release connections (idempotent)."""
        ...


class DeltaStream:
    """A ``ProviderStream`` over an iterator of delta batches.

    ``batches`` yields one list of core deltas per unit of input and must raise
    ``ProviderError`` subclasses for transport failures. Running out of batches before
    the terminator delta is a ``MalformedStream``.
    """

    __slots__ = ("_asm", "_batches", "_complete", "_on_close")

    def __init__(
        self,
        batches: Iterator[Sequence[tuple[Any, ...]]],
        wire: WireIdentity,
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._batches = batches
        self._asm = ResponseAssembler(wire)
        self._complete = False
        self._on_close = on_close

    def produce(self, queue: deque[Event]) -> bool:
        if self._complete:
            return True
        asm = self._asm
        try:
            batch = next(self._batches)
        except StopIteration:
            raise MalformedStream(
                "response ended before its terminator", offset=None
            ) from None
        if batch:
            asm.feed(batch, queue)
        if asm.done:
            message = asm.finish()
            queue.append(MessageComplete(message, message.usage or _ZERO))
            self._complete = True
            self.close()
        return self._complete

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


_ZERO = Usage()

"""``Scripted``: an offline provider replaying scripted responses, for tests and demos.

Each item is one response: a list of blocks, an assistant ``Message`` (to carry usage
and a stop reason), a plain string (one text block), an exception instance (raised when
that response is opened) or ``MidStreamFailure`` (streams a part, then fails). Text is
streamed in small deltas through the same assembler the HTTP providers use, one delta
per simulated network read unless ``deltas_per_read`` says more.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, TypeAlias

from .. import _deltas as D
from .._history import History
from .._ids import publish
from ..config import Pricing
from ..conversation import (
    Block,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolUse,
    Usage,
    WireIdentity,
)
from ..errors import BadRequest, ProviderError
from .base import ProviderRequest
from .delta_stream import DeltaStream

__all__ = ["MidStreamFailure", "Scripted", "ScriptItem"]


@dataclass(frozen=True, slots=True)
class MidStreamFailure:
    """A response that streams ``after`` deltas of ``blocks`` and then raises ``error``."""

    blocks: Sequence[Block]
    error: ProviderError
    after: int = 3


ScriptItem: TypeAlias = (
    "Sequence[Block] | Message | str | BaseException | MidStreamFailure"
)


class Scripted:
    """Replays scripted responses in order; ``calls`` counts opens, ``requests`` keeps
    the conversations it was sent (one list of messages per open)."""

    def __init__(
        self,
        items: Iterable[ScriptItem] = (),
        *,
        model: str = "scripted",
        chunk_chars: int = 4,
        deltas_per_read: int = 1,
        pricing: Pricing | None = None,
    ) -> None:
        self._items: deque[Any] = deque(items)
        self._lock = threading.Lock()
        self._wire = WireIdentity("scripted", "scripted://local", model)
        self.chunk_chars = max(1, chunk_chars)
        self.deltas_per_read = max(1, deltas_per_read)
        #: USD per million tokens (``TurnComplete.cost``)
        self.pricing = pricing
        self.calls = 0
        self._requests: list[list[Message]] = []
        self._unread: list[Sequence[Message]] = []  # immutable: listed when read
        self.last_request: ProviderRequest | None = None

    def __repr__(self) -> str:
        return f"Scripted(model={self._wire.model!r}, remaining={len(self._items)})"

    @property
    def wire(self) -> WireIdentity:
        return self._wire

    def add(self, *items: ScriptItem) -> None:
        """Append more responses to the script."""
        with self._lock:
            self._items.extend(items)

    @property
    def requests(self) -> list[list[Message]]:
        """The messages of every request so far, in order: one list, which a test may
        clear, edit or replace. A request's immutable messages are listed only when
        this is read, so a long script costs no copy per request."""
        with self._lock:
            unread, self._unread = self._unread, []
            self._requests.extend(list(messages) for messages in unread)
            return self._requests

    @requests.setter
    def requests(self, value: list[list[Message]]) -> None:
        with self._lock:
            self._unread = []
            self._requests = value

    @property
    def remaining(self) -> int:
        """Responses not yet replayed."""
        return len(self._items)

    def open(self, request: ProviderRequest) -> DeltaStream:
        with self._lock:
            self.calls += 1
            messages = request.messages
            if type(messages) is not History and type(messages) is not tuple:
                messages = tuple(messages)  # a list the caller may change later
            self._unread.append(messages)
            self.last_request = request
            if not self._items:
                raise BadRequest(
                    "Scripted provider has no response left", status_code=400
                )
            item = self._items.popleft()
        if isinstance(item, BaseException):
            raise item
        fail: ProviderError | None = None
        after = 0
        if isinstance(item, MidStreamFailure):
            fail, after, item = item.error, item.after, list(item.blocks)
        batches = self._batches(_as_message(item), fail, after)
        # a RequestConfig from before coalesce_deltas existed has no such attribute
        coalesce = getattr(request.config, "coalesce_deltas", False)
        return DeltaStream(batches, self._wire, coalesce=coalesce)

    def _batches(
        self, message: Message, fail: ProviderError | None = None, after: int = 0
    ) -> Iterator[list[tuple[Any, ...]]]:
        """``deltas_per_read`` deltas at a time, made as they are read (as a parser
        makes them); finish, usage and done arrive together at the end. With ``fail``,
        it is raised after ``after`` deltas (the end counting as one), whatever the
        read size."""
        deltas = self._deltas(message)
        size = self.deltas_per_read
        left = after if fail is not None else -1
        while batch := list(islice(deltas, size if left < 0 else min(size, left))):
            if left > 0:
                left -= len(batch)
            yield batch
        if fail is not None and left == 0:
            raise fail
        u = message.usage or Usage()
        tools = any(isinstance(b, ToolUse) for b in message.content)
        yield [
            (D.FINISH, message.stop_reason or ("tool_use" if tools else "end_turn")),
            (D.USAGE, u.input, u.output, u.cache_read, u.cache_write, u.reasoning),
            (D.DONE,),
        ]
        if fail is not None:
            raise fail

    def _deltas(self, message: Message) -> Iterator[tuple[Any, ...]]:
        n = self.chunk_chars
        yield (D.MODEL, self._wire.model)
        tool_index = 0
        for block in message.content:
            if isinstance(block, Text):
                text = block.text
                for i in range(0, len(text), n):
                    yield (D.TEXT, text[i : i + n])
            elif isinstance(block, Thinking):
                text = block.text
                for i in range(0, len(text), n):
                    yield (D.THINKING, text[i : i + n])
                if block.signature is not None:
                    yield (D.SIGNATURE, block.signature)
            elif isinstance(block, RedactedThinking):
                yield (D.REDACTED_THINKING, block.data)
            elif isinstance(block, ToolUse):
                yield (D.TOOL_START, tool_index, block.id, block.name)
                step = max(n * 4, 8)
                for i in range(0, len(block.input), step):
                    yield (D.TOOL_ARGS, tool_index, block.input[i : i + step])
                tool_index += 1

    def close(self) -> None:
        pass

    def __enter__(self) -> Scripted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_message(item: Any) -> Message:
    if isinstance(item, Message):
        return item
    if isinstance(item, str):
        return Message("assistant", (Text(item),))
    return Message("assistant", tuple(item))


publish(globals())

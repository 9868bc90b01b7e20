"""The thinking-stall guard: ``Config.max_thinking_chars`` as a wrapper of a response.

A response that streams more than the limit of thinking before any text or tool call
is aborted with ``ThinkingStall``; once text or a tool call began it is never stalled.
``ThinkingStall`` is not a ``ProviderError``, so the turn fails instead of retrying.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from ..config import Config
from ..errors import ThinkingStall
from ..events import Event, TextDelta, ThinkingDelta, ToolCallStart
from ..providers.base import ProviderStream

__all__ = ["ThinkingWatch", "watch_thinking"]


class ThinkingWatch:
    """A ``ProviderStream`` that counts the thinking its inner response streams."""

    __slots__ = ("_chars", "_inner", "_limit", "_spoke")

    def __init__(self, inner: ProviderStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit
        self._chars = 0
        self._spoke = False

    def produce(self, queue: deque[Event]) -> bool:
        start = len(queue)
        done = self._inner.produce(queue)
        if not self._spoke:
            for ev in islice(queue, start, None):
                kind = type(ev)
                if kind is ThinkingDelta:
                    assert isinstance(ev, ThinkingDelta)
                    self._chars += len(ev.text)
                    if self._chars > self._limit:
                        raise ThinkingStall(
                            f"the response streamed {self._chars} characters of "
                            f"thinking (limit {self._limit}) with no text or tool "
                            "call; it was aborted"
                        )
                elif kind is TextDelta or kind is ToolCallStart:
                    self._spoke = True
                    break
        return done

    def shown(self) -> tuple[int, int, int]:
        """What the inner response returned so far (see ``DeltaStream.shown``)."""
        shown = getattr(self._inner, "shown", None)
        return shown() if callable(shown) else (0, 0, 0)

    def close(self) -> None:
        self._inner.close()


def watch_thinking(response: ProviderStream, config: Config) -> ProviderStream:
    """``response`` under the thinking limit of ``config`` (unchanged without one)."""
    limit = config.max_thinking_chars
    return response if limit is None else ThinkingWatch(response, limit)

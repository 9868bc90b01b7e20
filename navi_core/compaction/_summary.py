"""The summary request of a compaction: what it may send, and who answers it.

A summary request carries the whole prefix it summarises, so one oversized tool result
(a 640 KB file in a 400 KB context) made it overflow too, and every later turn failed
the same way. ``bounded_transcript`` renders the prefix within a token budget: when
it does not fit, the largest blocks are cut (their start and end kept, the middle
replaced by a note saying how much was cut), the small ones stay whole.
``transcript_budget`` derives the budget from ``CompactionConfig.context_window``;
without one the first request is sent whole and a context overflow halves the budget
(``compaction`` asks again, at most ``MAX_SHRINKS`` times). ``ask_summary`` asks
the compaction provider and falls back to the chat provider when it fails or answers
with no text; it says which of them answered, so that the summary is priced at the
price of the provider that wrote it (``price_of``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from ..config import Config, Pricing
from ..conversation import Message
from ..core import estimate_tokens
from ..errors import ProviderError
from ..events import Event, MessageComplete
from ..providers.base import Provider, ProviderRequest
from ._transcript import heading, render_block

__all__ = [
    "MAX_SHRINKS",
    "MIN_TRANSCRIPT_TOKENS",
    "ask_summary",
    "bounded_transcript",
    "clip_block",
    "complete",
    "price_of",
    "transcript_budget",
]

MAX_SHRINKS: Final = 6
"""How many times a summary request that overflowed is sent again, halved each time."""

MIN_TRANSCRIPT_TOKENS: Final = 256
"""A transcript this small that still overflows is not halved again."""

_MIN_BLOCK_CHARS: Final = 64
_NOTE: Final = "\n[... {n} characters cut to fit the summary request ...]\n"


def transcript_budget(config: Config, system: str) -> int | None:
    """The tokens a transcript may use in a summary request, None when unknown.

    ``context_window`` minus the system prompt and room for the summary itself
    (``max_output_tokens``, and at least an eighth of the window).
    """
    window = config.compaction.context_window
    if window is None:
        return None
    reserve = max(config.max_output_tokens or 0, window // 8)
    return max(MIN_TRANSCRIPT_TOKENS, window - reserve - estimate_tokens(system) - 64)


def clip_block(text: str, limit: int) -> str:
    """``text`` in at most about ``limit`` characters: its start and end, and a note."""
    if len(text) <= limit:
        return text
    keep = max(limit - len(_NOTE) - 8, _MIN_BLOCK_CHARS)
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - head - tail
    return text[:head] + _NOTE.format(n=cut) + text[len(text) - tail :]


def _rendered(messages: Sequence[Message]) -> list[tuple[str, list[str]]]:
    names: dict[str, str] = {}
    return [
        (f"## {heading(m)}", [render_block(b, names) for b in m.content])
        for m in messages
    ]


def _join(rendered: Sequence[tuple[str, Sequence[str]]]) -> str:
    return "\n\n".join("\n".join([head, *blocks]) for head, blocks in rendered)


def _cap(sizes: Sequence[int], allowed: int) -> int:
    """The largest per-block size that keeps ``sum(min(s, cap))`` within ``allowed``."""
    rest = len(sizes)
    for size in sorted(sizes):
        if size * rest > allowed:
            return max(allowed // rest, 0)
        allowed -= size
        rest -= 1
    return max(sizes, default=0)


def bounded_transcript(messages: Sequence[Message], budget: int | None) -> str:
    """The transcript of ``messages`` (as ``render_transcript``) within ``budget``
    tokens; whole when ``budget`` is None or it fits."""
    rendered = _rendered(messages)
    whole = _join(rendered)
    if budget is None:
        return whole
    tokens = estimate_tokens(whole)
    if tokens <= budget:
        return whole
    # tokens -> characters at this transcript's own ratio
    allowed = len(whole) * budget // max(tokens, 1)
    sizes = [len(b) for _, blocks in rendered for b in blocks]
    fixed = len(whole) - sum(sizes)
    cap = _cap(sizes, max(allowed - fixed, 0))
    return _join(
        [(head, [clip_block(b, cap) for b in blocks]) for head, blocks in rendered]
    )


def ask_summary(
    provider: Provider, summariser: Provider | None, request: ProviderRequest
) -> tuple[Message, Provider]:
    """The summary from ``summariser``, else ``provider`` (also when the summariser
    fails or answers with no text), and the provider that answered."""
    first = summariser if summariser is not None else provider
    try:
        answer = complete(first, request)
        if first is provider or answer.text.strip():
            return answer, first
    except ProviderError:
        if first is provider:
            raise
    return complete(provider, request), provider


def price_of(provider: Provider) -> Pricing | None:
    """``provider``'s price, as a turn's is found: its ``pricing`` attribute when set,
    else the price table's for its endpoint and model (``Pricing.lookup``, which may
    wait for the table's first import); None when no price is known."""
    given = getattr(provider, "pricing", None)  # not in the Provider protocol
    if isinstance(given, Pricing):
        return given
    wire = provider.wire
    return Pricing.lookup(wire.model, wire.base_url)


def complete(provider: Provider, request: ProviderRequest) -> Message:
    """Open ``request`` on ``provider``, pump it to the end, return its message."""
    response = provider.open(request)
    queue: deque[Event] = deque()
    try:
        while not response.produce(queue):
            queue.clear()  # only the completed message matters here
    finally:
        response.close()
    complete = queue[-1]
    assert isinstance(complete, MessageComplete)
    return complete.message

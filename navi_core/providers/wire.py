"""Which blocks of a message an API may receive when the session switched provider.

Every assistant message remembers the API that wrote it (``Message.wire``). Text and
tool calls mean the same to every API. Reasoning does not: an Anthropic thinking
signature, redacted thinking and an OpenAI Responses reasoning item (encrypted content)
are only valid for the API, endpoint and model that issued them (OpenAI refuses
reasoning items sent to a model that does not reason), and another API refuses the
request or misreads them. So they go back, unchanged, only to the API style, base URL
and model that wrote them; to any other they are dropped (the reasoning was the
model's, not part of its answer).
"""

from __future__ import annotations

from ..conversation import Block, Message, RedactedThinking, Thinking, WireIdentity

__all__ = ["is_own", "own_blocks"]


def is_own(message: Message, wire: WireIdentity) -> bool:
    """True when ``message`` was written by the API and model ``wire`` talks to.

    A message without a wire identity (built by hand, or stored before identities
    were kept) counts as the receiver's own, as before provider switching existed.
    """
    made = message.wire
    return made is None or made == wire


def own_blocks(message: Message, wire: WireIdentity) -> tuple[Block, ...]:
    """The blocks of ``message`` the API ``wire`` may be sent."""
    if is_own(message, wire):
        return message.content
    return tuple(
        b
        for b in message.content
        if not isinstance(b, RedactedThinking)
        and not (isinstance(b, Thinking) and b.signature)
    )

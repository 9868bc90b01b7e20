"""The dialogue an HTTP request sends never holds two user prompts in a row.

A turn cancelled before the model wrote any text leaves its prompt without an answer,
so the next prompt follows it directly (a steering message that arrives before the
first answer does the same). Some APIs refuse that, others read it as one turn; the
request body sends such prompts as one user message, their blocks in order. The
conversation, and the ``ProviderRequest`` a provider is given, keep them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..conversation import MediaPart, Message, Text
from .base import ProviderRequest

__all__ = ["request_dialogue", "well_formed"]


def well_formed(request: ProviderRequest) -> ProviderRequest:
    """``request`` with its adjacent user prompts merged (itself when it has none)."""
    messages = request_dialogue(request.messages)
    return (
        request if messages is request.messages else replace(request, messages=messages)
    )


def request_dialogue(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` with each run of adjacent user prompts merged into one;
    ``messages`` itself when there is none."""
    prev: Message | None = None
    for m in messages:  # a role compare per message; blocks only where users meet
        if (
            prev is not None
            and m.role == "user"
            and prev.role == "user"
            and _is_prompt(m)
            and _is_prompt(prev)
        ):
            break
        prev = m
    else:
        return messages
    merged: list[Message] = []
    for m in messages:
        if merged and _is_prompt(m) and _is_prompt(merged[-1]):
            last = merged[-1]
            merged[-1] = Message("user", (*last.content, *m.content), wire=m.wire)
        else:
            merged.append(m)
    return tuple(merged)


def _is_prompt(m: Message) -> bool:
    """A user prompt: text and images only (not tool results, not a compaction
    summary, which a prompt may follow)."""
    return m.role == "user" and all(isinstance(b, (Text, MediaPart)) for b in m.content)

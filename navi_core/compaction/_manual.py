"""Compaction on request: ``Agent.compact_stream`` and ``keep_turns``.

A threshold compaction keeps as many recent turns as ``keep_verbatim`` tokens hold; a
compaction asked for by hand may instead keep a number of turns, whatever their size.
When that leaves fewer than two messages to summarise, the oldest kept turn is split
between its iterations (before an assistant message, so a tool call stays with its
results). ``prompt`` replaces ``CompactionConfig.prompt`` for one call.
``compact_now`` is ``Agent.compact``: the same compaction, reported with what its
summary request spent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from ..config import Config
from ..conversation import CompactionSummary, Message, ToolResult
from ..errors import NoCompactionPrompt, NothingToCompact
from ..events import CompactionStarted, Event
from ..providers.base import Provider
from ..session import Session
from ..tokens import message_sizes, request_tokens
from ..tools._tool import ToolSpec
from ._compaction import (
    CompactionResult,
    PendingCompaction,
    Split,
    compact,
    compact_pending,
    keep_from,
    run_compaction,
    split,
)

__all__ = [
    "MANUAL",
    "compact_now",
    "is_prompt",
    "plan_manual",
    "split_turns",
    "stream_compaction",
]

#: ``CompactionStarted.reason`` of a compaction asked for by hand
MANUAL = "manual"


def is_prompt(m: Message) -> bool:
    """A user message that starts a turn: not tool results, not a summary."""
    return m.role == "user" and not any(
        isinstance(b, (ToolResult, CompactionSummary)) for b in m.content
    )


def split_turns(messages: Sequence[Message], keep_turns: int) -> Split:
    """Cut ``messages`` to keep the newest ``keep_turns`` turns verbatim.

    When fewer than two messages would be summarised, the oldest kept turn is cut
    before its last assistant message instead (its earlier iterations summarised).
    A trailing user prompt or unanswered tool call is always kept (``keep_from``),
    so a batch held for approval still runs on ``resume()``.
    """
    if keep_turns < 0:
        raise ValueError(f"keep_turns must not be negative, not {keep_turns}")
    whole = split(messages, 1 << 62)  # everything after the latest summary kept
    window = whole.kept
    starts = [i for i, m in enumerate(window) if i == 0 or is_prompt(m)]
    if keep_turns == 0:
        cut = len(window)
    elif keep_turns >= len(starts):
        cut = 0
    else:
        cut = starts[-keep_turns]
    if cut < 2 and keep_turns > 0 and window:
        turn_end = starts[starts.index(cut) + 1] if cut in starts[:-1] else len(window)
        inner = [i for i in range(cut + 1, turn_end) if window[i].role == "assistant"]
        if inner and inner[-1] >= 2:
            cut = inner[-1]
    cut = min(cut, keep_from(window))
    sizes = whole.kept_sizes
    return Split(
        whole.system,
        whole.previous,
        tuple(window[:cut]),
        tuple(window[cut:]),
        tuple(sizes[cut:]),
        sum(sizes[:cut]),
    )


def plan_manual(
    session: Session,
    config: Config,
    keep_turns: int | None,
    prompt: str | None,
) -> tuple[str, Split]:
    """The prompt and the split of a compaction asked for now.

    Raises:
        NoCompactionPrompt: neither ``prompt`` nor ``config.compaction.prompt`` is set.
        NothingToCompact: fewer than two messages could be summarised.
    """
    text = prompt if prompt is not None else config.compaction.prompt
    if text is None:
        raise NoCompactionPrompt(
            "set Config.compaction.prompt (e.g. compaction.DEFAULT_SUMMARY_PROMPT) "
            "or pass prompt= to compact a conversation"
        )
    messages = session.messages
    if keep_turns is None:
        plan = split(messages, config.compaction.keep_verbatim)
    else:
        plan = split_turns(messages, keep_turns)
    if len(plan.prefix) < 2:
        raise NothingToCompact(
            f"only {len(plan.prefix)} message(s) could be summarised; "
            "a compaction needs at least two (try a smaller keep_turns)"
        )
    return text, plan


def stream_compaction(
    session: Session,
    provider: Provider,
    config: Config,
    tools: Sequence[ToolSpec],
    prompt: str,
    plan: Split,
    extra_instructions: str | None,
) -> Iterator[Event]:
    """``CompactionStarted``, then (after the summary request) ``Compacted``."""
    pending = _pending(session, config, tools, prompt, plan, extra_instructions)
    yield pending.started
    yield run_compaction(session, provider, config, pending)


def compact_now(
    session: Session,
    provider: Provider,
    config: Config,
    tools: Sequence[ToolSpec],
    extra_instructions: str | None,
    keep_turns: int | None,
    prompt: str | None,
) -> CompactionResult:
    """``Agent.compact``: compact now (as ``compact``, or as ``stream_compaction``
    with ``keep_turns`` or ``prompt``); what it did and what its summary request
    spent.

    Raises:
        NoCompactionPrompt: neither ``prompt`` nor ``config.compaction.prompt`` is set.
        ProviderError, EmptyAssistantResponse: the summary request failed; the
            conversation and the store are unchanged.
    """
    if keep_turns is None and prompt is None:
        return compact(session, provider, config, extra_instructions)
    try:
        text, plan = plan_manual(session, config, keep_turns, prompt)
    except NothingToCompact:
        return CompactionResult(False, 0, 0)
    pending = _pending(session, config, tools, text, plan, extra_instructions)
    return compact_pending(session, provider, config, pending)


def _pending(
    session: Session,
    config: Config,
    tools: Sequence[ToolSpec],
    prompt: str,
    plan: Split,
    extra_instructions: str | None,
) -> PendingCompaction:
    """The compaction asked for: announced as ``MANUAL``, run with ``prompt`` (and
    the extra instructions) as its summary prompt."""
    conversation = session.conversation
    dialogue = conversation.dialogue()
    sizes = message_sizes(dialogue, session.sizes)
    estimated = request_tokens(conversation.system_prompt(), dialogue, sizes, tools)
    before = len(conversation.messages)
    started = CompactionStarted(MANUAL, before, estimated)
    if extra_instructions:
        prompt += "\n\nAdditional instructions:\n" + extra_instructions
    snapshot = replace(config, compaction=replace(config.compaction, prompt=prompt))
    return PendingCompaction(started, plan, snapshot)

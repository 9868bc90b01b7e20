"""Context compaction: summarise the old prefix of a conversation, keep recent turns.

A compaction rewrites the conversation as ``[system messages, summary, kept suffix]``:
the prefix after the latest summary is rendered as a readable transcript (the previous
summary first, so summaries chain) and sent, with ``CompactionConfig.prompt`` as the
system prompt, to the compaction provider; its answer becomes a user message holding a
``CompactionSummary``. The store receives the result as a new window. The transcript
is bounded to fit the summary request (``summary_input``), and the summary's own
output tokens anchor the usage restated on the kept messages.

The summary request is spending: a turn adds its usage to its own and prices it at the
price of the provider that wrote it (``summarise_with_usage``); ``Agent.compact``
reports it in its ``CompactionResult``.

Messages are sized as ``navi_core.tokens`` describes. Compaction works on a
``Session`` (conversation and store), a provider and the tool declarations; it never
sees the ``Agent``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from .._ids import publish
from .._logs import get_logger
from ..config import CompactionConfig, Config, Pricing
from ..conversation import CompactionSummary, Message, ToolResult, Usage, UserMessage
from ..core import estimate_tokens
from ..errors import ContextOverflow, EmptyAssistantResponse, NoCompactionPrompt
from ..events import Compacted, CompactionStarted, Cost
from ..providers.base import Provider, ProviderRequest
from ..session import Session
from ..tokens import (
    SizeCache,
    estimate_message_tokens,
    estimate_request_tokens,
    message_sizes,
    request_tokens,
)
from ..tools._tool import ToolSpec
from ._summary import (
    MAX_SHRINKS,
    MIN_TRANSCRIPT_TOKENS,
    ask_summary,
    bounded_transcript,
    price_of,
    transcript_budget,
)
from ._transcript import is_summary

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "MIN_FOLD_TOKENS",
    "CompactionResult",
    "PendingCompaction",
    "SizeCache",
    "Split",
    "compact",
    "estimate_request_tokens",
    "message_sizes",
    "plan_compaction",
    "apply_pending",
    "compact_pending",
    "run_compaction",
    "split",
    "summarise_pending",
    "summarise_with_usage",
]

DEFAULT_SUMMARY_PROMPT: Final = (
    "You compact the history of a conversation between a user and an assistant that "
    "uses tools. The assistant will continue the work seeing only your summary and the "
    "most recent messages, so write the summary it needs:\n"
    "- the user's goals, requests and constraints, quoting exact wording where it "
    "matters;\n"
    "- decisions taken and why;\n"
    "- facts learned: file paths, names, identifiers, commands, numbers, error "
    "messages;\n"
    "- what the tools were asked and what they returned, in outline;\n"
    "- the current state of the work and what remains to do next.\n"
    "Be concise; leave out pleasantries and anything that no longer matters. Do not "
    "address the user and do not invent anything that is not in the transcript."
)
"""A general-purpose summary prompt; compaction stays off until a prompt is configured."""

MIN_FOLD_TOKENS: Final = 512
"""Proactive compaction needs more than this many new tokens to fold into the summary:
a summary is rarely shorter, so folding less would not shrink the context."""

_CHAIN_NOTE: Final = (
    "The transcript starts with the summary of an earlier part of the conversation. "
    "Those earlier messages are gone: fold that summary into yours and keep everything "
    "from it that still matters."
)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What ``Agent.compact`` did, and what it spent.

    ``summarized_messages`` counts the messages folded into the new summary (the
    previous summary not included); ``kept_turns`` the user prompts kept verbatim.
    ``usage`` is the summary request's (``Usage()`` when nothing was summarised, or
    the server reported none); ``cost`` prices it at the price of the provider that
    wrote the summary (``CompactionConfig.provider``'s, at the session provider's
    when its price is unknown or the session provider wrote it), None when no price
    is known or nothing was summarised.
    """

    compacted: bool
    summarized_messages: int
    kept_turns: int
    usage: Usage = field(default_factory=Usage)
    cost: Cost | None = None


@dataclass(frozen=True, slots=True)
class Split:
    """A conversation cut in two: what to summarise and what to keep verbatim."""

    #: every system message, in order; they survive a compaction untouched
    system: tuple[Message, ...]
    #: the latest summary message, folded into the next summary, or None
    previous: Message | None
    #: the dialogue messages after ``previous`` to summarise
    prefix: tuple[Message, ...]
    #: the suffix kept word for word, and the token size of each of its messages
    kept: tuple[Message, ...]
    kept_sizes: tuple[int, ...]
    #: the estimated tokens of ``prefix``
    prefix_tokens: int

    @property
    def kept_turns(self) -> int:
        """The user prompts in the kept suffix (a partial turn kept counts none)."""
        return sum(1 for m in self.kept if _is_prompt(m))


# -- the split ------------------------------------------------------------------------


def _is_prompt(m: Message) -> bool:
    """A user message that starts a turn: not tool results, not a summary."""
    return m.role == "user" and not any(
        isinstance(b, (ToolResult, CompactionSummary)) for b in m.content
    )


def split(messages: Sequence[Message], keep_verbatim: int) -> Split:
    """Cut ``messages`` into a prefix to summarise and a suffix of at most
    ``keep_verbatim`` tokens to keep.

    Whole turns are kept, newest first, while they fit. When not even the newest turn
    fits (one long turn of tool iterations), the suffix starts at the earliest assistant
    message of that turn whose suffix fits, so a tool call is never parted from its
    results; when none fits, everything is summarised but a trailing user prompt or
    unanswered tool call (``keep_from``). An empty prefix means there is nothing to
    summarise.
    """
    dialogue = [m for m in messages if m.role != "system"]
    return _split(messages, dialogue, message_sizes(dialogue), keep_verbatim)


def _split(
    messages: Sequence[Message],
    dialogue: Sequence[Message],
    sizes: Sequence[int],
    budget: int,
) -> Split:
    start = 0
    previous: Message | None = None
    for i in range(len(dialogue) - 1, -1, -1):
        if is_summary(dialogue[i]):
            previous, start = dialogue[i], i + 1
            break
    window = dialogue[start:]
    wsizes = sizes[start:]
    cut = _cut(window, wsizes, budget)
    return Split(
        tuple(m for m in messages if m.role == "system"),
        previous,
        tuple(window[:cut]),
        tuple(window[cut:]),
        tuple(wsizes[cut:]),
        sum(wsizes[:cut]),
    )


def keep_from(window: Sequence[Message]) -> int:
    """The index from which ``window`` is always kept verbatim: its last message
    when that is a user prompt (the request being answered: a summary of it would
    stand in for the user's own words) or an assistant message whose tool calls
    have no results yet (held for approval, or interrupted: ``Agent.resume``
    answers them, so they must stay the last message); else ``len(window)``."""
    if window:
        last = window[-1]
        if _is_prompt(last) or (last.role == "assistant" and last.tool_uses):
            return len(window) - 1
    return len(window)


def _cut(window: Sequence[Message], sizes: Sequence[int], budget: int) -> int:
    """The index where the kept suffix of ``window`` starts (never after
    ``keep_from``)."""
    return min(_cut_turns(window, sizes, budget), keep_from(window))


def _cut_turns(window: Sequence[Message], sizes: Sequence[int], budget: int) -> int:
    n = len(window)
    starts = [0, *(i for i in range(1, n) if _is_prompt(window[i]))]
    cut = n
    used = 0
    for s in reversed(starts):
        used += sum(sizes[s:cut])
        if used > budget:
            break
        cut = s
    if cut < n or n == 0:
        return cut
    # not even the newest turn fits: keep the tail of it, cut before an assistant
    # message so that every tool call stays with its results
    turn = starts[-1]
    tail = 0
    best = n
    for i in range(n - 1, turn, -1):
        tail += sizes[i]
        if tail > budget:
            break
        if window[i].role == "assistant":
            best = i
    return best


# -- compacting -----------------------------------------------------------------------


def compact(
    session: Session,
    provider: Provider,
    config: Config,
    extra_instructions: str | None = None,
) -> CompactionResult:
    """Summarise the prefix of ``session``'s conversation now (``Agent.compact``).

    ``provider`` is the session's own provider: the fallback when the configured
    summary provider fails, and the wire identity of the summary message.

    Raises:
        NoCompactionPrompt: ``config.compaction.prompt`` is not set.
        ProviderError: the summary request failed on every provider tried.
        EmptyAssistantResponse: the summary came back empty.
        The conversation and the store are unchanged when any of these is raised.
    """
    cc = config.compaction
    if cc.prompt is None:
        raise NoCompactionPrompt(
            "set Config.compaction.prompt (e.g. compaction.DEFAULT_SUMMARY_PROMPT) "
            "to compact a conversation"
        )
    plan = split(session.messages, cc.keep_verbatim)
    if not plan.prefix:
        return CompactionResult(False, 0, plan.kept_turns)
    answer = _summarise(
        provider, cc.provider, config, cc.prompt, plan, extra_instructions
    )
    _install(session, provider, plan, answer.text, answer.usage.output)
    return _result(provider, plan, answer)


def compact_pending(
    session: Session, provider: Provider, config: Config, pending: PendingCompaction
) -> CompactionResult:
    """``run_compaction`` for ``Agent.compact``: what it did and spent (raises as
    ``run_compaction``)."""
    answer = _summarise_planned(provider, config, pending)
    apply_pending(session, provider, pending, (answer.text, answer.usage.output))
    return _result(provider, pending.plan, answer)


@dataclass(frozen=True, slots=True)
class PendingCompaction:
    """A compaction decided on but not yet run.

    ``config`` is the snapshot it was planned with: the compaction runs with that
    snapshot's prompt and summary provider even if ``Agent.set_config`` replaced the
    config after ``started`` was returned.
    """

    #: the event announcing the compaction
    started: CompactionStarted
    #: what to summarise and what to keep
    plan: Split
    #: the config snapshot the plan was made with
    config: Config

    @property
    def settings(self) -> CompactionConfig:
        """The compaction settings of the snapshot."""
        return self.config.compaction


def plan_compaction(
    session: Session,
    config: Config,
    tools: Sequence[ToolSpec],
    *,
    reason: str,
    force: bool = False,
    cache: SizeCache | None = None,
) -> PendingCompaction | None:
    """Decide whether to compact before a response; cheap, makes no provider call.

    Without ``force`` (the threshold check) it plans only when
    ``compaction.context_window`` and ``prompt`` are set, the request (with the
    declarations ``tools``) is estimated above ``threshold_tokens`` (``threshold *
    context_window``, less when ``max_output_tokens`` needs the room) and more
    than ``MIN_FOLD_TOKENS`` would be folded. With ``force`` (after a context overflow)
    it plans whenever there is anything to summarise, keeping at most half the
    dialogue when ``keep_verbatim`` would keep all of it. ``cache`` (by default the
    session's own) spares re-estimating the messages already seen.
    """
    cc = config.compaction
    if cc.prompt is None or (not force and cc.context_window is None):
        return None
    conversation = session.conversation
    messages = conversation.messages
    dialogue = conversation.dialogue()
    sizes = message_sizes(dialogue, session.sizes if cache is None else cache)
    estimated = request_tokens(conversation.system_prompt(), dialogue, sizes, tools)
    if not force:
        assert cc.context_window is not None
        if estimated <= threshold_tokens(config, cc.context_window):
            return None
    plan = _split(messages, dialogue, sizes, cc.keep_verbatim)
    if force and not plan.prefix:
        plan = _split(messages, dialogue, sizes, sum(plan.kept_sizes) // 2)
    if not plan.prefix or (not force and plan.prefix_tokens <= MIN_FOLD_TOKENS):
        return None
    started = CompactionStarted(reason, len(messages), estimated)
    get_logger("navi_core.compaction").info(
        "compacting (%s): %d messages, ~%d tokens", reason, len(messages), estimated
    )
    return PendingCompaction(started, plan, config)


def threshold_tokens(config: Config, window: int) -> float:
    """The estimated prompt size above which a request is compacted first:
    ``threshold * window``, lowered so that the prompt leaves room for
    ``max_output_tokens`` (OpenAI, vLLM and Anthropic refuse a request whose prompt
    and output limit together exceed the window)."""
    limit = config.compaction.threshold * window
    reserve = config.max_output_tokens
    if reserve is not None and 0 < reserve < window:
        limit = min(limit, window - reserve)
    return limit


def run_compaction(
    session: Session, provider: Provider, config: Config, pending: PendingCompaction
) -> Compacted:
    """Summarise a planned prefix (one provider call) and rewrite the conversation.

    The prompt and summary provider come from ``pending.config``, the snapshot the
    plan was made with; ``config`` (the current one) carries the request options;
    ``provider`` is the session's own provider (fallback and wire identity).

    Raises:
        ProviderError, EmptyAssistantResponse: the summary request failed; the
            conversation and the store are unchanged, and ``pending`` can run again.
    """
    summary = summarise_pending(provider, config, pending)
    return apply_pending(session, provider, pending, summary)


def summarise_pending(
    provider: Provider, config: Config, pending: PendingCompaction
) -> tuple[str, int]:
    """The summary of a planned compaction and its output tokens: only the provider
    call, so a ``Stream`` may run it on another thread (raises as ``run_compaction``)."""
    answer = _summarise_planned(provider, config, pending)
    return answer.text, answer.usage.output


def summarise_with_usage(
    provider: Provider, config: Config, pending: PendingCompaction
) -> tuple[tuple[str, int], Usage, Cost | None]:
    """``summarise_pending``, the usage of the summary request and its cost, which
    the turn adds to its own (``TurnComplete.usage``, ``cost``, ``Config.budget``).

    The cost is the usage at the price of the summary provider
    (``CompactionConfig.provider``: its ``pricing=``, else the price table's for its
    model), as a sub-agent's turn is priced at its own model's. It is None when that
    price is unknown, or when ``provider`` (the session's) wrote the summary (no
    summary provider, or it failed or answered nothing): the turn then prices the
    usage at its own price, as it does a sub-agent turn with no known price. The
    price is looked up here, beside the provider call (off the driving thread when
    the turn runs that call there), and only for a compaction that ran.
    """
    answer = _summarise_planned(provider, config, pending)
    price = _own_price(provider, answer.by)
    cost = None if price is None else price.cost_of(answer.usage)
    return (answer.text, answer.usage.output), answer.usage, cost


def _summarise_planned(
    provider: Provider, config: Config, pending: PendingCompaction
) -> _Answer:
    cc = pending.settings
    if cc.prompt is None:  # plan_compaction never plans without a prompt
        raise NoCompactionPrompt("the planned compaction has no summary prompt")
    return _summarise(provider, cc.provider, config, cc.prompt, pending.plan, None)


def _own_price(provider: Provider, by: Provider) -> Pricing | None:
    """The price of the summary provider ``by`` that wrote a summary; None when it is
    the session's ``provider`` or its price is unknown."""
    return None if by is provider else price_of(by)


def _result(provider: Provider, plan: Split, answer: _Answer) -> CompactionResult:
    """A done compaction's result: its summary request's usage, priced as
    ``CompactionResult.cost`` says."""
    price = _own_price(provider, answer.by)
    if price is None:
        price = price_of(provider)
    cost = None if price is None else price.cost_of(answer.usage)
    return CompactionResult(True, len(plan.prefix), plan.kept_turns, answer.usage, cost)


def apply_pending(
    session: Session,
    provider: Provider,
    pending: PendingCompaction,
    summary: tuple[str, int],
) -> Compacted:
    """Store the window that starts at ``summary``; it becomes the conversation."""
    plan, before = pending.plan, pending.started.messages_before
    after = _install(session, provider, plan, *summary)
    get_logger("navi_core.compaction").info(
        "compacted: %d -> %d messages, %d summarised", before, after, len(plan.prefix)
    )
    return Compacted(before, after, len(plan.prefix), plan.kept_turns)


def _install(
    session: Session, provider: Provider, plan: Split, text: str, measured: int
) -> int:
    """Store the new window (system messages, summary, kept turns); the kept turns'
    usage restated from the summary's measured size (``measured``, else estimated)."""
    summary = Message("user", (CompactionSummary(text),), wire=provider.wire)
    running = measured or estimate_message_tokens(summary)
    kept: list[Message] = []
    for m, size in zip(plan.kept, plan.kept_sizes, strict=True):
        u = m.usage
        if m.role == "assistant" and u is not None and u.total > 0:
            m = m.with_usage(Usage(running, u.output, 0, 0, u.reasoning))
        kept.append(m)
        running += size
    new = [*plan.system, summary, *kept]
    session.new_window(new)
    return len(new)


class _Answer(NamedTuple):
    """A summary request's answer."""

    #: the summary
    text: str
    #: the successful attempt's usage (``Usage()`` when unreported)
    usage: Usage
    #: the provider that wrote it: the summary provider, or the session's
    by: Provider


def _summarise(
    provider: Provider,
    summariser: Provider | None,
    config: Config,
    prompt: str,
    plan: Split,
    extra_instructions: str | None,
) -> _Answer:
    """The summary, the request's usage and who wrote it (``_Answer``).

    The transcript is bounded to fit (``summary_input``); one that still overflows
    is halved and sent again, at most ``MAX_SHRINKS`` times.
    """
    system = prompt
    if plan.previous is not None:
        system += "\n\n" + _CHAIN_NOTE
    if extra_instructions:
        system += "\n\nAdditional instructions:\n" + extra_instructions
    shown = (plan.previous, *plan.prefix) if plan.previous else plan.prefix
    budget = transcript_budget(config, system)
    for shrink in range(MAX_SHRINKS + 1):
        transcript = bounded_transcript(shown, budget)
        message = UserMessage(
            f"Summarise this conversation.\n\n<transcript>\n{transcript}\n</transcript>"
        )
        request = ProviderRequest((message,), system, (), config)
        try:
            answer, by = ask_summary(provider, summariser, request)
            break
        except ContextOverflow:
            tokens = estimate_tokens(transcript)
            if shrink == MAX_SHRINKS or tokens <= MIN_TRANSCRIPT_TOKENS:
                raise
            budget = tokens // 2
    if not answer.text.strip():
        raise EmptyAssistantResponse(
            "the summary response held no text; the conversation is unchanged"
        )
    usage = answer.usage if answer.usage is not None else Usage()
    return _Answer(answer.text, usage, by)


# its public path, in reprs, docs and pickles; its annotations resolved here
publish(globals())

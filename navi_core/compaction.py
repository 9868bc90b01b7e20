"""Context compaction: summarise the old prefix of a conversation, keep recent turns.

A compaction rewrites the conversation as ``[system messages, summary, kept suffix]``:
the prefix after the latest summary is rendered as a readable transcript (the previous
summary first, so summaries chain) and sent, with ``CompactionConfig.prompt`` as the
system prompt, to the compaction provider; its answer becomes a user message holding a
``CompactionSummary``. The store receives the result as a new window.

Sizing. Each message is sized by ``estimate_message_tokens`` unless provider usage says
better: an assistant message with usage costs its ``output - reasoning`` tokens (the
reasoning is not sent back: OpenAI drops it, Anthropic strips earlier thinking), and
between two assistant messages with usage the messages in between cost together
``next.prompt_total - prev.prompt_total - size(prev)`` tokens, spread over them in
proportion to their estimates. Differences of prompt totals cancel the system prompt
and tool declarations, so these sizes are dialogue-only and stay valid after a
compaction restates usage (``input`` = the sizes of the messages before it, summary
included; cache buckets zeroed; ``output`` and ``reasoning`` kept).

Messages are frozen values, so a ``SizeCache`` keeps each one's estimate between the
threshold checks made before every response instead of estimating the whole
conversation again.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .config import CompactionConfig, Config
from .conversation import (
    CompactionSummary,
    Conversation,
    Message,
    ToolResult,
    Usage,
    UserMessage,
)
from .errors import EmptyAssistantResponse, NoCompactionPrompt, ProviderError
from .events import Compacted, CompactionStarted, Event, MessageComplete
from .providers.base import Provider, ProviderRequest
from .tokens import estimate_message_tokens, estimate_tokens
from .tools import ToolSpec
from .transcript import is_summary, render_transcript

if TYPE_CHECKING:
    from .agent import Agent

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
    "run_compaction",
    "split",
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
    """What ``Agent.compact`` did.

    ``summarized_messages`` counts the messages folded into the new summary (the
    previous summary not included); ``kept_turns`` the user prompts kept verbatim.
    """

    compacted: bool
    summarized_messages: int
    kept_turns: int


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


# -- sizing ---------------------------------------------------------------------------


class SizeCache:
    """The token estimate of each message seen, kept between calls.

    Messages are frozen, so an estimate stays valid as long as its message lives.
    Entries are keyed by ``id(message)`` and hold the message itself, so an id cannot
    be reused while its entry exists. Entries of messages that left the conversation
    (after a compaction) are dropped once the cache holds over twice as many entries
    as the conversation has messages. One cache serves one conversation, from one
    thread at a time.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Message, int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def estimates(self, messages: Sequence[Message]) -> list[int]:
        """``estimate_message_tokens`` of each message, computed once per message."""
        entries = self._entries
        out: list[int] = []
        for m in messages:
            entry = entries.get(id(m))
            if entry is None or entry[0] is not m:
                entry = entries[id(m)] = (m, estimate_message_tokens(m))
            out.append(entry[1])
        if len(entries) > 2 * len(messages) + 64:
            self._entries = {id(m): entries[id(m)] for m in messages}
        return out


def message_sizes(
    messages: Sequence[Message], cache: SizeCache | None = None
) -> list[int]:
    """The token size of each message, from usage where it exists (module docstring).

    ``cache`` keeps the estimates for the next call on the same conversation.
    """
    if cache is None:
        sizes = [estimate_message_tokens(m) for m in messages]
    else:
        sizes = cache.estimates(messages)
    prev = -1
    for i, m in enumerate(messages):
        u = m.usage
        if m.role != "assistant" or u is None:
            continue
        sent_back = u.output - u.reasoning
        if sent_back > 0:
            sizes[i] = sent_back
        if u.prompt_total <= 0:
            continue
        if prev >= 0 and i - prev > 1:
            pu = messages[prev].usage
            assert pu is not None
            gap = u.prompt_total - pu.prompt_total - sizes[prev]
            if gap > 0:
                _spread(sizes, prev + 1, i, gap)
        prev = i
    return sizes


def _spread(sizes: list[int], start: int, stop: int, total: int) -> None:
    """Share ``total`` over ``sizes[start:stop]`` in proportion to their estimates."""
    weights = sizes[start:stop]
    if not any(weights):
        weights = [1] * len(weights)
    weight = sum(weights)
    given = 0
    for k, w in enumerate(weights[:-1], start):
        sizes[k] = total * w // weight
        given += sizes[k]
    sizes[stop - 1] = total - given


def estimate_request_tokens(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec] = (),
    cache: SizeCache | None = None,
) -> int:
    """The estimated prompt size of a request made of ``messages`` and ``tools``.

    The larger of two estimates, since the threshold check should rather compact early:
    the system prompt, tool declarations and dialogue sizes summed; and the latest
    response's prompt total (from usage) plus the sizes from that response onwards.
    """
    conversation = Conversation(list(messages))
    dialogue = conversation.dialogue()
    sizes = message_sizes(dialogue, cache)
    return _request_tokens(conversation.system_prompt(), dialogue, sizes, tools)


def _request_tokens(
    system: str | None,
    dialogue: Sequence[Message],
    sizes: Sequence[int],
    tools: Sequence[ToolSpec],
) -> int:
    overhead = estimate_tokens(system) if system else 0
    for t in tools:
        schema = json.dumps(t.parameters, separators=(",", ":"))
        overhead += estimate_tokens(f"{t.name} {t.description} {schema}")
    summed = overhead + sum(sizes)
    for k in range(len(dialogue) - 1, -1, -1):
        u = dialogue[k].usage
        if dialogue[k].role == "assistant" and u is not None and u.prompt_total > 0:
            return max(summed, u.prompt_total + sum(sizes[k:]))
    return summed


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
    results; when none fits, everything is summarised. An empty prefix means there is
    nothing to summarise.
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


def _cut(window: Sequence[Message], sizes: Sequence[int], budget: int) -> int:
    """The index where the kept suffix of ``window`` starts."""
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
    agent: Agent, config: Config, extra_instructions: str | None = None
) -> CompactionResult:
    """Summarise the prefix of ``agent``'s conversation now (``Agent.compact``).

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
    plan = split(agent.conversation.messages, cc.keep_verbatim)
    if not plan.prefix:
        return CompactionResult(False, 0, plan.kept_turns)
    _apply(agent, config, cc.prompt, cc.provider, plan, extra_instructions)
    return CompactionResult(True, len(plan.prefix), plan.kept_turns)


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
    agent: Agent,
    config: Config,
    *,
    reason: str,
    force: bool = False,
    cache: SizeCache | None = None,
) -> PendingCompaction | None:
    """Decide whether to compact before a response; cheap, makes no provider call.

    Without ``force`` (the threshold check) it plans only when
    ``compaction.context_window`` and ``prompt`` are set, the request is estimated
    above ``threshold * context_window`` and more than ``MIN_FOLD_TOKENS`` would be
    folded. With ``force`` (after a context overflow) it plans whenever there is
    anything to summarise, keeping at most half the dialogue when ``keep_verbatim``
    would keep all of it. ``cache``, kept from one call to the next, spares
    re-estimating the messages already seen.
    """
    cc = config.compaction
    if cc.prompt is None or (not force and cc.context_window is None):
        return None
    conversation = agent.conversation
    messages = conversation.messages
    dialogue = conversation.dialogue()
    sizes = message_sizes(dialogue, cache)
    system = conversation.system_prompt()
    estimated = _request_tokens(system, dialogue, sizes, agent.tool_specs())
    if not force:
        assert cc.context_window is not None
        if estimated <= cc.threshold * cc.context_window:
            return None
    plan = _split(messages, dialogue, sizes, cc.keep_verbatim)
    if force and not plan.prefix:
        plan = _split(messages, dialogue, sizes, sum(plan.kept_sizes) // 2)
    if not plan.prefix or (not force and plan.prefix_tokens <= MIN_FOLD_TOKENS):
        return None
    started = CompactionStarted(reason, len(messages), estimated)
    return PendingCompaction(started, plan, config)


def run_compaction(
    agent: Agent, config: Config, pending: PendingCompaction
) -> Compacted:
    """Summarise a planned prefix (one provider call) and rewrite the conversation.

    The prompt and summary provider come from ``pending.config``, the snapshot the
    plan was made with; ``config`` (the current one) carries the request options.

    Raises:
        ProviderError, EmptyAssistantResponse: the summary request failed; the
            conversation and the store are unchanged, and ``pending`` can run again.
    """
    cc = pending.settings
    if cc.prompt is None:  # plan_compaction never plans without a prompt
        raise NoCompactionPrompt("the planned compaction has no summary prompt")
    plan = pending.plan
    before = pending.started.messages_before
    after = _apply(agent, config, cc.prompt, cc.provider, plan, None)
    return Compacted(before, after, len(plan.prefix), plan.kept_turns)


def _apply(
    agent: Agent,
    config: Config,
    prompt: str,
    provider: Provider | None,
    plan: Split,
    extra_instructions: str | None,
) -> int:
    """Summarise ``plan``, store the new window, then replace the conversation."""
    text = _summarise(agent, config, prompt, provider, plan, extra_instructions)
    summary = Message("user", (CompactionSummary(text),), wire=agent.provider.wire)
    running = estimate_message_tokens(summary)
    kept: list[Message] = []
    for m, size in zip(plan.kept, plan.kept_sizes, strict=True):
        u = m.usage
        if m.role == "assistant" and u is not None and u.total > 0:
            m = m.with_usage(Usage(running, u.output, 0, 0, u.reasoning))
        kept.append(m)
        running += size
    new = [*plan.system, summary, *kept]
    agent._flush()
    agent.store.new_window(agent.session_id, new)
    agent.conversation.messages[:] = new
    return len(new)


def _summarise(
    agent: Agent,
    config: Config,
    prompt: str,
    provider: Provider | None,
    plan: Split,
    extra_instructions: str | None,
) -> str:
    """Ask ``provider`` (else the agent's, also the fallback) for the summary text."""
    system = prompt
    if plan.previous is not None:
        system += "\n\n" + _CHAIN_NOTE
    if extra_instructions:
        system += "\n\nAdditional instructions:\n" + extra_instructions
    shown = (plan.previous, *plan.prefix) if plan.previous else plan.prefix
    transcript = render_transcript(shown)
    message = UserMessage(
        f"Summarise this conversation.\n\n<transcript>\n{transcript}\n</transcript>"
    )
    request = ProviderRequest((message,), system, (), config)
    first = provider if provider is not None else agent.provider
    try:
        text = _complete(first, request)
    except ProviderError:
        if first is agent.provider:
            raise
        text = _complete(agent.provider, request)
    if not text.strip():
        raise EmptyAssistantResponse(
            "the summary response held no text; the conversation is unchanged"
        )
    return text


def _complete(provider: Provider, request: ProviderRequest) -> str:
    """Open ``request`` on ``provider``, pump it to the end and return its text."""
    response = provider.open(request)
    queue: deque[Event] = deque()
    try:
        while not response.produce(queue):
            queue.clear()  # only the completed message matters here
    finally:
        response.close()
    complete = queue[-1]
    assert isinstance(complete, MessageComplete)
    return complete.message.text

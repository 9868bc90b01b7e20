"""The workload of ``navi-core bench``: N workers, each running T agent turns.

Every worker has its own ``Agent`` (and session) over one shared provider, so turns
of one worker carry a growing history, as a real agent does. With tools, each turn
asks for a chain of additions made with a local ``add`` tool, one call per step: a
multi-iteration tool loop. Every response is timed from the moment its request is
sent (a thin provider wrapper) to its first delta and its last.

An attempt that fails midway and is retried (``ProviderRetry``) is not a response: its
deltas are dropped from the timing, so every sample measures one complete response.
Attempts cut off before their API's terminal marker (``IncompleteResponse``) are
counted per turn, as a server that cuts streams under load makes them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...agent import Agent
from ...config import Config
from ...conversation import WireIdentity
from ...errors import IncompleteResponse, NaviError
from ...events import (
    MessageComplete,
    ProviderRetry,
    ResponseDiscarded,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolFinished,
    TurnComplete,
)
from ...providers.base import Provider, ProviderRequest, ProviderStream
from ...providers.openai_chat import TEXT_CALL_ID_PREFIX
from ...tools._tool import tool

__all__ = ["BenchResult", "ResponseSample", "TurnSample", "Workload", "add", "run"]

SYSTEM = "You are a precise assistant. When asked to use a tool, use it as told."
TOPICS = ("tides", "bridges", "bread", "glaciers", "compilers", "bees", "maps")
_DELTAS = (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta)
#: events that come after a response's request was sent
_SENT = (*_DELTAS, MessageComplete, ResponseDiscarded, ProviderRetry)


@tool
def add(a: float, b: float) -> float:
    """Add two numbers and return the sum.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@dataclass(frozen=True, slots=True)
class Workload:
    """What every worker runs: ``turns`` turns, with ``steps`` tool calls each."""

    concurrency: int = 1
    turns: int = 3
    tools: bool = False
    steps: int = 3
    max_tokens: int = 256

    def prompt(self, worker: int, turn: int) -> str:
        """The user message of one turn (varied, so no server caches a reply)."""
        seed = 7 * worker + 13 * turn
        if not self.tools:
            topic = TOPICS[seed % len(TOPICS)]
            return f"In about 120 words, explain how {topic} work (variant {seed})."
        numbers = [(seed + 11 * i) % 90 + 10 for i in range(self.steps + 1)]
        chain = ", then ".join(f"add {n}" for n in numbers[1:])
        return (
            f"Start from {numbers[0]}, {chain}. Use the add tool for every step, one "
            "call at a time, each on the previous result. Then reply with the final "
            "number only."
        )


@dataclass(slots=True)
class ResponseSample:
    """One complete model response, timed from the moment its request was sent (the
    last attempt's, when cut attempts were retried)."""

    worker: int
    turn: int
    iteration: int
    seconds: float
    ttft: float | None
    tokens: int
    gaps: list[float]
    tool_calls: int
    #: client time from this response's end to the next request, less the tool's own
    tool_overhead: float | None = None
    #: attempts of this response cut off (``IncompleteResponse``) and retried
    incomplete_before: int = 0
    #: of ``tool_calls``, those the model wrote as text in its content (recovered)
    text_calls: int = 0
    #: the server reported no usage: ``tokens`` is the local estimate
    estimated: bool = False

    @property
    def tokens_per_second(self) -> float | None:
        """Decode speed: tokens after the first over the time from the first to the
        message's end (several tokens of one network read arrive together)."""
        if self.ttft is None or self.tokens < 2 or self.seconds <= self.ttft:
            return None
        return (self.tokens - 1) / (self.seconds - self.ttft)


@dataclass(slots=True)
class TurnSample:
    """One turn: its wall time, iterations and how it ended."""

    worker: int
    turn: int
    seconds: float
    iterations: int = 0
    tool_calls: int = 0
    stop_reason: str = ""
    error: str | None = None
    #: responses cut off (``IncompleteResponse``) and retried
    incomplete_retried: int = 0
    #: the turn failed with ``IncompleteResponse``: its last response was cut off too
    ended_incomplete: bool = False

    @property
    def incomplete(self) -> int:
        """Responses of this turn cut off before their end, retried or not."""
        return self.incomplete_retried + self.ended_incomplete


@dataclass(slots=True)
class BenchResult:
    """Everything measured in one run."""

    workload: Workload
    model: str
    base_url: str
    wall: float = 0.0
    cpu: float = 0.0
    responses: list[ResponseSample] = field(default_factory=list)
    turns: list[TurnSample] = field(default_factory=list)


class _Timed:
    """A provider that records when each request is sent (one per worker)."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner
        self.sent: list[float] = []

    @property
    def wire(self) -> WireIdentity:
        return self._inner.wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        self.sent.append(time.perf_counter())
        return self._inner.open(request)

    def close(self) -> None:
        """The shared provider is closed by whoever made it."""


def run(
    provider: Provider, workload: Workload, on_turn: Callable[[], None] | None = None
) -> BenchResult:
    """Run ``workload`` against ``provider``; ``on_turn`` is called after every turn."""
    wire = provider.wire
    result = BenchResult(workload, wire.model, wire.base_url)
    lock = threading.Lock()

    def work(worker: int) -> None:
        responses, turns = _worker(provider, workload, worker, on_turn)
        with lock:
            result.responses.extend(responses)
            result.turns.extend(turns)

    threads = [
        threading.Thread(target=work, args=(i,), name=f"bench-{i}", daemon=True)
        for i in range(workload.concurrency)
    ]
    cpu, start = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.wall = time.perf_counter() - start
    result.cpu = time.process_time() - cpu
    return result


def _worker(
    provider: Provider,
    workload: Workload,
    worker: int,
    on_turn: Callable[[], None] | None,
) -> tuple[list[ResponseSample], list[TurnSample]]:
    timed = _Timed(provider)
    responses: list[ResponseSample] = []
    turns: list[TurnSample] = []
    config = Config(max_output_tokens=workload.max_tokens)
    tools = [add] if workload.tools else []
    with Agent(timed, tools=tools, config=config, system=SYSTEM) as agent:
        for turn in range(workload.turns):
            start = time.perf_counter()
            sample = TurnSample(worker, turn, 0.0)
            try:
                _turn(agent, timed, workload.prompt(worker, turn), sample, responses)
            except NaviError as exc:
                sample.error = f"{type(exc).__name__}: {exc}"
                sample.ended_incomplete = isinstance(exc, IncompleteResponse)
            sample.seconds = time.perf_counter() - start
            turns.append(sample)
            if on_turn is not None:
                on_turn()
    return responses, turns


def _turn(
    agent: Agent,
    timed: _Timed,
    prompt: str,
    sample: TurnSample,
    out: list[ResponseSample],
) -> None:
    first: float | None = None
    last = 0.0
    gaps: list[float] = []
    deltas = cut = 0
    waiting: ResponseSample | None = None  # a response whose tools are running
    after = 0  # index in ``timed.sent`` of the request that follows ``waiting``
    ended = tool_seconds = 0.0
    iteration = 0
    for event in agent.run(prompt):
        now = time.perf_counter()
        if waiting is not None and isinstance(event, _SENT) and len(timed.sent) > after:
            # the first attempt's send ends the round trip, even if it was cut
            waiting.tool_overhead = max(0.0, timed.sent[after] - ended - tool_seconds)
            waiting = None
        if isinstance(event, _DELTAS):
            if first is None:
                first = now
            else:
                gaps.append(now - last)
            last = now
            deltas += 1
        elif isinstance(event, ProviderRetry):
            first, gaps, deltas = None, [], 0  # the failed attempt's deltas are void
            if event.error == IncompleteResponse.__name__:
                cut += 1
                sample.incomplete_retried += 1
        elif isinstance(event, MessageComplete):
            sent = timed.sent[-1]
            calls = len(event.message.tool_uses)
            response = ResponseSample(
                sample.worker, sample.turn, iteration, now - sent,
                None if first is None else first - sent,
                # no usage from the server: one token per delta, not the estimate
                deltas if event.usage.estimated else event.usage.output or deltas,
                gaps, calls,
                incomplete_before=cut,
                text_calls=sum(
                    u.id.startswith(TEXT_CALL_ID_PREFIX)
                    for u in event.message.tool_uses
                ),
                estimated=event.usage.estimated,
            )  # fmt: skip
            out.append(response)
            waiting = response if calls else None
            after = len(timed.sent)
            ended, tool_seconds = now, 0.0
            first, gaps, deltas, cut = None, [], 0, 0
            iteration += 1
        elif isinstance(event, ToolFinished):
            tool_seconds = max(tool_seconds, event.seconds)
        elif isinstance(event, TurnComplete):
            sample.iterations = event.iterations
            sample.tool_calls = event.tool_calls
            sample.stop_reason = event.stop_reason.value

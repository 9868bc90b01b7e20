"""Preparing the next request of a long session: today's full encoding vs kept JSON.

An agent-loop session of 30, 300 and 3,000 messages (a prompt, then assistant text
with a tool call and its ~600-character tool result, repeated). For each HTTP
provider, in the same run:

* full: ``orjson.dumps(provider.build_body(request))``, what every request paid before;
* next: what a ``Stream`` and ``open`` do for the next request, right after the
  previous request of the loop was encoded: ``conversation.history()`` (a view, no
  copy) into a ``ProviderRequest``, then ``provider.encode_parts`` (the parts ``open``
  hands to the socket one after the other: the kept JSON of older messages is sent as
  it is kept, not copied into one body); the two newest messages are new objects each
  round, so they are encoded for real (what an agent loop pays per response);
* loop: the mean of ``next`` over a run of requests of one conversation growing as an
  agent loop grows it (1/30 of its size, at least 10), the kept JSON's occasional
  merges included (the best of three runs);
* rebuild: ``encode_body`` for a conversation this provider did not encode last (a
  new provider per request, or one provider serving many sessions): every message
  comes from the per-message cache;
* copy: copying a body-sized ``bytes`` once, the floor of any assembly (a different
  buffer each time, out of 48 MiB of them, since the kept JSON a request assembles was
  last touched a request ago and is no longer in the CPU caches either).

Ratios: next / full (goal <= 0.10 at 3,000), next(3,000) / (2 x next(30) + copy(3,000))
(goal <= 1), and rebuild / full. Every request is also checked byte for byte.

Run: ``python bench/bench_requests.py`` (``--quick`` for fewer rounds).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import _record
import orjson

from navi_core.conversation import (
    Conversation,
    Message,
    Text,
    TextPart,
    ToolResult,
    ToolUse,
)
from navi_core.providers._http import HTTPProvider
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.base import ProviderRequest
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.providers.openai_responses import OpenAIResponses
from navi_core.tools import ToolSpec

URL = "http://127.0.0.1:9"
SYSTEM = "You are a careful assistant. Use the tools when they help."
TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file of the project.",
        {"type": "object", "properties": {"path": {"type": "string"}}},
    ),
)


@dataclass(frozen=True)
class Settings:
    max_output_tokens: int | None = 1024
    temperature: float | None = None
    coalesce_deltas: bool = False


def pair(i: int) -> tuple[Message, Message]:
    """One loop iteration: a tool call and its result (new objects on every call)."""
    call = Message(
        "assistant",
        (
            Text(f"Reading part {i} of the report to check the totals."),
            ToolUse(
                f"call_{i}", "read_file", orjson.dumps({"path": f"r/{i}"}).decode()
            ),
        ),
    )
    body = f"line {i}: revenue 1,204.50 EUR, costs 980.10 EUR, margin 18.6 %\n" * 9
    result = Message("user", (ToolResult(f"call_{i}", (TextPart(body),)),))
    return call, result


def session(size: int) -> tuple[Message, ...]:
    messages = [Message("user", (Text("Check the totals of every report part."),))]
    i = 0
    while len(messages) < size - 1:
        messages.extend(pair(i))
        i += 1
    return tuple(messages)


def request(messages: Sequence[Message]) -> ProviderRequest:
    return ProviderRequest(messages, SYSTEM, TOOLS, Settings())


def median_ms(run: Callable[[], float], rounds: int) -> float:
    return statistics.median(run() for _ in range(rounds)) * 1e3


def measure(provider: HTTPProvider, size: int, rounds: int) -> dict[str, float]:
    base = session(size)
    full_request = request(base)
    body = orjson.dumps(provider.build_body(full_request))
    assert provider.encode_body(full_request) == body

    def full() -> float:
        start = time.perf_counter()
        orjson.dumps(provider.build_body(full_request))
        return time.perf_counter() - start

    def next_request() -> float:
        conversation = Conversation(list(base[:-2]))
        provider.encode_parts(request(conversation.history()))  # the previous one
        conversation.messages.extend(pair(size))  # what the response just added
        start = time.perf_counter()
        provider.encode_parts(request(conversation.history()))  # as open() does
        return time.perf_counter() - start

    def steady(rounds: int) -> float:
        """The mean over ``rounds`` requests of one conversation growing as a loop
        grows it: the kept chunks' occasional merges are in it."""
        conversation = Conversation(list(base[:-2]))
        provider.encode_parts(request(conversation.history()))
        total = 0.0
        for k in range(rounds):
            conversation.messages.extend(pair(size + k))
            start = time.perf_counter()
            provider.encode_parts(request(conversation.history()))
            total += time.perf_counter() - start
        return total / rounds

    other = request(base[:1])

    def rebuild() -> float:
        provider.encode_body(other)
        start = time.perf_counter()
        provider.encode_body(full_request)
        return time.perf_counter() - start

    # The kept bytes were last touched a request ago, so the floor copies bytes that
    # are not in the CPU caches either: a different body-sized buffer each time.
    sources = [bytes(body) for _ in range(max(2, (48 << 20) // len(body)))]
    turn = iter(range(1 << 30))

    def copy() -> float:
        source = sources[next(turn) % len(sources)]
        start = time.perf_counter()
        bytearray(source)
        return time.perf_counter() - start

    now = request(base[:-2] + pair(size))
    check = provider.encode_body(now)
    assert check == orjson.dumps(provider.build_body(now)), "bodies differ"
    assert b"".join(provider.encode_parts(now)) == check, "parts differ"
    return {
        "full": median_ms(full, rounds),
        "next": median_ms(next_request, rounds),
        "rebuild": median_ms(rebuild, rounds),
        "steady": min(steady(max(10, size // 30)) for _ in range(3)) * 1e3,
        "copy": median_ms(copy, rounds),
        "kb": len(body) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)
    providers: list[HTTPProvider] = [
        OpenAIChat("m", URL),
        OpenAIResponses("m", URL),
        Anthropic("m", URL),
    ]
    sizes = (30, 300, 3000)
    print(f"{'provider':<18}{'msgs':>6}{'KiB':>8}{'full ms':>10}{'next ms':>10}"
          f"{'loop ms':>9}{'next/full':>11}{'rebuild/full':>14}"
          f"{'next/(2x30+copy)':>18}")  # fmt: skip
    rows: list[list[object]] = []
    for provider in providers:
        small = 0.0
        for size in sizes:
            rounds = (
                (15 if size == 3000 else 60)
                if args.quick
                else (40 if size == 3000 else 200)
            )
            r = measure(provider, size, rounds)
            if size == sizes[0]:
                small = r["next"]
            goal = r["next"] / (2 * small + r["copy"])
            print(
                f"{type(provider).__name__:<18}{size:>6}{r['kb']:>8.0f}{r['full']:>10.3f}"
                f"{r['next']:>10.3f}{r['steady']:>9.3f}{r['next'] / r['full']:>11.3f}"
                f"{r['rebuild'] / r['full']:>14.3f}{goal:>18.2f}"
            )
            rows.append(
                [type(provider).__name__, f"{size:,}", f"{r['kb']:,.0f}",
                 f"{r['full']:.3f}", f"{r['next']:.3f}", f"{r['steady']:.3f}",
                 f"{r['next'] / r['full']:.3f}", f"{r['rebuild'] / r['full']:.3f}",
                 f"{goal:.2f}"]
            )  # fmt: skip
        provider.close()
    _record.table(
        "Preparing the next request of a session",
        ["provider", "messages", "KiB", "full ms", "next ms", "loop ms",
         "next / full", "rebuild / full", "next / (2 x next(30) + copy)"],
        rows,
        "full: encoding the whole body; next: what the next request of a loop costs; "
        "goals: next / full ≤ 0.10 at 3,000 messages, the last column ≤ 1.",
    )  # fmt: skip


if __name__ == "__main__":
    main()

"""Whole turns over real HTTP: navi_core's providers beside the vendors' SDKs.

A loopback server in its own process (``bench/server.py``) answers every request with
the same pre-built response: 20,000 text chunks in each API's wire format. In the same
run, interleaved round by round, each contender makes the request and accumulates the
text:

* navi_core: ``Agent(provider=OpenAIChat(...)).run(...)`` then ``next()`` until None
  (likewise ``Anthropic``), every event handed to the caller;
* the official ``openai`` / ``anthropic`` SDK: ``create(stream=True)`` and the text
  deltas appended, the usual way;
* a plain loop: ``httpx`` + ``httpx-sse`` + ``orjson``, appending the same deltas.

Ratios are median times of the others over navi_core's (higher is better for it).
The memory part streams a ~200 MB response through one turn in a fresh process and
reports peak RSS growth minus the size of the final message.

Run: ``python bench/bench_providers.py`` (``--quick`` for fewer rounds, ``--mb 0`` to
skip the memory part).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import _record
import anthropic
import httpx
import openai
import orjson
from httpx_sse import connect_sse
from server import openai_events, spawn as server

from navi_core import Agent, NullStore
from navi_core.core import IMPLEMENTATION
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat

HERE = Path(__file__).resolve().parent
MODEL_O = "gpt-4o-2024-08-06"
MODEL_A = "claude-sonnet-4-20250514"
PROMPT = [{"role": "user", "content": "Tell me a long story."}]


# -- contenders: each returns the accumulated text --------------------------------------


def navi_turn(provider: OpenAIChat | Anthropic) -> Callable[[], str]:
    def run() -> str:
        agent = Agent(provider, store=NullStore())
        stream = agent.run("Tell me a long story.")
        while stream.next() is not None:
            pass
        return agent.conversation.messages[-1].text

    return run


def openai_sdk(url: str) -> Callable[[], str]:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

    def run() -> str:
        parts = []
        stream = client.chat.completions.create(
            model=MODEL_O,
            messages=PROMPT,
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.choices:
                content = chunk.choices[0].delta.content
                if content:
                    parts.append(content)
        return "".join(parts)

    return run


def anthropic_sdk(url: str) -> Callable[[], str]:
    client = anthropic.Anthropic(base_url=url, api_key="sk-bench", max_retries=0)

    def run() -> str:
        parts = []
        stream = client.messages.create(
            model=MODEL_A, max_tokens=4096, messages=PROMPT, stream=True
        )
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                parts.append(event.delta.text)
        return "".join(parts)

    return run


def plain_openai(url: str) -> Callable[[], str]:
    client = httpx.Client(timeout=60)
    body = {
        "model": MODEL_O,
        "messages": PROMPT,
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    def run() -> str:
        parts = []
        with connect_sse(
            client, "POST", url + "/v1/chat/completions", json=body
        ) as source:
            for sse in source.iter_sse():
                if sse.data == "[DONE]":
                    break
                for choice in orjson.loads(sse.data)["choices"]:
                    content = choice["delta"].get("content")
                    if content:
                        parts.append(content)
        return "".join(parts)

    return run


def plain_anthropic(url: str) -> Callable[[], str]:
    client = httpx.Client(timeout=60)
    body = {"model": MODEL_A, "max_tokens": 4096, "messages": PROMPT, "stream": True}

    def run() -> str:
        parts = []
        with connect_sse(client, "POST", url + "/v1/messages", json=body) as source:
            for sse in source.iter_sse():
                event = orjson.loads(sse.data)
                kind = event["type"]
                if kind == "content_block_delta":
                    delta = event["delta"]
                    if delta["type"] == "text_delta":
                        parts.append(delta["text"])
                elif kind == "message_stop":
                    break
        return "".join(parts)

    return run


def measure(contenders: dict[str, Callable[[], str]], rounds: int) -> dict[str, float]:
    """Median seconds per turn, contenders interleaved; all must agree on the text."""
    texts = {name: fn() for name, fn in contenders.items()}  # warm-up + check
    first = next(iter(texts.values()))
    for name, text in texts.items():
        if text != first:
            raise AssertionError(f"{name} accumulated different text")
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def report(
    title: str, medians: dict[str, float], chunks: int, goals: dict[str, float]
) -> None:
    base = medians["navi_core"]
    rows: list[list[object]] = []
    print(f"\n{title}")
    print(f"  {'contender':<34}{'median ms':>10}{'chunks/s':>12}{'navi_core is':>15}")
    for name, t in medians.items():
        ratio = "" if name == "navi_core" else f"{t / base:.1f}x faster"
        goal = f"   (goal >= {goals[name]:.0f}x)" if name in goals else ""
        print(f"  {name:<34}{t * 1e3:>10.1f}{chunks / t:>12,.0f}{ratio:>15}{goal}")
        rows.append([name, f"{t * 1e3:.1f}", f"{chunks / t:,.0f}", ratio, goal.strip()])
        if name in goals:
            _record.goal(
                f"{title}: {name} >= {goals[name]:.0f}x", t / base >= goals[name]
            )
    _record.table(
        title,
        ["contender", "median ms", "chunks/s", "navi_core is", "goal"],
        rows,
        f"one turn of {chunks:,} streamed chunks over loopback HTTP",
    )


# -- memory ----------------------------------------------------------------------------


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def memory_child(url: str, api: str) -> None:
    """Run one turn and print peak RSS growth and the final message size (bytes)."""
    if api == "openai":
        provider: OpenAIChat | Anthropic = OpenAIChat(MODEL_O, url + "/v1", "sk-bench")
    else:
        provider = Anthropic(MODEL_A, url, "sk-bench")
    # Warm up imports and code paths on the first bytes only, then drop that response.
    agent = Agent(provider, store=NullStore())
    warm = agent.run("warm up")
    warm.next()
    warm.close()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current RSS
    before = _status("VmRSS")
    text = navi_turn(provider)()
    peak = _status("VmHWM")
    message = sys.getsizeof(text)
    print(
        orjson.dumps(
            {"growth": peak - before, "message": message, "chars": len(text)}
        ).decode()
    )


def memory(mb: int) -> None:
    sample = list(openai_events(1000))
    per_chunk = sum(map(len, sample)) / len(sample)
    chunks = int(mb * 1024 * 1024 / per_chunk)
    print(
        f"\nmemory: one turn streaming ~{mb} MB ({chunks:,} text chunks), in a fresh process"
    )
    rows: list[list[object]] = []
    with server(chunks, lazy=True) as url:
        for api in ("openai", "anthropic"):
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, __file__, "--memory-child", url, api],
                capture_output=True,
                text=True,
                check=True,
            )
            seconds = time.perf_counter() - start
            result = orjson.loads(out.stdout.strip().splitlines()[-1])
            growth, message = result["growth"], result["message"]
            print(
                f"  {api:<10} {seconds:5.1f}s: peak RSS growth {growth / 2**20:6.1f} MB, final message "
                f"{message / 2**20:5.1f} MB, growth - message {(growth - message) / 2**20:6.1f} MB"
            )
            rows.append(
                [api, f"{growth / 2**20:.1f}", f"{message / 2**20:.1f}",
                 f"{(growth - message) / 2**20:.1f}"]
            )  # fmt: skip
    _record.table(
        f"Memory: one turn streaming ~{mb} MB, in a fresh process",
        ["API", "peak RSS growth MB", "final message MB", "growth - message MB"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description="navi_core providers vs the vendors' SDKs"
    )
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--mb", type=int, default=200, help="memory run size (0: skip)")
    parser.add_argument(
        "--memory-child", nargs=2, metavar=("URL", "API"), help=argparse.SUPPRESS
    )
    _record.add_option(parser)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child)
        return
    _record.start(args)
    rounds = 3 if args.quick else args.rounds
    print(
        f"navi_core core: {IMPLEMENTATION}; openai {openai.__version__}, anthropic "
        f"{anthropic.__version__}, httpx {httpx.__version__}; {os.cpu_count()} CPUs; "
        f"{args.chunks:,} chunks per response, median of {rounds} rounds"
    )
    with server(args.chunks) as url:
        o = OpenAIChat(MODEL_O, url + "/v1", "sk-bench")
        a = Anthropic(MODEL_A, url, "sk-bench")
        medians = measure(
            {
                "navi_core": navi_turn(o),
                "openai SDK": openai_sdk(url),
                "httpx + httpx-sse + orjson": plain_openai(url),
            },
            rounds,
        )
        report(
            "OpenAI chat completions",
            medians,
            args.chunks,
            {"openai SDK": 20, "httpx + httpx-sse + orjson": 2},
        )
        medians = measure(
            {
                "navi_core": navi_turn(a),
                "anthropic SDK": anthropic_sdk(url),
                "httpx + httpx-sse + orjson": plain_anthropic(url),
            },
            rounds,
        )
        report(
            "Anthropic Messages",
            medians,
            args.chunks,
            {"anthropic SDK": 5, "httpx + httpx-sse + orjson": 2},
        )
        o.close()
        a.close()
    if args.mb:
        memory(args.mb)


if __name__ == "__main__":
    main()

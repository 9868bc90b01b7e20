"""Core parser throughput: navi_core's compiled and pure parsers beside the usual stacks.

Every contender reads the same bytes (``bench/corpus.py``), handed over by one
``httpx.MockTransport`` in seeded 1-16 KiB network-sized chunks, and accumulates the
text, thinking and tool arguments as a user would:

* navi_core Cython and pure twin: ``parser.feed(chunk)`` over ``response.iter_bytes()``;
* ``httpx-sse`` + ``orjson``: ``EventSource(response).iter_sse()`` then ``orjson.loads``;
* the official ``openai`` SDK: ``chat.completions.create(stream=True)`` (OpenAI corpora);
* the official ``anthropic`` SDK: ``messages.create(stream=True)`` raw events;
* the official ``openai`` SDK: ``responses.create(stream=True)`` (the Responses corpus);
* msgspec typed structs over the payloads already framed (no SSE, no transport): a
  stretch reference for decoding alone, set against the Cython parser fed the same
  chunks directly (no transport either).

Rounds are interleaved (each round runs every contender once); the table shows median
times, MB/s over the whole body, and how many times faster the Cython parser is. All
contenders must produce identical accumulated results, or the run stops.

Local models (``--only local``): the scan for tool calls written as text
(``TextCalls``) over a plain OpenAI text stream against the bare parser (goal: it adds
at most 10 % to the parse time), and a stream whose content holds Hermes
``<tool_call>`` markup, recovered while streaming by the Cython core, against
``httpx-sse`` + ``orjson`` accumulating the content and a regex recovering the calls
from it afterwards, both through the mock transport (goal: 5x).

Run: ``python bench/bench_core.py`` (``--quick`` for fewer rounds).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import _record
import anthropic
import corpus
import httpx
import httpx2
import msgspec
import openai
import orjson
from httpx_sse import EventSource

sys.path.insert(0, str(Path(__file__).absolute().parent.parent))  # a plain checkout

import navi_core._core as cy
import navi_core._core_py as py
from navi_core._deltas import TEXT, THINKING, TOOL_ARGS, TOOL_START

__all__ = ["main"]

Result = tuple[str, str, tuple[str, ...]]  # text, thinking, tool arguments in order
Contender = Callable[[], Result]
PROMPT = [{"role": "user", "content": "Go."}]


class Accumulator:
    """What a caller keeps: text, thinking and each tool call's arguments."""

    __slots__ = ("args", "text", "thinking")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.args: defaultdict[int, list[str]] = defaultdict(list)

    def result(self) -> Result:
        args = tuple("".join(self.args[k]) for k in sorted(self.args))
        return "".join(self.text), "".join(self.thinking), args


def transport(chunks: list[bytes], http: Any = httpx) -> Any:
    """A mock transport of ``http`` (httpx, or httpx2 for the anthropic SDK)."""

    def handler(request: Any) -> Any:
        headers = {"content-type": "text/event-stream"}
        return http.Response(200, headers=headers, content=iter(chunks))

    return http.MockTransport(handler)


@contextmanager
def response(chunks: list[bytes]) -> Iterator[httpx.Response]:
    with (
        httpx.Client(transport=transport(chunks)) as client,
        client.stream("POST", "http://bench.invalid/stream") as resp,
    ):
        yield resp


# -- contenders ---------------------------------------------------------------------


def navi(module: ModuleType, parser: str, chunks: list[bytes]) -> Contender:
    def run() -> Result:
        acc = Accumulator()
        text, thinking, args = acc.text.append, acc.thinking.append, acc.args
        p = getattr(module, parser)()

        def take(deltas: list[tuple[Any, ...]]) -> None:
            for d in deltas:
                kind = d[0]
                if kind == TEXT:
                    text(d[1])
                elif kind == TOOL_ARGS:
                    args[d[1]].append(d[2])
                elif kind == THINKING:
                    thinking(d[1])

        with response(chunks) as resp:
            for data in resp.iter_bytes():
                take(p.feed(data))
        take(p.close())
        return acc.result()

    return run


def navi_raw(module: ModuleType, parser: str, chunks: list[bytes]) -> Contender:
    """The parser fed the chunks directly, like msgspec its payloads: no transport."""

    def run() -> Result:
        acc = Accumulator()
        text, thinking, args = acc.text.append, acc.thinking.append, acc.args
        p = getattr(module, parser)()
        for data in chunks:
            for d in p.feed(data):
                kind = d[0]
                if kind == TEXT:
                    text(d[1])
                elif kind == TOOL_ARGS:
                    args[d[1]].append(d[2])
                elif kind == THINKING:
                    thinking(d[1])
        p.close()
        return acc.result()

    return run


def httpx_sse_openai(chunks: list[bytes]) -> Contender:
    def run() -> Result:
        acc = Accumulator()
        with response(chunks) as resp:
            for sse in EventSource(resp).iter_sse():
                if sse.data == "[DONE]":
                    break
                obj = orjson.loads(sse.data)
                choices = obj.get("choices")
                if not choices:
                    continue
                delta = choices[0].get("delta") or {}
                if content := delta.get("content"):
                    acc.text.append(content)
                for call in delta.get("tool_calls") or ():
                    if fragment := (call.get("function") or {}).get("arguments"):
                        acc.args[call["index"]].append(fragment)
        return acc.result()

    return run


def httpx_sse_anthropic(chunks: list[bytes]) -> Contender:
    def run() -> Result:
        acc = Accumulator()
        with response(chunks) as resp:
            for sse in EventSource(resp).iter_sse():
                obj = orjson.loads(sse.data)
                if obj["type"] != "content_block_delta":
                    continue
                delta = obj["delta"]
                kind = delta["type"]
                if kind == "text_delta":
                    acc.text.append(delta["text"])
                elif kind == "thinking_delta":
                    acc.thinking.append(delta["thinking"])
                elif kind == "input_json_delta" and delta["partial_json"]:
                    acc.args[obj["index"]].append(delta["partial_json"])
        return acc.result()

    return run


def httpx_sse_responses(chunks: list[bytes]) -> Contender:
    def run() -> Result:
        acc = Accumulator()
        calls: dict[int, int] = {}
        with response(chunks) as resp:
            for sse in EventSource(resp).iter_sse():
                obj = orjson.loads(sse.data)
                kind = obj["type"]
                if kind == "response.output_text.delta":
                    acc.text.append(obj["delta"])
                elif kind == "response.reasoning_summary_text.delta":
                    acc.thinking.append(obj["delta"])
                elif kind == "response.function_call_arguments.delta":
                    acc.args[calls[obj["output_index"]]].append(obj["delta"])
                elif kind == "response.output_item.added":
                    if obj["item"]["type"] == "function_call":
                        calls[obj["output_index"]] = len(calls)
                elif kind == "response.completed":
                    break
        return acc.result()

    return run


def openai_responses_sdk(chunks: list[bytes]) -> Contender:
    client = openai.OpenAI(
        api_key="sk-bench",
        base_url="http://bench.invalid/v1",
        http_client=httpx.Client(transport=transport(chunks)),
        max_retries=0,
    )

    def run() -> Result:
        acc = Accumulator()
        calls: dict[int, int] = {}
        stream = client.responses.create(model="gpt-5", input="Go.", stream=True)
        for event in stream:
            kind = event.type
            if kind == "response.output_text.delta":
                acc.text.append(event.delta)
            elif kind == "response.reasoning_summary_text.delta":
                acc.thinking.append(event.delta)
            elif kind == "response.function_call_arguments.delta":
                acc.args[calls[event.output_index]].append(event.delta)
            elif (
                kind == "response.output_item.added"
                and event.item.type == "function_call"
            ):
                calls[event.output_index] = len(calls)
        return acc.result()

    return run


def openai_sdk(chunks: list[bytes]) -> Contender:
    client = openai.OpenAI(
        api_key="sk-bench",
        base_url="http://bench.invalid/v1",
        http_client=httpx.Client(transport=transport(chunks)),
        max_retries=0,
    )

    def run() -> Result:
        acc = Accumulator()
        stream = client.chat.completions.create(
            model="gpt-4o", messages=PROMPT, stream=True
        )  # type: ignore[call-overload]
        for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                acc.text.append(delta.content)
            for call in delta.tool_calls or ():
                if call.function and call.function.arguments:
                    acc.args[call.index].append(call.function.arguments)
        return acc.result()

    return run


def anthropic_sdk(chunks: list[bytes]) -> Contender:
    client = anthropic.Anthropic(
        api_key="sk-ant-bench",
        base_url="http://bench.invalid",
        http_client=httpx2.Client(transport=transport(chunks, httpx2)),
        max_retries=0,
    )

    def run() -> Result:
        acc = Accumulator()
        stream = client.messages.create(
            model="claude-sonnet-4-20250514",
            max_tokens=64000,
            messages=PROMPT,
            stream=True,
        )  # type: ignore[call-overload]
        for event in stream:
            if event.type != "content_block_delta":
                continue
            delta = event.delta
            if delta.type == "text_delta":
                acc.text.append(delta.text)
            elif delta.type == "thinking_delta":
                acc.thinking.append(delta.thinking)
            elif delta.type == "input_json_delta" and delta.partial_json:
                acc.args[event.index].append(delta.partial_json)
        return acc.result()

    return run


class OFunction(msgspec.Struct):
    arguments: str | None = None


class OToolCall(msgspec.Struct):
    index: int
    function: OFunction | None = None


class ODelta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[OToolCall] | None = None


class OChoice(msgspec.Struct):
    delta: ODelta


class OChunk(msgspec.Struct):
    choices: list[OChoice] = []


class ADelta(msgspec.Struct):
    type: str = ""
    text: str | None = None
    thinking: str | None = None
    partial_json: str | None = None


class AEvent(msgspec.Struct):
    type: str
    index: int = 0
    delta: ADelta | None = None


class RItem(msgspec.Struct):
    type: str = ""


class REvent(msgspec.Struct):
    type: str
    delta: str | None = None
    output_index: int = 0
    item: RItem | None = None


def msgspec_responses(payloads: list[bytes]) -> Contender:
    decode = msgspec.json.Decoder(REvent).decode

    def run() -> Result:
        acc = Accumulator()
        calls: dict[int, int] = {}
        for payload in payloads:
            event = decode(payload)
            kind = event.type
            if kind == "response.output_text.delta" and event.delta:
                acc.text.append(event.delta)
            elif kind == "response.reasoning_summary_text.delta" and event.delta:
                acc.thinking.append(event.delta)
            elif kind == "response.function_call_arguments.delta" and event.delta:
                acc.args[calls[event.output_index]].append(event.delta)
            elif (
                kind == "response.output_item.added"
                and event.item is not None
                and event.item.type == "function_call"
            ):
                calls[event.output_index] = len(calls)
        return acc.result()

    return run


def msgspec_openai(payloads: list[bytes]) -> Contender:
    decode = msgspec.json.Decoder(OChunk).decode

    def run() -> Result:
        acc = Accumulator()
        for payload in payloads:
            chunk = decode(payload)
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                acc.text.append(delta.content)
            for call in delta.tool_calls or ():
                if call.function and call.function.arguments:
                    acc.args[call.index].append(call.function.arguments)
        return acc.result()

    return run


def msgspec_anthropic(payloads: list[bytes]) -> Contender:
    decode = msgspec.json.Decoder(AEvent).decode

    def run() -> Result:
        acc = Accumulator()
        for payload in payloads:
            event = decode(payload)
            delta = event.delta
            if event.type != "content_block_delta" or delta is None:
                continue
            if delta.type == "text_delta" and delta.text:
                acc.text.append(delta.text)
            elif delta.type == "thinking_delta" and delta.thinking:
                acc.thinking.append(delta.thinking)
            elif delta.type == "input_json_delta" and delta.partial_json:
                acc.args[event.index].append(delta.partial_json)
        return acc.result()

    return run


# -- the run ------------------------------------------------------------------------

BASELINE = "httpx-sse + orjson"
CYTHON = "navi_core Cython"
CYTHON_RAW = "navi_core Cython, no httpx"
PURE = "navi_core pure twin"
MSGSPEC = "msgspec structs, pre-framed"
# corpus -> [(faster, slower, minimum ratio of slower's time to faster's)]
GOALS = {
    "OpenAI text": [
        (CYTHON, BASELINE, 3.0),
        (CYTHON, "openai SDK", 100.0),
        (PURE, BASELINE, 1.5),
    ],
    "Anthropic thinking + text + tool_use": [
        (CYTHON, BASELINE, 3.0),
        (CYTHON, "anthropic SDK", 20.0),
        (PURE, BASELINE, 1.5),
    ],
    "Responses reasoning + text + function calls": [
        (CYTHON, BASELINE, 3.0),
        (CYTHON, "openai SDK (responses)", 20.0),
    ],
}
PARSERS = {
    "openai": "OpenAIChatParser",
    "anthropic": "AnthropicParser",
    "responses": "OpenAIResponsesParser",
}
STRETCH = [(CYTHON_RAW, MSGSPEC, 1.0)]  # both without transport


def contenders(kind: str, body: bytes, chunks: list[bytes]) -> dict[str, Contender]:
    parser = PARSERS[kind]
    framed = corpus.payloads(body)
    out = {
        CYTHON: navi(cy, parser, chunks),
        PURE: navi(py, parser, chunks),
    }
    if kind == "openai":
        out[BASELINE] = httpx_sse_openai(chunks)
        out["openai SDK"] = openai_sdk(chunks)
    elif kind == "responses":
        out[BASELINE] = httpx_sse_responses(chunks)
        out["openai SDK (responses)"] = openai_responses_sdk(chunks)
    else:
        out[BASELINE] = httpx_sse_anthropic(chunks)
        out["anthropic SDK"] = anthropic_sdk(chunks)
    out[CYTHON_RAW] = navi_raw(cy, parser, chunks)
    decoders = {"openai": msgspec_openai, "anthropic": msgspec_anthropic,
                "responses": msgspec_responses}  # fmt: skip
    out[MSGSPEC] = decoders[kind](framed)
    return out


def measure(runs: dict[str, Contender], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    results = {name: run() for name, run in runs.items()}  # warm-up and check
    for name, result in results.items():
        if result != results[PURE]:
            raise SystemExit(f"{name} accumulated a different result than the twin")
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def check(
    name: str,
    medians: dict[str, float],
    goals: list[tuple[str, str, float]],
    label: str,
) -> list[str]:
    missed = []
    for faster, slower, goal in goals:
        ratio = medians[slower] / medians[faster]
        verdict = "ok" if ratio >= goal else "MISSED"
        print(f"  {label}: {faster} >= {goal:g}x {slower}: {ratio:.1f}x {verdict}")
        if label == "goal":
            _record.goal(
                f"{name}: {faster} >= {goal:g}x {slower} ({ratio:.1f}x)", ratio >= goal
            )
        if ratio < goal:
            missed.append(f"{name}: {faster} vs {slower} {ratio:.1f}x < {goal:g}x")
    return missed


def report(
    name: str, kind: str, body: bytes, chunks: list[bytes], rounds: int
) -> tuple[list[str], list[str]]:
    medians = measure(contenders(kind, body, chunks), rounds)
    fast = medians[CYTHON]
    mb = len(body) / 1e6
    events = body.count(b"\ndata: ") + body.startswith(b"data: ")
    print(f"\n{name}: {mb:.2f} MB, {events:,} events, {len(chunks)} chunks of 1-16 KiB")
    print(f"  {'contender':<30}{'MB/s':>9}{'ms':>10}{'Cython is':>12}")
    for contender, t in medians.items():
        print(f"  {contender:<30}{mb / t:>9.1f}{t * 1e3:>10.1f}{t / fast:>11.1f}x")
    _record.table(
        f"{name}: {mb:.2f} MB, {events:,} events, {len(chunks)} chunks of 1-16 KiB",
        ["contender", "MB/s", "ms", "Cython is"],
        [
            [c, f"{mb / t:,.1f}", f"{t * 1e3:,.1f}", f"{t / fast:.1f}x"]
            for c, t in medians.items()
        ],
    )
    missed = check(name, medians, GOALS.get(name, []), "goal")
    if name not in GOALS:
        print("  (no stated goal for this corpus)")
    return missed, check(name, medians, STRETCH, "stretch")


# -- local models: tool calls written as text -----------------------------------------

LOCAL_TOOLS = {"search": {"q": "string"}, "add": {"a": "integer", "b": "integer"}}
WORDS = ("tide", "bridge", "bread", "glacier", "compiler", "bee", "map", "river", "the")
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def hermes_corpus(n: int, seed: int = 5) -> bytes:
    """A chat stream whose content is prose with Hermes tool calls written in it, a
    token per chunk, as a local server without a tool parser sends it."""
    rng = random.Random(seed)
    pieces: list[str] = []
    while len(pieces) < n:
        pieces += [rng.choice(WORDS) + " " for _ in range(40)]
        call = orjson.dumps(
            {
                "name": "search",
                "arguments": {"q": " ".join(rng.choices(WORDS, k=8))},
            }
        ).decode()
        pieces += ["<tool_call>", "\n"] + [
            call[i : i + 4] for i in range(0, len(call), 4)
        ]
        pieces += ["\n", "</tool_call>", "\n"]
    head = b'data: {"id":"x","object":"chat.completion.chunk","model":"local","choices":[{"index":0,"delta":{"content":'
    tail = b'},"finish_reason":null}]}\n\n'
    body = [head + orjson.dumps(p) + tail for p in pieces]
    body.append(
        b'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    )
    body.append(b"data: [DONE]\n\n")
    return b"".join(body)


Calls = list[tuple[str, str]]


def navi_text_calls(
    module: ModuleType, chunks: list[bytes], scan: bool, http: bool = False
) -> Callable[[], Any]:
    """The chat parser fed the chunks (through the mock transport with ``http``, else
    directly); with ``scan``, inside ``TextCalls``."""

    def run() -> tuple[str, Calls]:
        text: list[str] = []
        names: dict[int, str] = {}
        args: defaultdict[int, list[str]] = defaultdict(list)
        p = module.OpenAIChatParser()
        if scan:
            p = module.TextCalls(p, "auto", LOCAL_TOOLS, ("<think>", "</think>"), 0)

        def take(deltas: list[tuple[Any, ...]]) -> None:
            for d in deltas:
                kind = d[0]
                if kind == TEXT:
                    text.append(d[1])
                elif kind == TOOL_ARGS:
                    args[d[1]].append(d[2])
                elif kind == TOOL_START:
                    names[d[1]] = d[3]

        if http:
            with response(chunks) as resp:
                for data in resp.iter_bytes():
                    take(p.feed(data))
        else:
            for data in chunks:
                take(p.feed(data))
        take(p.close())
        calls = [(names[k], "".join(args[k])) for k in sorted(names)]
        return "".join(text), calls

    return run


def regex_recovery(chunks: list[bytes]) -> Callable[[], Any]:
    """``httpx-sse`` + ``orjson`` accumulating the content, then a regex and
    ``orjson`` taking the calls out of it: recovery in pure Python, after the stream."""

    def run() -> tuple[str, Calls]:
        text: list[str] = []
        with response(chunks) as resp:
            for sse in EventSource(resp).iter_sse():
                if sse.data == "[DONE]":
                    break
                for choice in orjson.loads(sse.data).get("choices") or ():
                    content = choice["delta"].get("content")
                    if content:
                        text.append(content)
        content = "".join(text)
        calls: Calls = []
        for match in TOOL_CALL.finditer(content):
            obj = orjson.loads(match.group(1))
            calls.append((obj["name"], orjson.dumps(obj["arguments"]).decode()))
        return TOOL_CALL.sub("", content), calls

    return run


def local_models(n: int, rounds: int) -> list[str]:
    """The rows of the text-call scan; the goals missed."""
    plain = corpus.openai_text(n)
    plain_chunks = corpus.network_chunks(plain)
    runs = {
        "Cython parser": navi_text_calls(cy, plain_chunks, False),
        "Cython parser + text-call scan": navi_text_calls(cy, plain_chunks, True),
    }
    assert runs["Cython parser"]()[0] == runs["Cython parser + text-call scan"]()[0]
    medians = measure_plain(runs, rounds * 3)
    bare, scanned = medians["Cython parser"], medians["Cython parser + text-call scan"]
    share = scanned / bare - 1
    print(f"\nLocal models: OpenAI text, {len(plain) / 1e6:.2f} MB, no markup")
    for name, t in medians.items():
        print(f"  {name:<34}{t * 1e3:>10.2f} ms")
    missed = []
    verdict = "ok" if share <= 0.10 else "MISSED"
    print(f"  goal: the scan adds <= 10% to the parse time: {share:+.1%} {verdict}")
    _record.table(
        f"Local models: OpenAI text, {len(plain) / 1e6:.2f} MB, no markup",
        ["parser", "ms"],
        [[name, f"{t * 1e3:.2f}"] for name, t in medians.items()],
    )
    _record.goal(f"the text-call scan adds <= 10% ({share:+.1%})", share <= 0.10)
    if share > 0.10:
        missed.append(f"text-call scan adds {share:.1%} > 10%")
    body = hermes_corpus(n)
    chunks = corpus.network_chunks(body)
    runs = {
        "navi_core Cython, calls recovered": navi_text_calls(cy, chunks, True, True),
        "httpx-sse + orjson, then regex": regex_recovery(chunks),
    }
    got = {name: run() for name, run in runs.items()}
    ours, theirs = got.values()
    assert [(n_, orjson.loads(a)) for n_, a in ours[1]] == [
        (n_, orjson.loads(a)) for n_, a in theirs[1]
    ], "the recoveries disagree"
    medians = measure_plain(runs, rounds)
    print(
        f"\nLocal models: Hermes calls in content, {len(body) / 1e6:.2f} MB, "
        f"{len(ours[1])} calls"
    )
    for name, t in medians.items():
        print(f"  {name:<34}{t * 1e3:>10.2f} ms")
    ratio = (
        medians["httpx-sse + orjson, then regex"]
        / medians["navi_core Cython, calls recovered"]
    )
    verdict = "ok" if ratio >= 5 else "MISSED"
    _record.table(
        f"Local models: Hermes calls in content, {len(body) / 1e6:.2f} MB, "
        f"{len(ours[1])} calls",
        ["recovery", "ms"],
        [[name, f"{t * 1e3:.2f}"] for name, t in medians.items()],
    )
    _record.goal(
        f"calls recovered while streaming >= 5x regex ({ratio:.1f}x)", ratio >= 5
    )
    print(
        f"  goal: recovered while streaming >= 5x the regex recovery: {ratio:.1f}x {verdict}"
    )
    if ratio < 5:
        missed.append(f"text-call recovery {ratio:.1f}x < 5x")
    return missed


def measure_plain(runs: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds of each run, rounds interleaved."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 7")
    parser.add_argument("--chunks", type=int, default=20_000, help="deltas per corpus")
    parser.add_argument("--only", help="run the corpora whose name contains this")
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)
    rounds = 3 if args.quick else 7
    print(f"navi_core core parsers, median of {rounds} interleaved rounds")
    corpora = {
        "OpenAI text": ("openai", corpus.openai_text(args.chunks)),
        "OpenAI parallel tool calls": ("openai", corpus.openai_tool_calls(args.chunks)),
        "Anthropic thinking + text + tool_use": (
            "anthropic",
            corpus.anthropic_mixed(args.chunks),
        ),
        "Responses reasoning + text + function calls": (
            "responses",
            corpus.responses_mixed(args.chunks),
        ),
    }
    missed: list[str] = []
    stretch: list[str] = []
    for name, (kind, body) in corpora.items():
        if args.only and args.only.lower() not in name.lower():
            continue
        goals, stretches = report(name, kind, body, corpus.network_chunks(body), rounds)
        missed += goals
        stretch += stretches
    if not args.only or args.only.lower() in "local models":
        missed += local_models(args.chunks, rounds)
    print("\nall goals met" if not missed else "\nmissed: " + "; ".join(missed))
    print(
        "all stretch goals met"
        if not stretch
        else "stretch missed: " + "; ".join(stretch)
    )


if __name__ == "__main__":
    main()

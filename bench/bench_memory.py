"""Memory a kept conversation costs, and whether the body cache's limit holds in RSS.

Each measurement runs in a fresh process and reads its RSS (``VmRSS``, after
``gc.collect()``) before and after; the figure is the growth divided by the count.

- ``kept``: ``--k`` agents each run one turn against a loopback server (in its own
  process) that answers ``add(a=1, b=2)`` twice, then a 500-word answer, over
  OpenAI-compatible chat completions; the agents are kept. Against it, the floor: the
  same conversation as plain OpenAI-style dicts with their own strings, and
  pydantic-ai's kept result when it is installed.
- ``cache``: small messages, kept alive by the program as a conversation keeps them,
  are encoded until the cache has evicted many times over, with its byte limit set to
  ``--limit`` MiB; the same run with a cache that holds nothing gives the messages'
  own memory, and the difference, what the cache holds, is compared with the limit.
  (A message nothing else keeps alive costs the cache nothing: its entry goes with
  it.)

Goals: a kept conversation at most 3x the plain-dict floor (and at or below
pydantic-ai's); the cache's RSS growth at most 1.5x its limit. pydantic-ai's
``run_sync`` asks for a whole completion (no stream), which the server answers as
one JSON object. With the contenders in a virtual environment of their own (the one
``bench_import.py`` describes)::

    python bench/bench_memory.py
    python bench/bench_memory.py --k 500 --limit 64
    PYTHONPATH=. /tmp/venv-peers/bin/python bench/bench_memory.py
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import _record
import orjson

KEPT_GOAL = 3.0
CACHE_GOAL = 1.5
SYSTEM = "You are a helpful assistant."
PROMPT = "Add 1 and 2 twice, then explain."
WORDS = [f"word{i % 50} " for i in range(500)]


def rss_kb() -> int:
    gc.collect()
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# -- the loopback server (its own process) -------------------------------------------


def _sse(payloads: list[dict[str, Any]]) -> bytes:
    events = b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)
    return events + b"data: [DONE]\n\n"


def _reply(request: dict[str, Any]) -> bytes:
    calls = sum(1 for m in request["messages"] if m["role"] == "tool")
    if calls < 2:
        call = {
            "index": 0,
            "id": f"call_{calls + 1}",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        }
        return _sse(
            [
                {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            ]
        )
    deltas = [{"choices": [{"index": 0, "delta": {"content": w}}]} for w in WORDS]
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return _sse([*deltas, done])


def _completion(request: dict[str, Any]) -> bytes:
    """The same answer as one chat completion, for a request that does not stream
    (pydantic-ai's ``run_sync``)."""
    calls = sum(1 for m in request["messages"] if m["role"] == "tool")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(WORDS)}
    finish = "stop"
    if calls < 2:
        function = {"name": "add", "arguments": '{"a": 1, "b": 2}'}
        call = {"id": f"call_{calls + 1}", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }
    )


def requests(conn: socket.socket) -> Iterator[tuple[bytes, bytes]]:
    """Each request that comes on ``conn``: its request line and its body (keep-alive,
    bodies sized by content-length), until the client closes."""
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            data = conn.recv(65536)
            if not data:
                return
            buffer += data
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(buffer) < length:
            buffer += conn.recv(65536)
        body, buffer = buffer[:length], buffer[length:]
        yield head.partition(b"\r\n")[0], body


def _connection(conn: socket.socket) -> None:
    with conn:
        for _, body in requests(conn):
            request = orjson.loads(body)
            streamed = request.get("stream") is True
            payload = _reply(request) if streamed else _completion(request)
            kind = b"text/event-stream" if streamed else b"application/json"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\n"
                b"content-length: %d\r\n\r\n" % (kind, len(payload)) + payload
            )


@contextlib.contextmanager
def serving(script: str = __file__) -> Iterator[str]:
    """Run ``script --serve`` in its own process while the block runs; yields its
    root URL (``http://127.0.0.1:PORT``)."""
    server = subprocess.Popen(
        [sys.executable, script, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        yield f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


def serve() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print("PORT", listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_connection, args=(conn,), daemon=True).start()


# -- the measurements (each in its own process) --------------------------------------


@functools.cache
def _shared(url: str, inline: bool = False) -> tuple[Any, Any]:
    """The provider and the one ``add`` tool every agent of a run shares
    (``inline``: ``@tool(inline=True)``)."""
    from navi_core import OpenAIChat, tool

    @tool(inline=inline)
    def add(a: int, b: int) -> str:
        """Add two integers.

        Args:
            a: first.
            b: second.
        """
        return f"RZQ17 {a + b}"

    return OpenAIChat(model="m", base_url=url, api_key="x"), add


def navi_agent(url: str, inline: bool = False) -> Any:
    """An agent for the turn this script keeps and ``bench_syscalls.py`` counts:
    the ``add`` tool, against ``url``, its provider and tool shared."""
    from navi_core import Agent

    provider, add = _shared(url, inline)
    return Agent(provider, tools=[add], system=SYSTEM)


def kept_navi(url: str, k: int) -> float:
    for _ in navi_agent(url).run(PROMPT):
        pass  # warm: every module and lazy table loaded
    agents = []
    start = rss_kb()
    for _ in range(k):
        agent = navi_agent(url)
        for _ in agent.run(PROMPT):
            pass
        agents.append(agent)
    return (rss_kb() - start) / k


def kept_floor(url: str, k: int) -> float:
    del url
    call = '{"a": 1, "b": 2}'
    kept = []
    start = rss_kb()
    for i in range(k):
        kept.append(
            [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": PROMPT + ""},
                *[
                    message
                    for n in (1, 2)
                    for message in (
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": f"call_{n}",
                                    "type": "function",
                                    "function": {"name": "add", "arguments": call},
                                }
                            ],
                        },
                        {
                            "role": "tool",
                            "tool_call_id": f"call_{n}",
                            "content": "RZQ17 3",
                        },
                    )
                ],
                {"role": "assistant", "content": "".join(list(WORDS)) + str(i)},
            ]
        )
    return (rss_kb() - start) / k


def kept_pydantic_ai(url: str, k: int) -> float:
    from pydantic_ai import Agent  # type: ignore[import-not-found,unused-ignore]
    from pydantic_ai.models import (  # type: ignore[import-not-found,unused-ignore]
        openai as models,
    )
    from pydantic_ai.providers.openai import (  # type: ignore[import-not-found,unused-ignore]
        OpenAIProvider,
    )

    # OpenAIChatModel since 1.0; OpenAIModel, its name before, is gone in 2.0
    chat = getattr(models, "OpenAIChatModel", None) or models.OpenAIModel
    model = chat("m", provider=OpenAIProvider(base_url=url, api_key="x"))
    agent = Agent(model, system_prompt=SYSTEM)

    @agent.tool_plain  # type: ignore[untyped-decorator,unused-ignore]
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return f"RZQ17 {a + b}"

    agent.run_sync(PROMPT)
    kept = []
    start = rss_kb()
    for _ in range(k):
        kept.append(agent.run_sync(PROMPT))
    return (rss_kb() - start) / k


def cache_growth(limit_mib: int, cached: bool) -> tuple[float, int]:
    """RSS growth (KiB) while the body cache fills past a limit of ``limit_mib``
    (``cached``; else it holds nothing), encoding small messages that stay alive;
    messages encoded."""
    from navi_core import Message, Text
    from navi_core.providers import body_cache
    from navi_core.providers.base import ProviderRequest
    from navi_core.providers.openai_chat import OpenAIChat

    class Settings:
        max_output_tokens = None
        temperature = None
        coalesce_deltas = False

    limit = limit_mib << 20 if cached else 0
    body_cache.CACHE = body_cache.MessageCache(limit=1 << 30, max_bytes=limit)
    provider = OpenAIChat("m", "http://127.0.0.1:9/v1")
    settings = Settings()
    warm = (Message("user", (Text("warm"),)),)
    provider.encode_body(ProviderRequest(warm, None, (), settings))
    kept: list[Message] = []
    start = rss_kb()
    count = 0
    peak = 0
    while count < 8 * (limit_mib << 20) // 400:  # several times what fits
        for _ in range(10_000):
            message = Message("user", (Text(f"question number {count:>9}"),))
            kept.append(message)
            request = ProviderRequest((message,), None, (), settings)
            provider.encode_body(request)
            count += 1
        peak = max(peak, rss_kb() - start)
    return float(peak), count


CHILDREN = {
    "navi_core": kept_navi,
    "plain dicts": kept_floor,
    "pydantic-ai": kept_pydantic_ai,
}


def _child(argv: list[str]) -> None:
    kind = argv[0]
    if kind == "cache":
        print(json.dumps(cache_growth(int(argv[1]), argv[2] == "cached")))
        return
    print(json.dumps(CHILDREN[kind](argv[1], int(argv[2]))))


def _run(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return done.stderr.strip().splitlines()[-1] if done.stderr else "failed"
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve()
        return
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=1000, help="conversations kept")
    parser.add_argument("--limit", type=int, default=32, help="cache limit, MiB")
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)

    from navi_core.core import IMPLEMENTATION

    print(f"core: {IMPLEMENTATION}")
    with serving() as root:
        results = {kind: _run(kind, root + "/v1", str(args.k)) for kind in CHILDREN}
    floor = results["plain dicts"]
    print(f"kept conversation after one tool turn (RSS per conversation, k={args.k})")
    for kind, value in results.items():
        if isinstance(value, float):
            print(f"  {kind:<14} {value:7.2f} KiB  {value / floor:5.2f}x floor")
        else:
            print(f"  {kind:<14} not measured ({value})")
    _record.table(
        f"A conversation kept after one tool turn (RSS each, {args.k:,} kept)",
        ["kept as", "KiB each", "vs plain dicts"],
        [
            [kind, f"{value:.2f}", f"{value / floor:.2f}x"]
            for kind, value in results.items()
            if isinstance(value, float)
        ],
    )
    ours = results["navi_core"]
    if isinstance(ours, float):
        ratio = ours / floor
        verdict = "met" if ratio <= KEPT_GOAL else "missed"
        print(
            f"goal: kept <= {KEPT_GOAL}x the plain-dict floor: {ratio:.2f}x ({verdict})"
        )
        _record.goal(
            f"kept conversation <= {KEPT_GOAL}x plain dicts ({ratio:.2f}x)",
            ratio <= KEPT_GOAL,
        )
        theirs = results["pydantic-ai"]
        if isinstance(theirs, float):
            verdict = "met" if ours <= theirs else "missed"
            print(f"goal: kept <= pydantic-ai's: {ours / theirs:.2f}x ({verdict})")
            _record.goal(
                f"kept conversation <= pydantic-ai's ({ours / theirs:.2f}x)",
                ours <= theirs,
            )

    growth = _run("cache", str(args.limit), "cached")
    bare = _run("cache", str(args.limit), "empty")
    if isinstance(growth, list) and isinstance(bare, list):
        (peak, count), (floor_kb, _) = growth, bare
        held = peak - floor_kb
        ratio = held / (args.limit * 1024)
        verdict = "met" if ratio <= CACHE_GOAL else "missed"
        print(
            f"body cache, limit {args.limit} MiB, {count:,} small messages kept and "
            f"encoded: peak RSS growth {peak / 1024:.1f} MiB, "
            f"{floor_kb / 1024:.1f} MiB without the cache: the cache holds "
            f"{held / 1024:.1f} MiB = {ratio:.2f}x the limit"
        )
        print(f"goal: the cache's RSS <= {CACHE_GOAL}x the limit ({verdict})")
        _record.table(
            "The body cache's byte limit, measured by RSS",
            [
                "limit MiB",
                "messages kept and encoded",
                "RSS growth MiB",
                "without the cache",
                "the cache's share vs the limit",
            ],
            [
                [
                    f"{args.limit}",
                    f"{count:,}",
                    f"{peak / 1024:.1f}",
                    f"{floor_kb / 1024:.1f}",
                    f"{ratio:.2f}x",
                ]
            ],
        )
        _record.goal(
            f"body cache RSS <= {CACHE_GOAL}x its limit ({ratio:.2f}x)",
            ratio <= CACHE_GOAL,
        )
    else:
        print(f"body cache: not measured ({growth}, {bare})")


if __name__ == "__main__":
    main()

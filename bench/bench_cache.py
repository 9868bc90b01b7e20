"""Input tokens billed over a 10-iteration tool loop, with and without prompt caching.

An ``Agent`` on ``Anthropic(cache=True)`` and one on ``Anthropic(cache=False)`` run the
same turn against a loopback fake of the Messages API: nine ``read_file`` calls, each
answered with a few thousand tokens of source, then a final answer, under a 2,000-word
system prompt and three tools. The fake reports usage by the documented caching rules:

* the prompt is the prefix tools -> system -> messages, cut into content blocks;
* a ``cache_control`` block is a breakpoint; the prefix up to it is written to the cache
  (if it holds at least 1,024 tokens, the minimum of Claude Sonnet and Opus);
* a request reads the longest cached prefix that ends at a breakpoint or at one of the
  20 blocks before it (the API's look-back), everything after it is new input;
* prices relative to the base input price: cache writes 1.25x, cache reads 0.1x.

The usage comes back in ``message_start`` as ``input_tokens`` /
``cache_creation_input_tokens`` / ``cache_read_input_tokens``, exactly where the API
puts it, and is read by navi_core's own parser into ``Usage``. Token counts are
navi_core's ``estimate_tokens`` of each block's JSON.

Run: ``python bench/bench_cache.py``
"""

from __future__ import annotations

import hashlib
import random
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).absolute().parent.parent))  # a plain checkout

from navi_core import Agent, Anthropic, Config, MessageComplete, Usage, tool
from navi_core.core import estimate_tokens

__all__ = ["main"]

ITERATIONS = 10
MIN_CACHEABLE = 1024
LOOKBACK = 20
WRITE_PRICE, READ_PRICE = 1.25, 0.1
WORDS = ("request", "stream", "token", "value", "return", "module", "the", "of",
         "cache", "prefix", "parser", "session", "store", "retry", "error")  # fmt: skip


def prose(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def source(n: int) -> str:
    rng = random.Random(n)
    lines = [
        f"def f{i}(x):\n    return x * {rng.randrange(99)} + {i}\n" for i in range(260)
    ]
    return "".join(lines)


class PromptCache:
    """The fake's cache: hashes of prefixes written at breakpoints."""

    def __init__(self) -> None:
        self.entries: set[str] = set()
        self.lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(input, cache_write, cache_read) tokens of one request."""
        blocks = list(prefix_blocks(body))
        sizes, hashes, marks = [], [], []
        running = hashlib.sha256()
        for position, block in enumerate(blocks):
            if block.pop("cache_control", None) is not None:
                marks.append(position)
            running.update(orjson.dumps(block, option=orjson.OPT_SORT_KEYS))
            hashes.append(running.copy().hexdigest())
            sizes.append(estimate_tokens(orjson.dumps(block).decode()))
        total = sum(sizes)
        upto = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        with self.lock:
            read_end = -1
            for mark in marks:
                for j in range(mark, max(mark - LOOKBACK, -1), -1):
                    if hashes[j] in self.entries:
                        read_end = max(read_end, j)
                        break
            read = upto[read_end] if read_end >= 0 else 0
            write = 0
            cacheable = [m for m in marks if upto[m] >= MIN_CACHEABLE]
            if cacheable and cacheable[-1] > read_end:
                write = upto[cacheable[-1]] - read
                self.entries.update(hashes[m] for m in cacheable)
        return total - read - write, write, read


def prefix_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The prompt in cache order, as blocks (copies: the caller may change them)."""
    for spec in body.get("tools", ()):
        yield dict(spec)
    system = body.get("system")
    if isinstance(system, str):
        yield {"type": "text", "text": system}
    elif system:
        yield from (dict(b) for b in system)
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for i, block in enumerate(content):
            yield {**block, "role": message["role"]} if i == 0 else dict(block)


def sse(kind: str, obj: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def reply(body: dict[str, Any], cache: PromptCache) -> bytes:
    fresh, write, read = cache.usage(body)
    step = sum(1 for m in body["messages"] if m["role"] == "assistant")
    usage = {"input_tokens": fresh, "cache_creation_input_tokens": write,
             "cache_read_input_tokens": read, "output_tokens": 1}  # fmt: skip
    message = {"id": f"msg_{step}", "type": "message", "role": "assistant",
               "model": body["model"], "content": [], "usage": usage}  # fmt: skip
    out = [sse("message_start", {"type": "message_start", "message": message})]
    if step < ITERATIONS - 1:
        block = {
            "type": "tool_use",
            "id": f"toolu_{step:02d}",
            "name": "read_file",
            "input": {},
        }
        args = orjson.dumps({"path": f"src/module_{step}.py"}).decode()
        delta = {"type": "input_json_delta", "partial_json": args}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": "Reviewed all nine modules."}
        stop = "end_turn"
    out.append(
        sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
    )
    out.append(
        sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": delta},
        )
    )
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop},
                "usage": {"output_tokens": 20},
            },
        )
    )
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def serve() -> tuple[ThreadingHTTPServer, PromptCache]:
    cache = PromptCache()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = orjson.loads(self.rfile.read(int(self.headers["content-length"])))
            data = reply(body, cache)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, cache


@tool
def read_file(path: str) -> str:
    """Read a source file of the project under review.

    Args:
        path: the file, relative to the project root.
    """
    return source(len(path))


@tool
def list_files(directory: str) -> list[str]:
    """List the files of a directory of the project under review.

    Args:
        directory: the directory, relative to the project root.
    """
    return [f"{directory}/module_{i}.py" for i in range(9)]


@tool
def note(text: str) -> str:
    """Keep a review note for the final report.

    Args:
        text: the note.
    """
    return "noted"


def run(cache: bool) -> list[Usage]:
    server, _ = serve()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with Anthropic(
            "claude-sonnet-4-5", url, "sk-ant-bench", cache=cache
        ) as provider:
            agent = Agent(
                provider,
                tools=[read_file, list_files, note],
                system=prose(2000, 1),
                config=Config(max_iterations=ITERATIONS + 1),
            )
            with agent.run("Review every module of src/ one by one.") as stream:
                usages = [e.usage for e in stream if isinstance(e, MessageComplete)]
            agent.close()
    finally:
        server.shutdown()
        server.server_close()
    return usages


def billed(u: Usage) -> float:
    return u.input + WRITE_PRICE * u.cache_write + READ_PRICE * u.cache_read


def main() -> None:
    plain, cached = run(cache=False), run(cache=True)
    assert len(plain) == len(cached) == ITERATIONS, (len(plain), len(cached))
    print(
        f"Input tokens over a {ITERATIONS}-iteration tool loop (loopback fake of the Messages API)"
    )
    print(
        f"{'iteration':>9} {'prompt':>8} | {'no cache':>9} | {'input':>7} {'write':>7} {'read':>7} {'billed':>9}"
    )
    for i, (p, c) in enumerate(zip(plain, cached, strict=True), 1):
        print(
            f"{i:>9} {p.prompt_total:>8} | {billed(p):>9.0f} | {c.input:>7} {c.cache_write:>7} {c.cache_read:>7} {billed(c):>9.0f}"
        )
    total_plain = sum(billed(u) for u in plain)
    total_cached = sum(billed(u) for u in cached)
    print(
        f"\nbilled input tokens: {total_plain:,.0f} without caching, {total_cached:,.0f} with cache=True"
    )
    print(
        f"caching bills {total_cached / total_plain:.1%} of the input ({total_plain / total_cached:.1f}x fewer)"
    )


if __name__ == "__main__":
    main()

"""MCP call overhead: navi_core's synchronous client beside the official SDK's client.

One server (``tests/mcp_server.py``, written with the official ``mcp`` package) per
contender, transport and protocol revision (2026-07-28, stateless; 2025-11-25, the
initialize handshake: both sides pinned to the same one); every contender makes the
same ``tools/call`` of ``add``:

* navi_core: ``MCPTools.call_batch([call])``, one call at a time, from plain sync code;
  and batches of 10 calls (what the dispatcher hands a source for one response);
* the SDK: ``Client.call_tool`` awaited in a loop inside ``asyncio.run`` (its own
  home ground);
* the SDK driven from sync code: the session on a private event-loop thread, each call
  sent with ``run_coroutine_threadsafe(...).result()`` (what a synchronous library
  built on the SDK would do).

Rounds are interleaved; the figure is calls per second (median round), and the ratio
is navi_core's rate over each other's. Run: ``python bench/bench_mcp.py`` (``--quick``
for fewer calls). The whole run takes well under a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import _record
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from navi_core.mcp import MCPTools
from navi_core.tools import ToolCall

SERVER = str(Path(__file__).resolve().parent.parent / "tests" / "mcp_server.py")
ARGS = {"a": 20, "b": 22}
#: the revisions measured, and the SDK ``Client`` mode that pins each
REVISIONS = {"2026-07-28": "2026-07-28", "2025-11-25": "legacy"}


@contextlib.asynccontextmanager
async def sdk_session(url: str | None, revision: str) -> AsyncIterator[Client]:
    """A connected SDK client over stdio (``url`` None) or streamable HTTP."""
    if url is None:
        params = StdioServerParameters(command=sys.executable, args=[SERVER])
        transport: Any = stdio_client(params)
    else:
        transport = streamable_http_client(url)
    async with Client(transport, mode=REVISIONS[revision]) as client:
        assert client.protocol_version == revision
        yield client


class LoopThread:
    """The SDK session on a private event loop, called from sync code."""

    def __init__(self, url: str | None, revision: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        self.session: Client | None = None
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self.main(url, revision),)
        )
        self.thread.start()
        self.ready.wait(30)

    async def main(self, url: str | None, revision: str) -> None:
        self.stop = asyncio.Event()
        async with sdk_session(url, revision) as session:
            self.session = session
            self.ready.set()
            await self.stop.wait()

    def call(self) -> Any:
        assert self.session is not None
        coro = self.session.call_tool("add", ARGS)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)
        self.loop.close()


def rate(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    fn()
    return calls / (time.perf_counter() - start)


def sdk_async_round(url: str | None, revision: str, calls: int) -> float:
    async def main() -> float:
        async with sdk_session(url, revision) as session:
            await session.call_tool("add", ARGS)  # warm
            start = time.perf_counter()
            for _ in range(calls):
                result = await session.call_tool("add", ARGS)
                assert not getattr(result, "is_error", False)
            return calls / (time.perf_counter() - start)

    return asyncio.run(main())


@contextlib.contextmanager
def http_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def bench(label: str, url: str | None, revision: str, calls: int, rounds: int) -> None:
    if url:
        tools = MCPTools(url=url, protocol=revision)
    else:
        tools = MCPTools([sys.executable, SERVER], protocol=revision)
    assert tools.protocol_version == revision
    bridge = LoopThread(url, revision)
    one = [ToolCall("c", "add", ARGS)]
    ten = one * 10
    try:
        tools.call_batch(one)
        bridge.call()
        results: dict[str, list[float]] = {
            k: [] for k in ("navi", "navi10", "sdk", "bridge")
        }
        for _ in range(rounds):
            results["navi"].append(
                rate(lambda: [tools.call_batch(one) for _ in range(calls)], calls)
            )
            results["navi10"].append(
                rate(lambda: [tools.call_batch(ten) for _ in range(calls // 10)], calls)
            )
            results["sdk"].append(sdk_async_round(url, revision, calls))
            results["bridge"].append(
                rate(lambda: [bridge.call() for _ in range(calls)], calls)
            )
    finally:
        tools.close()
        bridge.close()
    med = {k: statistics.median(v) for k, v in results.items()}
    print(
        f"\n{label}, protocol {revision}: calls/s, median of {rounds} rounds "
        f"of {calls} calls"
    )
    rows = [
        ("navi_core MCPTools, one call per batch", "navi"),
        ("navi_core MCPTools, batches of 10", "navi10"),
        ("official SDK Client, async loop", "sdk"),
        ("official SDK on a private loop thread, from sync", "bridge"),
    ]
    for text, key in rows:
        print(
            f"  {text:<50} {med[key]:>8.0f}   navi/this {med['navi'] / med[key]:.2f}x"
        )
    _record.table(
        f"{label}, protocol {revision}: tools/call per second",
        ["client", "calls/s", "navi_core (one per batch) / this"],
        [
            [text, f"{med[key]:,.0f}", f"{med['navi'] / med[key]:.2f}x"]
            for text, key in rows
        ],
        f"median of {rounds} rounds of {calls} calls",
    )
    for key in ("sdk", "bridge"):
        _record.goal(
            f"{label} {revision}: navi_core >= the SDK ({'async' if key == 'sdk' else 'from sync'}): "
            f"{med['navi'] / med[key]:.2f}x",
            med["navi"] >= med[key],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    _record.add_option(parser)
    opts = parser.parse_args()
    _record.start(opts)
    calls, rounds = (100, 2) if opts.quick else (300, 3)
    for revision in REVISIONS:
        bench("stdio", None, revision, calls, rounds)
        with http_server() as url:
            bench("streamable HTTP", url, revision, calls // 3, rounds)


if __name__ == "__main__":
    main()

"""Session store throughput: appends per second and the load time of a long session.

    python bench/bench_store.py [--appends 300] [--turns 200] [--messages 10000]

Measures, in one run and on the same messages: single-message appends per second,
whole-turn appends per second (an assistant message with tool calls plus its tool
results, one ``append``), and the time ``load`` takes on a session of ``--messages``
messages. MemoryStore is the append baseline; load time is compared with decoding
the same number of stored bodies, the floor for any store that persists. SQLite runs
with ``synchronous=FULL`` (the default) and ``NORMAL``. PostgreSQL runs when
``NAVI_BENCH_POSTGRES_DSN`` or ``NAVI_TEST_POSTGRES_DSN`` is set, in a throwaway
schema; its ``fsync`` setting is printed, since it decides commit cost. Commit costs
depend on the disk and on other load: compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).absolute().parent.parent))  # a plain checkout

import _record

from navi_core import codec
from navi_core.conversation import (
    Message,
    Text,
    TextPart,
    ToolResult,
    ToolUse,
    Usage,
    UserMessage,
    WireIdentity,
)
from navi_core.store import MemoryStore, SessionStore, SQLiteStore

__all__ = ["main"]

WIRE = WireIdentity("openai_chat", "http://127.0.0.1:11434/v1", "qwen2.5")
PROMPT = UserMessage("Summarise the error handling in the HTTP client module. " * 3)
ASSISTANT = Message(
    "assistant",
    (
        Text("I will read the three files first."),
        ToolUse("call_1", "read_file", '{"path": "navi_core/providers/_http.py"}'),
        ToolUse("call_2", "read_file", '{"path": "navi_core/errors.py"}'),
        ToolUse("call_3", "grep", '{"pattern": "raise .*Error", "path": "navi_core"}'),
    ),
    Usage(1843, 96, 1024, 0, 0),
    "tool_use",
    WIRE,
)
RESULTS = Message(
    "user",
    tuple(
        ToolResult(f"call_{i}", (TextPart("line of source code\n" * 40),))
        for i in (1, 2, 3)
    ),
    wire=WIRE,
)

#: the session that load time is measured on repeats this turn
TURN = (PROMPT, ASSISTANT, RESULTS, Message("assistant", (Text("done"),), wire=WIRE))


def _best_rate(fn: Callable[[], None], n: int, repeats: int = 3) -> float:
    """Operations per second: the best of ``repeats`` runs of ``n`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def _load_seconds(store: SessionStore, messages: int) -> float:
    sid = store.create().id
    for _ in range(messages // len(TURN)):
        store.append(sid, TURN)
    assert len(store.load(sid).messages) == messages - messages % len(TURN)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        store.load(sid)
        times.append(time.perf_counter() - start)
    return min(times)


def _decode_seconds(messages: int) -> float:
    """The floor of any persistent load: decoding ``messages`` stored bodies."""
    bodies = [codec.encode(m) for m in TURN] * (messages // len(TURN))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for b in bodies:
            codec.decode(b)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(
    store: SessionStore, args: argparse.Namespace
) -> tuple[float, float, float]:
    """(single appends/s, turn appends/s, load seconds) for one store."""
    sid = store.create().id
    single = _best_rate(lambda: store.append(sid, [PROMPT]), args.appends)
    turn = _best_rate(lambda: store.append(sid, [ASSISTANT, RESULTS]), args.turns)
    return single, turn, _load_seconds(store, args.messages)


@contextmanager
def _postgres(dsn: str) -> Iterator[tuple[SessionStore, str]]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    from navi_core.store.postgres import PostgresStore

    schema = f"navi_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        row = conn.execute("SHOW fsync").fetchone()
    try:
        with PostgresStore(make_conninfo(dsn, options=f"-c search_path={schema}")) as s:
            yield s, f"fsync={row[0] if row else '?'}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--messages", type=int, default=10_000)
    _record.add_option(parser)
    args = parser.parse_args(argv)
    _record.start(args)

    rows: list[tuple[str, tuple[float, float, float]]] = []
    rows.append(("MemoryStore", measure(MemoryStore(), args)))
    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("FULL", "NORMAL"):
            with SQLiteStore(Path(tmp) / f"{sync}.db", synchronous=sync) as s:
                rows.append((f"SQLiteStore synchronous={sync}", measure(s, args)))
    dsn = os.environ.get("NAVI_BENCH_POSTGRES_DSN") or os.environ.get(
        "NAVI_TEST_POSTGRES_DSN"
    )
    if dsn:
        with _postgres(dsn) as (pg, setting):
            rows.append((f"PostgresStore ({setting})", measure(pg, args)))
    else:
        print("PostgreSQL skipped: set NAVI_BENCH_POSTGRES_DSN", file=sys.stderr)

    base, decode = rows[0][1], _decode_seconds(args.messages)
    print(
        f"{args.appends} single appends, {args.turns} turn appends (assistant with 3 "
        f"tool calls + results), load of a {args.messages}-message session\n"
    )
    print(
        f"{'store':<34} {'appends/s':>10} {'vs mem':>8} {'turns/s':>9} {'vs mem':>8} "
        f"{'load ms':>8} {'vs decode':>9}"
    )
    for name, (single, turn, load) in rows:
        print(
            f"{name:<34} {single:>10.0f} {base[0] / single:>7.1f}x {turn:>9.0f} "
            f"{base[1] / turn:>7.1f}x {load * 1000:>8.1f} {load / decode:>8.2f}x"
        )
    _record.table(
        f"{args.appends} single appends, {args.turns} turn appends, load of a "
        f"{args.messages:,}-message session",
        ["store", "appends/s", "vs mem", "turns/s", "vs mem", "load ms", "vs decode"],
        [
            [name, f"{single:,.0f}", f"{base[0] / single:.1f}x", f"{turn:,.0f}",
             f"{base[1] / turn:.1f}x", f"{load * 1000:.1f}", f"{load / decode:.2f}x"]
            for name, (single, turn, load) in rows
        ],
        "vs mem: times slower than MemoryStore; vs decode: load time over decoding "
        "the stored bodies, the floor for any store that persists",
    )  # fmt: skip
    print(
        "\nvs mem: times slower than MemoryStore (in-process list) in this run\n"
        f"vs decode: load time over codec.decode of {args.messages} stored bodies "
        f"({decode * 1000:.1f} ms, the floor for any store that persists)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

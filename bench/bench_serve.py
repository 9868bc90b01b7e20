"""Load test of ``navi-core serve``: what the service adds per event and per turn.

A fake model (``bench/server.py``, its own process) answers every request with the
same OpenAI stream of ``--chunks`` text chunks. The same turns run twice:

- direct: ``Agent.run`` + ``next()`` in this process on a SQLite store (the floor);
- served: ``POST /v1/sessions/{id}/turns`` against ``navi-core serve`` under gunicorn
  (``--workers``, ``--threads``), one session per turn, read as SSE.

At concurrency 1 the difference is the latency the service adds: per turn (a served
turn includes its ``POST /v1/sessions``, as a direct one creates its session), to the
first event, and per event after the first (the pace of the stream). Then ``--concurrency`` clients run ``--turns`` turns at once:
turns/s per worker, p50/p99 turn latency, and every session is read back to check that
no message was lost or doubled.

    python bench/bench_serve.py [--chunks 300] [--turns 200] [--concurrency 8]
    source .ci/postgres.sh && python bench/bench_serve.py --postgres "$NAVI_TEST_POSTGRES_DSN"
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from navi_core import Agent, SQLiteStore
from navi_core.core import SSEDecoder
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.base import SessionStore

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKEN = "bench-token"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def fake_model(chunks: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "server.py"), "--chunks", str(chunks)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@contextmanager
def served(
    model_url: str,
    store_args: list[str],
    workers: int,
    threads: int,
    pin: bool = False,
) -> Iterator[str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, NAVI_SERVE_TOKENS=TOKEN, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "navi_core", "serve", "--bind", f"127.0.0.1:{port}"]
    cmd += ["--model", "gpt-4o", "--base-url", model_url, *store_args]
    cmd += ["--workers", str(workers), "--threads", str(threads)]
    cmd += ["--pin-workers"] if pin else []
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(url + "/openapi.json", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def direct_turn(provider: OpenAIChat, store: SessionStore) -> tuple[float, float, int]:
    """(seconds to the first event, seconds for the turn, events)."""
    t0 = time.perf_counter()
    first = 0.0
    n = 0
    with Agent(provider, store=store) as agent, agent.run("Tell me a story.") as s:
        while s.next() is not None:
            if n == 0:
                first = time.perf_counter() - t0
            n += 1
    return first, time.perf_counter() - t0, n


def served_turn(client: httpx.Client) -> tuple[float, float, int, str]:
    """(seconds to the first event, seconds for the turn, events, session id)."""
    t0 = time.perf_counter()
    sid = client.post("/v1/sessions", json={}).json()["id"]
    decoder = SSEDecoder()
    first = 0.0
    n = 0
    last = ""
    with client.stream(
        "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "Tell me a story."}
    ) as r:
        assert r.status_code == 200, r.read()
        for chunk in r.iter_raw():
            for ev in decoder.feed(chunk):
                if n == 0:
                    first = time.perf_counter() - t0
                n += 1
                last = ev.event
    assert last == "TurnComplete", last
    return first, time.perf_counter() - t0, n, sid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--chunks", type=int, default=300, help="text chunks per answer"
    )
    parser.add_argument("--turns", type=int, default=200, help="turns under load")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--pin-workers", action="store_true", help="navi-core serve --pin-workers"
    )
    parser.add_argument("--single", type=int, default=40, help="turns at concurrency 1")
    parser.add_argument(
        "--postgres", metavar="DSN", help="PostgreSQL for both paths instead of SQLite"
    )
    args = parser.parse_args()

    # SQLite files on tmpfs when there is one: an fsync per commit would otherwise
    # dominate both paths and hide what the service itself costs
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with (
        tempfile.TemporaryDirectory(dir=shm) as tmp,
        fake_model(args.chunks) as model_url,
    ):
        provider = OpenAIChat("gpt-4o", base_url=model_url, api_key="x")
        store: SessionStore
        if args.postgres:
            from navi_core.store.postgres import PostgresStore

            store = PostgresStore(args.postgres)
            store_args = ["--postgres", args.postgres]
            where = "PostgreSQL"
        else:
            store = SQLiteStore(Path(tmp) / "direct.db")
            store_args = ["--db", str(Path(tmp) / "served.db")]
            where = f"SQLite on {shm or 'disk'}"
        for _ in range(3):
            direct_turn(provider, store)
        direct = [direct_turn(provider, store) for _ in range(args.single)]
        store.close()
        provider.close()

        with served(
            model_url, store_args, args.workers, args.threads, args.pin_workers
        ) as url:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
                for _ in range(3):
                    served_turn(c)
                single = [served_turn(c) for _ in range(args.single)]

            results: list[tuple[float, float, int, str]] = []
            lock = threading.Lock()
            todo = iter(range(args.turns))

            def worker() -> None:
                with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
                    while True:
                        with lock:
                            if next(todo, None) is None:
                                return
                        r = served_turn(c)
                        with lock:
                            results.append(r)

            t0 = time.perf_counter()
            threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0

            lost = 0
            with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
                for *_, sid in results:
                    msgs = c.get(f"/v1/sessions/{sid}/messages").json()["messages"]
                    roles = [m["role"] for m in msgs]
                    lost += roles != ["user", "assistant"]

    events = direct[0][2]
    d_turn = [t for _, t, _ in direct]
    s_turn = [t for _, t, _, _ in single]
    d_first = statistics.median(f for f, _, _ in direct)
    s_first = statistics.median(f for f, _, _, _ in single)
    added50 = pct(s_turn, 0.5) - pct(d_turn, 0.5)
    added99 = pct(s_turn, 0.99) - pct(d_turn, 0.99)
    load = [t for _, t, _, _ in results]
    print(
        f"navi-core serve: {args.workers} workers x {args.threads} threads"
        f"{' (pinned)' if args.pin_workers else ''}, "
        f"{events} events per turn ({args.chunks} text chunks), {where}"
    )
    print()
    print("| concurrency 1 | direct Agent.run | served (SSE over HTTP) | added |")
    print("|---|---|---|---|")
    print(
        f"| turn p50 | {pct(d_turn, 0.5) * 1e3:.2f} ms | {pct(s_turn, 0.5) * 1e3:.2f} ms | {added50 * 1e3:.2f} ms |"
    )
    print(
        f"| turn p99 | {pct(d_turn, 0.99) * 1e3:.2f} ms | {pct(s_turn, 0.99) * 1e3:.2f} ms | {added99 * 1e3:.2f} ms |"
    )
    # after the first event: the pace of the stream itself, per event
    d_ev = [(t - f) / (n - 1) for f, t, n in direct]
    s_ev = [(t - f) / (n - 1) for f, t, n, _ in single]
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        print(
            f"| per event after the first, {name} | {pct(d_ev, q) * 1e6:.2f} µs | "
            f"{pct(s_ev, q) * 1e6:.2f} µs | {(pct(s_ev, q) - pct(d_ev, q)) * 1e6:.2f} µs |"
        )
    print(
        f"| first event p50 | {d_first * 1e3:.2f} ms | {s_first * 1e3:.2f} ms | {(s_first - d_first) * 1e3:.2f} ms |"
    )
    print()
    print(
        f"under load: {args.turns} turns, {args.concurrency} concurrent clients: "
        f"{len(results) / wall:.0f} turns/s ({len(results) / wall / args.workers:.0f} per worker), "
        f"{len(results) * events / wall:,.0f} events/s; turn p50 {pct(load, 0.5) * 1e3:.1f} ms, "
        f"p99 {pct(load, 0.99) * 1e3:.1f} ms; sessions with a lost or doubled message: {lost}"
    )
    print(
        f"goal: zero lost messages: {'met' if lost == 0 and len(results) == args.turns else 'NOT met'}"
    )


if __name__ == "__main__":
    main()

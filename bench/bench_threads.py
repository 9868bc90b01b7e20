"""Many streams in one process: aggregate throughput and latency as threads grow.

A loopback server in its own process (``bench/server.py``) answers every request with
the same 2,000-chunk chat-completions stream. T threads (1, 8, 64, 256 by default) each
own one provider and run whole turns back to back, a new ``Agent`` per turn, consuming
with ``for ev in agent.run(...)``, about ``--events`` events per point in all (at least
one turn per thread); beside them, the official ``openai`` SDK on the same threads and
server (one client per thread, chunks iterated) for ``--window`` seconds per point, the
turn open at its end cut short (its turns take 0.3 s each alone). Per T, over rounds
that visit every T in turn:

* aggregate events/s (events seen by all consumers / time), the median over rounds,
  and the median of each round's ratio to T=1 of the same contender;
* p50/p99/p99.9 inter-event latency: the time between consecutive events of one turn
  as its consumer sees them. Every ``SAMPLE``-th turn of each thread (every turn of the
  SDK's) records ``time.perf_counter_ns()`` into a preallocated list, one store per
  event, so the recording costs little and nothing in the other turns;
* CPU µs per event: the process's CPU time (all threads) over the events.

Beside them, in the same rounds, the loop alone: the same turns on ``prebuilt.Prebuilt``
(no network, nothing to parse), so "vs T=1" of navi_core over that of the loop alone
tells what the network path adds as threads grow; and a plain Python generator (none
of navi_core's loop: one ``TextDelta`` built per chunk, its text kept), which tells
what any Python loop loses in that many threads.

The machine's cores are shared with the server process, so read the ratios, and run it
twice. Every thread that waits for the GIL wakes each switch interval (5 ms) to ask for
it, and the holder is made to give it up, so 63 waiting threads mean thousands of futex
wake-ups and thread switches a second (``strace -f -c``: ~40,000 futex calls for 128
turns at 64 threads, 130 at 1). ``--switch-interval 1`` shows what a host that sets a
longer interval gets.

Run: ``python bench/bench_threads.py`` (``--quick`` for one smaller round, ``--threads
1,8,64`` to choose T, ``--no-sdk`` to skip the openai SDK, ``--switch-interval S`` to
run with ``sys.setswitchinterval(S)``, ``--pin CPU`` to run this process's threads on
one CPU and the server on the others).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prebuilt import Prebuilt
from server import spawn as server

from navi_core import Agent, NullStore, TextDelta
from navi_core.core import IMPLEMENTATION
from navi_core.providers.openai_chat import OpenAIChat

HERE = Path(__file__).resolve().parent
MODEL_O = "gpt-4o-2024-08-06"
PROMPT: Any = [{"role": "user", "content": "Tell me a long story."}]

CHUNKS = 2_000
SAMPLE = 4  # every SAMPLE-th turn of a thread records its event times
_STAMPS = CHUNKS + 64  # a turn's events: the chunks, start, usage, finish


@dataclass
class Result:
    """What one contender did with T threads in one window."""

    threads: int
    events: int
    seconds: float
    turns: int
    gaps_ns: list[int]
    cpu: float  # seconds of this process's CPU (all threads) during the window

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    def quantile(self, q: float) -> float:
        """The q-quantile of the inter-event gaps, in microseconds."""
        if not self.gaps_ns:
            return float("nan")
        gaps = sorted(self.gaps_ns)
        return gaps[min(len(gaps) - 1, int(q * len(gaps)))] / 1000


# A contender: given the base URL, a per-thread factory; the factory builds the thread's
# client and returns one turn, an iterator of events (whatever the consumer sees).
Contender = Callable[[str], Callable[[], Callable[[], Iterator[Any]]]]


def navi(url: str) -> Callable[[], Callable[[], Iterator[Any]]]:
    def per_thread() -> Callable[[], Iterator[Any]]:
        provider = OpenAIChat(MODEL_O, base_url=url + "/v1", api_key="sk-bench")

        def turn() -> Iterator[Any]:
            return iter(Agent(provider, store=NullStore()).run(PROMPT[0]["content"]))

        return turn

    return per_thread


def loop_alone(url: str) -> Callable[[], Callable[[], Iterator[Any]]]:
    """The same turns with no network: ``prebuilt.Prebuilt`` deltas, 64 per simulated
    read (about what a 16 KiB slice of this server's body holds)."""

    def per_thread() -> Callable[[], Iterator[Any]]:
        provider = Prebuilt(CHUNKS, per_read=64)

        def turn() -> Iterator[Any]:
            return iter(Agent(provider, store=NullStore()).run(PROMPT[0]["content"]))

        return turn

    return per_thread


def plain_python(url: str) -> Callable[[], Callable[[], Iterator[Any]]]:
    """None of navi_core's loop: a generator that builds one ``TextDelta`` per chunk
    and keeps its text, what the simplest Python consumer of a stream does. What it
    loses as threads grow, any Python loop in that many threads loses."""

    def turn() -> Iterator[Any]:
        parts = []
        for _ in range(CHUNKS + 3):
            parts.append("abcd")
            yield TextDelta("abcd")
        "".join(parts)

    return lambda: turn


def openai_sdk(url: str) -> Callable[[], Callable[[], Iterator[Any]]]:
    import openai

    def per_thread() -> Callable[[], Iterator[Any]]:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

        def turn() -> Iterator[Any]:
            return iter(
                client.chat.completions.create(
                    model=MODEL_O,
                    messages=PROMPT,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )

        return turn

    return per_thread


class Crew:
    """``threads`` consumers of one contender, each with its own client, kept across
    runs (a client can take tens of ms to build: that is not what is measured)."""

    def __init__(
        self, contender: Contender, url: str, threads: int, *, sample: int = SAMPLE
    ) -> None:
        self.threads = threads
        self._sample = sample
        self._quota = 0
        self._per_thread = contender(url)
        self._start = threading.Barrier(threads + 1)
        self._done = threading.Barrier(threads + 1)
        self._deadline = 0
        self._stop = False
        self._counts = [0] * threads
        self._turns = [0] * threads
        self._gaps: list[list[int]] = [[] for _ in range(threads)]
        self._errors: list[BaseException] = []
        self._built = threading.Barrier(threads + 1)
        self._workers = [
            threading.Thread(target=self._work, args=(k,), daemon=True)
            for k in range(threads)
        ]
        for w in self._workers:
            w.start()
        self._built.wait()
        if self._errors:
            raise RuntimeError("a client could not be built") from self._errors[0]

    def window(self, seconds: float) -> Result:
        """Run every consumer for ``seconds``; the events seen inside the window (the
        turn open at its end is cut short there)."""
        return self._run(seconds, 0)

    def turns(self, turns: int) -> Result:
        """Every consumer runs ``turns`` whole turns; the time until the last ends."""
        return self._run(None, turns)

    def _run(self, seconds: float | None, turns: int) -> Result:
        self._quota = turns
        self._counts = [0] * self.threads
        self._turns = [0] * self.threads
        self._gaps = [[] for _ in range(self.threads)]
        gc.collect()
        cpu = time.process_time()
        start = time.perf_counter_ns()
        forever = 1 << 62
        self._deadline = forever if seconds is None else start + int(seconds * 1e9)
        self._start.wait()
        self._done.wait()
        end = time.perf_counter_ns()
        if self._errors:
            raise RuntimeError(f"{len(self._errors)} thread(s) failed") from (
                self._errors[0]
            )
        return Result(
            self.threads,
            sum(self._counts),
            (end - start if seconds is None else max(end, self._deadline) - start)
            / 1e9,
            sum(self._turns),
            [g for part in self._gaps for g in part],
            time.process_time() - cpu,
        )

    def stop(self) -> None:
        self._stop = True
        self._start.wait()
        for w in self._workers:
            w.join()

    def _work(self, k: int) -> None:
        try:
            turn = self._per_thread()
        except BaseException as exc:  # reported by __init__
            self._errors.append(exc)
        self._built.wait()
        ns = time.perf_counter_ns
        stamps = [0] * _STAMPS
        t = k  # threads sample different turns, so sampling is spread in time
        while True:
            self._start.wait()
            if self._stop:
                return
            deadline, quota, sample = self._deadline, self._quota, self._sample
            mine: list[int] = []
            n = turns = 0
            try:
                while ns() < deadline and (not quota or turns < quota):
                    events = turn()
                    i = 0
                    if t % sample == 0:
                        for _ in events:
                            stamps[i] = ns()
                            i += 1
                            if i == _STAMPS or stamps[i - 1] > deadline:
                                break
                        mine.extend(stamps[j] - stamps[j - 1] for j in range(1, i))
                    else:
                        for _ in events:
                            i += 1
                            if not i & 127 and ns() > deadline:
                                break
                    close = getattr(events, "close", None)
                    if close is not None:
                        close()
                    n += i
                    t += 1
                    turns += 1
            except BaseException as exc:
                self._errors.append(exc)
            self._counts[k], self._turns[k], self._gaps[k] = n, turns, mine
            self._done.wait()


def _merge(parts: list[Result]) -> Result:
    return Result(
        parts[0].threads,
        sum(r.events for r in parts),
        sum(r.seconds for r in parts),
        sum(r.turns for r in parts),
        [g for r in parts for g in r.gaps_ns],
        sum(r.cpu for r in parts),
    )


def _table(name: str, rounds: dict[int, list[Result]]) -> None:
    """Per T: median events/s over rounds, the median of each round's ratio to T=1,
    and the gaps of all rounds pooled."""
    base = rounds.get(1)
    print(f"\n{name}")
    print(
        f"{'threads':>8} {'events/s':>11} {'vs T=1':>7} {'turns':>6}"
        f" {'p50 µs':>8} {'p99 µs':>9} {'p99.9 µs':>10} {'CPU µs/ev':>10}"
    )
    for threads, parts in rounds.items():
        rate = statistics.median(r.rate for r in parts)
        if base is None:
            ratio = "     -"
        else:
            ratio = f"{statistics.median(r.rate / b.rate for r, b in zip(parts, base, strict=True)):6.2f}x"
        pooled = _merge(parts)
        print(
            f"{threads:>8} {rate:>11,.0f} {ratio:>7} {pooled.turns:>6}"
            f" {pooled.quantile(0.5):>8.1f} {pooled.quantile(0.99):>9.1f}"
            f" {pooled.quantile(0.999):>10.1f} {1e6 * pooled.cpu / pooled.events:>10.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, smaller rounds")
    parser.add_argument("--threads", default="1,8,64,256", help="comma-separated T")
    parser.add_argument("--rounds", type=int, help="rounds (each T once per round)")
    parser.add_argument(
        "--events", type=int, help="navi_core: events per point (whole turns)"
    )
    parser.add_argument("--window", type=float, help="openai SDK: seconds per point")
    parser.add_argument("--no-sdk", action="store_true", help="skip the openai SDK")
    parser.add_argument(
        "--switch-interval",
        type=float,
        help="sys.setswitchinterval for the run (the host's choice; default 0.005)",
    )
    parser.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="run this process's threads on one CPU and the server on the others",
    )
    args = parser.parse_args()
    if args.pin is not None and args.pin not in os.sched_getaffinity(0):
        allowed = sorted(os.sched_getaffinity(0))
        parser.error(f"--pin {args.pin}: this process may run on CPUs {allowed}")
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    counts = [int(t) for t in args.threads.split(",")]
    budget = args.events or (256_000 if args.quick else 512_000)
    window = args.window or (0.5 if args.quick else 1.0)
    rounds = args.rounds or (1 if args.quick else 3)
    sdk = "" if args.no_sdk else f" openai SDK: {window:g} s windows;"
    cpus = (
        f"{os.cpu_count()} CPUs (the server in its own process)"
        if args.pin is None
        else f"this process's threads on CPU {args.pin}, the server on the others"
    )
    print(
        f"core: {IMPLEMENTATION}; {CHUNKS:,}-chunk turns; {rounds} round(s), each T"
        f" once per round; navi_core: whole turns, ~{budget:,} events per point;{sdk}"
        f" {cpus}; GIL switch interval {sys.getswitchinterval() * 1e3:g} ms"
    )
    results: dict[str, dict[int, list[Result]]] = {
        "navi_core": {},
        "loop alone (no network)": {},
        "plain Python generator (no navi_core loop)": {},
        "openai SDK": {},
    }
    others = None if args.pin is None else os.sched_getaffinity(0) - {args.pin}
    with server(CHUNKS, cpus=others or None) as url:
        if args.pin is not None:  # the threads made from now on inherit it
            os.sched_setaffinity(0, {args.pin})
        ours = {t: Crew(navi, url, t) for t in counts}
        alone = {t: Crew(loop_alone, url, t) for t in counts}
        plain = {t: Crew(plain_python, url, t) for t in counts}
        theirs = (
            {}
            if args.no_sdk
            else {t: Crew(openai_sdk, url, t, sample=1) for t in counts}
        )
        local = [*ours.values(), *alone.values(), *plain.values()]
        for crew in local:  # warm-up: code paths hot
            crew.turns(1)
        for crew in theirs.values():
            crew.window(0.05)
        for _ in range(rounds):
            for t, crew in ours.items():
                per_thread = max(1, budget // (t * CHUNKS))
                results["navi_core"].setdefault(t, []).append(crew.turns(per_thread))
                results["loop alone (no network)"].setdefault(t, []).append(
                    alone[t].turns(per_thread)
                )
                results["plain Python generator (no navi_core loop)"].setdefault(
                    t, []
                ).append(plain[t].turns(per_thread))
            for t, crew in theirs.items():
                results["openai SDK"].setdefault(t, []).append(crew.window(window))
        for crew in [*local, *theirs.values()]:
            crew.stop()
    for name, rounds_of in results.items():
        if rounds_of:
            _table(name, rounds_of)
    if 1 in counts:
        print("\nnavi_core's 'vs T=1' over the loop alone's, each round's, median:")
        net, bare = results["navi_core"], results["loop alone (no network)"]
        for t in counts:
            rel = [
                (n.rate / n1.rate) / (b.rate / b1.rate)
                for n, n1, b, b1 in zip(net[t], net[1], bare[t], bare[1], strict=True)
            ]
            print(f"{t:>8} {statistics.median(rel):>8.2f}x")
    if theirs:
        print("\nnavi_core / openai SDK, median events/s at the same T:")
        for t in counts:
            a = statistics.median(r.rate for r in results["navi_core"][t])
            b = statistics.median(r.rate for r in results["openai SDK"][t])
            print(f"{t:>8} {a / b:>8.1f}x")


if __name__ == "__main__":
    main()

"""What moving between CPUs costs the loop: threads that take turns, never two at once.

``--threads`` warm threads each run ``--turns`` whole turns of the loop alone
(``prebuilt.Prebuilt``: 2,000 text deltas, 64 per simulated read, nothing to parse),
strictly one after another: the main thread wakes one, waits for its turns to end,
then wakes the next, so no two ever run at the same time and no thread waits for the
GIL. Against them, in the same rounds, the main thread runs the same number of turns
itself. Any gap between the two is what handing the work to another thread costs: on
a machine with several CPUs the kernel may wake the next thread on another core,
whose caches do not hold the interpreter's state yet. Printed per round: both ratios,
wall time and the process's CPU time (when CPU time grows as much, the cost is work
done, not time spent waiting for a wake-up). ``--pin CPU`` runs every thread on one
CPU, which removes that move.

    python bench/bench_handoff.py            # 64 threads x 4 turns, 6 rounds
    python bench/bench_handoff.py --pin 0
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from prebuilt import Prebuilt

from navi_core import Agent, NullStore
from navi_core.core import IMPLEMENTATION

CHUNKS = 2_000


def _turns(provider: Prebuilt, turns: int) -> None:
    for _ in range(turns):
        for _ in Agent(provider, store=NullStore()).run("q"):
            pass


class Relay:
    """``threads`` threads, each woken in turn to run its share of turns."""

    def __init__(self, provider: Prebuilt, threads: int, turns: int) -> None:
        self._go = [threading.Semaphore(0) for _ in range(threads)]
        self._done = threading.Semaphore(0)
        for k in range(threads):
            threading.Thread(
                target=self._serve, args=(provider, k, turns), daemon=True
            ).start()

    def _serve(self, provider: Prebuilt, k: int, turns: int) -> None:
        while True:
            self._go[k].acquire()
            _turns(provider, turns)
            self._done.release()

    def run(self) -> float:
        """Seconds for every thread's turns, one thread after another."""
        start = time.perf_counter()
        for go in self._go:
            go.release()
            self._done.acquire()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=64, help="threads taking turns (default 64)"
    )
    parser.add_argument(
        "--turns", type=int, default=4, help="turns per thread (default 4)"
    )
    parser.add_argument("--rounds", type=int, default=6, help="rounds (default 6)")
    parser.add_argument("--pin", type=int, metavar="CPU", help="run on this CPU only")
    args = parser.parse_args()
    if args.pin is not None:
        allowed = sorted(os.sched_getaffinity(0))
        if args.pin not in allowed:
            parser.error(f"--pin {args.pin}: this process may run on CPUs {allowed}")
        os.sched_setaffinity(0, {args.pin})  # before any thread starts: all inherit it
    provider = Prebuilt(CHUNKS, per_read=64)
    relay = Relay(provider, args.threads, args.turns)
    total = args.threads * args.turns
    relay.run()  # warm-up
    ratios, cpu_ratios = [], []
    for r in range(args.rounds):
        start, cpu = time.perf_counter(), time.process_time()
        _turns(provider, total)
        alone, alone_cpu = time.perf_counter() - start, time.process_time() - cpu
        cpu = time.process_time()
        handed = relay.run()
        handed_cpu = time.process_time() - cpu
        ratios.append(alone / handed)
        cpu_ratios.append(alone_cpu / handed_cpu)
        print(
            f"round {r + 1}: wall {alone / handed:.3f}x, CPU {alone_cpu / handed_cpu:.3f}x"
            f" (one thread {alone * 1e3:.0f} ms, handed on {handed * 1e3:.0f} ms)"
        )
    where = f"CPU {args.pin}" if args.pin is not None else f"{os.cpu_count()} CPUs"
    print(
        f"core: {IMPLEMENTATION}; {where}; {args.threads} threads x {args.turns} turns"
        f" one after another, over one thread's {total} turns: median wall"
        f" {statistics.median(ratios):.3f}x, CPU {statistics.median(cpu_ratios):.3f}x"
    )


if __name__ == "__main__":
    main()

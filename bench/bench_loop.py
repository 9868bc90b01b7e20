"""The loop's own cost: events per second through ``Stream.next()``.

Text turns come from ``prebuilt.Prebuilt``, whose deltas are built before anything is
measured, so the numbers are the loop's alone (``next()``, the assembler, the phase
machine): one delta per simulated network read (the worst case), 64 per read (what a
fast server's reads hold), and 64 per read with ``Config(coalesce_deltas=True)``.
Baseline (the floor): a plain Python generator yielding the very same event objects.

Tool turns (5 calls of a tool that returns at once, then a final answer) are timed
whole: with no tool time and no network, all of it is the loop's overhead. On
``Scripted`` once on one agent reused, once on a new ``Agent`` per turn (what a web app
does); then on ``prebuilt.PrebuiltToolTurns`` (a new ``Agent`` per turn), whose deltas
are built before, so the provider costs nothing and what is left is the loop alone.
Against a floor measured in the same run: one round trip to a waiting thread per call.

Run: ``python bench/bench_loop.py`` (prints one table; best of several repeats).
"""

from __future__ import annotations

import argparse
import queue
import threading
import time
from collections.abc import Callable, Iterator

from prebuilt import Prebuilt, PrebuiltToolTurns

from navi_core import Agent, Config, NullStore, Scripted, Text, ToolUse, tool
from navi_core.core import IMPLEMENTATION
from navi_core.events import Event, ToolFinished


@tool
def noop(n: int) -> str:
    """Return n as text."""
    return str(n)


def text_turn(deltas: int, per_read: int, coalesce: bool) -> Callable[[], Agent]:
    provider = Prebuilt(deltas, per_read)
    config = Config(coalesce_deltas=coalesce)
    return lambda: Agent(provider, store=NullStore(), config=config)


def tool_script(calls: int) -> list[object]:
    uses = [ToolUse(f"c{i}", "noop", f'{{"n": {i}}}') for i in range(calls)]
    return [[Text("calling tools"), *uses], [Text("all done here")]]


def drain_stream(agent: Agent) -> list[Event]:
    out = []
    stream = agent.run("go")
    while (ev := stream.next()) is not None:
        out.append(ev)
    return out


def drain_generator(events: list[Event]) -> int:
    def gen() -> Iterator[Event]:
        yield from events

    g = gen()
    n = 0
    while next(g, None) is not None:
        n += 1
    return n


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def handoffs(calls: int) -> None:
    """A floor for a batch: each call handed to a waiting thread, and its answer
    waited for (one round trip between two threads per call)."""
    inbox: queue.SimpleQueue[int] = queue.SimpleQueue()
    outbox: queue.SimpleQueue[int] = queue.SimpleQueue()

    def serve() -> None:
        while (n := inbox.get()) >= 0:
            outbox.put(n)

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    t0 = time.perf_counter()
    for i in range(calls):
        inbox.put(i)
        outbox.get()
    handoffs.seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    inbox.put(-1)
    worker.join()


def text_rows(deltas: int, repeats: int) -> None:
    for per_read, coalesce in ((1, False), (64, False), (64, True)):
        make = text_turn(deltas, per_read, coalesce)
        events = drain_stream(make())
        agents = [make() for _ in range(repeats)]
        it = iter(agents)
        loop_s = best(lambda it=it: drain_stream(next(it)), repeats)
        plain = text_turn(deltas, per_read, False)
        floor_events = drain_stream(plain())
        floor_s = best(lambda evs=floor_events: drain_generator(evs), repeats)
        label = f"{deltas:,} deltas, {per_read}/read" + (
            ", coalesced" if coalesce else ""
        )
        print(
            f"{label:<36} {len(events):>7,} {deltas / loop_s:>13,.0f} "
            f"{len(floor_events) / floor_s:>15,.0f} {loop_s / floor_s:>7.1f}x"
        )


def tool_rows(repeats: int, turns: int) -> None:
    def reused() -> float:
        agent = Agent(Scripted(tool_script(5) * turns), tools=[noop], store=NullStore())
        t0 = time.perf_counter()
        for _ in range(turns):
            drain_stream(agent)
        return (time.perf_counter() - t0) / turns

    def fresh() -> float:
        agents = [
            Agent(Scripted(tool_script(5)), tools=[noop], store=NullStore())
            for _ in range(turns)
        ]
        t0 = time.perf_counter()
        for agent in agents:
            drain_stream(agent)
        return (time.perf_counter() - t0) / turns

    def floor() -> float:
        samples = []
        for _ in range(turns):
            handoffs(5)
            samples.append(handoffs.seconds)  # type: ignore[attr-defined]
        return min(samples)

    def prebuilt() -> float:
        agents = [
            Agent(PrebuiltToolTurns(5), tools=[noop], store=NullStore())
            for _ in range(turns)
        ]
        t0 = time.perf_counter()
        for agent in agents:
            drain_stream(agent)
        return (time.perf_counter() - t0) / turns

    events = drain_stream(Agent(PrebuiltToolTurns(5), tools=[noop], store=NullStore()))
    finished = [e for e in events if isinstance(e, ToolFinished) and not e.is_error]
    assert len(finished) == 5 and events[-1].response == "all done here", events  # type: ignore[attr-defined]
    base = min(floor() for _ in range(repeats))
    for label, run in (
        ("one agent, reused", reused),
        ("a new Agent per turn", fresh),
        ("prebuilt, new Agent", prebuilt),
    ):
        ms = min(run() for _ in range(repeats)) * 1e3
        print(
            f"5-call tool turn, {label:<22} {ms:>8.3f} ms   {ms / (base * 1e3):>6.1f}x"
        )
    print(f"floor: 5 round trips to a thread    {base * 1e3:>8.3f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--deltas", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=200)
    args = ap.parse_args()
    print(f"core: {IMPLEMENTATION}; best of {args.repeats}")
    print(
        f"{'text turn':<36} {'events':>7} {'deltas/s':>13} {'generator ev/s':>15} "
        f"{'ratio':>8}"
    )
    text_rows(args.deltas, args.repeats)
    print("ratio = time through Stream.next() / a plain generator of the same events")
    print()
    tool_rows(args.repeats, args.turns)


if __name__ == "__main__":
    main()

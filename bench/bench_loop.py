"""The loop's own cost: events per second through ``Stream.next()`` on ``Scripted``.

Baseline (the floor): a plain Python generator yielding the very same event objects.
Run: ``python bench/bench_loop.py`` (prints one table; best of several repeats).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator

from navi_core import Agent, Config, NullStore, Scripted, Text, ToolUse, tool
from navi_core.core import IMPLEMENTATION
from navi_core.events import Event


@tool
def noop(n: int) -> str:
    """Return n as text."""
    return str(n)


def text_turn(deltas: int) -> tuple[Callable[[], Agent], str]:
    text = "abcd" * deltas

    def make() -> Agent:
        return Agent(Scripted([[Text(text)]], chunk_chars=4), store=NullStore())

    return make, f"1 response, {deltas:,} text deltas"


def tool_turn(calls: int) -> tuple[Callable[[], Agent], str]:
    uses = [ToolUse(f"c{i}", "noop", f'{{"n": {i}}}') for i in range(calls)]

    def make() -> Agent:
        script = Scripted([[Text("calling tools"), *uses], [Text("all done here")]])
        return Agent(script, tools=[noop], store=NullStore(), config=Config())

    return make, f"2 responses, {calls} tool calls"


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


def measure(make: Callable[[], Agent], repeats: int) -> tuple[int, float, float]:
    events = drain_stream(make())
    agents = [make() for _ in range(repeats)]
    it = iter(agents)
    loop_s = best(lambda: drain_stream(next(it)), repeats)
    floor_s = best(lambda: drain_generator(events), repeats)
    return len(events), loop_s, floor_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--deltas", type=int, default=10_000)
    args = ap.parse_args()
    print(f"core: {IMPLEMENTATION}; best of {args.repeats}")
    print(
        f"{'scenario':<34} {'events':>7} {'next() ev/s':>14} {'generator ev/s':>15} {'ratio':>7}"
    )
    for make, label in (text_turn(args.deltas), tool_turn(5)):
        n, loop_s, floor_s = measure(make, args.repeats)
        print(
            f"{label:<34} {n:>7,} {n / loop_s:>14,.0f} {n / floor_s:>15,.0f} "
            f"{loop_s / floor_s:>6.1f}x"
        )
    print(
        "ratio = time through Stream.next() / time through a plain generator (lower is better)"
    )


if __name__ == "__main__":
    main()

"""What observers and hooks cost the driver: events per second through ``Stream.next()``.

Baseline: the same turn with no subscriber and no hook, measured in the same run.
Rows: a subscriber drained by another thread, a subscriber nobody reads (it lags and
drops), and a tool turn with three no-op hooks against the same turn without hooks.
Run: ``python bench/bench_observers.py`` (best of several repeats; well under a minute).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

import _record

from navi_core import Agent, Hook, NullStore, Scripted, Text, ToolUse, tool


@tool
def noop(n: int) -> str:
    """Return n as text."""
    return str(n)


def text_agent(deltas: int) -> Agent:
    return Agent(Scripted([[Text("abcd" * deltas)]], chunk_chars=4), store=NullStore())


def tool_agent(calls: int, hooks: int) -> Agent:
    uses = [ToolUse(f"c{i}", "noop", f'{{"n": {i}}}') for i in range(calls)]
    script = Scripted([[Text("calling"), *uses], [Text("done")]])
    return Agent(
        script, tools=[noop], store=NullStore(), hooks=[Hook() for _ in range(hooks)]
    )


def timed(
    make: Callable[[], Agent], setup: Callable[[Agent], Callable[[], None]]
) -> tuple[float, int]:
    agent = make()
    stop = setup(agent)
    t0 = time.perf_counter()
    with agent.run("go") as stream:
        n = sum(1 for _ in stream)
    seconds = time.perf_counter() - t0
    stop()
    agent.close()
    return seconds, n


def nothing(agent: Agent) -> Callable[[], None]:
    return lambda: None


def drained(agent: Agent) -> Callable[[], None]:
    sub = agent.subscribe(maxsize=1024)
    reader = threading.Thread(target=lambda: sum(1 for _ in sub), daemon=True)
    reader.start()

    def stop() -> None:
        sub.close()
        reader.join()

    return stop


def ignored(agent: Agent) -> Callable[[], None]:
    sub = agent.subscribe(maxsize=64)
    return sub.close


def best(
    repeats: int,
    make: Callable[[], Agent],
    setup: Callable[[Agent], Callable[[], None]],
) -> tuple[float, int]:
    runs = [timed(make, setup) for _ in range(repeats)]
    return min(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--deltas", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=32)
    _record.add_option(ap)
    args = ap.parse_args()
    _record.start(args)
    rows = []
    base, n = best(args.repeats, lambda: text_agent(args.deltas), nothing)
    rows.append(("no subscriber (baseline)", base, n, 1.0))
    for label, setup in (
        ("1 subscriber, drained", drained),
        ("1 subscriber, never read", ignored),
    ):
        s, n = best(args.repeats, lambda: text_agent(args.deltas), setup)
        rows.append((label, s, n, s / base))
    tool_base, n = best(args.repeats, lambda: tool_agent(args.calls, 0), nothing)
    rows.append((f"{args.calls} tool calls, no hook (baseline)", tool_base, n, 1.0))
    s, n = best(args.repeats, lambda: tool_agent(args.calls, 3), nothing)
    rows.append((f"{args.calls} tool calls, 3 no-op hooks", s, n, s / tool_base))
    print(f"{'case':<40} {'events':>7} {'events/s':>12} {'time ratio':>10}")
    for label, seconds, events, ratio in rows:
        print(f"{label:<40} {events:>7} {events / seconds:>12,.0f} {ratio:>10.2f}")
    _record.table(
        "What observers and hooks add to a turn",
        ["case", "events", "events/s", "time ratio"],
        [
            [label, f"{events:,}", f"{events / seconds:,.0f}", f"{ratio:.2f}"]
            for label, seconds, events, ratio in rows
        ],
        "time ratio: against the baseline row above it",
    )


if __name__ == "__main__":
    main()

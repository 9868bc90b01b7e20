"""The loop's own cost in CPU instructions: stable where wall-clock timings are noisy.

Runs each scenario under valgrind's cachegrind twice (a small and a large count) and
prints the difference per unit, so start-up and import cost cancel out:

- the floor: a plain generator yielding 10,000 ``TextDelta`` objects, drained;
- per text delta: a turn of 10,000 small text deltas through ``next()``, from a
  provider whose deltas were built before (``prebuilt.py``: the loop alone), one delta
  per simulated network read (the worst case) and 64 per read (what a fast server's
  reads hold), without and with ``Config(coalesce_deltas=True)``;
- per tool turn: a turn with 5 tool calls and a final answer, on ``Scripted`` with one
  agent, and on ``prebuilt.PrebuiltToolTurns`` (nothing to parse) with a new ``Agent``
  per turn;
- per loopback tool turn: ``bench_turn.py``'s turn (``add`` called twice over real HTTP
  to a loopback server in its own, untraced process, then a 20-word or a 500-word
  answer in one sized body), for ``navi_core`` (the tool on the pool, and
  ``@tool(inline=True)``), the httpx + httpx-sse + orjson loop and the socket + orjson
  floor: the instructions of the client process, every thread. Where ``bench_turn.py``
  finds a gap in CPU time that is not here, it is in the kernel and the hand-offs
  between threads (``bench_syscalls.py``), not in the code run. Under valgrind threads
  run one at a time, slowly, so the pool turn's count moves a few percent between runs
  (a short wait for the tool times out or not); the inline turn's does not.

Compare two trees in one sitting, e.g. ``PYTHONPATH=/path/to/other/checkout python
bench/loop_instructions.py``. Needs ``valgrind`` (``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import partial

import _record

DELTAS = 10_000


def floor(turns: int) -> None:
    from navi_core.events import TextDelta

    events = [TextDelta("xxxx") for _ in range(DELTAS)]

    def gen() -> Iterator[TextDelta]:
        yield from events

    for _ in range(turns):
        g = gen()
        while next(g, None):
            pass


def delta_turns(turns: int, per_read: int = 1, coalesce: bool = False) -> None:
    from prebuilt import Prebuilt

    from navi_core import Agent, Config
    from navi_core.store.null import NullStore

    provider = Prebuilt(DELTAS, per_read)
    agent = Agent(provider, store=NullStore(), config=Config(coalesce_deltas=coalesce))
    for _ in range(turns):
        stream = agent.run("q")
        while stream.next():
            pass


def tool_turns(turns: int) -> None:
    from navi_core import Agent, Scripted, Text, ToolUse, tool
    from navi_core.store.null import NullStore

    @tool
    def echo(i: int) -> str:
        """Echo ``i``."""
        return str(i)

    items: list[object] = []
    for _ in range(turns):
        items.append([ToolUse(f"c{i}", "echo", f'{{"i": {i}}}') for i in range(5)])
        items.append([Text("done")])
    agent = Agent(Scripted(items), tools=[echo], store=NullStore())  # type: ignore[arg-type]
    for _ in range(turns):
        stream = agent.run("q")
        while stream.next():
            pass
    agent.close()


def prebuilt_tool_turns(turns: int) -> None:
    from prebuilt import PrebuiltToolTurns

    from navi_core import Agent, tool
    from navi_core.store.null import NullStore

    @tool
    def noop(n: int) -> str:
        """Return n as text."""
        return str(n)

    for _ in range(turns):  # a new agent per turn, as a web app makes one
        agent = Agent(PrebuiltToolTurns(5), tools=[noop], store=NullStore())
        stream = agent.run("q")
        while stream.next():
            pass
        agent.close()


#: the loopback turn's contenders: name -> (bench_turn's maker, keywords)
LOOPBACK = {
    "navi_core": ("navi", {}),
    "navi_core, inline tool": ("navi", {"inline": True}),
    "httpx + httpx-sse + orjson": ("httpx_sse", {}),
    "socket + orjson (floor)": ("floor", {}),
}
#: answer -> bench_turn's server path for it
ANSWERS = {"20-word": "/short/v1", "500-word": "/v1"}


def loopback_turns(turns: int, contender: str, answer: str) -> None:
    """``turns`` of bench_turn's tool turn, after 5 to warm up."""
    import bench_turn
    from bench_memory import serving

    maker, keywords = LOOPBACK[contender]
    with serving(bench_turn.__file__) as root:
        turn = getattr(bench_turn, maker)(root + ANSWERS[answer], **keywords)
        if turn is None:
            raise SystemExit(f"{contender}: not installed")
        for _ in range(5 + turns):
            turn()


SCENARIOS: dict[str, Callable[[int], None]] = {
    "floor": floor,
    "delta": delta_turns,
    "delta64": lambda turns: delta_turns(turns, 64),
    "coalesced64": lambda turns: delta_turns(turns, 64, coalesce=True),
    "tool": tool_turns,
    "toolprebuilt": prebuilt_tool_turns,
    **{
        f"loopback:{answer}:{contender}": partial(
            loopback_turns, contender=contender, answer=answer
        )
        for answer in ANSWERS
        for contender in LOOPBACK
    },
}


def instructions(scenario: str, count: int) -> int:
    """Instructions of one child process running ``scenario`` ``count`` times."""
    result = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            scenario,
            str(count),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        check=True,
    )
    match = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    assert match, result.stderr[-2000:]
    return int(match.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--loopback-only", action="store_true", help="only the loopback tool turns"
    )
    _record.add_option(parser)
    args = parser.parse_args()
    if args.child:
        SCENARIOS[args.child[0]](int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    _record.start(args)
    import navi_core.core

    print(f"core: {navi_core.core.IMPLEMENTATION}; navi_core from {navi_core.__file__}")
    if not args.loopback_only:
        _loop_scenarios()
    _loopback_table()


def _loopback_table() -> None:
    """The loopback tool turn's instructions per contender, against the floor."""
    rows: list[list[object]] = []
    print(f"{'per loopback tool turn':<44} {'instructions':>13} {'x floor':>8}")
    import importlib.util

    contenders = [
        c
        for c in LOOPBACK
        if LOOPBACK[c][0] != "httpx_sse" or importlib.util.find_spec("httpx_sse")
    ]
    for answer in ANSWERS:
        counts = {c: per_unit(f"loopback:{answer}:{c}", 1) for c in contenders}
        base = counts["socket + orjson (floor)"]
        for contender, n in counts.items():
            print(
                f"{f'{answer} answer: {contender}':<44} {n:>13,.0f} {n / base:>7.2f}x"
            )
            rows.append([answer, contender, f"{n:,.0f}", f"{n / base:.2f}x"])
    _record.table(
        "Instructions per loopback tool turn (the client process, every thread)",
        ["answer", "contender", "instructions", "vs socket + orjson"],
        rows,
        note="bench_turn.py's turn, one sized body; valgrind's count, so the kernel's "
        "work (system calls, wake-ups) is not in it.",
    )


def _loop_scenarios() -> None:
    base = per_unit("floor", DELTAS)
    print(f"{'scenario':<44} {'instructions':>13} {'x floor':>8}")
    print(f"{'floor: a generator, per event':<44} {base:>13,.0f} {1:>7.1f}x")
    for name, label in (
        ("delta", "per text delta, 1 per read"),
        ("delta64", "per text delta, 64 per read"),
        ("coalesced64", "per text delta, 64 per read, coalesced"),
    ):
        n = per_unit(name, DELTAS)
        print(f"{label:<44} {n:>13,.0f} {n / base:>7.1f}x")
    print(f"{'per 5-call tool turn (Scripted)':<44} {per_unit('tool', 1):>13,.0f}")
    print(
        f"{'per 5-call tool turn (prebuilt, new Agent)':<44}"
        f" {per_unit('toolprebuilt', 1):>13,.0f}"
    )


def per_unit(scenario: str, units: int) -> float:
    """Instructions per unit: two runs, so start-up and imports cancel out."""
    if scenario.startswith("loopback"):
        small, large = 10, 60
    else:
        small, large = (1, 3) if not scenario.startswith("tool") else (1, 21)
    diff = instructions(scenario, large) - instructions(scenario, small)
    return diff / ((large - small) * units)


if __name__ == "__main__":
    main()

"""The loop's own cost in CPU instructions: stable where wall-clock timings are noisy.

Runs each scenario under valgrind's cachegrind twice (a small and a large count) and
prints the difference per unit, so start-up and import cost cancel out:

- per text delta: a ``Scripted`` turn of 10,000 small text deltas through ``next()``;
- per tool turn: a turn with 5 tool calls and a final answer.

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

DELTAS = 10_000


def delta_turns(turns: int) -> None:
    from navi_core import Agent, Scripted, Text
    from navi_core.store.null import NullStore

    agent = Agent(Scripted([[Text("x" * (DELTAS * 4))]] * turns), store=NullStore())
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


SCENARIOS = {"delta": delta_turns, "tool": tool_turns}


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
    args = parser.parse_args()
    if args.child:
        SCENARIOS[args.child[0]](int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    import navi_core.core

    print(f"core: {navi_core.core.IMPLEMENTATION}; navi_core from {navi_core.__file__}")
    per_delta = (instructions("delta", 3) - instructions("delta", 1)) / (2 * DELTAS)
    per_turn = (instructions("tool", 21) - instructions("tool", 1)) / 20
    print(f"instructions per text delta through next(): {per_delta:,.0f}")
    print(f"instructions per 5-call tool turn:          {per_turn:,.0f}")


if __name__ == "__main__":
    main()

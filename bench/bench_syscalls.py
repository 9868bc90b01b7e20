"""System calls per tool turn, counted by ``strace -f -c`` (Linux, strace installed).

A loopback server (``bench_memory.py --serve``, its own process, not traced) answers
``add(a=1, b=2)`` twice, then a 500-word answer: three requests per turn. The client runs
``--turns`` turns and then twice as many in two traced processes; the difference
divided by the extra turns is the count per turn, without the process's start. Printed:
the calls per turn by name, and their total against the goal (15 per turn).

    python bench/bench_syscalls.py
    python bench/bench_syscalls.py --turns 40
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _record

GOAL = 15
HERE = Path(__file__).resolve().parent
STRACE = ("strace", "-f", "-c", "-o")
_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def _client(url: str, turns: int) -> None:
    from bench_memory import PROMPT, navi_agent

    for _ in navi_agent(url).run("warm up"):
        pass
    for _ in range(turns):
        for _ in navi_agent(url).run(PROMPT):
            pass


def _counted(url: str, turns: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "strace.txt")
        subprocess.run(
            [*STRACE, out, sys.executable, __file__, "--client", url, str(turns)],
            check=True,
            capture_output=True,
        )
        counts: dict[str, int] = {}
        for line in Path(out).read_text().splitlines():
            match = _ROW.match(line)
            if match and match.group(2) != "total":
                counts[match.group(2)] = int(match.group(1))
        return counts


def main() -> None:
    if sys.argv[1:2] == ["--client"]:
        _client(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)
    if shutil.which("strace") is None:
        print("strace is not installed: nothing measured")
        return
    from navi_core.core import IMPLEMENTATION

    print(f"core: {IMPLEMENTATION}")
    server = subprocess.Popen(
        [sys.executable, str(HERE / "bench_memory.py"), "--serve"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}/v1"
        short = _counted(url, args.turns)
        long = _counted(url, 2 * args.turns)
    finally:
        server.terminate()
        server.wait(timeout=10)
    per_turn = {
        name: (long.get(name, 0) - short.get(name, 0)) / args.turns
        for name in set(short) | set(long)
    }
    shown = sorted(
        ((n, c) for n, c in per_turn.items() if c >= 0.05), key=lambda x: -x[1]
    )
    print(f"system calls per tool turn (3 requests; {args.turns} turns more)")
    for name, count in shown:
        print(f"  {name:<16} {count:6.1f}")
    total = sum(count for _, count in shown)
    verdict = "met" if total <= GOAL else "missed"
    print(f"  {'total':<16} {total:6.1f}")
    print(f"goal: at most {GOAL} per turn: {total:.1f} ({verdict})")
    _record.table(
        "System calls per tool turn (strace -f -c; 3 requests)",
        ["system call", "per turn"],
        [*([name, f"{count:.1f}"] for name, count in shown), ["total", f"{total:.1f}"]],
    )
    _record.goal(
        f"at most {GOAL} system calls per tool turn ({total:.1f})", total <= GOAL
    )


if __name__ == "__main__":
    main()

"""System calls and CPU time per tool turn: tool calls on the pool against inline calls.

A loopback server (``bench_memory.py --serve``, its own process, not traced) answers
``add(a=1, b=2)`` twice, then a 500-word answer: three requests per turn. Two turns are
measured in the same run, the same but for the tool: ``add`` as it is (its calls
handed to a pool thread and back) and ``add`` with ``@tool(inline=True)`` (run on the
thread that calls ``next()``). For each, the client runs ``--turns`` turns and then
twice as many in two processes traced by ``strace -f -c``; the difference divided by
the extra turns is the count per turn, without the process's start. Printed: both
turns' calls per turn by name and their totals; the goal (at most 15 per turn) is
checked against both. The floor is 6 (3 ``sendto`` + 3 ``recvfrom``); a call handed
to the pool and back adds at least two ``futex`` calls (one wakes the worker, one
wakes the poller), four when both sides have to sleep.

Then CPU time (the whole process, every thread) and wall time per turn of each kind,
untraced, in alternating rounds in one process, the best round of each against the
pool turn of the same run: the loopback turn, and the same turn on ``Scripted`` (no
HTTP, no parsing), where the tool dispatch is a larger share of the cost. Where the
process may run on several CPUs, the ``Scripted`` turns are measured once more in a
child process held to one CPU (``os.sched_setaffinity``): there a hand-off to the pool
thread and back is a switch on one CPU, not a wake-up of another (on a virtual machine,
an idle CPU woken from its halt), so the gap between the two rows is what waking the
other CPU costs.

    python bench/bench_syscalls.py
    python bench/bench_syscalls.py --turns 40 --rounds 9
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _record
from bench_memory import serving

GOAL = 15
HERE = Path(__file__).resolve().parent
STRACE = ("strace", "-f", "-c", "-o")
_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")
#: the two turns: (label, ``inline`` of the ``add`` tool)
KINDS = (("pool", False), ("inline", True))


def _turns(url: str, turns: int, inline: bool) -> None:
    from bench_memory import PROMPT, navi_agent

    for _ in range(turns):
        for _ in navi_agent(url, inline).run(PROMPT):
            pass


def _client(url: str, turns: int, inline: bool) -> None:
    from bench_memory import navi_agent

    for _ in navi_agent(url, inline).run("warm up"):
        pass
    _turns(url, turns, inline)


def _counted(url: str, turns: int, inline: bool) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "strace.txt")
        subprocess.run(
            [
                *STRACE,
                out,
                sys.executable,
                __file__,
                "--client",
                url,
                str(turns),
                str(int(inline)),
            ],
            check=True,
            capture_output=True,
        )
        counts: dict[str, int] = {}
        for line in Path(out).read_text().splitlines():
            match = _ROW.match(line)
            if match and match.group(2) != "total":
                counts[match.group(2)] = int(match.group(1))
        return counts


def _per_turn(url: str, turns: int, inline: bool) -> dict[str, float]:
    short = _counted(url, turns, inline)
    long = _counted(url, 2 * turns, inline)
    return {
        name: (long.get(name, 0) - short.get(name, 0)) / turns
        for name in set(short) | set(long)
    }


def _scripted(url: str, turns: int, inline: bool) -> None:
    """The same turn on ``Scripted``: two single-call batches, then the answer (the
    tool is the one the loopback turn of ``url`` runs)."""
    from bench_memory import PROMPT, SYSTEM, WORDS, _shared

    from navi_core import Agent, Scripted, ToolUse

    _, add = _shared(url, inline)
    call = [ToolUse("call_1", "add", '{"a": 1, "b": 2}')]
    answer = "".join(WORDS)
    for _ in range(turns):
        agent = Agent(Scripted([call, call, answer]), tools=[add], system=SYSTEM)
        for _ in agent.run(PROMPT):
            pass


def _cpu(
    url: str,
    turns: int,
    rounds: int,
    wheres: tuple[str, ...] = ("loopback", "Scripted"),
) -> dict[tuple[str, str], tuple[float, float]]:
    """CPU and wall µs per turn of each (turn, kind): one turn of each kind after the
    other, so that both see the same disturbance from other processes; the best of
    ``rounds`` rounds. Scripted turns, shorter, run ten times as many per round."""
    runs: dict[str, tuple[Callable[[int, bool], None], int]] = {
        "loopback": (lambda n, inline: _turns(url, n, inline), turns),
        "Scripted": (lambda n, inline: _scripted(url, n, inline), 10 * turns),
    }
    best: dict[tuple[str, str], tuple[float, float]] = {}
    clock, cpu_clock = time.perf_counter, time.process_time
    for where in wheres:
        run, count = runs[where]
        for _, inline in KINDS:
            run(2, inline)  # warm: modules, connections, lazy tables
        for _ in range(rounds):
            spent = {label: [0.0, 0.0] for label, _ in KINDS}
            for _ in range(count):
                for label, inline in KINDS:
                    c0, w0 = cpu_clock(), clock()
                    run(1, inline)
                    cpu, wall = cpu_clock() - c0, clock() - w0
                    spent[label][0] += cpu
                    spent[label][1] += wall
            for label, (cpu, wall) in spent.items():
                per_turn = (cpu / count * 1e6, wall / count * 1e6)
                key = (where, label)
                best[key] = min(best.get(key, per_turn), per_turn)
    return best


def _one_cpu(
    url: str, turns: int, rounds: int
) -> dict[tuple[str, str], tuple[float, float]]:
    """The ``Scripted`` rows of ``_cpu`` from a child process held to one CPU (none
    where the process may only use one, or cannot choose)."""
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        return {}
    cpu = min(os.sched_getaffinity(0))
    args = ["--one-cpu", str(cpu), url, str(turns), str(rounds)]
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    ).stdout
    return {("Scripted, 1 CPU", label): (c, w) for label, c, w in json.loads(out)}


def main() -> None:
    if sys.argv[1:2] == ["--client"]:
        _client(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1")
        return
    if sys.argv[1:2] == ["--one-cpu"]:
        os.sched_setaffinity(0, {int(sys.argv[2])})  # before any thread starts
        found = _cpu(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), ("Scripted",))
        print(json.dumps([[label, *spent] for (_, label), spent in found.items()]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument(
        "--rounds", type=int, default=7, help="CPU rounds (of --turns turns each)"
    )
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)
    from navi_core.core import IMPLEMENTATION

    print(f"core: {IMPLEMENTATION}")
    traced = shutil.which("strace") is not None
    if not traced:
        print("strace is not installed: system calls not counted")
    with serving() as root:
        url = root + "/v1"
        counts = (
            {label: _per_turn(url, args.turns, inline) for label, inline in KINDS}
            if traced
            else {}
        )
        cpu = _cpu(url, args.turns, args.rounds)
        cpu |= _one_cpu(url, args.turns, args.rounds)
    if counts:
        _report_counts(counts, args.turns)
    _report_cpu(cpu, args.turns, args.rounds)


def _report_counts(counts: dict[str, dict[str, float]], turns: int) -> None:
    names = sorted(
        {n for per in counts.values() for n, c in per.items() if c >= 0.05},
        key=lambda n: (-counts["pool"].get(n, 0.0), n),
    )
    labels = [label for label, _ in KINDS]
    print(f"system calls per tool turn (3 requests; {turns} turns more)")
    print(f"  {'':<16} " + " ".join(f"{label:>8}" for label in labels))
    rows = []
    for name in names:
        cells = [counts[label].get(name, 0.0) for label in labels]
        print(f"  {name:<16} " + " ".join(f"{c:8.1f}" for c in cells))
        rows.append([name, *(f"{c:.1f}" for c in cells)])
    totals = {
        label: sum(c for n, c in counts[label].items() if n in names)
        for label in labels
    }
    print(f"  {'total':<16} " + " ".join(f"{totals[label]:8.1f}" for label in labels))
    rows.append(["total", *(f"{totals[label]:.1f}" for label in labels)])
    inline, pool = totals["inline"], totals["pool"]
    for label, total in (("pool", pool), ("inline", inline)):
        verdict = "met" if total <= GOAL else "missed"
        print(f"goal: at most {GOAL} per turn, {label} tools: {total:.1f} ({verdict})")
    _record.table(
        "System calls per tool turn (strace -f -c; 3 requests)",
        ["system call", "pool tool", "inline tool"],
        rows,
        note="The same turn twice: `add` run on the pool, and `@tool(inline=True)`.",
    )
    _record.goal(
        f"at most {GOAL} system calls per tool turn with a pool tool ({pool:.1f})",
        pool <= GOAL,
    )
    _record.goal(
        f"at most {GOAL} system calls per tool turn with an inline tool ({inline:.1f})",
        inline <= GOAL,
    )


def _report_cpu(
    cpu: dict[tuple[str, str], tuple[float, float]], turns: int, rounds: int
) -> None:
    print(
        f"CPU per tool turn, untraced (best of {rounds} rounds of {turns} turns; "
        f"Scripted: {10 * turns})"
    )
    head = f"{'CPU µs':>9} {'vs pool':>8} {'wall µs':>9} {'vs pool':>8}"
    print(f"  {'turn':<15} {'tool':<7} {head}")
    rows = []
    for (where, label), (c, w) in cpu.items():
        base_cpu, base_wall = cpu[(where, "pool")]
        print(
            f"  {where:<15} {label:<7} {c:9.0f} {c / base_cpu:7.2f}x "
            f"{w:9.0f} {w / base_wall:7.2f}x"
        )
        rows.append(
            [
                where,
                label,
                f"{c:.0f}",
                f"{c / base_cpu:.2f}x",
                f"{w:.0f}",
                f"{w / base_wall:.2f}x",
            ]
        )
    note = ""
    if ("Scripted, 1 CPU", "pool") in cpu:
        hand_off = {
            where: (cpu[(where, "pool")][0] - cpu[(where, "inline")][0]) / 2
            for where in ("Scripted", "Scripted, 1 CPU")
        }
        print(
            "  a pool call costs {:.0f} µs of CPU more than an inline one; {:.0f} µs "
            "on one CPU".format(*hand_off.values())
        )
        note = (
            "Scripted, 1 CPU: the same turns in a process held to one CPU. A pool call "
            f"cost {hand_off['Scripted']:.0f} µs of CPU more than an inline call, "
            f"{hand_off['Scripted, 1 CPU']:.0f} µs on one CPU."
        )
    _record.table(
        "CPU per tool turn (the client process, every thread)",
        ["turn", "tool", "CPU µs", "vs pool", "wall µs", "vs pool"],
        rows,
        note=note,
    )


if __name__ == "__main__":
    main()

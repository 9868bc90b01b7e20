"""Two checkouts' tool turns, timed in turns: for a machine whose speed swings.

Each tree runs in its own worker process (``PYTHONPATH`` set to the tree) that builds
the agents of a sample, then times a 5-call tool turn on each (``prebuilt``'s
``PrebuiltToolTurns``: nothing to parse, a new ``Agent`` per turn, as in
``bench_loop.py``). The workers take samples in turns, A, B, A, B ..., so a slow
minute of the machine falls on both; the table gives each tree's minimum, first
quartile and median per turn, and B's median over A's. Each tree loads its own
``navi_core``: trees whose cores differ (one built, one not) are refused.

``--cpus 0`` pins each worker (and the tool threads it starts) to those CPUs: on one
CPU the stream and its tool thread never hand the turn's objects across caches.

    python bench/compare_trees.py --tree /path/to/old --tree .
    python bench/compare_trees.py --tree . --cpus 0
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def worker(tree: str, cpus: str | None, per_sample: int) -> None:
    """Answer each line on stdin with the ms per turn of one sample."""
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    sys.path.insert(0, str(Path(tree) / "bench"))
    from bench_loop import drain_stream, noop
    from prebuilt import PrebuiltToolTurns

    from navi_core import Agent, NullStore
    from navi_core.core import IMPLEMENTATION

    print(IMPLEMENTATION, flush=True)  # which core this tree loaded: the first line

    def agents() -> list[Agent]:
        return [
            Agent(PrebuiltToolTurns(5), tools=[noop], store=NullStore())
            for _ in range(per_sample)
        ]

    for a in agents():  # warm: imports, the shared tool threads, the plans
        drain_stream(a)
    for _ in sys.stdin:
        sample = agents()
        t0 = time.perf_counter()
        for a in sample:
            drain_stream(a)
        print((time.perf_counter() - t0) / per_sample * 1e3, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="a checkout")
    ap.add_argument("--samples", type=int, default=40, help="samples per tree")
    ap.add_argument("--turns", type=int, default=200, help="turns per sample")
    ap.add_argument("--cpus", help="pin the workers to these CPUs, e.g. 0 or 0,1")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.cpus, args.turns)
        return
    trees = [str(Path(t).resolve()) for t in args.tree]
    procs = []
    for tree in trees:
        cmd = [sys.executable, __file__, "--tree", tree, "--worker", tree]
        cmd += ["--turns", str(args.turns)] + (
            ["--cpus", args.cpus] if args.cpus else []
        )
        env = dict(os.environ, PYTHONPATH=tree)
        procs.append(
            subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
        )
    times: list[list[float]] = [[] for _ in trees]
    try:
        cores = []
        for proc in procs:
            assert proc.stdout is not None
            cores.append(proc.stdout.readline().strip())
        if len(set(cores)) > 1:
            mixed = ", ".join(
                f"{t} loads the {c} core" for t, c in zip(trees, cores, strict=True)
            )
            raise SystemExit(
                f"the trees would not be compared like for like: {mixed}. Build each"
                " tree's core (python setup.py build_ext --inplace) or set"
                " NAVI_CORE_PURE=1 for all"
            )
        for _ in range(args.samples):
            for proc, out in zip(procs, times, strict=True):
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                out.append(float(proc.stdout.readline()))
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
    pinned = f", pinned to CPU {args.cpus}" if args.cpus else ""
    print(
        f"5-call tool turn, prebuilt, a new Agent per turn; {args.samples} samples of "
        f"{args.turns} turns per tree, taken in turns{pinned}"
    )
    print(f"core: {cores[0]}")
    print(f"{'tree':<40} {'min ms':>8} {'p25 ms':>8} {'median':>8} {'vs first':>9}")
    first = statistics.median(times[0])
    for tree, out in zip(trees, times, strict=True):
        v = sorted(out)
        median = statistics.median(v)
        print(
            f"{tree[-40:]:<40} {v[0]:>8.3f} {v[len(v) // 4]:>8.3f} {median:>8.3f} "
            f"{median / first:>8.2f}x"
        )


if __name__ == "__main__":
    main()

"""``navi-core serve --pin-workers``: each worker, threads included, on a CPU of its own."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import Served

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's"
)


def _workers(served: Served) -> list[int]:
    """The arbiter's live children, by pid."""
    pid = served.proc.pid
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return sorted(int(p) for p in f.read().split())


def _cpus_of_every_thread(pid: int) -> set[frozenset[int]]:
    """The CPU sets of each of the process's threads (one per distinct set)."""
    return {
        frozenset(os.sched_getaffinity(int(tid)))
        for tid in os.listdir(f"/proc/{pid}/task")
    }


def _wait_for_workers(served: Served, count: int, old: set[int]) -> list[int]:
    deadline = time.monotonic() + 30
    while True:
        pids = _workers(served)
        if len(pids) == count and not old & set(pids):
            return pids
        assert time.monotonic() < deadline, f"workers {pids}"
        time.sleep(0.05)


def test_each_worker_and_its_threads_run_on_one_cpu_and_a_new_one_takes_the_freed_cpu(
    fake_model: FakeModel, tmp_path: Path
) -> None:
    (tmp_path / "workspace").mkdir()
    cpus = sorted(os.sched_getaffinity(0))
    workers = min(2, len(cpus)) + 1  # one more than the CPUs, when there are 1 or 2
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    args += ["--workers", str(workers), "--threads", "2", "--pin-workers"]
    with Served.start(tmp_path, args) as served:
        with served.client() as client:
            for _ in range(2 * workers):  # requests start each worker's threads
                client.turn(client.new_session(), "hello")
        pids = _wait_for_workers(served, workers, set())
        placed = {}
        for pid in pids:
            sets = _cpus_of_every_thread(pid)
            assert len(sets) == 1 and len(next(iter(sets))) == 1, sets
            placed[pid] = next(iter(next(iter(sets))))
        # the fewest workers per CPU: round robin over the arbiter's CPUs
        counts = sorted(list(placed.values()).count(c) for c in cpus[:workers])
        assert max(counts) - min(counts) <= 1
        assert set(placed.values()) == set(cpus[: min(workers, len(cpus))])

        victim = pids[0]
        os.kill(victim, signal.SIGKILL)
        after = _wait_for_workers(served, workers, {victim})
        new = (set(after) - set(pids)).pop()
        deadline = time.monotonic() + 10  # a worker pins itself once it is forked
        while (sets := _cpus_of_every_thread(new)) != {frozenset({placed[victim]})}:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert sets == {frozenset({placed[victim]})}  # the dead worker's CPU
        with served.client() as client:
            assert client.turn(client.new_session(), "hello").text()


def test_without_the_flag_workers_keep_every_cpu(
    fake_model: FakeModel, tmp_path: Path
) -> None:
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    with Served.start(tmp_path, [*args, "--workers", "2", "--threads", "2"]) as served:
        everything = frozenset(os.sched_getaffinity(0))
        for pid in _wait_for_workers(served, 2, set()):
            assert _cpus_of_every_thread(pid) == {everything}

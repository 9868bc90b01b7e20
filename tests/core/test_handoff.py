"""``Signal`` and ``hand_off``, the wake-ups a tool call is handed to a pool thread and
back with: the same results on both twins (and on random sequences of calls), across
real threads, with timeouts, and interruptible by a signal as a lock's wait is."""

from __future__ import annotations

import signal
import threading
import time
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from navi_core.core import Signal
from navi_core.tools._pool import Inbox


def test_gives_before_a_wait_are_one(core: ModuleType) -> None:
    s = core.Signal()
    assert s.wait(0) is False
    s.give()
    s.give()
    assert s.wait(0) is True
    assert s.wait(0) is False
    assert s.wait(0.001) is False


def test_a_wait_runs_out_after_its_timeout(core: ModuleType) -> None:
    s = core.Signal()
    start = time.monotonic()
    assert s.wait(0.05) is False
    assert core.hand_off(None, s, 0.05) is False
    assert time.monotonic() - start >= 0.09


@pytest.mark.parametrize("call", ["wait", "hand_off"])
@pytest.mark.parametrize(
    ("timeout", "error"),
    [(-0.5, ValueError), (float("nan"), ValueError), (1e300, OverflowError)],
)
def test_a_bad_timeout_is_refused_before_the_give(
    core: ModuleType, call: str, timeout: float, error: type[Exception]
) -> None:
    mine, theirs = core.Signal(), core.Signal()
    with pytest.raises(error, match="timeout"):
        mine.wait(timeout) if call == "wait" else core.hand_off(theirs, mine, timeout)
    assert theirs.wait(0) is False  # not given


def test_a_give_from_another_thread_ends_a_wait(core: ModuleType) -> None:
    s = core.Signal()
    timer = threading.Timer(0.05, s.give)
    timer.start()
    start = time.monotonic()
    assert s.wait(10) is True
    assert time.monotonic() - start < 5
    timer.join()


def test_two_threads_hand_work_back_and_forth_in_order(core: ModuleType) -> None:
    mine, theirs = core.Signal(), core.Signal()
    box: list[int] = []
    seen: list[int] = []

    def other() -> None:
        assert theirs.wait(10)
        while True:
            value = box.pop()
            seen.append(value)
            box.append(value * 2)
            if value == 499:
                mine.give()
                return
            assert core.hand_off(mine, theirs, 10)

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    answers = []
    for i in range(500):
        box.append(i)
        assert core.hand_off(theirs, mine, 10)
        answers.append(box.pop())
    thread.join(10)
    assert seen == list(range(500))
    assert answers == [i * 2 for i in range(500)]


def test_a_hand_off_to_a_signal_given_already_still_gives(core: ModuleType) -> None:
    mine, theirs = core.Signal(), core.Signal()
    mine.give()
    assert core.hand_off(theirs, mine, 0) is True  # no wait: given before
    assert theirs.wait(0) is True


def _raise_in_main_thread_after(seconds: float, signum: int) -> threading.Timer:
    timer = threading.Timer(
        seconds, signal.pthread_kill, (threading.main_thread().ident, signum)
    )
    timer.start()
    return timer


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")
def test_ctrl_c_ends_a_wait(core: ModuleType) -> None:
    s = core.Signal()
    timer = _raise_in_main_thread_after(0.05, signal.SIGINT)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        core.hand_off(core.Signal(), s, 10)
    assert time.monotonic() - start < 5
    timer.join()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")
def test_a_signal_interrupted_in_its_wait_still_takes_a_give(core: ModuleType) -> None:
    s = core.Signal()
    for _ in range(3):
        timer = _raise_in_main_thread_after(0.02, signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            s.wait(10)
        timer.join()
        s.give()
        assert s.wait(1) is True
        assert s.wait(0) is False


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")
def test_a_signal_that_raises_nothing_leaves_the_wait_to_its_timeout(
    core: ModuleType,
) -> None:
    caught: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: caught.append(1))
    try:
        s = core.Signal()
        timer = _raise_in_main_thread_after(0.05, signal.SIGUSR1)
        start = time.monotonic()
        assert s.wait(0.3) is False
        assert 0.29 <= time.monotonic() - start < 5
        timer.join()
        assert caught == [1]
    finally:
        signal.signal(signal.SIGUSR1, previous)


_OPS = st.lists(
    st.sampled_from(
        ["give a", "give b", "wait a", "wait b", "a to b", "b to a", "none to a"]
    ),
    max_size=40,
)


def _run(module: ModuleType, ops: list[str]) -> list[Any]:
    a, b = module.Signal(), module.Signal()
    signals = {"a": a, "b": b, "none": None}
    out: list[Any] = []
    for op in ops:
        first, second = op.split()[0], op.split()[-1]
        if first == "give":
            out.append(signals[second].give())
        elif first == "wait":
            out.append(signals[second].wait(0))
        else:
            out.append(module.hand_off(signals[first], signals[second], 0))
    return [*out, a.wait(0), b.wait(0)]


@settings(deadline=None, max_examples=200)
@given(ops=_OPS)
def test_both_twins_agree_on_any_sequence_of_calls(
    both_cores: tuple[ModuleType, ModuleType], ops: list[str]
) -> None:
    python, cython = both_cores
    assert _run(python, ops) == _run(cython, ops)


def test_an_inbox_always_gives_the_wake_it_is_handed() -> None:
    """A poll hands its get the wake-up of the pool thread it posted to: it is given
    whether the get waits, finds an item, or runs out of time (a wake-up lost there
    would leave the call unstarted and the turn waiting for ever)."""
    inbox = Inbox()
    for item in (("item",), None):
        if item is not None:
            inbox.put(item)
        wake = Signal()
        assert inbox.get(0.01, wake) == item
        assert wake.wait(0) is True


def test_an_inbox_gives_the_wake_even_when_its_get_fails() -> None:
    inbox = Inbox()
    wake = Signal()
    with pytest.raises(ValueError, match="timeout"):
        inbox.get(-1.0, wake)
    assert wake.wait(0) is True


def test_an_inbox_returns_an_item_put_while_it_waits() -> None:
    inbox = Inbox()
    timer = threading.Timer(0.05, inbox.put, (("late",),))
    timer.start()
    assert inbox.get(10) == ("late",)
    assert inbox.get_nowait() is None
    timer.join()

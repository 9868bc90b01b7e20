"""``history_page`` and held approvals on every store (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from conftest import StoreFactory

from navi_core.conversation import Message, Text, TextPart, ToolResult, UserMessage
from navi_core.store import NullStore, SessionStore
from navi_core.store.base import MAX_PAGE, Approval, ApprovalState

P, A, R, DN = (
    ApprovalState.PENDING,
    ApprovalState.APPROVED,
    ApprovalState.RUNNING,
    ApprovalState.DONE,
)


def numbered(n: int, start: int = 0) -> list[Message]:
    return [UserMessage(f"m{i}") for i in range(start, start + n)]


def texts(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [m.text for m in messages]


def test_pages_walk_every_window_oldest_first(open_store: StoreFactory) -> None:
    store = open_store()
    sid = store.create().id
    store.append(sid, numbered(5))
    store.new_window(sid, numbered(3, 5))
    store.append(sid, numbered(4, 8))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = store.history_page(sid, limit=3, cursor=cursor)
        assert 1 <= len(page.messages) <= 3
        seen += texts(page.messages)
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"m{i}" for i in range(12)]
    assert pages == 4
    # the pages are what history() holds, flattened
    assert seen == [m.text for w in store.history(sid) for m in w]


def test_page_limits_and_bad_cursors(open_store: StoreFactory) -> None:
    store = open_store()
    sid = store.create().id
    store.append(sid, numbered(300))
    page = store.history_page(sid, limit=MAX_PAGE)
    assert len(page.messages) == MAX_PAGE
    rest = store.history_page(sid, limit=MAX_PAGE, cursor=page.next_cursor)
    assert texts(rest.messages) == [f"m{i}" for i in range(256, 300)]
    assert rest.next_cursor is None
    assert len(store.history_page(sid).messages) == 100
    for bad in (0, -1, MAX_PAGE + 1):
        with pytest.raises(ValueError, match="between 1 and 256"):
            store.history_page(sid, limit=bad)
    with pytest.raises(ValueError, match="not a history_page cursor"):
        store.history_page(sid, cursor="abc")


def test_empty_session_and_exact_fit(open_store: StoreFactory) -> None:
    store = open_store()
    sid = store.create().id
    assert store.history_page(sid).messages == ()
    assert store.history_page(sid).next_cursor is None
    store.append(sid, numbered(4))
    page = store.history_page(sid, limit=4)
    assert len(page.messages) == 4
    assert page.next_cursor is None


def result(call_id: str, text: str) -> ToolResult:
    return ToolResult(call_id, (TextPart(text),), False)


def test_approvals_round_trip_and_move_once(open_store: StoreFactory) -> None:
    store = open_store()
    sid = store.create().id
    assert store.approvals(sid) == []
    c1 = Approval("c1", "delete", P, "asks a person", None, 0, "t1", "d" * 64)
    batch = [c1, Approval("c2", "read", DN, "", result("c2", "contents \x00 é"), 1)]
    store.save_approvals(sid, batch)
    other = open_store()  # another connection (another process for SQL stores)
    assert other.approvals(sid) == batch
    assert other.move_approval(sid, c1, P, A)
    assert not store.move_approval(sid, c1, P, A), "a call moves out of pending once"
    assert not store.move_approval(sid, replace(c1, call_id="missing"), P, A)
    assert store.move_approval(sid, c1, A, R)
    assert store.move_approval(sid, c1, R, DN, result=result("c1", "gone"))
    got = store.approvals(sid)
    assert got[0].state is DN
    assert got[0].reason == "asks a person"
    assert got[0].result == result("c1", "gone")
    assert [(a.call_id, a.ordinal) for a in got] == [("c1", 0), ("c2", 1)]
    store.save_approvals(sid, [])
    assert other.approvals(sid) == []


def test_a_move_names_one_call_not_an_id(open_store: StoreFactory) -> None:
    """Two calls of one response share an id: both are kept, each moves on its own;
    a record of another turn or other arguments moves nothing."""
    store = open_store()
    sid = store.create().id
    done = result("c1", "100")
    first = Approval("c1", "balance", DN, "", done, 0, "t1", "a" * 64)
    second = Approval("c1", "pay", P, "", None, 1, "t1", "b" * 64)
    store.save_approvals(sid, [first, second])  # no key clash: ordinals differ
    assert store.approvals(sid) == [first, second]
    assert not store.move_approval(sid, replace(second, turn_id="t0"), P, A)
    assert not store.move_approval(sid, replace(second, digest="c" * 64), P, A)
    assert not store.move_approval(sid, replace(second, ordinal=0), P, A)
    assert store.move_approval(sid, second, P, A)
    assert [(a.name, a.state, a.result) for a in open_store().approvals(sid)] == [
        ("balance", DN, done),
        ("pay", A, None),
    ]


def test_saving_numbers_the_batch_in_its_order(open_store: StoreFactory) -> None:
    store = open_store()
    sid = store.create().id
    store.save_approvals(sid, [Approval("c1", "x", P), Approval("c1", "x", P)])
    assert [a.ordinal for a in store.approvals(sid)] == [0, 1]


def test_concurrent_claims_pick_one_winner(open_store: StoreFactory) -> None:
    first = open_store()
    sid = first.create().id
    held = Approval("c1", "pay", A)
    first.save_approvals(sid, [held])
    stores = [first, open_store(), open_store(), open_store()]
    wins: list[bool] = []
    barrier = threading.Barrier(len(stores))

    def claim(s: SessionStore) -> None:
        barrier.wait()
        wins.append(s.move_approval(sid, held, A, R))

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False, False, False, True]


def test_null_store_keeps_approvals_in_memory_only() -> None:
    store = NullStore()
    sid = store.create().id
    held = Approval("c1", "x", P)
    store.save_approvals(sid, [held])
    assert store.move_approval(sid, held, P, A)
    assert store.approvals(sid)[0].state is A
    assert NullStore().approvals(sid) == []
    with pytest.raises(ValueError, match="between 1 and 256"):
        store.history_page(sid, limit=1000)


def test_approval_state_survives_reopen(open_store: StoreFactory) -> None:
    store = open_store()
    sid = store.create().id
    store.append(sid, [Message("assistant", (Text("x"),))])
    store.save_approvals(sid, [Approval("c1", "x", P)])
    store.close()
    assert open_store().approvals(sid)[0].state is P

"""``history_page`` and held approvals on every store (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import threading

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
    batch = [
        Approval("c1", "delete", P, "asks a person"),
        Approval("c2", "read", DN, "", result("c2", "contents \x00 é")),
    ]
    store.save_approvals(sid, batch)
    other = open_store()  # another connection (another process for SQL stores)
    assert other.approvals(sid) == batch
    assert other.move_approval(sid, "c1", P, A)
    assert not store.move_approval(sid, "c1", P, A), "a call moves out of pending once"
    assert not store.move_approval(sid, "missing", P, A)
    assert store.move_approval(sid, "c1", A, R)
    assert store.move_approval(sid, "c1", R, DN, result=result("c1", "gone"))
    got = {a.call_id: a for a in store.approvals(sid)}
    assert got["c1"].state is DN
    assert got["c1"].reason == "asks a person"
    assert got["c1"].result == result("c1", "gone")
    assert [a.call_id for a in store.approvals(sid)] == ["c1", "c2"]
    store.save_approvals(sid, [])
    assert other.approvals(sid) == []


def test_concurrent_claims_pick_one_winner(open_store: StoreFactory) -> None:
    first = open_store()
    sid = first.create().id
    first.save_approvals(sid, [Approval("c1", "pay", A)])
    stores = [first, open_store(), open_store(), open_store()]
    wins: list[bool] = []
    barrier = threading.Barrier(len(stores))

    def claim(s: SessionStore) -> None:
        barrier.wait()
        wins.append(s.move_approval(sid, "c1", A, R))

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False, False, False, True]


def test_null_store_keeps_approvals_in_memory_only() -> None:
    store = NullStore()
    sid = store.create().id
    store.save_approvals(sid, [Approval("c1", "x", P)])
    assert store.move_approval(sid, "c1", P, A)
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

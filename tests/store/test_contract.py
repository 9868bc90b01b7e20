"""The SessionStore contract, run against MemoryStore, SQLiteStore and PostgresStore."""

from __future__ import annotations

import threading

import pytest
from conftest import StoreFactory
from storekit import EVERY_BLOCK

from navi_core.conversation import (
    CompactionSummary,
    Message,
    Text,
    TextPart,
    ToolResult,
    ToolUse,
    Usage,
    UserMessage,
    WireIdentity,
)
from navi_core.errors import (
    AmbiguousSession,
    SessionBusy,
    SessionError,
    SessionNotFound,
)
from navi_core.store import MemoryStore, SessionLock, SessionStore

WIRE = WireIdentity("openai_chat", "http://127.0.0.1:9/v1", "model-a")


def _assistant(text: str, model: str = "model-a") -> Message:
    wire = WireIdentity("openai_chat", "http://127.0.0.1:9/v1", model)
    return Message("assistant", (Text(text),), stop_reason="end_turn", wire=wire)


def test_store_satisfies_the_protocol(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)


def test_new_session_is_empty_and_listed(store: SessionStore) -> None:
    info = store.create()
    assert (info.message_count, info.last_user_message, info.model) == (0, None, None)
    assert store.list() == [info]
    assert store.get(info.id) == info
    assert store.load(info.id).messages == []
    assert store.load(info.id).session_id == info.id
    assert store.history(info.id) == [[]]


def test_append_then_load_keeps_order_and_content(store: SessionStore) -> None:
    sid = store.create().id
    turn = [
        UserMessage("read it"),
        EVERY_BLOCK,
        UserMessage("thanks"),
        _assistant("ok"),
    ]
    store.append(sid, turn[:1])
    store.append(sid, turn[1:3])
    store.append(sid, [])
    store.append(sid, turn[3:])
    assert store.load(sid).messages == turn


def test_sessions_survive_reopening(open_store: StoreFactory) -> None:
    first = open_store()
    sid = first.create().id
    first.append(sid, [UserMessage("hello"), EVERY_BLOCK])
    first.close()
    second = open_store()
    assert second.load(sid).messages == [UserMessage("hello"), EVERY_BLOCK]
    assert second.get(sid).message_count == 2


def test_info_tracks_count_last_prompt_and_model(store: SessionStore) -> None:
    sid = store.create().id
    result = Message("user", (ToolResult("c1", (TextPart("42"),)),))
    store.append(sid, [UserMessage("first"), _assistant("a", "model-a")])
    store.append(sid, [UserMessage("second")])
    store.append(sid, [Message("assistant", (ToolUse("c1", "t", "{}"),)), result])
    info = store.get(sid)
    assert info.message_count == 5
    assert (
        info.last_user_message == "second"
    )  # a tool-result message has no prompt text
    assert info.model == "model-a"
    store.append(sid, [_assistant("b", "model-b")])
    assert store.get(sid).model == "model-b"
    assert info.created_at <= info.modified_at <= store.get(sid).modified_at


def test_get_by_unique_prefix(store: SessionStore) -> None:
    ids = [store.create().id for _ in range(3)]
    for sid in ids:
        prefix = next(
            sid[:n]
            for n in range(1, len(sid))
            if not any(o.startswith(sid[:n]) for o in ids if o != sid)
        )
        assert store.get(prefix).id == sid
        assert store.load(prefix).session_id == sid


def test_writes_take_a_unique_prefix(store: SessionStore) -> None:
    sid, other = store.create().id, store.create().id
    prefix = next(sid[:n] for n in range(1, len(sid)) if not other.startswith(sid[:n]))
    store.append(prefix, [UserMessage("q1")])
    store.new_window(prefix, [UserMessage("q2")])
    store.append(prefix, [UserMessage("q3")])
    assert store.history(sid) == [
        [UserMessage("q1")],
        [UserMessage("q2"), UserMessage("q3")],
    ]
    assert store.get(other).message_count == 0


def test_a_new_session_was_modified_when_made(store: SessionStore) -> None:
    info = store.create()
    assert info.created_at == info.modified_at
    assert store.get(info.id) == info


def test_unknown_and_empty_ids_are_not_found(store: SessionStore) -> None:
    store.create()
    for bad in ("nope", "", "%", "_"):
        with pytest.raises(SessionNotFound):
            store.get(bad)
    with pytest.raises(SessionNotFound):
        store.load("nope")
    with pytest.raises(SessionNotFound):
        store.append("nope", [UserMessage("lost?")])
    with pytest.raises(SessionNotFound):
        store.lock("nope")
    assert isinstance(SessionNotFound("x"), SessionError)


def test_shared_prefix_is_ambiguous(store: SessionStore) -> None:
    # 17 hex ids cannot all start with different characters.
    ids = [store.create().id for _ in range(17)]
    firsts = [i[0] for i in ids]
    shared = next(c for c in firsts if firsts.count(c) > 1)
    with pytest.raises(AmbiguousSession, match="give more characters"):
        store.get(shared)


def test_list_and_latest_are_newest_first(store: SessionStore) -> None:
    assert store.latest() is None
    a, b, c = (store.create().id for _ in range(3))
    store.append(a, [UserMessage("a")])
    store.append(c, [UserMessage("c")])
    store.append(b, [UserMessage("b")])
    assert [i.id for i in store.list()] == [b, c, a]
    latest = store.latest()
    assert latest is not None and latest.id == b
    store.append(a, [UserMessage("a again")])
    assert [i.id for i in store.list()] == [a, b, c]


def test_new_window_replaces_what_load_returns(store: SessionStore) -> None:
    sid = store.create().id
    old = [UserMessage("q1"), _assistant("a1"), UserMessage("q2"), _assistant("a2")]
    store.append(sid, old)
    window = [Message("user", (CompactionSummary("asked q1, got a1"),)), *old[2:]]
    store.new_window(sid, window)
    assert store.load(sid).messages == window
    store.append(sid, [UserMessage("q3")])
    assert store.load(sid).messages == [*window, UserMessage("q3")]
    assert store.history(sid) == [old, [*window, UserMessage("q3")]]
    store.new_window(sid, [])
    assert store.load(sid).messages == []
    assert store.history(sid)[2] == []
    assert store.get(sid).message_count == len(old) + len(window) + 1


def test_a_window_of_a_summary_alone_keeps_the_last_prompt_and_model(
    store: SessionStore,
) -> None:
    """A compaction that summarised every turn leaves a window with no prompt text
    (and, for a summary without a wire identity, no model) of its own: the session
    still shows the last prompt and model it had (``navi-core sessions list`` showed
    them empty); a later window with its own replaces them."""
    sid = store.create().id
    store.append(sid, [UserMessage("q1"), _assistant("a1", "chat-model")])
    store.new_window(sid, [Message("user", (CompactionSummary("asked q1"),))])
    info = store.get(sid)
    assert (info.last_user_message, info.model) == ("q1", "chat-model")
    store.append(sid, [UserMessage("q2"), _assistant("a2", "other-model")])
    info = store.get(sid)
    assert (info.last_user_message, info.model) == ("q2", "other-model")
    store.new_window(sid, [UserMessage("kept"), _assistant("a3", "third-model")])
    info = store.get(sid)
    assert (info.last_user_message, info.model) == ("kept", "third-model")


def test_lock_admits_one_driver(store: SessionStore) -> None:
    a, b = store.create().id, store.create().id
    lock = store.lock(a[:6])
    assert isinstance(lock, SessionLock)
    with pytest.raises(SessionBusy):
        store.lock(a)
    other = store.lock(b)  # another session is independent
    lock.release()
    lock.release()  # idempotent
    again = store.lock(a)
    again.release()
    other.release()


def test_lock_is_exclusive_across_threads(store: SessionStore) -> None:
    sid = store.create().id
    outcomes: list[str] = []
    barrier = threading.Barrier(6)
    held: list[SessionLock] = []
    mutex = threading.Lock()

    def contend() -> None:
        barrier.wait()
        try:
            lock = store.lock(sid)
        except SessionBusy:
            outcome = "busy"
        else:
            outcome = "held"
            with mutex:
                held.append(lock)
        with mutex:
            outcomes.append(outcome)

    threads = [threading.Thread(target=contend) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["busy"] * 5 + ["held"]
    held[0].release()


def test_concurrent_appends_from_threads_lose_nothing(store: SessionStore) -> None:
    sid = store.create().id
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(15):
                store.append(sid, [UserMessage(f"t{n}-{i}"), _assistant(f"t{n}-{i}")])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    messages = store.load(sid).messages
    assert len(messages) == 4 * 15 * 2
    for pair in zip(
        messages[::2], messages[1::2], strict=True
    ):  # each append stayed contiguous
        assert pair[0].text == pair[1].text
    for n in range(4):
        mine = [m.text for m in messages[::2] if m.text.startswith(f"t{n}-")]
        assert mine == [f"t{n}-{i}" for i in range(15)]


def test_a_message_that_cannot_be_stored_writes_nothing(store: SessionStore) -> None:
    if isinstance(store, MemoryStore):
        pytest.skip("MemoryStore keeps objects and encodes nothing")
    sid = store.create().id
    store.append(sid, [UserMessage("kept")])
    too_big = Usage(2**64, 0, 0, 0, 0)  # JSON integers stop at 64 bits
    bad = [_assistant("fine"), Message("assistant", (Text("x"),), too_big)]
    with pytest.raises(SessionError, match="cannot encode"):
        store.append(sid, bad)
    with pytest.raises(SessionError):
        store.new_window(sid, bad)
    assert store.load(sid).messages == [UserMessage("kept")]
    assert store.get(sid).message_count == 1
    assert store.history(sid) == [[UserMessage("kept")]]


def test_close_is_idempotent(store: SessionStore) -> None:
    store.create()
    store.close()
    store.close()

"""``SessionStore.delete_session`` on memory, SQLite and PostgreSQL: the session, every
window of its messages and its held approvals go; other sessions stay."""

from __future__ import annotations

import pytest
from conftest import StoreFactory

from navi_core.conversation import Message, Text, ToolUse, UserMessage, WireIdentity
from navi_core.errors import SessionBusy, SessionNotFound
from navi_core.store import SessionStore
from navi_core.store.base import Approval, ApprovalState

WIRE = WireIdentity("openai_chat", "http://127.0.0.1:9/v1", "model-a")


def _turn(store: SessionStore, prompt: str) -> str:
    sid = store.create().id
    call = ToolUse("call_1", "rm", "{}")
    store.append(
        sid,
        [
            UserMessage(prompt),
            Message("assistant", (Text("ok"), call), stop_reason="tool_use", wire=WIRE),
        ],
    )
    store.new_window(sid, [UserMessage(prompt + " (kept)")])
    store.save_approvals(sid, [Approval("call_1", "rm", ApprovalState.PENDING)])
    return sid


def test_delete_removes_the_session_its_windows_and_approvals(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    gone, kept = _turn(store, "delete me"), _turn(store, "keep me")
    store.delete_session(gone)
    for reader in (store, open_store()):  # also as another connection sees it
        assert [s.id for s in reader.list()] == [kept]
        with pytest.raises(SessionNotFound):
            reader.get(gone)
        with pytest.raises(SessionNotFound):
            reader.history(gone)
        with pytest.raises(SessionNotFound):
            reader.approvals(gone)
        assert len(reader.history(kept)) == 2
        assert [a.call_id for a in reader.approvals(kept)] == ["call_1"]


def test_delete_needs_the_whole_id(store: SessionStore) -> None:
    sid = _turn(store, "x")
    with pytest.raises(SessionNotFound):
        store.delete_session(sid[:6])
    with pytest.raises(SessionNotFound):
        store.delete_session("no-such-session")
    assert store.get(sid).id == sid


def test_a_deleted_session_frees_its_lock_and_its_id(store: SessionStore) -> None:
    sid = _turn(store, "x")
    lock = store.lock(sid)
    with pytest.raises(SessionBusy):
        store.lock(sid)
    store.delete_session(sid)
    lock.release()
    with pytest.raises(SessionNotFound):
        store.lock(sid)
    fresh = store.create().id
    store.append(fresh, [UserMessage("after")])
    assert store.load(fresh).messages == [UserMessage("after")]

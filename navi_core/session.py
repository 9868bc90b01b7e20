"""``Session``: one stored conversation and the right to write to it.

A ``Session`` owns the live ``Conversation``, the store it is persisted in, the session
lock (one driver at a time), the buffer of committed messages not yet written, the
results kept from tool batches that a turn abandoned, and the token-size cache of its
messages. Everything that changes the conversation goes through it, so the store and
the conversation never disagree about what was committed. What the history holds
besides the dialogue is read back from it: the model's todo list (``todos``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from types import TracebackType
from typing import Literal

from ._ids import publish
from .conversation import (
    Conversation,
    Message,
    System,
    ToolResult,
    WireIdentity,
    scrub_text,
)
from .events import TodoItem
from .store.base import SessionLock, SessionStore
from .tokens import SizeCache
from .tools._results import interrupted_results
from .tools._todo import latest_todos

__all__ = ["Session"]


class Session:
    """The conversation of one stored session, written through its lock.

    Use ``Session.open`` to create or resume one. ``close()`` writes what is pending
    and releases the lock; it is idempotent.

    Raises:
        SessionBusy: another driver holds the session (from ``open``).
        SessionNotFound, AmbiguousSession: the id names no single session.
    """

    __slots__ = ("_kept", "_lock", "_unsaved", "conversation", "sizes", "store")

    def __init__(
        self, store: SessionStore, conversation: Conversation, lock: SessionLock
    ) -> None:
        self.store = store
        self.conversation = conversation
        #: token estimates of the messages, kept between threshold checks
        self.sizes = SizeCache()
        self._lock: SessionLock | None = lock
        self._unsaved: list[Message] = []
        self._kept: dict[str, ToolResult] = {}

    @classmethod
    def open(cls, store: SessionStore, session: str | None = None) -> Session:
        """Create (``None``), resume the latest (``"latest"``) or resume by id/prefix."""
        if session is None:
            info = store.create()
        elif session == "latest":
            info = store.latest() or store.create()
        else:
            info = store.get(session)
        lock = store.lock(info.id)
        try:
            # Loaded after the lock: the count read before it may be stale (another
            # driver may have written until it let go). A new id has nothing to load.
            conversation = (
                Conversation([], info.id) if session is None else store.load(info.id)
            )
            conversation.session_id = info.id
        except BaseException:
            lock.release()
            raise
        return cls(store, conversation, lock)

    @property
    def id(self) -> str:
        """The session id."""
        sid = self.conversation.session_id
        assert sid is not None
        return sid

    @property
    def messages(self) -> list[Message]:
        """The live list of messages (the conversation's own list)."""
        return self.conversation.messages

    @property
    def closed(self) -> bool:
        """True once ``close()`` released the lock."""
        return self._lock is None

    def last_dialogue_message(self) -> Message | None:
        """The newest message that is not a system message."""
        for m in reversed(self.conversation.messages):
            if m.role != "system":
                return m
        return None

    def todos(self, names: Collection[str]) -> tuple[TodoItem, ...]:
        """The todo list the model last wrote with a tool named in ``names`` (a
        ``TodoList``), read from the history: the live window first, then the windows
        a compaction closed; empty when it wrote none."""
        if not names:
            return ()
        found = latest_todos(self.conversation.messages, names)
        if found is None:
            for window in reversed(self.store.history(self.id)):
                found = latest_todos(window, names)
                if found is not None:
                    break
        return found or ()

    # -- changes ----------------------------------------------------------------------

    def commit(self, message: Message, wire: WireIdentity | None = None) -> Message:
        """Append ``message`` to the conversation and persist it at once.

        Non-assistant text is cleaned of lone surrogates; a message without a wire
        identity gets ``wire``. Returns the message as committed.
        """
        if message.role != "assistant":
            message = scrub_text(message)
        if message.wire is None and wire is not None:
            message = message.with_wire(wire)
        self.conversation.messages.append(message)
        self._unsaved.append(message)
        self.flush()
        return message

    def commit_stored(
        self, message: Message, wire: WireIdentity | None = None
    ) -> Message:
        """Store ``message`` (after anything still buffered), then append it.

        Unlike ``commit``, a store failure changes nothing: the message is neither in
        the conversation nor buffered, so the caller can simply try again. Returns
        the message as committed.

        Raises:
            SessionError: the store refused the write.
        """
        if message.role != "assistant":
            message = scrub_text(message)
        if message.wire is None and wire is not None:
            message = message.with_wire(wire)
        batch = [*self._unsaved, message]
        self.store.append(self.id, batch)
        del self._unsaved[: len(batch) - 1]
        self.conversation.messages.append(message)
        return message

    def add_system(
        self, text: str, mode: Literal["append", "replace"], wire: WireIdentity | None
    ) -> None:
        """Commit a system prompt ("append", or "replace" the earlier ones)."""
        if mode not in ("append", "replace"):
            raise ValueError(f"mode must be 'append' or 'replace', not {mode!r}")
        self.commit(Message("system", (System(text, mode),)), wire)

    def flush(self) -> None:
        """Write the committed messages the store has not received yet.

        On a store failure they stay buffered for the next flush.
        """
        if self._unsaved:
            batch = list(self._unsaved)
            self.store.append(self.id, batch)
            del self._unsaved[: len(batch)]

    def new_window(self, messages: Sequence[Message]) -> None:
        """Replace the conversation with ``messages``, stored as a new window."""
        self.flush()
        self.store.new_window(self.id, messages)
        self.conversation.messages[:] = messages

    def keep_results(self, results: Mapping[str, ToolResult]) -> None:
        """Keep the results of calls that finished in a batch a turn abandoned."""
        self._kept.update(results)

    def answer_dangling_calls(self, wire: WireIdentity | None) -> bool:
        """Give results to the tool calls of the last message that never got any.

        Calls whose result was kept (``keep_results``) get it; the others get an
        error result saying they were interrupted (they are never run again). The
        kept results are used up either way: when the last message has no dangling
        call, its batch was answered otherwise (a held batch settled from the store),
        and a later call reusing one of their ids must not read them. Returns True
        when a result message was committed.
        """
        kept, self._kept = self._kept, {}
        last = self.last_dialogue_message()
        if last is None or last.role != "assistant" or not last.tool_uses:
            return False
        self.commit(interrupted_results(last.tool_uses, wire, kept), wire)
        return True

    # -- life cycle -------------------------------------------------------------------

    def close(self) -> None:
        """Write what is pending and release the lock (idempotent)."""
        lock = self._lock
        if lock is None:
            return
        try:
            self.flush()
        finally:
            self._lock = None
            lock.release()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Session {self.conversation.session_id} messages={len(self.conversation)}"
            f" unsaved={len(self._unsaved)}>"
        )


publish(globals())

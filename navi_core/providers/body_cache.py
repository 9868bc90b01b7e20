"""Request bodies assembled from JSON kept per message, so a request costs what is new.

Messages are frozen, so each is encoded once per wire format and its bytes are kept
while the message lives (``MessageCache``: keyed by identity, bounded). An agent
loop's next request repeats the previous request's messages and adds a few, so an
encoder also remembers the last conversation it encoded and, when the next one extends
it, encodes only the new messages and appends their bytes. Everything else of the body
(model, tools, options) is small and encoded by ``orjson`` around the messages array
(``split_body``). The bytes are exactly those of ``orjson.dumps(build_body(request))``;
tests/providers/test_body_cache.py compares both on random conversations.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

import orjson

from .._history import History
from ..conversation import MediaPart, Message, Text, ToolResult, ToolUse, WireIdentity

if TYPE_CHECKING:
    from .base import ProviderRequest

__all__ = [
    "CACHE",
    "AnthropicEncoder",
    "BodyFrame",
    "FlatEncoder",
    "MessageCache",
    "exact",
    "split_body",
    "starts_turn",
    "tool_turns",
]

#: what ``mark_cache_breakpoints`` adds to a block, spliced before its closing brace
_MARK = b',"cache_control":{"type":"ephemeral"}}'


class MessageCache:
    """Encoded forms of messages, keyed by identity and a format key.

    An entry lives as long as its message and no longer: it holds a weak reference,
    whose callback drops the entry when the message is freed (before its id can be
    reused), so the messages of a conversation that ended take their bytes with them
    and nothing is left for the garbage collector to walk. Past ``limit`` messages or
    ``max_bytes`` of memory (as the callers of ``put`` measure it) the oldest half of
    the entries is dropped (their messages are encoded again if seen). An entry is one
    flat tuple, ``(ref, size, key, value, key, value...)``: most messages are encoded
    in one format only, so a dict per entry would cost more than the bytes it holds.
    """

    def __init__(self, limit: int = 50_000, max_bytes: int = 256 << 20) -> None:
        self._entries: dict[int, tuple[Any, ...]] = {}
        self._limit = limit
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()
        #: references of freed messages whose entries are still to be dropped: only
        #: the holder of ``_lock`` changes the table (``_bury_locked``)
        self._dead: list[weakref.KeyedRef[int, Message]] = []
        self._drop = self._gone  # one bound method for every reference

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def table(self) -> Mapping[int, tuple[Any, ...]]:
        """id(message) -> ``(ref, size, key, value, ...)``, ``ref()`` the message: what
        ``get`` reads, for loops that look up many messages without a call per
        message."""
        return self._entries

    @property
    def nbytes(self) -> int:
        """The memory the entries hold, as reported to ``put``."""
        return self._bytes

    def get(self, message: Message, key: Hashable) -> Any:
        """The value stored for ``message`` under ``key``, or None."""
        entry = self._entries.get(id(message))
        if entry is None or entry[0]() is not message:
            return None
        return _value(entry, key)

    def put(self, message: Message, key: Hashable, value: Any, size: int) -> None:
        """Store ``value`` (holding ``size`` bytes) for ``message`` under ``key``."""
        with self._lock:
            ident = id(message)
            entry = self._entries.get(ident)
            if entry is not None and entry[0]() is not message:
                # a freed message's entry, not dropped yet: the id is this one's now
                del self._entries[ident]
                self._bytes -= entry[1]
                entry = None
            if entry is None:
                if len(self._entries) >= self._limit or self._bytes >= self._max_bytes:
                    self._evict_locked()
                ref = weakref.KeyedRef(message, self._drop, ident)
                self._entries[ident] = (ref, size, key, value)
            else:
                others = range(2, len(entry), 2)
                flat = [
                    x for at in others if entry[at] != key for x in entry[at : at + 2]
                ]
                self._entries[ident] = (entry[0], entry[1] + size, *flat, key, value)
            self._bytes += size
            self._bury_locked()

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._dead.clear()
            self._bytes = 0

    def _evict_locked(self) -> None:
        entries = self._entries
        for old in list(islice(entries, (len(entries) + 1) // 2)):
            self._bytes -= entries.pop(old)[1]

    def _gone(self, ref: weakref.KeyedRef[int, Message]) -> None:
        """A message with an entry was freed (the weak reference's callback, on
        whichever thread freed it): its entry is dropped now when the lock is free,
        else by the lock's holder before it lets go.

        It never waits for the lock: a collection may free the message inside a
        locked section of this very thread (any allocation there), even while the
        table is being iterated, which a change would break."""
        self._dead.append(ref)
        if self._lock.acquire(blocking=False):
            try:
                self._bury_locked()
            finally:
                self._lock.release()

    def _bury_locked(self) -> None:
        """Drop the entries of freed messages (``_gone``); the lock is held. An entry
        a freed message left while another thread held the lock past this point
        stays until the next ``put``: its reference is dead, so no lookup finds it."""
        dead, entries = self._dead, self._entries
        while dead:
            ref = dead.pop()
            entry = entries.get(ref.key)
            if entry is not None and entry[0] is ref:
                del entries[ref.key]
                self._bytes -= entry[1]


def _value(entry: tuple[Any, ...], key: Hashable) -> Any:
    """The value an entry holds under ``key``, or None."""
    if entry[2] == key:
        return entry[3]
    for at in range(4, len(entry), 2):
        if entry[at] == key:
            return entry[at + 1]
    return None


def exact(data: bytes) -> bytes:
    """``data`` in a bytes object of its own size.

    orjson returns its output in the buffer it wrote it to (1 to 4 KiB at least,
    depending on the version), and ``sys.getsizeof`` does not always show it: a kept
    59-byte result can hold 4 KiB. A kept value is copied to its exact size once.
    """
    return memoryview(data).tobytes()


def _entry_bytes() -> int:
    """The memory of one entry besides the bytes it keeps: the entry tuple, its slot in
    the table, the id key, the weak reference and the value's tuple."""
    message = Message("user", (Text(""),))
    ref = weakref.KeyedRef(message, lambda _: None, 1 << 60)
    return (
        sys.getsizeof((None,) * 4)
        + sys.getsizeof((None,) * 4)
        + sys.getsizeof(1 << 60)
        + sys.getsizeof(ref)
        + 3 * 8 * 2  # a dict slot (hash, key, value), with the table at most 2/3 full
    )


_ENTRY_BYTES = _entry_bytes()


def _held(*kept: bytes) -> int:
    """The memory an entry keeping ``kept`` costs: the bytes objects themselves (their
    real size, overhead included) and the entry's own bookkeeping (the message is the
    conversation's: the entry does not keep it alive)."""
    return sum(map(sys.getsizeof, kept)) + _ENTRY_BYTES


CACHE = MessageCache()
"""The process-wide cache every provider shares (a provider per request still hits)."""


def split_body(body: Mapping[str, Any], key: str) -> tuple[bytes, bytes]:
    """The JSON of ``body`` before and after the array value of ``key``.

    ``before`` ends with ``"key":[`` and ``after`` starts with ``]``, so
    ``before + items + after`` is ``orjson.dumps(body)`` with ``body[key]`` the array
    whose comma-joined items are ``items``.
    """
    items = list(body.items())
    at = next(i for i, (name, _) in enumerate(items) if name == key)
    head = orjson.dumps(dict(items[:at]))[:-1]
    tail = orjson.dumps(dict(items[at + 1 :]))[1:]
    before = head + (b"," if at else b"") + orjson.dumps(key) + b":["
    after = (b"]," if at + 1 < len(items) else b"]") + tail
    return before, after


class BodyFrame:
    """The encoded JSON around a request's message array, kept for the next request
    with equal tools, system prompt, config and output: the requests of a turn (and
    of an agent's turns) differ only in their messages, so their frame is encoded
    once. One entry, swapped whole, so threads sharing a provider need no lock.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[Any, ...] | None = None

    def get(
        self, request: ProviderRequest, make: Callable[[], tuple[bytes, ...]]
    ) -> tuple[bytes, ...]:
        """``make()``, or what it returned for the last request with the same frame."""
        last = self._last
        tools, system, config = request.tools, request.system, request.config
        if (
            last is not None
            and last[3] is request.output
            and last[1] == system
            and (last[2] is config or last[2] == config)
            and last[0] == tools  # specs are frozen: equal ones encode the same
        ):
            return last[4]  # type: ignore[no-any-return]
        frame = make()
        self._last = (tools, system, config, request.output, frame)
        return frame


def _dumps_all(values: Sequence[dict[str, Any]]) -> bytes:
    return b",".join(orjson.dumps(v) for v in values)


#: (message, names) -> the wire items of one message; records its tool calls' names
FlatEncode = Callable[[Message, dict[str, str]], list[dict[str, Any]]]

#: (message, names, in_tool_turn) -> the same, for an encoding that also depends on
#: whether the message's turn has called a tool by then (``FlatEncoder(turns=True)``)
TurnEncode = Callable[[Message, dict[str, str], bool], list[dict[str, Any]]]


def starts_turn(message: Message) -> bool:
    """True for a user message that opens a turn: one holding anything besides tool
    results (the user's text or images, a summary). A message of tool results only
    carries on the turn of the calls it answers."""
    return message.role == "user" and any(
        type(b) is not ToolResult for b in message.content
    )


def tool_turns(messages: Iterable[Message], tooled: bool = False) -> Iterator[bool]:
    """For each message, whether its turn has called a tool by then: from the first
    assistant message with a tool call (itself included) up to the next message that
    ``starts_turn``. ``tooled``: the state after the messages before these."""
    for message in messages:
        role = message.role
        if role == "assistant":
            if not tooled:
                tooled = any(type(b) is ToolUse for b in message.content)
        elif role == "user" and tooled and starts_turn(message):
            tooled = False
        yield tooled


class FlatEncoder:
    """Items that map one message to zero or more array items (chat, Responses).

    ``names`` (tool call id -> tool name, from earlier assistant messages) only reaches
    the encoding of a tool result with images (its label); such a message's entry keeps
    the names it was encoded with and is encoded again when they differ. ``wire``:
    the encoding depends on whether a message is the receiver's own (``is_own``).
    ``turns``: ``encode`` is a ``TurnEncode``, and the encoding of the receiver's own
    assistant messages also depends on whether their turn has called a tool by then
    (``tool_turns``); each form is kept under a key of its own.
    """

    def __init__(
        self,
        style: str,
        encode: FlatEncode | TurnEncode,
        wire: WireIdentity | None = None,
        *,
        turns: bool = False,
    ) -> None:
        if turns:
            self._encode = cast(TurnEncode, encode)
        else:
            plain = cast(FlatEncode, encode)
            self._encode = lambda message, names, _turn: plain(message, names)
        self._wire = wire
        self._turns = turns
        # by is_own, then (own assistant messages, with turns) in a tool turn
        self._keys = ((style, False), (style, True), (style, True, "tool turn"))
        self._lock = threading.Lock()
        #: the messages last encoded, their chunks, the names and the tool-turn state
        #: they leave
        self._memo: (
            tuple[Sequence[Message], list[bytes], dict[str, str], bool] | None
        ) = None

    def join(
        self, messages: Sequence[Message], before: bytes, first: bytes, after: bytes
    ) -> list[bytes]:
        """``before``, ``first`` (an item or b""), the messages' items, ``after``, in
        parts (``_assemble``)."""
        with self._lock:
            memo = self._memo
            if memo is not None and _extends(messages, memo[0]):
                done, chunks, names, tooled = len(memo[0]), memo[1], memo[2], memo[3]
            else:
                done, chunks, names, tooled = 0, [], {}, False
            entries = CACHE.table
            wire, keys, turns = self._wire, self._keys, self._turns
            pieces = []
            for message in messages[done:]:
                made = message.wire
                own = wire is None or made is None or made == wire  # is_own
                turn = False
                if turns:  # tool_turns, inline
                    role = message.role
                    if role == "assistant":
                        if not tooled:
                            tooled = any(type(b) is ToolUse for b in message.content)
                        turn = tooled and own
                    elif role == "user" and tooled and starts_turn(message):
                        tooled = False
                key = keys[2 if turn else own]
                entry = entries.get(id(message))
                hit = None
                if entry is not None and entry[0]() is message:
                    hit = entry[3] if entry[2] == key else _value(entry, key)
                if hit is None:
                    piece = self._encoded(message, names, key, turn)
                elif hit[2]:  # its image labels name tools: check them
                    piece = self._piece(message, names, key, turn)
                else:
                    if hit[1]:
                        names.update(hit[1])
                    piece = hit[0]
                if piece:
                    pieces.append(piece)
            _add_chunk(chunks, pieces)
            self._memo = (_kept(messages), chunks, names, tooled)
            return _assemble(before, first, chunks, b"", after)

    def _piece(
        self, message: Message, names: dict[str, str], key: Hashable, turn: bool
    ) -> bytes:
        hit = CACHE.get(message, key)
        if hit is not None:
            piece, added, label_ids, labels = hit
            if added:
                names.update(added)
            if not label_ids or labels == tuple(names.get(i) for i in label_ids):
                return piece  # type: ignore[no-any-return]
        return self._encoded(message, names, key, turn)

    def _encoded(
        self, message: Message, names: dict[str, str], key: Hashable, turn: bool
    ) -> bytes:
        """Encode ``message`` and keep its piece, the tool names it adds and the names
        its image labels read (``names`` as they were)."""
        added: tuple[tuple[str, str], ...] = ()
        label_ids: tuple[str, ...] = ()
        for b in message.content:
            if type(b) is ToolUse:
                added += ((b.id, b.name),)
            elif type(b) is ToolResult and any(type(p) is MediaPart for p in b.parts):
                label_ids += (b.tool_use_id,)
        items = self._encode(message, names, turn)
        piece = exact(orjson.dumps(items[0]) if len(items) == 1 else _dumps_all(items))
        labels = tuple(names.get(i) for i in label_ids) if label_ids else ()
        size = sys.getsizeof(piece) + _ENTRY_BYTES  # _held(piece)
        CACHE.put(message, key, (piece, added, label_ids, labels), size)
        return piece


def _add_chunk(chunks: list[bytes], pieces: list[bytes]) -> None:
    """Append the comma-joined ``pieces`` to the kept ``chunks`` (every chunk but the
    first starts with its comma). A chunk is merged into the one before it while that
    one is less than twice its size, so there are O(log n) chunks, the older ones the
    larger, and each byte is copied O(log n) times in all (as in a binary counter)."""
    if not pieces:
        return
    chunks.append(b",".join([b"", *pieces]) if chunks else b",".join(pieces))
    while len(chunks) > 1 and len(chunks[-2]) < 2 * len(chunks[-1]):
        last = chunks.pop()
        chunks[-1] += last


def _assemble(
    before: bytes, first: bytes, chunks: list[bytes], tail: bytes, after: bytes
) -> list[bytes]:
    """``before``, ``first``, the kept chunks, ``tail`` (items not kept, no leading
    comma), ``after``: the body as parts to send in order. A chunk of at least
    ``_ALONE`` bytes is a part of its own (sent as it is kept, never copied); the small
    pieces around them are joined."""
    parts: list[bytes] = []
    small = [before, first, b","] if first and chunks else [before, first]
    for chunk in chunks:
        if len(chunk) >= _ALONE:
            if small:
                parts.append(b"".join(small))
            parts.append(chunk)
            small = []
        else:
            small.append(chunk)
    if tail:
        if chunks or first:
            small.append(b",")
        small.append(tail)
    small.append(after)
    parts.append(b"".join(small))
    return parts


#: a kept chunk this long goes to the socket as its own part
_ALONE = 64 * 1024


#: message -> its Messages blocks (tool results first), or None for another role
BlockEncode = Callable[[Message], list[dict[str, Any]]]
_Group = list[Any]  # [role, results, others, the one message's rendering or None]


class AnthropicEncoder:
    """The Messages array: same-role neighbours merged, breakpoints on two user groups.

    Groups before the second-to-last user group can no longer merge or be marked, so
    their bytes are frozen; the rest is kept as blocks and rendered per request.
    """

    def __init__(self, encode: BlockEncode, wire: WireIdentity, *, marks: bool) -> None:
        self._encode = encode
        self._wire = wire
        self._marks = marks
        self._lock = threading.Lock()
        self._memo: tuple[Sequence[Message], list[bytes], list[_Group]] | None = None

    def join(
        self, messages: Sequence[Message], before: bytes, after: bytes
    ) -> list[bytes]:
        """``before``, the messages array's items, ``after``, in parts."""
        with self._lock:
            memo = self._memo
            if memo is not None and _extends(messages, memo[0]):
                done, frozen, tail = len(memo[0]), memo[1], memo[2]
            else:
                done, frozen, tail = 0, [], []
            entries = CACHE.table
            wire = self._wire
            for message in messages[done:]:
                made = message.wire
                key = _ANTHROPIC[made is None or made == wire]  # is_own
                entry = entries.get(id(message))
                hit = None
                if entry is not None and entry[0]() is message:
                    hit = entry[3] if entry[2] == key else _value(entry, key)
                if hit is None:
                    hit = self._blocks(message, key)
                if not hit:
                    continue  # no blocks, or not a user or assistant message
                results, others, alone = hit
                role = message.role
                if tail and tail[-1][0] == role:
                    group = tail[-1]
                    group[1] = [*group[1], *results]
                    group[2] = [*group[2], *others]
                    group[3] = None  # merged: no longer one message's rendering
                else:
                    tail.append([role, results, others, alone])
            users = [i for i, g in enumerate(tail) if g[0] == "user"]
            keep = max(len(tail) - 1, 0)
            if self._marks and users:
                keep = min(keep, users[-2] if len(users) > 1 else users[-1])
            if keep:
                _add_chunk(frozen, [_render(g, False) for g in tail[:keep]])
                del tail[:keep]
            marked = {i - keep for i in users[-2:]} if self._marks else set()
            self._memo = (_kept(messages), frozen, tail)
            rendered = b",".join([_render(g, i in marked) for i, g in enumerate(tail)])
            return _assemble(before, b"", frozen, rendered, after)

    def _blocks(self, message: Message, key: Hashable) -> tuple[Any, ...]:
        """The message's blocks (tool results, others) and its unmarked group; () when
        it has none or is neither a user nor an assistant message."""
        hit: tuple[Any, ...] = ()
        if message.role in ("user", "assistant"):
            results: list[bytes] = []
            others: list[bytes] = []
            for block in self._encode(message):
                is_result = block["type"] == "tool_result"
                (results if is_result else others).append(exact(orjson.dumps(block)))
            if results or others:
                alone = _render([message.role, results, others, None], False)
                hit = (tuple(results), tuple(others), alone)
        size = _held(*hit[0], *hit[1], hit[2]) if hit else _ENTRY_BYTES
        CACHE.put(message, key, hit, size)
        return hit


_ANTHROPIC = (("anthropic-messages", False), ("anthropic-messages", True))


def _render(group: _Group, mark: bool) -> bytes:
    if not mark and group[3] is not None:
        return group[3]  # type: ignore[no-any-return]
    blocks = [*group[1], *group[2]]
    if mark:
        blocks[-1] = blocks[-1][:-1] + _MARK
    role: str = group[0]
    return b'{"role":"' + role.encode() + b'","content":[' + b",".join(blocks) + b"]}"


def _kept(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` as the memo may keep them: a ``History`` or a tuple as it is, any
    other sequence (a list the caller goes on editing) as the tuple of what it holds
    now, so the next request is compared with what was encoded."""
    if type(messages) is History or type(messages) is tuple:
        return messages
    return tuple(messages)


def _extends(messages: Sequence[Message], done: Sequence[Message]) -> bool:
    if isinstance(messages, History) and messages.extends(done):
        return True  # views of one conversation: O(1)
    # Tuple equality compares by identity first: a C loop over the shared prefix.
    n = len(done)
    return len(messages) >= n and tuple(messages[:n]) == tuple(done)

"""Append-only message storage a request can share instead of copying.

``MessageList`` counts every edit that is not an append, so whoever indexed the list
can tell that what it found still holds. ``History`` is an immutable view of the first
``n`` items of a list that is only ever appended to: a request's messages taken without
copying the conversation. A tuple of 3,000 messages costs 3,000 reference-count writes
spread over memory on every request; a view costs two pointers, and a provider that
encoded the previous request tells in O(1) that the next one extends it (``extends``).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, overload

__all__ = ["History", "MessageList"]

T = TypeVar("T")


class MessageList(list[T]):
    """A list that counts its edits (anything but appending), so ``Conversation`` can
    tell that what it found in the list still holds."""

    __slots__ = ("edits",)

    def __init__(self, messages: Iterable[T] = ()) -> None:
        super().__init__(messages)
        self.edits = 0

    def _edited(name: str) -> Any:  # type: ignore[misc]
        method = getattr(list, name)

        def edit(self: MessageList[Any], *args: Any, **kwargs: Any) -> Any:
            self.edits += 1
            return method(self, *args, **kwargs)

        edit.__name__ = name
        return edit

    __setitem__ = _edited("__setitem__")
    __delitem__ = _edited("__delitem__")
    insert = _edited("insert")
    pop = _edited("pop")
    remove = _edited("remove")
    clear = _edited("clear")
    sort = _edited("sort")
    reverse = _edited("reverse")
    __imul__ = _edited("__imul__")
    del _edited


class History(Sequence[T]):
    """The first ``len`` items of an append-only list, as an immutable sequence.

    It compares, hashes, adds and prints like the tuple of its items (slicing gives a
    tuple), so code written for a tuple of messages keeps working. The list must only
    grow while a view of it lives: ``Conversation`` hands out views of a list it owns
    and never edits (an edit of the conversation starts a new list).
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[T], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def extends(self, other: object) -> bool:
        """Whether ``other`` is a view of the same list no longer than this one, so this
        one holds ``other``'s items followed by more (an O(1) answer; False means only
        that it cannot tell that way)."""
        return (
            type(other) is History
            and other.source is self._items
            and len(other) <= self._n
        )

    @property
    def source(self) -> list[T]:
        """The list this views (shared: never to be edited)."""
        return self._items

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...
    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step == 1:  # the common case: copies only what it returns
                return tuple(self._items[start:stop])
            return tuple(self._items[: self._n][i])
        n = self._n
        try:
            j = operator.index(i)
        except TypeError:
            raise TypeError(
                f"History indices must be integers or slices, not {type(i).__name__}"
            ) from None
        if j < 0:
            j += n
        if not 0 <= j < n:
            raise IndexError("History index out of range")
        return self._items[j]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._n)

    def __reversed__(self) -> Iterator[T]:
        items = self._items
        return (items[j] for j in range(self._n - 1, -1, -1))

    def _tuple(self) -> tuple[T, ...]:
        return tuple(islice(self._items, self._n))

    def __eq__(self, other: object) -> bool:
        if type(other) is History:
            if other.source is self._items:
                return len(other) == self._n
            return self._n == len(other) and self._tuple() == tuple(other)
        if isinstance(other, tuple):
            return self._n == len(other) and self._tuple() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __add__(self, other: object) -> tuple[Any, ...]:
        if isinstance(other, (tuple, History)):
            return self._tuple() + tuple(other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[Any, ...]:
        if isinstance(other, tuple):
            return other + self._tuple()
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self._tuple())

    def __reduce__(self) -> tuple[Any, ...]:
        return (History, (list(islice(self._items, self._n)),))

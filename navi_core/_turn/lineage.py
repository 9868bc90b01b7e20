"""``Lineage``: where a turn stands among the sub-agent turns, and how a stop reaches
every one of them.

A top-level turn's lineage is a root (depth 0). A sub-agent call asks the lineage of
the turn whose tool it runs in to ``admit`` a child (depth + 1), refused past the
depth limit or while the tree already runs as many sub-agents as allowed; the child
agent's turn takes that child as its own lineage (``adopting``), and its stream is
``attach``ed to it.

``stop()`` (the turn's cancel, timeout or close, and its end) marks the lineage and
every descendant stopped, under the tree's one lock, then cancels their streams on
the stopping thread: when ``Stream.cancel()`` returns, every descendant was told to
stop, and none starts after, since a stopped lineage admits no child and cancels a
stream attached to it at once. Each child is ``release``d when its agent closed; its
sub-agent call waits for that (``wait_drained``), so a sub-agent call that returns
leaves nothing of its tree running.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Final

from ..events import Event
from ..tools._tool import ToolContext

__all__ = ["DelegationRefused", "Lineage", "LineageContext", "adopted", "adopting"]

#: the lineage the next turn made on this thread takes (set by ``adopting``)
_ADOPTING: Final[ContextVar[Lineage | None]] = ContextVar(
    "navi_core_adopting", default=None
)


class DelegationRefused(RuntimeError):
    """A sub-agent call that may not start: too deep, too many running, or its turn
    is stopping. The model reads it as the call's error result."""


class _Tree:
    """What every lineage of one tree shares: the lock and the running count."""

    __slots__ = ("changed", "lock", "running")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: notified when a child is released; made by the first wait
        self.changed: threading.Condition | None = None
        #: children admitted and not released, in the whole tree
        self.running = 0


class Lineage:
    """One turn's place in a tree of sub-agent turns (see the module)."""

    __slots__ = ("children", "depth", "on_stop", "parent", "stopped", "tree")

    def __init__(self, parent: Lineage | None = None) -> None:
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        #: the lock and count this lineage shares with its whole tree
        self.tree: _Tree = _Tree() if parent is None else parent.tree
        #: the children admitted and not released yet
        self.children: set[Lineage] = set()
        #: cancels this lineage's turn (``attach``)
        self.on_stop: Callable[[], None] | None = None
        #: set once this lineage or an ancestor was stopped
        self.stopped = False

    def admit(self, max_depth: int, max_running: int) -> Lineage:
        """A child lineage for a sub-agent call made by this lineage's turn.

        Raises:
            DelegationRefused: the child would be deeper than ``max_depth``, the tree
                runs ``max_running`` sub-agents already, or this turn is stopping.
        """
        if self.depth + 1 > max_depth:
            raise DelegationRefused(
                f"sub-agents nest at most {max_depth} deep and this agent is at "
                f"depth {self.depth}: it cannot delegate further. Do the task "
                "yourself."
            )
        tree = self.tree
        with tree.lock:
            if self.stopped:
                raise DelegationRefused("the turn is stopping: no sub-agent starts")
            if tree.running >= max_running:
                raise DelegationRefused(
                    f"{tree.running} sub-agents run already (at most {max_running} "
                    "at once): wait for them, or do the task yourself."
                )
            child = Lineage(self)
            self.children.add(child)
            tree.running += 1
        return child

    def attach(self, cancel: Callable[[], None]) -> bool:
        """Cancel this lineage's turn with ``cancel`` when it is stopped; False (and
        ``cancel`` called now) when it was stopped already."""
        with self.tree.lock:
            if not self.stopped:
                self.on_stop = cancel
                return True
        cancel()
        return False

    def stop(self) -> None:
        """Stop this lineage and every descendant: none admits a child from now on,
        and each descendant's turn is cancelled, on this thread, before this returns
        (the turn of this lineage is the caller's to end)."""
        cancels: list[Callable[[], None]] = []
        with self.tree.lock:
            if self.stopped:  # and so is every descendant: none was admitted since
                return
            todo = [self]
            while todo:
                node = todo.pop()
                node.stopped = True
                if node.on_stop is not None and node is not self:
                    cancels.append(node.on_stop)
                todo.extend(node.children)
        for cancel in cancels:
            cancel()

    def release(self) -> None:
        """This child's agent is closed: it leaves its parent and the running count."""
        parent = self.parent
        if parent is None:
            return
        tree = self.tree
        with tree.lock:
            self.on_stop = None  # the stream, which holds this lineage: no cycle left
            if self in parent.children:
                parent.children.discard(self)
                tree.running -= 1
                if tree.changed is not None:
                    tree.changed.notify_all()

    def wait_drained(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until every child was released; False when
        some still run then."""
        deadline = time.monotonic() + timeout
        tree = self.tree
        with tree.lock:
            while self.children:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if tree.changed is None:
                    tree.changed = threading.Condition(tree.lock)
                tree.changed.wait(left)
        return True

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "live"
        return f"<Lineage depth={self.depth} children={len(self.children)} {state}>"


class LineageContext(ToolContext):
    """A ``ToolContext`` that knows the lineage of the turn running the call, so a
    sub-agent the call starts becomes its child."""

    __slots__ = ("lineage",)

    def __init__(
        self,
        lineage: Lineage,
        call_id: str,
        name: str,
        session_id: str | None = None,
        cancelled: threading.Event | None = None,
        emit: Callable[[str], None] | None = None,
        forward: Callable[[Event], None] | None = None,
        turn_id: str = "",
        publish: Callable[[Event], None] | None = None,
    ) -> None:
        super().__init__(
            call_id, name, session_id, cancelled, emit, forward, turn_id, publish
        )
        self.lineage = lineage


@contextlib.contextmanager
def adopting(lineage: Lineage) -> Iterator[None]:
    """The turns made on this thread inside the block take ``lineage`` as theirs."""
    token = _ADOPTING.set(lineage)
    try:
        yield
    finally:
        _ADOPTING.reset(token)


def adopted() -> Lineage | None:
    """The lineage ``adopting`` offers a turn made now; None for a top-level turn."""
    return _ADOPTING.get()

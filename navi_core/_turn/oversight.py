"""``Oversight``: the part of ``Agent`` that watches, holds and compacts its turns.

Hooks and their registration, observers (``subscribe``), the request preview
(``inspect``), decisions on held tool calls (``approve``/``deny``) and compaction by
hand (``compact``, ``compact_stream``). ``Agent`` inherits it; it works on the agent's
session, config and provider only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .. import approvals
from ..compaction._compaction import CompactionResult, compact
from ..compaction._manual import plan_manual, stream_compaction
from ..config import Config
from ..errors import NothingToCompact
from ..events import Compacted, Event
from ..hooks import Hook, check_hooks
from ..providers.base import Provider, ProviderRequest
from ..session import Session
from ..store.base import ApprovalState
from ..subscribe import Observers, Subscription
from ..tools._tool import ToolSpec

__all__ = ["Oversight"]


class Oversight:
    """Hooks, observers, approvals, ``inspect`` and compaction by hand (``Agent``)."""

    _hooks: tuple[Hook, ...]
    _observers: Observers
    _session: Session
    _config: Config
    provider: Provider

    if TYPE_CHECKING:

        def _check_idle(self) -> None: ...
        def tool_specs(self) -> tuple[ToolSpec, ...]: ...
        def next_request(self) -> ProviderRequest: ...

    @property
    def hooks(self) -> tuple[Hook, ...]:
        """The lifecycle hooks, in the order they run."""
        return self._hooks

    @property
    def observers(self) -> Observers:
        """The subscriptions every turn publishes its events to."""
        return self._observers

    def add_hook(self, hook: Hook) -> None:
        """Add a lifecycle hook after the others; it runs from the next turn on."""
        self._hooks = (*self._hooks, *check_hooks([hook]))

    def subscribe(self, maxsize: int = 1024) -> Subscription:
        """Receive ``(turn_id, event)`` for every event of every later turn.

        Safe from any thread; the turn never waits for a slow reader, which reads
        ``Lagged(dropped)`` where events were dropped. ``close()`` it when done.
        """
        return self._observers.subscribe(maxsize)

    def inspect(self) -> ProviderRequest:
        """Exactly what the next response would be sent: dialogue, system prompt,
        tool declarations and config, as the provider receives them."""
        return self.next_request()

    def approve(self, call_id: str) -> None:
        """Approve a held tool call; the next ``resume()`` runs it (exactly once).

        The decision is stored at once, so it holds across a crash or a restart.

        Raises:
            ApprovalNotPending: no held call has that id, or it was denied.
        """
        approvals.decide(
            self._session.store, self._session.id, call_id, ApprovalState.APPROVED
        )

    def deny(self, call_id: str, reason: str = "") -> None:
        """Deny a held tool call; the model reads that it was not approved, and why.

        Raises:
            ApprovalNotPending: no held call has that id, or it was approved.
        """
        approvals.decide(
            self._session.store, self._session.id, call_id, ApprovalState.DENIED, reason
        )

    def compact(
        self,
        extra_instructions: str | None = None,
        keep_turns: int | None = None,
        *,
        prompt: str | None = None,
    ) -> CompactionResult:
        """Summarise the old prefix now and keep the recent turns verbatim.

        ``keep_turns`` keeps that many recent turns whatever their size (else
        ``keep_verbatim`` tokens of them); ``prompt`` replaces the configured
        summary prompt for this call.

        Raises:
            NoCompactionPrompt: no summary prompt is set or given.
        """
        self._check_idle()
        if keep_turns is None and prompt is None:
            return compact(
                self._session, self.provider, self._config, extra_instructions
            )
        try:
            events = list(self.compact_stream(extra_instructions, keep_turns, prompt))
        except NothingToCompact:
            return CompactionResult(False, 0, 0)
        done = events[-1]
        assert isinstance(done, Compacted)
        return CompactionResult(True, done.summarized_messages, done.kept_turns)

    def compact_stream(
        self,
        extra_instructions: str | None = None,
        keep_turns: int | None = None,
        prompt: str | None = None,
    ) -> Iterator[Event]:
        """Compact now, as events: ``CompactionStarted``, then ``Compacted`` once the
        summary request returned (the iterator makes that request).

        Raises:
            NothingToCompact: fewer than two messages could be summarised (at once).
            NoCompactionPrompt: no summary prompt is set or given (at once).
            ProviderError: while iterating; the conversation is then unchanged.
        """
        self._check_idle()
        text, plan = plan_manual(self._session, self._config, keep_turns, prompt)
        return stream_compaction(
            self._session,
            self.provider,
            self._config,
            self.tool_specs(),
            text,
            plan,
            extra_instructions,
        )

"""``SubAgent``: a tool that hands a task to a child agent and returns its answer.

The child is made fresh for every call by ``agent_factory`` (and closed after), runs
one turn on the tool's thread with its own ``max_iterations`` and
``max_thinking_chars``, and ends with ``StopReason.TIMEOUT`` when ``timeout`` seconds
pass. Each child event reaches the parent stream as ``SubagentEvent(call_id, event)``;
the child's ``TurnComplete`` among them carries its usage, which the parent adds to
its own. A child turn that ends without one (it failed: a refused request, a thinking
stall) spent tokens too: what it used up to the failure (``Stream.usage`` and
``cost``) goes to the parent in a ``ChildSpent``, counted there once and never shown.
The result is the child's answer followed by a status line such as
``[Sub-agent stopped: completed]``.

Sub-agents form a tree under the top-level turn (``navi_core._turn.lineage``): a call
from a turn ``max_depth`` deep, or while the tree runs ``max_running`` sub-agents, is
an error result telling the model it cannot delegate (further); cancelling, closing
or timing out a turn cancels every sub-agent under it before ``cancel()`` returns,
and none starts after. A call returns only once its child's whole tree has ended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from ._ids import publish
from ._turn.extras import ChildSpent
from ._turn.lineage import Lineage, LineageContext, adopting
from .errors import ThinkingStall
from .events import StopReason, TextDelta, TurnComplete
from .tools._tool import Tool, ToolContext

if TYPE_CHECKING:
    from .agent import Agent
    from .stream import Stream

__all__ = ["SubAgent", "status_line"]

#: how often a call made outside a stream looks at its context's cancel flag
_WATCH_SECONDS: Final = 0.02
#: how long a call waits for its child's tree to end once the child's turn ended
_DRAIN_SECONDS: Final = 10.0

_STATUS: Final = {
    StopReason.END_TURN: "completed",
    StopReason.MAX_ITERATIONS: "iteration limit",
    StopReason.MAX_TOKENS: "output token limit",
    StopReason.CANCELLED: "cancelled",
    StopReason.TIMEOUT: "timeout",
    StopReason.APPROVAL_REQUIRED: "approval required",
    StopReason.REFUSED: "refused by the provider's content filter",
    StopReason.PAUSED: "paused by the provider",
}


def status_line(status: str) -> str:
    """``[Sub-agent stopped: <status>]``."""
    return f"[Sub-agent stopped: {status}]"


_PARAMETERS: Final = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The task for the sub-agent, with everything it needs "
            "to know: it does not see this conversation.",
        }
    },
    "required": ["task"],
    "additionalProperties": False,
}


def _watch(cancelled: threading.Event, tree: Lineage, done: threading.Event) -> None:
    """Stop ``tree`` when ``cancelled`` is set, until ``done`` is."""
    while not done.wait(_WATCH_SECONDS):
        if cancelled.is_set():
            tree.stop()
            return


class SubAgent(Tool[[str, ToolContext], str]):
    """A tool (one parameter, ``task``) that runs a child agent's turn to the end.

    Args:
        name, description: the tool declaration the parent model sees.
        agent_factory: makes a new child ``Agent`` for each call; it is closed after.
        max_iterations: the child's ``Config.max_iterations``.
        timeout: seconds the child turn may take; then it ends ("timeout"), and every
            sub-agent under it with it.
        max_thinking_chars: the child's ``Config.max_thinking_chars``.
        max_depth: how deep sub-agents nest (the top-level turn is at 0): a call
            from a turn at this depth is an error result, "cannot delegate further".
        max_running: sub-agents that may run at once under one top-level turn,
            nested ones included; a call beyond is an error result.
    """

    __slots__ = (
        "agent_factory",
        "max_depth",
        "max_iterations",
        "max_running",
        "max_thinking_chars",
        "timeout",
    )
    agent_factory: Callable[[], Agent]
    max_iterations: int
    timeout: float
    max_thinking_chars: int | None
    max_depth: int
    max_running: int

    def __init__(
        self,
        name: str,
        description: str,
        agent_factory: Callable[[], Agent],
        *,
        max_iterations: int = 20,
        timeout: float = 300.0,
        max_thinking_chars: int | None = None,
        max_depth: int = 4,
        max_running: int = 8,
    ) -> None:
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        if max_running < 1:
            raise ValueError("max_running must be at least 1")
        hints: dict[str, Any] = {"task": str, "context": ToolContext}
        super().__init__(name, description, dict(_PARAMETERS), self.run_task, hints)
        object.__setattr__(self, "agent_factory", agent_factory)
        object.__setattr__(self, "max_iterations", max_iterations)
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "max_thinking_chars", max_thinking_chars)
        object.__setattr__(self, "max_depth", max_depth)
        object.__setattr__(self, "max_running", max_running)

    def run_task(self, task: str, context: ToolContext) -> str:
        """Run the child turn for ``task``; the answer plus a status line.

        Raises:
            DelegationRefused: too deep, too many sub-agents running, or the calling
                turn is stopping (the model reads it as the call's error result).
        """
        if isinstance(context, LineageContext):
            parent, watched = context.lineage, None
        else:  # called outside a stream: a tree of its own, stopped by the context
            parent, watched = Lineage(), threading.Event()
        node = parent.admit(self.max_depth, self.max_running)
        if watched is not None:
            threading.Thread(
                target=_watch,
                args=(context.cancelled, parent, watched),
                name=f"navi-subagent-{context.call_id}",
                daemon=True,
            ).start()
        try:
            if node.stopped:
                return status_line("cancelled")
            child = self.agent_factory()
            try:
                if node.stopped:  # cancelled while the factory ran: never starts
                    return status_line("cancelled")
                self._configure(child)
                return self._drive(child, node, task, context)
            finally:
                child.close()
        finally:
            node.stop()
            node.wait_drained(_DRAIN_SECONDS)
            node.release()
            if watched is not None:
                watched.set()

    def _configure(self, child: Agent) -> None:
        """The child's limits: iterations, thinking, and the turn timeout."""
        own = child.config
        stall = self.max_thinking_chars
        limit = own.turn_timeout
        child.set_config(
            replace(
                own,
                max_iterations=self.max_iterations,
                max_thinking_chars=own.max_thinking_chars if stall is None else stall,
                turn_timeout=self.timeout
                if limit is None
                else min(limit, self.timeout),
            )
        )

    def _drive(
        self, child: Agent, node: Lineage, task: str, context: ToolContext
    ) -> str:
        text: list[str] = []
        status = "completed"
        completed = False  # the child's TurnComplete, with its usage, was forwarded
        with adopting(node):  # the child's turn takes ``node`` as its lineage
            stream = child.run(task)
        with stream:
            node.attach(stream.cancel)  # a stop that came first cancels it now
            try:
                while (ev := stream.next()) is not None:
                    context.forward(ev)
                    if isinstance(ev, TextDelta):
                        text.append(ev.text)
                    elif isinstance(ev, TurnComplete):
                        completed = True
                        status = _STATUS.get(ev.stop_reason, str(ev.stop_reason))
                        if ev.response:
                            text = [ev.response]
            except ThinkingStall:
                status = "thinking stall"
            finally:  # failed (raising or not): what it spent still counts, once
                if not completed:
                    _forward_spent(stream, context)
        answer = "".join(text).strip()
        return f"{answer}\n\n{status_line(status)}" if answer else status_line(status)

    def __repr__(self) -> str:
        return f"SubAgent(name={self.name!r})"


def _forward_spent(stream: Stream, context: ToolContext) -> None:
    """Hand the parent what the child's turn, ended without ``TurnComplete``, spent
    (priced at the child's model); nothing when it spent nothing, or when the
    parent's batch was cancelled (its stop counts no event of the batch any more)."""
    if context.cancelled.is_set():
        return
    usage = stream.usage
    if usage.total:
        context.forward(ChildSpent(usage, stream.cost))


publish(globals())

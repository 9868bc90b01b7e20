"""``SubAgent``: a tool that hands a task to a child agent and returns its answer.

The child is made fresh for every call by ``agent_factory`` (and closed after), runs
one turn on the tool's thread with its own ``max_iterations`` and
``max_thinking_chars``, and is cancelled when ``timeout`` seconds pass or the parent
turn is cancelled. Each child event reaches the parent stream as
``SubagentEvent(call_id, event)``; the child's ``TurnComplete`` among them carries its
usage, which the parent adds to its own. The result is the child's answer followed by
a status line such as ``[Sub-agent stopped: completed]``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from .errors import ThinkingStall
from .events import StopReason, TextDelta, TurnComplete
from .tools._tool import Tool, ToolContext

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["SubAgent", "status_line"]

#: how often the watcher looks at the parent's cancel flag and the clock
_WATCH_SECONDS: Final = 0.02

_STATUS: Final = {
    StopReason.END_TURN: "completed",
    StopReason.MAX_ITERATIONS: "iteration limit",
    StopReason.MAX_TOKENS: "output token limit",
    StopReason.CANCELLED: "cancelled",
    StopReason.TIMEOUT: "timeout",
    StopReason.APPROVAL_REQUIRED: "approval required",
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


class _Watch:
    """Cancels the child stream on a parent cancel or when the time is up."""

    def __init__(self, parent: threading.Event, timeout: float) -> None:
        self.parent = parent
        self.deadline = time.monotonic() + timeout
        self.done = threading.Event()
        self.timed_out = False
        self.cancelled = False

    def run(self, cancel: Callable[[], None]) -> None:
        while not self.done.wait(_WATCH_SECONDS):
            if self.parent.is_set():
                self.cancelled = True
                cancel()
                return
            if time.monotonic() >= self.deadline:
                self.timed_out = True
                cancel()
                return


class SubAgent(Tool[[str, ToolContext], str]):
    """A tool (one parameter, ``task``) that runs a child agent's turn to the end.

    Args:
        name, description: the tool declaration the parent model sees.
        agent_factory: makes a new child ``Agent`` for each call; it is closed after.
        max_iterations: the child's ``Config.max_iterations``.
        timeout: seconds the child turn may take; then it is cancelled ("timeout").
        max_thinking_chars: the child's ``Config.max_thinking_chars``.
    """

    __slots__ = ("agent_factory", "max_iterations", "max_thinking_chars", "timeout")
    agent_factory: Callable[[], Agent]
    max_iterations: int
    timeout: float
    max_thinking_chars: int | None

    def __init__(
        self,
        name: str,
        description: str,
        agent_factory: Callable[[], Agent],
        *,
        max_iterations: int = 20,
        timeout: float = 300.0,
        max_thinking_chars: int | None = None,
    ) -> None:
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        hints: dict[str, Any] = {"task": str, "context": ToolContext}
        super().__init__(name, description, dict(_PARAMETERS), self.run_task, hints)
        object.__setattr__(self, "agent_factory", agent_factory)
        object.__setattr__(self, "max_iterations", max_iterations)
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "max_thinking_chars", max_thinking_chars)

    def run_task(self, task: str, context: ToolContext) -> str:
        """Run the child turn for ``task``; the answer plus a status line."""
        child = self.agent_factory()
        try:
            own = child.config
            stall = self.max_thinking_chars
            limit = own.turn_timeout
            child.set_config(
                replace(
                    own,
                    max_iterations=self.max_iterations,
                    max_thinking_chars=own.max_thinking_chars
                    if stall is None
                    else stall,
                    turn_timeout=self.timeout
                    if limit is None
                    else min(limit, self.timeout),
                )
            )
            return self._drive(child, task, context)
        finally:
            child.close()

    def _drive(self, child: Agent, task: str, context: ToolContext) -> str:
        watch = _Watch(context.cancelled, self.timeout)
        text: list[str] = []
        status = "completed"
        with child.run(task) as stream:
            watcher = threading.Thread(
                target=watch.run,
                args=(stream.cancel,),
                name=f"navi-subagent-{context.call_id}",
                daemon=True,
            )
            watcher.start()
            try:
                while (ev := stream.next()) is not None:
                    context.forward(ev)
                    if isinstance(ev, TextDelta):
                        text.append(ev.text)
                    elif isinstance(ev, TurnComplete):
                        status = _STATUS.get(ev.stop_reason, str(ev.stop_reason))
                        if ev.response:
                            text = [ev.response]
            except ThinkingStall:
                status = "thinking stall"
            finally:
                watch.done.set()
                watcher.join()
        if watch.timed_out:
            status = "timeout"
        answer = "".join(text).strip()
        return f"{answer}\n\n{status_line(status)}" if answer else status_line(status)

    def __repr__(self) -> str:
        return f"SubAgent(name={self.name!r})"

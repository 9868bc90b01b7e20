"""Idle limits of tool calls: a call that reports no progress for its tool's
``timeout`` seconds becomes an error result, so a hung tool never hangs the turn.

The call runs on a thread of its own and the caller waits for it; ``ToolContext.emit``
moves the limit on. Past the limit the call's ``cancelled`` is set (a tool that checks
it, or an ``async def`` tool, stops there) and the caller gets ``ToolTimeout`` at once.
A thread cannot be killed: a tool that checks nothing keeps running on its thread
until it returns, and what it returns then is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

from ._context import ToolContext

__all__ = ["ToolTimeout", "call_with_idle_limit"]

#: Seconds between looks at the turn's own cancel while a timed call runs.
_LOOK: Final = 0.05


class ToolTimeout(TimeoutError):
    """A tool call reported no progress within its tool's ``timeout``."""


def call_with_idle_limit(
    run: Callable[[ToolContext], Any], context: ToolContext, limit: float
) -> Any:
    """Return ``run(ctx)`` where ``ctx`` is ``context`` with a cancel of its own and
    an ``emit`` that restarts the idle clock.

    Raises:
        ToolTimeout: ``limit`` seconds passed without a result or a progress report.
        BaseException: whatever ``run`` raised.
    """
    last = [time.monotonic()]

    def touch() -> None:
        last[0] = time.monotonic()

    outer = context.cancelled
    inner = threading.Event()
    ctx = context.copy_with(inner, touch)
    done = threading.Event()
    box: list[tuple[bool, Any]] = []

    def body() -> None:
        try:
            box.append((True, run(ctx)))
        except BaseException as exc:  # handed to the waiting caller
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=body, name=f"navi-tool-{context.name}", daemon=True).start()
    while not done.wait(min(_LOOK, max(0.0, last[0] + limit - time.monotonic()))):
        if outer.is_set():
            inner.set()
        if time.monotonic() - last[0] >= limit:
            inner.set()
            raise ToolTimeout(
                f"no result or progress for {limit:g} s (the tool's timeout); the "
                "call was abandoned and may still be running"
            )
    ok, value = box[0]
    if not ok:
        raise value
    return value

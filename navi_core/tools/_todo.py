"""``TodoList``: a built-in tool through which the model keeps a todo list.

The host opts in by passing it with the other tools (``Agent(provider,
tools=[TodoList()])``). Each call replaces the whole list (items of ``text`` and
``status``: "pending", "in_progress" or "done"), checked against the tool's schema
before it runs; the stream returns ``TodoUpdated(items)`` between the call's
``ToolStarted`` and ``ToolFinished``, and the model reads the list back as the result.

The list lives in the session's history, nowhere else: the newest successful call is
the list (``latest_todos``), so a resumed session, in another process too, shows it
(``Agent.todos``). Make one call per response: of several, the history keeps the
last one in the model's order. The tool is inline (``Tool.inline``): its calls run
on the thread that drives the turn, one after the other.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Final

import orjson

from .._ids import publish
from ..conversation import Message
from ..events import TodoItem, TodoUpdated
from ._context import ToolContext
from ._tool import Tool
from ._validation import ArgumentError

__all__ = ["MAX_TODO_ITEMS", "MAX_TODO_TEXT", "TodoList", "latest_todos"]

#: the most items a list may hold
MAX_TODO_ITEMS: Final = 100
#: the most characters an item's text may hold
MAX_TODO_TEXT: Final = 500

_STATUSES: Final = ("pending", "in_progress", "done")
_MARKS: Final = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}

_DESCRIPTION: Final = (
    "Write your todo list for this task: send the whole list each time (it replaces "
    "the previous one), in order. Mark an item in_progress while you work on it and "
    "done once it is finished; keep the list short and concrete."
)

_PARAMETERS: Final = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "description": "The whole list, in order.",
            "maxItems": MAX_TODO_ITEMS,
            "items": {
                "type": "object",
                "properties": {
                    "text": {
                        "type": "string",
                        "description": "What to do.",
                        "minLength": 1,
                        "maxLength": MAX_TODO_TEXT,
                    },
                    "status": {"type": "string", "enum": list(_STATUSES)},
                },
                "required": ["text", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}


def _items(raw: Sequence[Mapping[str, Any]]) -> tuple[TodoItem, ...]:
    """The list from arguments the schema accepted; blank text is refused too.

    Raises:
        ArgumentError: an item's text is only whitespace.
    """
    items = []
    for i, entry in enumerate(raw):
        text = str(entry["text"]).strip()
        if not text:
            raise ArgumentError(f"invalid arguments: `items[{i}].text`: it is blank")
        items.append(TodoItem(text, entry["status"]))
    return tuple(items)


def _render(items: Sequence[TodoItem]) -> str:
    """The list as the model reads it back: a count, then one line per item."""
    if not items:
        return "Todo list cleared."
    counts = {s: sum(1 for i in items if i.status == s) for s in _STATUSES}
    head = (
        f"Todo list updated: {len(items)} items ({counts['done']} done, "
        f"{counts['in_progress']} in progress, {counts['pending']} pending)."
    )
    return "\n".join([head, *(f"{_MARKS[i.status]} {i.text}" for i in items)])


class TodoList(Tool[[list[dict[str, str]], ToolContext], str]):
    """The todo tool (see the module); ``name`` and ``description`` may be changed."""

    __slots__ = ()

    def __init__(
        self, name: str = "todo_write", description: str = _DESCRIPTION
    ) -> None:
        hints: dict[str, Any] = {"items": Any, "context": ToolContext}
        # inline: a call checks and renders a list in memory, it returns at once
        super().__init__(
            name, description, dict(_PARAMETERS), self.write, hints, inline=True
        )

    def write(self, items: list[dict[str, str]], context: ToolContext) -> str:
        """Replace the list with ``items``; the stream returns ``TodoUpdated``.

        Raises:
            ArgumentError: an item's text is blank (the model reads why).
        """
        todos = _items(items)
        context.publish(TodoUpdated(todos))
        return _render(todos)

    def __repr__(self) -> str:
        return f"TodoList(name={self.name!r})"


def latest_todos(
    messages: Iterable[Message], names: Collection[str]
) -> tuple[TodoItem, ...] | None:
    """The list the newest successful call to a tool named in ``names`` wrote in
    ``messages`` (a window of the history, oldest first); None when none did.

    A call counts when the message after its own answers it without an error (a
    vetoed, failed or interrupted call changed nothing).
    """
    window = list(messages)
    for k in range(len(window) - 1, -1, -1):
        message = window[k]
        if message.role != "assistant":
            continue
        uses = [u for u in message.tool_uses if u.name in names]
        if not uses or k + 1 >= len(window):
            continue
        answers = {r.tool_use_id: r for r in window[k + 1].tool_results}
        for use in reversed(uses):
            result = answers.get(use.id)
            if result is None or result.is_error:
                continue
            try:
                raw = orjson.loads(use.input)["items"]
                return _items(raw)
            except (orjson.JSONDecodeError, TypeError, KeyError, ArgumentError):
                continue
    return None


publish(globals())

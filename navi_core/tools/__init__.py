"""Tools the model may call: ``@tool`` functions, ``ToolSource`` batches, dispatch."""

from __future__ import annotations

from ._search import ToolSearch
from ._todo import TodoList
from ._tool import (
    ArgumentError,
    Tool,
    ToolCall,
    ToolContext,
    ToolRegistry,
    ToolSource,
    ToolSpec,
    context_parameters,
    schema_for,
    tool,
)

__all__ = [
    "ArgumentError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolRegistry",
    "ToolSearch",
    "ToolSource",
    "TodoList",
    "ToolSpec",
    "context_parameters",
    "schema_for",
    "tool",
]

"""The Model Context Protocol: ``MCPTools``, a ``ToolSource`` over stdio or HTTP."""

from __future__ import annotations

from ._tools import (
    PROTOCOL_VERSIONS,
    MCPError,
    MCPToolError,
    MCPTools,
)

__all__ = [
    "PROTOCOL_VERSIONS",
    "MCPError",
    "MCPToolError",
    "MCPTools",
]

"""The Model Context Protocol: ``MCPTools``, a ``ToolSource`` over stdio or HTTP."""

from __future__ import annotations

from ._tools import (
    PROTOCOL_VERSIONS,
    MCPError,
    MCPToolError,
    MCPTools,
    SamplingPolicy,
)
from .oauth import FileTokenStore, OAuth, OAuthError, TokenStore

__all__ = [
    "PROTOCOL_VERSIONS",
    "FileTokenStore",
    "MCPError",
    "MCPToolError",
    "MCPTools",
    "OAuth",
    "OAuthError",
    "SamplingPolicy",
    "TokenStore",
]

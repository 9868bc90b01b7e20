"""navi_core: a synchronous, pull-based LLM agent loop with a compiled streaming core.

agent = Agent(provider=OpenAIChat(model="qwen2.5", base_url="http://127.0.0.1:11434/v1"))
with agent.run("What does README.md say?") as stream:
    while ev := stream.next():
        ...
"""

from __future__ import annotations

from .agent import Agent
from .config import CompactionConfig, Config, ImageLimits, RetryPolicy, Timeout
from .conversation import (
    CompactionSummary,
    Conversation,
    MediaPart,
    Message,
    RedactedThinking,
    System,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
    UserMessage,
    WireIdentity,
)
from .errors import (
    AmbiguousSession,
    AuthFailed,
    BadRequest,
    Cancelled,
    ContextOverflow,
    EmptyAssistantResponse,
    MalformedStream,
    NaviError,
    NoCompactionPrompt,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
    SessionBusy,
    SessionError,
    SessionNotFound,
    StreamPoisoned,
    ToolRegistrationError,
    TransportError,
)
from .events import (
    AnyEvent,
    Compacted,
    CompactionStarted,
    Event,
    MessageComplete,
    ModelInfo,
    ProviderRetry,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolStarted,
    TurnComplete,
)
from .providers.base import Provider, ProviderRequest, ProviderStream
from .providers.scripted import MidStreamFailure, Scripted
from .store.base import SessionInfo, SessionStore
from .store.memory import MemoryStore
from .store.null import NullStore
from .stream import Phase, Stream
from .tools import Tool, ToolCall, ToolSource, ToolSpec, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AmbiguousSession",
    "AnyEvent",
    "AuthFailed",
    "BadRequest",
    "Cancelled",
    "Compacted",
    "CompactionConfig",
    "CompactionStarted",
    "CompactionSummary",
    "Config",
    "ContextOverflow",
    "Conversation",
    "EmptyAssistantResponse",
    "Event",
    "ImageLimits",
    "MalformedStream",
    "MediaPart",
    "MemoryStore",
    "Message",
    "MessageComplete",
    "MidStreamFailure",
    "ModelInfo",
    "NaviError",
    "NoCompactionPrompt",
    "NullStore",
    "Overloaded",
    "Phase",
    "Provider",
    "ProviderError",
    "ProviderRequest",
    "ProviderRetry",
    "ProviderStream",
    "RateLimited",
    "RedactedThinking",
    "RetryPolicy",
    "Scripted",
    "ServerError",
    "SessionBusy",
    "SessionError",
    "SessionInfo",
    "SessionNotFound",
    "SessionStore",
    "StopReason",
    "Stream",
    "StreamPoisoned",
    "System",
    "Text",
    "TextDelta",
    "TextPart",
    "Thinking",
    "ThinkingDelta",
    "Timeout",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolDispatchComplete",
    "ToolDispatchStart",
    "ToolFinished",
    "ToolRegistrationError",
    "ToolResult",
    "ToolSource",
    "ToolSpec",
    "ToolStarted",
    "ToolUse",
    "TransportError",
    "TurnComplete",
    "Usage",
    "UserMessage",
    "WireIdentity",
    "__version__",
    "tool",
]


def __getattr__(name: str) -> object:
    """Lazy names: the HTTP providers, SQLite/PostgreSQL stores and media helpers."""
    lazy = {
        "OpenAIChat": "navi_core.providers.openai_chat",
        "Anthropic": "navi_core.providers.anthropic",
        "SQLiteStore": "navi_core.store.sqlite",
        "PostgresStore": "navi_core.store.postgres",
        "Media": "navi_core.media",
        "CompactionResult": "navi_core.compaction",
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'navi_core' has no attribute {name!r}")

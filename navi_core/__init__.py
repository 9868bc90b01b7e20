"""navi_core: a synchronous, pull-based LLM agent loop with a compiled streaming core.

agent = Agent(provider=OpenAIChat(model="qwen2.5", base_url="http://127.0.0.1:11434/v1"))
with agent.run("What does README.md say?") as stream:
    while ev := stream.next():
        ...
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from ._turn.casual import is_casual_message
from ._turn.steering import SteerDisposition
from .agent import Agent
from .config import (
    CompactionConfig,
    Config,
    ImageLimits,
    PlanningConfig,
    RetryPolicy,
    Timeout,
)
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
    ApprovalNotPending,
    AuthFailed,
    BadRequest,
    Cancelled,
    ContextOverflow,
    EmptyAssistantResponse,
    MalformedStream,
    NaviError,
    NoCompactionPrompt,
    NothingToCompact,
    OutputValidationError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
    SessionBusy,
    SessionError,
    SessionLockLost,
    SessionNotFound,
    SteeringQueueFull,
    StreamPoisoned,
    ThinkingStall,
    ToolRegistrationError,
    TransportError,
)
from .events import (
    PENDING,
    AnyEvent,
    Compacted,
    CompactionStarted,
    Event,
    HookFailure,
    Lagged,
    MessageComplete,
    ModelInfo,
    Pending,
    ProviderRetry,
    ResponseDiscarded,
    Steered,
    StopReason,
    SubagentEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnComplete,
)
from .hooks import Hook, NeedsApproval, TurnInfo, Veto
from .providers.base import Provider, ProviderRequest, ProviderStream
from .providers.scripted import MidStreamFailure, Scripted
from .session import Session
from .store.base import Approval, ApprovalState, HistoryPage, SessionInfo, SessionStore
from .store.memory import MemoryStore
from .store.null import NullStore
from .stream import Phase, Stream
from .subagent import SubAgent
from .subscribe import Subscription
from .tools._tool import (
    ArgumentError,
    Tool,
    ToolCall,
    ToolContext,
    ToolSource,
    ToolSpec,
    tool,
)

if TYPE_CHECKING:  # imported on first use at run time (see __getattr__)
    from .compaction._compaction import CompactionResult
    from .mcp._tools import MCPError, MCPToolError, MCPTools
    from .media._parts import Media
    from .providers.anthropic import Anthropic
    from .providers.openai_chat import OpenAIChat
    from .providers.openai_responses import OpenAIResponses
    from .store.postgres import PostgresStore
    from .store.sqlite import SQLiteStore

__version__ = "0.1.0"

# A library logs, the host decides where records go: without a handler of the host's,
# navi_core's warnings stay silent instead of reaching stderr through logging's last
# resort.
logging.getLogger("navi_core").addHandler(logging.NullHandler())

#: names whose modules import httpx, sqlite3, psycopg or Pillow (or start processes):
#: loaded on first use
_LAZY = {
    "OpenAIChat": "navi_core.providers.openai_chat",
    "OpenAIResponses": "navi_core.providers.openai_responses",
    "Anthropic": "navi_core.providers.anthropic",
    "SQLiteStore": "navi_core.store.sqlite",
    "PostgresStore": "navi_core.store.postgres",
    "Media": "navi_core.media",
    "MCPTools": "navi_core.mcp",
    "MCPError": "navi_core.mcp",
    "MCPToolError": "navi_core.mcp",
    "CompactionResult": "navi_core.compaction",
}

__all__ = [
    "ApprovalNotPending",
    "is_casual_message",
    "Hook",
    "NeedsApproval",
    "TurnInfo",
    "Veto",
    "Approval",
    "ApprovalState",
    "HistoryPage",
    "SubAgent",
    "Subscription",
    "Agent",
    "AmbiguousSession",
    "Anthropic",
    "AnyEvent",
    "ArgumentError",
    "AuthFailed",
    "BadRequest",
    "Cancelled",
    "Compacted",
    "CompactionConfig",
    "CompactionResult",
    "CompactionStarted",
    "CompactionSummary",
    "Config",
    "ContextOverflow",
    "Conversation",
    "EmptyAssistantResponse",
    "Event",
    "HookFailure",
    "ImageLimits",
    "Lagged",
    "MCPError",
    "MCPToolError",
    "MCPTools",
    "MalformedStream",
    "Media",
    "MediaPart",
    "MemoryStore",
    "Message",
    "MessageComplete",
    "MidStreamFailure",
    "ModelInfo",
    "NaviError",
    "NoCompactionPrompt",
    "NothingToCompact",
    "NullStore",
    "OpenAIChat",
    "OpenAIResponses",
    "OutputValidationError",
    "Overloaded",
    "PENDING",
    "Pending",
    "Phase",
    "PlanningConfig",
    "PostgresStore",
    "Provider",
    "ProviderError",
    "ProviderRequest",
    "ProviderRetry",
    "ProviderStream",
    "RateLimited",
    "RedactedThinking",
    "ResponseDiscarded",
    "RetryPolicy",
    "SQLiteStore",
    "Scripted",
    "ServerError",
    "Session",
    "SessionBusy",
    "SessionError",
    "SessionInfo",
    "SessionLockLost",
    "SessionNotFound",
    "SessionStore",
    "SteerDisposition",
    "Steered",
    "SteeringQueueFull",
    "StopReason",
    "Stream",
    "StreamPoisoned",
    "SubagentEvent",
    "System",
    "Text",
    "TextDelta",
    "TextPart",
    "Thinking",
    "ThinkingDelta",
    "ThinkingStall",
    "Timeout",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolContext",
    "ToolDispatchComplete",
    "ToolDispatchStart",
    "ToolFinished",
    "ToolProgress",
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


def __getattr__(name: str) -> Any:
    """The lazy names: their modules are imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'navi_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value

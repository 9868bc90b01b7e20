"""navi_core: a synchronous, pull-based LLM agent loop with a compiled streaming core.

agent = Agent(provider=OpenAIChat(model="qwen2.5", base_url="http://127.0.0.1:11434/v1"))
with agent.run("What does README.md say?") as stream:
    while ev := stream.next():
        ...

Every public name is importable from here and reports ``__module__ == "navi_core"``,
so reprs, docs and tracebacks show the public path. Names only implementers need
(provider and store authors) are also reachable from their subpackages:
``navi_core.providers`` and ``navi_core.store``. ``import navi_core`` loads none of the
modules behind the names: each loads when its name is first used, so a program pays
only for what it uses.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time, each name loads on first use (__getattr__ below)
    from ._turn.casual import is_casual_message
    from ._turn.steering import SteerDisposition
    from .agent import Agent
    from .compaction._compaction import CompactionResult
    from .config import (
        Budget,
        CompactionConfig,
        Config,
        ImageLimits,
        PlanningConfig,
        Pricing,
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
        IncompleteResponse,
        MalformedStream,
        NaviError,
        NoCompactionPrompt,
        NotAnEventStream,
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
        Cost,
        Elicitation,
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
        TodoItem,
        TodoUpdated,
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
    from .mcp._tools import MCPError, MCPToolError, MCPTools
    from .media._parts import Media
    from .providers.anthropic import Anthropic
    from .providers.base import Provider, ProviderRequest, ProviderStream
    from .providers.openai_chat import OpenAIChat
    from .providers.openai_responses import OpenAIResponses
    from .providers.scripted import MidStreamFailure, Scripted
    from .session import Session
    from .store.base import (
        Approval,
        ApprovalState,
        HistoryPage,
        SessionInfo,
        SessionStore,
    )
    from .store.memory import MemoryStore
    from .store.null import NullStore
    from .store.postgres import PostgresStore
    from .store.sqlite import SQLiteStore
    from .stream import Phase, Stream
    from .subagent import SubAgent
    from .subscribe import Subscription
    from .tools._search import ToolSearch
    from .tools._todo import TodoList
    from .tools._tool import (
        ArgumentError,
        Tool,
        ToolCall,
        ToolContext,
        ToolSource,
        ToolSpec,
        tool,
    )

__version__ = "0.1.0"

# A library logs, the host decides where records go: without a handler of the host's,
# navi_core's warnings stay silent instead of reaching stderr through logging's last
# resort.
logging.getLogger("navi_core").addHandler(logging.NullHandler())

#: where each public name is defined: ``import navi_core`` loads none of these modules,
#: ``navi_core.X`` (or ``from navi_core import X``) loads the one that defines X. Each
#: such module gives its public classes the module ``navi_core`` when it is imported
#: (``_ids.publish``), so they report the public path however they are reached first.
_WHERE: dict[str, str] = {
    "Agent": "navi_core.agent",
    "CompactionResult": "navi_core.compaction._compaction",
    "Phase": "navi_core._turn.machine",
    "Session": "navi_core.session",
    "SteerDisposition": "navi_core._turn.steering",
    "Stream": "navi_core.stream",
    "is_casual_message": "navi_core._turn.casual",
    "AnyEvent": "navi_core.events",
    "Compacted": "navi_core.events",
    "CompactionStarted": "navi_core.events",
    "Cost": "navi_core.events",
    "Elicitation": "navi_core.events",
    "Event": "navi_core.events",
    "HookFailure": "navi_core.events",
    "Lagged": "navi_core.events",
    "MessageComplete": "navi_core.events",
    "ModelInfo": "navi_core.events",
    "PENDING": "navi_core.events",
    "Pending": "navi_core.events",
    "ProviderRetry": "navi_core.events",
    "ResponseDiscarded": "navi_core.events",
    "Steered": "navi_core.events",
    "StopReason": "navi_core.events",
    "SubagentEvent": "navi_core.events",
    "TextDelta": "navi_core.events",
    "ThinkingDelta": "navi_core.events",
    "TodoItem": "navi_core.events",
    "TodoUpdated": "navi_core.events",
    "ToolCallDelta": "navi_core.events",
    "ToolCallStart": "navi_core.events",
    "ToolDispatchComplete": "navi_core.events",
    "ToolDispatchStart": "navi_core.events",
    "ToolFinished": "navi_core.events",
    "ToolProgress": "navi_core.events",
    "ToolStarted": "navi_core.events",
    "TurnComplete": "navi_core.events",
    "CompactionSummary": "navi_core.conversation",
    "Conversation": "navi_core.conversation",
    "MediaPart": "navi_core.conversation",
    "Message": "navi_core.conversation",
    "RedactedThinking": "navi_core.conversation",
    "System": "navi_core.conversation",
    "Text": "navi_core.conversation",
    "TextPart": "navi_core.conversation",
    "Thinking": "navi_core.conversation",
    "ToolResult": "navi_core.conversation",
    "ToolUse": "navi_core.conversation",
    "Usage": "navi_core.conversation",
    "UserMessage": "navi_core.conversation",
    "WireIdentity": "navi_core.conversation",
    "Budget": "navi_core.config",
    "CompactionConfig": "navi_core.config",
    "Config": "navi_core.config",
    "ImageLimits": "navi_core.config",
    "PlanningConfig": "navi_core.config",
    "Pricing": "navi_core.config",
    "RetryPolicy": "navi_core.config",
    "Timeout": "navi_core.config",
    "ArgumentError": "navi_core.tools._validation",
    "TodoList": "navi_core.tools._todo",
    "Tool": "navi_core.tools._tool",
    "ToolCall": "navi_core.tools._tool",
    "ToolContext": "navi_core.tools._context",
    "ToolSearch": "navi_core.tools._search",
    "ToolSource": "navi_core.tools._tool",
    "ToolSpec": "navi_core.tools._tool",
    "tool": "navi_core.tools._tool",
    "Anthropic": "navi_core.providers.anthropic",
    "MidStreamFailure": "navi_core.providers.scripted",
    "OpenAIChat": "navi_core.providers.openai_chat",
    "OpenAIResponses": "navi_core.providers.openai_responses",
    "Provider": "navi_core.providers.base",
    "ProviderRequest": "navi_core.providers.base",
    "ProviderStream": "navi_core.providers.base",
    "Scripted": "navi_core.providers.scripted",
    "HistoryPage": "navi_core.store.base",
    "MemoryStore": "navi_core.store.memory",
    "NullStore": "navi_core.store.null",
    "PostgresStore": "navi_core.store.postgres",
    "SQLiteStore": "navi_core.store.sqlite",
    "SessionInfo": "navi_core.store.base",
    "SessionStore": "navi_core.store.base",
    "AmbiguousSession": "navi_core.errors",
    "ApprovalNotPending": "navi_core.errors",
    "AuthFailed": "navi_core.errors",
    "BadRequest": "navi_core.errors",
    "Cancelled": "navi_core.errors",
    "ContextOverflow": "navi_core.errors",
    "EmptyAssistantResponse": "navi_core.errors",
    "IncompleteResponse": "navi_core.errors",
    "MalformedStream": "navi_core.errors",
    "NaviError": "navi_core.errors",
    "NoCompactionPrompt": "navi_core.errors",
    "NothingToCompact": "navi_core.errors",
    "NotAnEventStream": "navi_core.errors",
    "OutputValidationError": "navi_core.errors",
    "Overloaded": "navi_core.errors",
    "ProviderError": "navi_core.errors",
    "RateLimited": "navi_core.errors",
    "ServerError": "navi_core.errors",
    "SessionBusy": "navi_core.errors",
    "SessionError": "navi_core.errors",
    "SessionLockLost": "navi_core.errors",
    "SessionNotFound": "navi_core.errors",
    "SteeringQueueFull": "navi_core.errors",
    "StreamPoisoned": "navi_core.errors",
    "ThinkingStall": "navi_core.errors",
    "ToolRegistrationError": "navi_core.errors",
    "TransportError": "navi_core.errors",
    "Approval": "navi_core.store.base",
    "ApprovalState": "navi_core.store.base",
    "Hook": "navi_core.hooks",
    "NeedsApproval": "navi_core.hooks",
    "SubAgent": "navi_core.subagent",
    "Subscription": "navi_core.subscribe",
    "TurnInfo": "navi_core.hooks",
    "Veto": "navi_core.hooks",
    "MCPError": "navi_core.mcp._wire",
    "MCPToolError": "navi_core.mcp._wire",
    "MCPTools": "navi_core.mcp._tools",
    "Media": "navi_core.media._parts",
}

__all__ = [
    "__version__",
    # the agent and its turn
    "Agent",
    "CompactionResult",
    "Phase",
    "Session",
    "SteerDisposition",
    "Stream",
    "is_casual_message",
    # events
    "AnyEvent",
    "Compacted",
    "CompactionStarted",
    "Cost",
    "Elicitation",
    "Event",
    "HookFailure",
    "Lagged",
    "MessageComplete",
    "ModelInfo",
    "PENDING",
    "Pending",
    "ProviderRetry",
    "ResponseDiscarded",
    "Steered",
    "StopReason",
    "SubagentEvent",
    "TextDelta",
    "ThinkingDelta",
    "TodoItem",
    "TodoUpdated",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolDispatchComplete",
    "ToolDispatchStart",
    "ToolFinished",
    "ToolProgress",
    "ToolStarted",
    "TurnComplete",
    # conversation values
    "CompactionSummary",
    "Conversation",
    "MediaPart",
    "Message",
    "RedactedThinking",
    "System",
    "Text",
    "TextPart",
    "Thinking",
    "ToolResult",
    "ToolUse",
    "Usage",
    "UserMessage",
    "WireIdentity",
    # configuration
    "Budget",
    "CompactionConfig",
    "Config",
    "ImageLimits",
    "PlanningConfig",
    "Pricing",
    "RetryPolicy",
    "Timeout",
    # tools
    "ArgumentError",
    "TodoList",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolSearch",
    "ToolSource",
    "ToolSpec",
    "tool",
    # providers
    "Anthropic",
    "MidStreamFailure",
    "OpenAIChat",
    "OpenAIResponses",
    "Provider",
    "ProviderRequest",
    "ProviderStream",
    "Scripted",
    # stores
    "HistoryPage",
    "MemoryStore",
    "NullStore",
    "PostgresStore",
    "SQLiteStore",
    "SessionInfo",
    "SessionStore",
    # errors
    "AmbiguousSession",
    "ApprovalNotPending",
    "AuthFailed",
    "BadRequest",
    "Cancelled",
    "ContextOverflow",
    "EmptyAssistantResponse",
    "IncompleteResponse",
    "MalformedStream",
    "NaviError",
    "NoCompactionPrompt",
    "NothingToCompact",
    "NotAnEventStream",
    "OutputValidationError",
    "Overloaded",
    "ProviderError",
    "RateLimited",
    "ServerError",
    "SessionBusy",
    "SessionError",
    "SessionLockLost",
    "SessionNotFound",
    "SteeringQueueFull",
    "StreamPoisoned",
    "ThinkingStall",
    "ToolRegistrationError",
    "TransportError",
    # sub-agents, hooks, approvals and observers
    "Approval",
    "ApprovalState",
    "Hook",
    "NeedsApproval",
    "SubAgent",
    "Subscription",
    "TurnInfo",
    "Veto",
    # MCP and media
    "MCPError",
    "MCPToolError",
    "MCPTools",
    "Media",
]


#: one first use at a time: the modules behind the names import each other, and two
#: threads importing parts of one cycle at once could each see the other's half-made
#: module (or Python's import locks could refuse one of them)
_LOADING = threading.RLock()


def __getattr__(name: str) -> Any:
    """A public name, its module imported on first use; or a subpackage or module of
    navi_core (``navi_core.providers``), imported on first use too."""
    where = _WHERE.get(name)
    if where is None:
        if name.startswith("__"):
            raise AttributeError(f"module 'navi_core' has no attribute {name!r}")
        return _submodule(name)
    from ._ids import publish

    with _LOADING:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            if name not in _NEEDS_EXTRA:
                raise
            return _needs_extra(name, exc)  # not kept: a later use tries again
        value = getattr(module, name)
        publish({name: value})  # one whose module does not publish it
        globals()[name] = value  # later lookups skip this function
        return value


def _submodule(name: str) -> Any:
    """``navi_core.<name>`` imported, or AttributeError when there is none."""
    full = f"{__name__}.{name}"
    with _LOADING:
        try:
            return importlib.import_module(full)
        except ModuleNotFoundError as exc:
            if exc.name != full:
                raise
    raise AttributeError(f"module 'navi_core' has no attribute {name!r}")


#: names whose module needs an optional extra: without it they still import (so
#: ``from navi_core import *`` works) and fail when used, saying what to install
_NEEDS_EXTRA = frozenset({"PostgresStore"})


def _needs_extra(name: str, error: ImportError) -> type:
    """A stand-in for ``name`` whose construction raises ``error`` again."""

    def fail(*args: Any, **kwargs: Any) -> None:
        raise ImportError(str(error)) from error

    return type(
        name, (), {"__init__": fail, "__module__": "navi_core", "__doc__": str(error)}
    )


def __dir__() -> list[str]:
    """The public names, loaded or not, and the module's own."""
    return sorted({*globals(), *__all__})

"""navi_core: a synchronous, pull-based LLM agent loop with a compiled streaming core.

agent = Agent(provider=OpenAIChat(model="qwen2.5", base_url="http://127.0.0.1:11434/v1"))
with agent.run("What does README.md say?") as stream:
    while ev := stream.next():
        ...

Every public name is importable from here and reports ``__module__ == "navi_core"``,
so reprs, docs and tracebacks show the public path. Names only implementers need
(provider and store authors) are also reachable from their subpackages:
``navi_core.providers`` and ``navi_core.store``.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

# isort: split
# the agent and its turn
from ._turn.casual import is_casual_message
from ._turn.steering import SteerDisposition
from .agent import Agent
from .session import Session
from .stream import Phase, Stream

# isort: split
# events
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

# isort: split
# conversation values
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

# isort: split
# configuration
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

# isort: split
# tools
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

# isort: split
# providers (OpenAIChat, OpenAIResponses and Anthropic: loaded on first use)
from .providers.base import Provider, ProviderRequest, ProviderStream
from .providers.scripted import MidStreamFailure, Scripted

# isort: split
# stores (SQLiteStore and PostgresStore: loaded on first use)
from .store.base import HistoryPage, SessionInfo, SessionStore
from .store.memory import MemoryStore
from .store.null import NullStore

# isort: split
# errors (MCPError and MCPToolError: with MCP, below)
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

# isort: split
# sub-agents, hooks, approvals and observers
from .hooks import Hook, NeedsApproval, TurnInfo, Veto
from .store.base import Approval, ApprovalState
from .subagent import SubAgent
from .subscribe import Subscription

if TYPE_CHECKING:  # imported on first use at run time (see __getattr__)
    # the agent and its turn
    from .compaction._compaction import CompactionResult

    # MCP and media
    from .mcp._tools import MCPError, MCPToolError, MCPTools
    from .media._parts import Media

    # providers
    from .providers.anthropic import Anthropic
    from .providers.openai_chat import OpenAIChat
    from .providers.openai_responses import OpenAIResponses

    # stores
    from .store.postgres import PostgresStore
    from .store.sqlite import SQLiteStore

__version__ = "0.1.0"

# A library logs, the host decides where records go: without a handler of the host's,
# navi_core's warnings stay silent instead of reaching stderr through logging's last
# resort.
logging.getLogger("navi_core").addHandler(logging.NullHandler())

#: names whose modules import httpx, sqlite3, psycopg or Pillow (or start processes):
#: loaded on first use. Each of their classes sets ``__module__ = "navi_core"`` in its
#: own body, so it reports the public path whichever module is imported first.
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


def __getattr__(name: str) -> Any:
    """The lazy names: their modules are imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'navi_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def _publish(namespace: dict[str, Any]) -> None:
    """Give each public class and function of ``namespace`` the module ``navi_core``.

    ``typing.get_type_hints`` evaluates a class's string annotations (``from
    __future__ import annotations``) in the namespace of ``sys.modules[cls.__module__]``
    (and the class's own), and pydantic evaluates a dataclass's ``Field.type`` there.
    Once that is navi_core, names a module imports for its annotations only
    (``Sequence``, ``Any``, private types) would be missing, so each class's own
    annotations are evaluated first, where the class is defined (the class, its module,
    the builtins), then among the public names of this module (for those its module
    imports under ``TYPE_CHECKING`` only). One that does not evaluate stays the string
    it was. A dataclass's own fields get the same objects as their ``type``. The lazy
    names are not loaded: their classes set ``__module__`` themselves.
    """
    import builtins
    import sys
    import types
    from collections import ChainMap
    from collections.abc import Mapping

    builtin = vars(builtins)
    codes: dict[str, types.CodeType] = {}  # the same strings recur: compile each once

    def evaluate(value: str, module: dict[str, Any], here: Mapping[str, Any]) -> Any:
        """The object ``value`` names (or itself, when it does not evaluate)."""
        for scope in (here, module, builtin, namespace):  # most are one name: no eval
            if value in scope:
                return scope[value]
        try:
            code = codes.get(value)
            if code is None:
                code = codes[value] = compile(value, "<annotation>", "eval")
            try:
                return eval(code, module, here)
            except NameError:  # a name its module imports under TYPE_CHECKING only
                scopes = ChainMap(here, module, builtin, namespace)  # type: ignore[arg-type]
                return eval(code, module, scopes)
        except Exception:  # NameError, or whatever else the expression raises
            return value

    def resolve(cls: type, annotations: dict[str, Any]) -> None:
        module = vars(sys.modules[cls.__module__])
        here = vars(cls)
        cls.__annotations__ = resolved = {
            name: evaluate(value, module, here) if isinstance(value, str) else value
            for name, value in annotations.items()
        }
        fields = here.get("__dataclass_fields__", {})
        for name, value in resolved.items():
            if name in fields and not isinstance(value, str):
                fields[name].type = value  # this class's own field

    for name in __all__:
        obj = namespace.get(name)
        if isinstance(obj, type):
            annotations = vars(obj).get("__annotations__")
            if annotations and any(isinstance(v, str) for v in annotations.values()):
                resolve(obj, annotations)
            obj.__module__ = "navi_core"
        elif isinstance(obj, types.FunctionType):
            obj.__module__ = "navi_core"


_publish(globals())
del _publish

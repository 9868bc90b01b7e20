"""The public face: every name of ``navi_core.__all__``, at its public path.

* Each public class and function reports ``__module__ == "navi_core"`` (reprs, docs,
  tracebacks and pickles show ``navi_core.X``), the lazily loaded ones too, whichever
  module is imported first.
* What that could break still works: pickling and copying the values, events, errors
  and enums; ``typing.get_type_hints`` of every public class; schemas of public
  dataclasses in tools, structured output and pydantic (``Field.type`` is evaluated).
* ``import navi_core`` loads none of httpx, sqlite3, Pillow or psycopg, nor the module
  of any public name: each loads on first use.
* Provider and store authors find the names they need in ``navi_core.providers`` and
  ``navi_core.store``, at run time and for mypy.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import importlib.util
import inspect
import pickle
import pickletools
import subprocess
import sys
import traceback
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import navi_core
import navi_core.providers
import navi_core.store
import navi_core.store.base
from navi_core import (
    PENDING,
    AmbiguousSession,
    Approval,
    ApprovalNotPending,
    ApprovalState,
    ArgumentError,
    AuthFailed,
    BadRequest,
    Budget,
    Cancelled,
    Compacted,
    CompactionConfig,
    CompactionStarted,
    CompactionSummary,
    Config,
    ContextOverflow,
    Conversation,
    Cost,
    Elicitation,
    EmptyAssistantResponse,
    HistoryPage,
    HookFailure,
    ImageLimits,
    IncompleteResponse,
    Lagged,
    MalformedStream,
    MediaPart,
    Message,
    MessageComplete,
    ModelInfo,
    NaviError,
    NeedsApproval,
    NoCompactionPrompt,
    NotAnEventStream,
    NothingToCompact,
    OutputValidationError,
    Overloaded,
    Phase,
    PlanningConfig,
    Pricing,
    ProviderError,
    ProviderRetry,
    RateLimited,
    RedactedThinking,
    ResponseDiscarded,
    RetryPolicy,
    ServerError,
    SessionBusy,
    SessionError,
    SessionInfo,
    SessionLockLost,
    SessionNotFound,
    SteerDisposition,
    Steered,
    SteeringQueueFull,
    StopReason,
    StreamPoisoned,
    SubagentEvent,
    System,
    Text,
    TextDelta,
    TextPart,
    Thinking,
    ThinkingDelta,
    ThinkingStall,
    Timeout,
    TodoItem,
    TodoUpdated,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolDispatchComplete,
    ToolDispatchStart,
    ToolFinished,
    ToolProgress,
    ToolRegistrationError,
    ToolResult,
    ToolSpec,
    ToolStarted,
    ToolUse,
    TransportError,
    TurnComplete,
    TurnInfo,
    Usage,
    UserMessage,
    Veto,
    WireIdentity,
    tool,
)
from navi_core.output import OutputSpec

PUBLIC = sorted(navi_core.__all__)
#: the public names that are neither a class nor a function
NOT_CLASSES = {"AnyEvent", "PENDING", "__version__"}
#: the names whose modules import httpx, sqlite3, psycopg or Pillow (or start
#: processes), and the module each is defined in
LAZY = {
    "Anthropic": "navi_core.providers.anthropic",
    "CompactionResult": "navi_core.compaction._compaction",
    "MCPError": "navi_core.mcp._wire",
    "MCPToolError": "navi_core.mcp._tools",
    "MCPTools": "navi_core.mcp._tools",
    "Media": "navi_core.media._parts",
    "OpenAIChat": "navi_core.providers.openai_chat",
    "OpenAIResponses": "navi_core.providers.openai_responses",
    "PostgresStore": "navi_core.store.postgres",
    "SQLiteStore": "navi_core.store.sqlite",
}
#: what ``import navi_core`` must not load
HEAVY = ("httpx", "sqlite3", "_sqlite3", "PIL", "psycopg", "psycopg_pool", "asyncio")
#: the optional extra a lazily loaded name needs
EXTRA = {"PostgresStore": "psycopg"}


def public(name: str) -> Any:
    """``navi_core.<name>``; skipped when it needs an extra that is not installed."""
    if name in EXTRA:
        pytest.importorskip(EXTRA[name])
    return getattr(navi_core, name)


def python(code: str) -> str:
    """Run ``code`` in a fresh interpreter; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# -- every name, at its public path -------------------------------------------------


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_imports_from_navi_core_and_reports_it(name: str) -> None:
    obj = public(name)
    namespace: dict[str, Any] = {}
    exec(f"from navi_core import {name}", namespace)
    assert namespace[name] is obj
    if name in NOT_CLASSES:
        # constants and aliases are not renamed; the type of a constant is
        assert not (inspect.isclass(obj) or inspect.isfunction(obj))
        assert type(obj).__module__ in ("navi_core", "builtins", "types")
        return
    assert inspect.isclass(obj) or inspect.isfunction(obj), name
    assert obj.__module__ == "navi_core"
    # the path it reports leads back to it (pickle relies on that)
    assert getattr(navi_core, obj.__qualname__) is obj


def test_reprs_and_tracebacks_show_the_public_path() -> None:
    assert repr(TextDelta) == "<class 'navi_core.TextDelta'>"
    assert repr(TextDelta("hi")) == "TextDelta(text='hi')"
    assert repr(StopReason.END_TURN) == "<StopReason.END_TURN: 'end_turn'>"
    assert repr(ProviderError("x", status_code=500)) == (
        "ProviderError('x', status_code=500, retry_after_ms=None)"
    )
    shown = traceback.format_exception_only(RateLimited, RateLimited("slow down"))
    assert shown[-1] == "navi_core.RateLimited: slow down\n"


@pytest.mark.parametrize(("name", "module"), sorted(LAZY.items()))
def test_lazy_names_report_navi_core_when_their_own_module_comes_first(
    name: str, module: str
) -> None:
    if name in EXTRA and not installed(EXTRA[name]):
        pytest.skip(f"{name} needs {EXTRA[name]}")
    out = python(
        f"import typing\n"
        f"from {module} import {name} as cls\n"
        f"import navi_core\n"
        f"assert navi_core.{name} is cls\n"
        f"typing.get_type_hints(cls)\n"
        f"print(cls.__module__)\n"
    )
    assert out == "navi_core\n"


def test_import_navi_core_loads_no_heavy_module_and_no_public_name() -> None:
    # every name loads on first use (tests/test_import_cost.py holds the rest)
    out = python(
        "import sys\n"
        "import navi_core\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print(sorted(n for n in navi_core.__all__ if n not in vars(navi_core)))\n"
    )
    assert out.splitlines() == ["[]", repr(sorted(set(PUBLIC) - {"__version__"}))]


def test_the_implementer_packages_import_first_and_light() -> None:
    out = python(
        "import sys\n"
        "import navi_core.providers, navi_core.store\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "from navi_core.store import SQLiteStore\n"
        "print(SQLiteStore.__module__, 'sqlite3' in sys.modules)\n"
    )
    assert out.splitlines() == ["[]", "navi_core True"]


# -- what a public path could break --------------------------------------------------

MESSAGE = Message(
    "assistant",
    (Thinking("hm", signature="sig"), Text("hi"), ToolUse("c1", "search", "{}")),
    usage=Usage(input=3, output=2),
    stop_reason="tool_use",
    wire=WireIdentity("openai-chat", "http://127.0.0.1/v1", "m"),
)
RESULTS = Message(
    "user",
    (ToolResult("c1", (TextPart("found"), MediaPart("image/png", "aGk="))),),
)
USAGE = Usage(input=1, output=2, cache_read=3, cache_write=4, reasoning=1)

#: a value of every public event
EVENTS: list[object] = [
    TextDelta("hi"),
    ThinkingDelta("hm"),
    ToolCallStart(0, "c1", "search"),
    ToolCallDelta(0, '{"q":'),
    ModelInfo("m"),
    MessageComplete(MESSAGE, USAGE),
    ToolDispatchStart(1),
    ToolStarted("c1", "search"),
    ToolFinished("c1", "search", is_error=True, seconds=0.5, error="boom"),
    ToolProgress("c1", "half way"),
    ToolDispatchComplete(RESULTS),
    ProviderRetry(1, 4, 500, "RateLimited", 429, 1000, "slow down", compaction=True),
    CompactionStarted("threshold", 40, 90_000),
    Compacted(40, 12, 30, 2),
    PENDING,
    ResponseDiscarded(1, 10, 0, 1),
    Steered(UserMessage("and also")),
    SubagentEvent("c1", TextDelta("child")),
    Lagged(3),
    TodoUpdated((TodoItem("read", "done"), TodoItem("write", "in_progress"))),
    Elicitation("c1", "r1", "Which branch?", {"type": "object", "properties": {}}),
    HookFailure("audit", "before_tool", "ValueError: no", call_id="c1"),
    TurnComplete(
        StopReason.APPROVAL_REQUIRED,
        "done",
        iterations=2,
        tool_calls=1,
        usage=USAGE,
        turn_id="t1",
        output={"answer": 42},
        hook_failures=(HookFailure("audit", "after_turn", "boom"),),
        pending_approvals=(ToolUse("c2", "rm", "{}"),),
        cost=Cost(0.01, 0.004, 0.005, 0.001),
    ),
]
#: a value of every public error
ERRORS: list[BaseException] = [
    NaviError("x"),
    ProviderError("x", status_code=500, retry_after_ms=20),
    RateLimited("x", status_code=429, retry_after_ms=1000),
    Overloaded("x", status_code=529),
    ServerError("x", status_code=500),
    TransportError("x"),
    MalformedStream("x", offset=42, status_code=200),
    IncompleteResponse("x", offset=None),
    NotAnEventStream("x", status_code=200),
    AuthFailed("x", status_code=401),
    BadRequest("x", status_code=400),
    ContextOverflow("x", status_code=400),
    StreamPoisoned("x"),
    EmptyAssistantResponse("x"),
    NoCompactionPrompt("x"),
    Cancelled("x"),
    ThinkingStall("x"),
    SteeringQueueFull("x"),
    NothingToCompact("x"),
    OutputValidationError("x"),
    SessionError("x"),
    SessionNotFound("x"),
    AmbiguousSession("x"),
    SessionBusy("x"),
    SessionLockLost("x"),
    ToolRegistrationError("x"),
    ApprovalNotPending("x"),
    ArgumentError("x"),
]
#: conversation, configuration, store and hook values, and a member of every enum
VALUES: list[object] = [
    MESSAGE,
    RESULTS,
    UserMessage("hello"),
    Text("hi"),
    Thinking("hm"),
    RedactedThinking("opaque"),
    ToolUse("c1", "search", "{}"),
    ToolResult("c1", (TextPart("no"),), is_error=True),
    TextPart("hi"),
    MediaPart("image/png", "aGk="),
    System("be brief", mode="replace"),
    CompactionSummary("so far"),
    USAGE,
    WireIdentity("anthropic-messages", "http://127.0.0.1", "m"),
    Conversation([UserMessage("hello"), MESSAGE], session_id="s1"),
    Config(
        retry=RetryPolicy(max_attempts=2, jitter=False),
        compaction=CompactionConfig(keep_verbatim=10, prompt="sum up"),
        images=ImageLimits(max_side=512),
        planning=PlanningConfig("plan first"),
        turn_timeout=60.0,
    ),
    RetryPolicy(max_attempts=2, jitter=False),
    CompactionConfig(keep_verbatim=10, prompt="sum up", context_window=8192),
    ImageLimits(max_side=512, max_bytes=1024),
    PlanningConfig("plan first"),
    Budget(usd=0.5, tokens=10_000),
    Pricing(3.0, 15.0, cache_read=0.3),
    Cost(0.01, 0.004, 0.005, 0.001),
    Timeout(read=5.0, idle=1.0),
    ToolSpec("search", "Search the web.", {"type": "object", "properties": {}}),
    ToolCall("c1", "search", {"q": "navi"}, turn_id="t1"),
    TodoItem("write the tests"),
    SessionInfo("s1", 1.0, 2.0, 3, "hello", "m"),
    HistoryPage((MESSAGE,), "cursor"),
    Approval("c1", "rm", ApprovalState.DONE, "", ToolResult("c1", (TextPart("ok"),))),
    Veto("no"),
    NeedsApproval("sure?"),
    TurnInfo("t1", "s1", UserMessage("hi")),
    StopReason.END_TURN,
    Phase.DONE,
    SteerDisposition.QUEUED,
    ApprovalState.RUNNING,
]


def same(a: object, b: object) -> bool:
    """Equal values; for errors, equal type, arguments and attributes."""
    if isinstance(a, BaseException):
        return type(a) is type(b) and a.args == b.args and vars(a) == vars(b)
    return type(a) is type(b) and a == b


def pickled_globals(value: object) -> set[str]:
    """The ``module name`` of every global a protocol-2 pickle of ``value`` names."""
    return {
        str(arg)
        for op, arg, _ in pickletools.genops(pickle.dumps(value, protocol=2))
        if op.name == "GLOBAL"
    }


def test_the_samples_cover_every_public_event_error_value_and_enum() -> None:
    covered = {type(v).__name__ for v in [*EVENTS, *ERRORS, *VALUES]}
    wanted = set()
    for name in PUBLIC:
        obj = public(name) if name not in LAZY else None
        if not inspect.isclass(obj):
            continue
        if (
            issubclass(obj, (navi_core.Event, BaseException, enum.Enum))
            or dataclasses.is_dataclass(obj)
        ) and obj is not navi_core.Event:
            wanted.add(name)
    # values that hold code or live objects, not data
    wanted -= {"Tool", "SubAgent", "TodoList", "ProviderRequest", "MidStreamFailure"}
    assert wanted <= covered, sorted(wanted - covered)
    assert {type(v).__module__ for v in [*EVENTS, *ERRORS, *VALUES]} == {"navi_core"}


ALL = [*EVENTS, *ERRORS, *VALUES]


@pytest.mark.parametrize("value", ALL, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_values_pickle_by_their_public_path(value: object, protocol: int) -> None:
    assert f"navi_core {type(value).__qualname__}" in pickled_globals(value)
    back = pickle.loads(pickle.dumps(value, protocol=protocol))
    assert same(back, value)
    if isinstance(value, enum.Enum):
        assert back is value


@pytest.mark.parametrize("value", ALL, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy])
def test_values_copy(value: object, copier: Callable[[object], object]) -> None:
    twin = copier(value)
    assert same(twin, value)
    assert type(twin).__module__ == "navi_core"


def test_lazily_loaded_values_pickle_and_copy() -> None:
    media = public("Media")(b"\x89PNG\r\n\x1a\n", "image/png")
    result = public("CompactionResult")(True, 10, 2)
    error = public("MCPToolError")("tool failed")
    for value in (media, result, error):
        assert f"navi_core {type(value).__qualname__}" in pickled_globals(value)
        for twin in (
            pickle.loads(pickle.dumps(value)),
            copy.copy(value),
            copy.deepcopy(value),
        ):
            assert same(twin, value)


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in PUBLIC
        if n not in NOT_CLASSES
        and n not in ("is_casual_message", "tool", "UserMessage")
    ],
)
def test_type_hints_of_every_public_class_resolve(name: str) -> None:
    cls = public(name)
    hints = typing.get_type_hints(cls)
    extras = typing.get_type_hints(cls, include_extras=True)
    assert set(hints) == set(extras)
    assert set(inspect.get_annotations(cls)) <= set(hints)
    if dataclasses.is_dataclass(cls):
        assert {f.name for f in dataclasses.fields(cls)} <= set(hints)


def test_type_hints_name_the_real_types() -> None:
    assert typing.get_type_hints(TurnComplete)["usage"] is Usage
    assert typing.get_type_hints(Message)["wire"] == WireIdentity | None
    assert typing.get_type_hints(HistoryPage)["messages"] == tuple[Message, ...]
    assert typing.get_type_hints(Config)["retry"] is RetryPolicy
    # names its module imports for type checkers only resolve among the public names
    assert typing.get_type_hints(CompactionConfig)["provider"] == (
        navi_core.Provider | None
    )


def test_public_dataclasses_work_as_tool_parameters() -> None:
    # System.mode is a Literal, a name its module imports and navi_core does not
    assert System.__module__ == Usage.__module__ == "navi_core"

    @tool
    def record(usage: Usage, reason: StopReason, system: System) -> str:
        """Record what a turn used."""
        return f"{usage.output} {reason} {system.text}"

    props = record.parameters["properties"]
    assert props["usage"]["properties"]["cache_read"] == {"type": "integer"}
    assert props["reason"]["enum"] == [r.value for r in StopReason]
    assert props["system"]["properties"]["mode"]["enum"] == ["append", "replace"]


def test_public_dataclasses_work_as_structured_output() -> None:
    # ToolResult.parts is a tuple[Part, ...], Part an alias of its module only
    assert Approval.__module__ == ToolResult.__module__ == "navi_core"
    spec = OutputSpec.of(Approval)
    value, problems = spec.parse(
        {
            "call_id": "c1",
            "name": "rm",
            "state": "denied",
            "reason": "no",
            "result": {"tool_use_id": "c1", "parts": [{"text": "kept"}]},
        }
    )
    assert problems == []
    assert value == Approval(
        "c1", "rm", ApprovalState.DENIED, "no", ToolResult("c1", (TextPart("kept"),))
    )


#: the public dataclasses loaded with navi_core
DATACLASSES = sorted(
    n
    for n in PUBLIC
    if n not in LAZY
    and n not in NOT_CLASSES
    and dataclasses.is_dataclass(getattr(navi_core, n))
)
#: the lazily loaded ones, and a value of each
LAZY_DATACLASSES: dict[str, Callable[[], object]] = {
    "CompactionResult": lambda: public("CompactionResult")(True, 10, 2),
    "Media": lambda: public("Media")(b"\x89PNG\r\n\x1a\n", "image/png"),
}
#: public dataclasses pydantic has no schema for (nor had before they reported
#: navi_core): each holds a value that is not data
NOT_PYDANTIC = {
    "CompactionConfig": "provider: Provider | None",
    "Config": "compaction: CompactionConfig",
    "MidStreamFailure": "error: ProviderError",
    "ProviderRequest": "config: RequestConfig",
    "SubAgent": "a Tool",
    "TodoList": "a Tool",
    "SubagentEvent": "event: Event",
    "Tool": "_plan: CallPlan | None",
}
#: the samples above, by class name
SAMPLES = {type(v).__name__: v for v in [*EVENTS, *VALUES]}


def test_dataclass_fields_hold_their_evaluated_types() -> None:
    # Field.type as the annotations: pydantic reads it, in the namespace of navi_core
    for name in DATACLASSES:
        cls = public(name)
        hints = typing.get_type_hints(cls, include_extras=True)
        for f in dataclasses.fields(cls):
            assert f.type == hints[f.name], (name, f.name, f.type)


@pytest.mark.parametrize(
    "name", sorted({*DATACLASSES, *LAZY_DATACLASSES} - set(NOT_PYDANTIC))
)
def test_public_dataclasses_have_pydantic_schemas(name: str) -> None:
    pytest.importorskip("pydantic", reason="pydantic is an optional dependency")
    from pydantic import TypeAdapter

    cls = public(name)
    adapter = TypeAdapter(cls)
    assert adapter.pydantic_complete  # every type its fields name was found
    value = LAZY_DATACLASSES[name]() if name in LAZY_DATACLASSES else SAMPLES[name]
    assert type(value) is cls
    assert same(adapter.validate_python(adapter.dump_python(value)), value)
    if name != "Media":  # bytes go to JSON as UTF-8 only
        assert same(adapter.validate_json(adapter.dump_json(value)), value)


# -- what implementers find in the subpackages ---------------------------------------


PROVIDER_SEAM = ("DeltaStream", "Provider", "ProviderRequest", "ProviderStream")
STORE_NAMES = (
    "Approval",
    "ApprovalState",
    "HistoryPage",
    "SessionInfo",
    "SessionStore",
)


@pytest.mark.parametrize("name", PROVIDER_SEAM)
def test_provider_authors_find_the_seam_in_navi_core_providers(name: str) -> None:
    assert name in navi_core.providers.__all__
    obj = getattr(navi_core.providers, name)
    if name in navi_core.__all__:
        assert obj is getattr(navi_core, name)
    else:
        from navi_core.providers.delta_stream import DeltaStream

        assert obj is DeltaStream


@pytest.mark.parametrize("name", sorted({*STORE_NAMES, *navi_core.store.base.__all__}))
def test_store_authors_find_the_protocol_and_its_values_in_navi_core_store(
    name: str,
) -> None:
    assert name in navi_core.store.__all__
    assert getattr(navi_core.store, name) is getattr(navi_core.store.base, name)


@pytest.mark.parametrize(
    "name", ["MemoryStore", "NullStore", "SQLiteStore", "PostgresStore"]
)
def test_the_stores_stay_in_navi_core_store_loaded_on_first_use(name: str) -> None:
    assert name in navi_core.store.__all__
    store = public(name)  # skipped without its extra
    assert getattr(navi_core.store, name) is store
    assert store.__module__ == "navi_core"
    with pytest.raises(AttributeError, match="Nope"):
        navi_core.Nope  # noqa: B018
    with pytest.raises(AttributeError, match="Nope"):
        navi_core.store.Nope  # noqa: B018


IMPLEMENTER = """\
from collections.abc import Iterator, Sequence
from typing import Any

from navi_core import Message, WireIdentity
from navi_core.providers import (
    DeltaStream,
    Provider,
    ProviderRequest,
    ProviderStream,
    RequestConfig,
)
from navi_core.store import (
    MAX_PAGE,
    Approval,
    ApprovalState,
    HistoryPage,
    SessionInfo,
    SessionStore,
    SQLiteStore,
)


class Echo:
    wire = WireIdentity("echo", "http://127.0.0.1", "echo")

    def open(self, request: ProviderRequest) -> ProviderStream:
        batches: Iterator[Sequence[tuple[Any, ...]]] = iter(())
        return DeltaStream(batches, self.wire)

    def close(self) -> None:
        pass


def use(provider: Provider, config: RequestConfig, store: SessionStore) -> int:
    page: HistoryPage = store.history_page("s1", limit=MAX_PAGE)
    infos: list[SessionInfo] = store.list()
    held: list[Approval] = store.approvals("s1")
    waiting = [a for a in held if a.state is ApprovalState.PENDING]
    messages: tuple[Message, ...] = page.messages
    return len(infos) + len(waiting) + len(messages)


provider: Provider = Echo()
sqlite: SessionStore = SQLiteStore("/tmp/never-opened.db")
"""


def test_implementer_names_type_check_from_the_subpackages(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="the typing tests need mypy (the test extra)")
    user = tmp_path / "implementer.py"
    user.write_text(IMPLEMENTER, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            str(user),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr

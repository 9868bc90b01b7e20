"""Tools the model may call: ``@tool`` functions, ``ToolSource`` batches, the registry.

``@tool`` derives a JSON schema from a function's type hints and its description from
the docstring (Google-style ``Args:`` lines describe parameters; see ``schema``). The
``Tool`` it returns is still the function for callers and type checkers: same
parameters, same return type. A ``ToolSource`` declares several tools and receives
every call addressed to it as one batch. ``ToolSpec`` is the declaration sent to the
model.
"""

from __future__ import annotations

import functools
import inspect
import re
import threading
import types
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Generic, Protocol, overload, runtime_checkable

from .._ids import publish
from .._logs import get_logger
from ..errors import ToolRegistrationError
from . import _pydantic as pydantic_types
from ._call_plan import CallPlan
from ._context import ToolContext, context_parameters
from ._schema import (
    ConversionError,
    function_schema,
    parse_docstring,
    schema_for,
    type_hints,
)
from ._timeouts import call_with_idle_limit
from ._validation import ArgumentError, errors, summary

if TYPE_CHECKING:
    # Defaults (PEP 696) let ``Tool`` stand alone in annotations (``Tool[..., Any]``);
    # type checkers ship these stubs, and at run time the defaults play no part.
    from typing_extensions import ParamSpec, TypeVar

    P = ParamSpec("P", default=...)
    R = TypeVar("R", default=Any)
else:
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")

__all__ = [
    "ArgumentError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolRegistry",
    "ToolSource",
    "ToolSpec",
    "context_parameters",
    "schema_for",
    "tool",
]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool declaration as sent to the model: name, description, JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any] = field(hash=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call handed to a tool: the model's call id, tool name and decoded arguments,
    and the id of the turn that made it (empty outside a turn)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(hash=False)
    turn_id: str = ""


def _may_await(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` may return a coroutine: an ``async def`` at any layer of
    ``functools.wraps`` wrappers and partials (an async wrapper of a sync function
    too), or any callable that is not a plain function, whose result cannot be told
    before it is called."""
    seen: set[int] = set()
    layer: Any = fn
    while id(layer) not in seen:  # a cycle of __wrapped__ cannot be told either
        seen.add(id(layer))
        if isinstance(layer, functools.partial):
            layer = layer.func
            continue
        if inspect.iscoroutinefunction(layer):
            return True
        if not (inspect.isfunction(layer) or inspect.ismethod(layer)):
            return True
        inner = getattr(layer, "__wrapped__", None)
        if inner is None:
            return False
        layer = inner
    return True


def _is_async(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is an ``async def`` at some layer of wrappers and partials."""
    seen: set[int] = set()
    layer: Any = fn
    while layer is not None and id(layer) not in seen:
        seen.add(id(layer))
        if inspect.iscoroutinefunction(layer):
            return True
        layer = (
            layer.func
            if isinstance(layer, functools.partial)
            else getattr(layer, "__wrapped__", None)
        )
    return False


class _FunctionSignature:
    """``inspect.signature(a_tool)`` is the signature of the tool's function."""

    def __get__(self, obj: Tool | None, owner: type | None = None) -> inspect.Signature:
        if obj is None:  # the class itself: inspect falls back to ``__init__``
            raise AttributeError("__signature__")
        return inspect.signature(obj.fn)


@dataclass(frozen=True, slots=True)
class Tool(Generic[P, R]):
    """A function the model may call, with its declaration.

    Calling the tool calls the function: ``Tool[P, R]`` takes the parameters ``P``
    and returns ``R`` of the function it wraps. A bare ``Tool`` is any tool.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(hash=False, repr=False)
    fn: Callable[P, R] = field(repr=False)
    hints: dict[str, Any] = field(
        default_factory=dict, hash=False, repr=False, compare=False
    )
    #: every call waits for ``Agent.approve`` before it runs
    needs_approval: bool = field(default=False, compare=False)
    #: seconds a call may go without a result or a ``ToolContext.emit`` before it
    #: becomes an error result (None: no limit): ``@tool(timeout=...)``
    idle_timeout: float | None = field(default=None, compare=False)
    #: calls run on the thread that calls ``Stream.next()``, with no thread hand-off:
    #: for work that returns at once (``cancel()`` waits for it): ``@tool(inline=True)``
    inline: bool = field(default=False, compare=False)
    #: worked out from ``parameters`` and ``hints`` on the first ``invoke`` (a copy
    #: from ``dataclasses.replace`` starts without one)
    _plan: CallPlan | None = field(
        default=None, init=False, repr=False, compare=False, hash=False
    )

    __signature__ = _FunctionSignature()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ToolRegistrationError(
                f"tool name {self.name!r} must be 1-64 characters of A-Z a-z 0-9 _ -"
            )
        if self.idle_timeout is not None and not self.idle_timeout > 0:
            raise ToolRegistrationError(
                f"tool {self.name!r}: timeout must be a positive number of seconds"
            )
        if self.inline:
            if self.idle_timeout is not None:
                raise ToolRegistrationError(
                    f"tool {self.name!r}: an inline tool cannot have a timeout (a call "
                    "on the thread that drives the turn cannot be cut off)"
                )
            if _is_async(self.fn):
                raise ToolRegistrationError(
                    f"tool {self.name!r}: an async tool cannot be inline (it needs an "
                    "event loop of its own and its cancel would wait for it)"
                )

    @property
    def spec(self) -> ToolSpec:
        """The declaration sent to the model."""
        return ToolSpec(self.name, self.description, self.parameters)

    def invoke(
        self, arguments: Mapping[str, Any], context: ToolContext | None = None
    ) -> Any:
        """Check JSON arguments against the schema, convert them to the annotated
        types and call the function; a coroutine function runs to completion here,
        so the value is the function's result, awaited.

        ``context`` is passed to every parameter annotated ``ToolContext`` (a fresh,
        inert one when none is given).

        With an ``idle_timeout``, the function runs on a thread of its own and the call
        ends when it goes that long without returning or reporting progress.

        Raises:
            ArgumentError: the arguments do not match the schema (the function was
                not called); the message names each field and what was expected.
            TimeoutError: ``idle_timeout`` passed without a result or progress.
        """
        plan = self._plan if self._plan is not None else self._call_plan()
        if plan.valid is None or not plan.valid(arguments):
            problems = errors(self.parameters, arguments)
            if problems:
                raise ArgumentError(f"invalid arguments: {summary(problems)}")
        try:
            kwargs = plan.keywords(arguments)
        except ConversionError as exc:
            where, cause = exc.where, exc.cause
            lines = pydantic_types.error_lines(cause, where) or [f"`{where}`: {cause}"]
            raise ArgumentError(f"invalid arguments: {summary(lines)}") from cause
        limit = self.idle_timeout
        if limit is not None:
            base = context if context is not None else ToolContext("", self.name)
            return call_with_idle_limit(
                lambda ctx: self._run(kwargs, plan.context, ctx), base, limit
            )
        if plan.context:
            if context is None:
                context = ToolContext("", self.name)
            for k in plan.context:
                kwargs[k] = context
        fn: Callable[..., Any] = self.fn
        result = fn(**kwargs)
        if isinstance(result, types.CoroutineType):
            return run_coroutine(
                result, context.cancelled if context is not None else None
            )
        return result

    def _run(
        self, kwargs: dict[str, Any], injected: tuple[str, ...], context: ToolContext
    ) -> Any:
        """Call the function with ``context`` in the ``injected`` parameters (a timed
        call, on its own thread)."""
        for k in injected:
            kwargs[k] = context
        fn: Callable[..., Any] = self.fn
        result = fn(**kwargs)
        if isinstance(result, types.CoroutineType):
            return run_coroutine(result, context.cancelled)
        return result

    @property
    def takes_context(self) -> bool:
        """Whether ``invoke`` reads its ``context``: a parameter annotated
        ``ToolContext``, a function that may return a coroutine (``async def``, also
        wrapped; cancelled through the context) or a subclass's own ``invoke``. A
        dispatcher builds no context for the others."""
        plan = self._plan if self._plan is not None else self._call_plan()
        return plan.takes_context

    def _call_plan(self) -> CallPlan:
        awaits = type(self).invoke is not Tool.invoke or _may_await(self.fn)
        plan = CallPlan(
            self.parameters, self.hints, context_parameters(self.hints), awaits=awaits
        )
        object.__setattr__(self, "_plan", plan)
        return plan

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)


def _tool_state(t: Tool) -> list[Any]:
    """What a copy or a pickle of ``t`` keeps: its fields but the plan (it holds
    closures; a copy works out its own), then a subclass's own attributes
    (``SubAgent``'s factory and limits)."""
    names = {f.name for f in fields(t)}
    extra = {
        name: getattr(t, name)
        for cls in type(t).__mro__
        for name in cls.__dict__.get("__slots__", ())
        if name not in names and hasattr(t, name)
    }
    extra.update(getattr(t, "__dict__", {}))
    state = [getattr(t, f.name) for f in fields(t) if f.name != "_plan"]
    return [*state, extra] if extra else state


def _restore_tool(t: Tool, state: list[Any]) -> None:
    """Set ``t`` from ``_tool_state``; the plan is worked out again on first use."""
    names = [f.name for f in fields(t) if f.name != "_plan"]
    extra = state[len(names)] if len(state) > len(names) else {}
    for name, value in [*zip(names, state[: len(names)], strict=True), *extra.items()]:
        object.__setattr__(t, name, value)
    object.__setattr__(t, "_plan", None)


# Set after the class: Python 3.10's ``dataclass(slots=True, frozen=True)`` puts its
# own field-only ``__getstate__``/``__setstate__`` over those of the class body (3.11
# keeps them), and a copy would lose a subclass's attributes.
Tool.__getstate__ = _tool_state  # type: ignore[assignment]
Tool.__setstate__ = _restore_tool  # type: ignore[attr-defined]


def run_coroutine(
    coro: Coroutine[Any, Any, Any], cancelled: threading.Event | None = None
) -> Any:
    """Run a coroutine to completion and return its result, from any thread.

    It runs on a fresh event loop: on this thread when none is running here, else on
    a helper thread (a thread whose own loop is running cannot wait on another
    coroutine). When ``cancelled`` is set, the coroutine is cancelled.
    """
    import asyncio  # only hosts with async tools pay for it

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_watched(coro, cancelled))
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, asyncio.run(_watched(coro, cancelled))))
        except BaseException as exc:
            box.append((False, exc))

    helper = threading.Thread(target=run, name="navi-coroutine", daemon=True)
    helper.start()
    helper.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value


async def _watched(
    coro: Coroutine[Any, Any, Any], cancelled: threading.Event | None
) -> Any:
    import asyncio

    task = asyncio.ensure_future(coro)
    if cancelled is None:
        return await task
    while not task.done():
        await asyncio.wait((task,), timeout=0.05)
        if cancelled.is_set() and not task.done():
            task.cancel()
    return task.result()


@runtime_checkable
class ToolSource(Protocol):
    """Several tools served together: all of a response's calls to them come as one batch.

    ``call_batch`` runs on one worker thread and returns one item per call, in order:
    a value (as a tool would return), a ``ToolResult`` (taken as it is, its error flag
    too) or an exception instance (an error result). A
    source whose calls return at once may set an attribute ``inline = True``: its batch
    then runs on the thread that drives the turn, as an inline ``Tool``'s calls do.

    Optional, used instead when defined: ``call_batch_with(calls, contexts)`` (each
    call's ``ToolContext`` too), or ``call_batch_as_completed(calls, contexts)``, a
    generator of ``(index, item)`` as each call finishes, so each is reported and
    saved then rather than when the slowest is done (``MCPTools``).
    """

    def tools(self) -> Sequence[ToolSpec]:
        """The declarations of the tools this source serves."""
        ...

    def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
        """Run every call, in the model's order."""
        ...


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
    timeout: float | None = None,
    inline: bool = False,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
    timeout: float | None = None,
    inline: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed, documented function into a ``Tool``.

    ``@tool`` or ``@tool(name=..., description=..., needs_approval=...)``; the tool
    is called like the function (``add(1, 2)``), with the same parameters and return
    type. With ``needs_approval`` every call ends the turn with
    ``StopReason.APPROVAL_REQUIRED`` until ``Agent.approve`` or ``Agent.deny``.
    With ``timeout`` (seconds), a call that goes that long without returning or a
    ``ToolContext.emit`` becomes an error result and the turn moves on; its
    ``ToolContext.cancelled`` is set, but a thread cannot be stopped: a tool that does
    not check it runs on until it returns, and its late result is dropped.

    With ``inline``, a call runs on the thread that calls ``Stream.next()``, inside
    the dispatch: no pool thread, no wake-ups. ``cancel()`` and ``next(timeout)`` then
    wait for the call to return, so use it for in-memory work (arithmetic, lookups),
    never for I/O. A batch that also calls pool tools starts those first. A tool that
    needs approval, or a turn with hooks, still runs its calls on the pool.

    Raises:
        ToolRegistrationError: a parameter type cannot be expressed as JSON schema,
            or ``inline`` is given with ``timeout`` or an ``async def`` function.
    """

    def build(f: Callable[..., Any]) -> Tool:
        summary, arg_docs = parse_docstring(inspect.getdoc(f) or "")
        hints = type_hints(f)
        injected = context_parameters(hints)
        return Tool(
            name or f.__name__,
            description if description is not None else summary,
            function_schema(f, hints, arg_docs, skip=injected),
            f,
            hints,
            needs_approval,
            timeout,
            inline,
        )

    return build(fn) if fn is not None else build


@runtime_checkable
class SpecSelector(Protocol):
    """A registered source that chooses the declarations a request carries
    (``ToolSearch``)."""

    def bind(self, specs: Callable[[], tuple[ToolSpec, ...]]) -> None:
        """Take the registry's ``specs``: every declaration, when asked."""
        ...

    def select_specs(self, specs: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        """The declarations to send, out of every registered one."""
        ...


class ToolRegistry:
    """Tool names mapped to the registration that owns them; names are unique."""

    __slots__ = ("_owners", "_selector", "_sources", "_specs")

    def __init__(self) -> None:
        self._owners: dict[str, Tool | ToolSource] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._selector: SpecSelector | None = None
        #: each source, what its ``tools()`` returned last and those declarations
        #: (``MCPTools`` lists its tools again when its server says they changed)
        self._sources: dict[
            int, tuple[ToolSource, Sequence[ToolSpec], tuple[ToolSpec, ...]]
        ] = {}

    def _claim(self, spec: ToolSpec, owner: Tool | ToolSource) -> None:
        if spec.name in self._owners:
            raise ToolRegistrationError(
                f"a tool named {spec.name!r} is registered already"
            )
        self._owners[spec.name] = owner
        self._specs[spec.name] = spec

    def register_tool(self, t: Tool | Callable[..., Any]) -> Tool:
        """Register one tool (a plain function is wrapped with ``@tool`` first)."""
        if not isinstance(t, Tool):
            t = tool(t)
        self._claim(t.spec, t)
        return t

    def register_source(self, source: ToolSource) -> None:
        """Register every tool a source declares, all or none."""
        listed = source.tools()
        specs = list(listed)
        names = [s.name for s in specs]
        clash = [n for n in names if n in self._owners]
        dupes = {n for n in names if names.count(n) > 1}
        if clash or dupes:
            hint = (
                " (MCPTools(..., prefix='name') or a server's \"prefix\" in an MCP "
                "config keeps two servers' names apart)"
                if clash
                else ""
            )
            raise ToolRegistrationError(
                f"tool names already registered: {sorted(set(clash) | dupes)}{hint}"
            )
        selector = source if isinstance(source, SpecSelector) else None
        if selector is not None and self._selector is not None:
            raise ToolRegistrationError("only one ToolSearch may be registered")
        for s in specs:
            self._claim(s, source)
        self._sources[id(source)] = (source, listed, tuple(specs))
        if selector is not None:
            self._selector = selector
            selector.bind(self.specs)

    def owner(self, name: str) -> Tool | ToolSource | None:
        """The registration serving ``name``, or None."""
        return self._owners.get(name)

    def refresh(self) -> None:
        """Take the declarations a source changed since it was registered (a server's
        tools/list_changed): its names that went away are dropped, new ones claimed
        unless another registration holds them already. A source that returns the
        same sequence object as last time costs a comparison of identity.

        The order of the declarations stays as it was, whatever order the source
        lists them in now (the tools array is part of the prefix a provider caches):
        a tool that stays keeps its place, also with a changed description or schema;
        a removed one drops out and the rest keep their order; a new one is appended
        after every declaration there is (of any registration), in the source's
        order. A tool that went away and is listed again later is a new one."""
        for key, (source, listed, before) in list(self._sources.items()):
            try:
                now = source.tools()
            except Exception as exc:  # a source's failure is not the turn's
                _log.warning(
                    "%s.tools() failed; its tools stay as they were: %s",
                    type(source).__name__,
                    exc,
                )
                continue
            if now is listed:
                continue
            specs = tuple(now)
            if specs != before:
                latest: dict[str, ToolSpec] = {}
                for s in specs:  # a name listed twice: its first declaration
                    latest.setdefault(s.name, s)
                for s in before:
                    if s.name not in latest and self._owners.get(s.name) is source:
                        del self._owners[s.name], self._specs[s.name]
                for name, s in latest.items():
                    owner = self._owners.get(name)
                    if owner is source:  # in place: a dict keeps a key's position
                        self._specs[name] = s
                    elif owner is None:  # appended
                        self._owners[name] = source
                        self._specs[name] = s
            self._sources[key] = (source, now, specs)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every declaration, in registration order (a source's new tools last: see
        ``refresh``)."""
        self.refresh()
        return tuple(self._specs.values())

    def visible_specs(self) -> tuple[ToolSpec, ...]:
        """The declarations a request carries: every one, or those a registered
        ``ToolSearch`` chose."""
        self.refresh()
        specs = tuple(self._specs.values())
        return specs if self._selector is None else self._selector.select_specs(specs)

    def names(self) -> list[str]:
        """Every registered tool name."""
        return list(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


_log = get_logger("navi_core.tools")

publish(globals())

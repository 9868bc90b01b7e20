"""Tools the model may call: ``@tool`` functions, ``ToolSource`` batches, the registry.

``@tool`` derives a JSON schema from a function's type hints and its description from
the docstring (Google-style ``Args:`` lines describe parameters). A ``ToolSource``
declares several tools and receives every call addressed to it as one batch.
``ToolSpec`` is the declaration sent to the model.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union, overload, runtime_checkable

import orjson

from .errors import ToolRegistrationError

__all__ = [
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolSource",
    "ToolSpec",
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
    """One call handed to a tool: the model's call id, tool name and decoded arguments."""

    id: str
    name: str
    arguments: dict[str, Any] = field(hash=False)


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call, with its declaration."""

    name: str
    description: str
    parameters: dict[str, Any] = field(hash=False, repr=False)
    fn: Callable[..., Any] = field(repr=False)
    hints: dict[str, Any] = field(
        default_factory=dict, hash=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ToolRegistrationError(
                f"tool name {self.name!r} must be 1-64 characters of A-Z a-z 0-9 _ -"
            )

    @property
    def spec(self) -> ToolSpec:
        """The declaration sent to the model."""
        return ToolSpec(self.name, self.description, self.parameters)

    def invoke(self, arguments: Mapping[str, Any]) -> Any:
        """Call the function with JSON arguments converted to the annotated types."""
        hints = self.hints
        return self.fn(
            **{k: _convert(hints.get(k, Any), v) for k, v in arguments.items()}
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


@runtime_checkable
class ToolSource(Protocol):
    """Several tools served together: all of a response's calls to them come as one batch.

    ``call_batch`` runs on one worker thread and returns one item per call, in order:
    a value (as a tool would return) or an exception instance (an error result).
    """

    def tools(self) -> Sequence[ToolSpec]:
        """The declarations of the tools this source serves."""
        ...

    def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
        """Run every call, in the model's order."""
        ...


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed, documented function into a ``Tool``.

    Raises:
        ToolRegistrationError: a parameter type cannot be expressed as JSON schema.
    """

    def build(f: Callable[..., Any]) -> Tool:
        doc = inspect.getdoc(f) or ""
        summary, arg_docs = _parse_docstring(doc)
        return Tool(
            name or f.__name__,
            description if description is not None else summary,
            _function_schema(f, arg_docs),
            f,
            _hints(f),
        )

    return build(fn) if fn is not None else build


_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "returns",
        "raises",
        "yields",
        "examples",
        "example",
        "notes",
        "note",
    }
)
_ARG_SECTIONS = frozenset({"args", "arguments", "parameters"})
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (text before any section) and per-argument docs from ``Args:``."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and stripped[:-1].lower() in _SECTIONS:
            section, current, arg_indent = stripped[:-1].lower(), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in _ARG_SECTIONS or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        m = _ARG_LINE.match(stripped)
        if m and (arg_indent is None or indent <= arg_indent):
            arg_indent, current = indent, m.group(1)
            args[current] = m.group(2)
        elif current is not None:
            args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), args


def _function_schema(
    f: Callable[..., Any], arg_docs: Mapping[str, str]
) -> dict[str, Any]:
    sig = inspect.signature(f)
    try:
        hints = typing.get_type_hints(f, include_extras=False)
    except Exception as exc:
        raise ToolRegistrationError(
            f"cannot read the type hints of {getattr(f, '__name__', f)!r}: {exc}"
        ) from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolRegistrationError(
                f"parameter {pname!r} of {f.__name__!r} is positional-only; "
                "tools are called with keyword arguments"
            )
        prop = schema_for(hints.get(pname, Any), where=f"{f.__name__}.{pname}")
        if arg_docs.get(pname):
            prop = {**prop, "description": arg_docs[pname]}
        if param.default is param.empty:
            required.append(pname)
        else:
            default = param.default
            if isinstance(default, enum.Enum):
                default = default.value
            try:
                orjson.dumps(default)
                prop = {**prop, "default": default}
            except TypeError:
                pass
        properties[pname] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
}


def schema_for(tp: Any, *, where: str = "value") -> dict[str, Any]:
    """The JSON schema of a type hint (str, int, float, bool, None, Optional, list,
    dict, tuple, Literal, Enum, dataclasses and TypedDicts, nested).

    Raises:
        ToolRegistrationError: the type has no JSON form.
    """
    if tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return schema_for(args[0], where=where)
    if origin in (Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        options = [schema_for(a, where=where) for a in non_null]
        if len(non_null) < len(args):
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is Literal:
        return {"enum": list(args)}
    if tp in (list, Sequence, tuple, set, frozenset) or origin in (
        list,
        Sequence,
        set,
        frozenset,
    ):
        out: dict[str, Any] = {"type": "array"}
        if args:
            out["items"] = schema_for(args[0], where=where)
        return out
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for(args[0], where=where)}
        items = [schema_for(a, where=where) for a in args]
        return {
            "type": "array",
            "prefixItems": items,
            "minItems": len(items),
            "maxItems": len(items),
        }
    if tp in (dict, Mapping) or origin in (dict, Mapping):
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = schema_for(args[1], where=where)
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record_schema(tp, where, dataclass_fields=True)
    if isinstance(tp, type) and typing.is_typeddict(tp):
        return _record_schema(tp, where, dataclass_fields=False)
    raise ToolRegistrationError(f"{where}: type {tp!r} has no JSON schema form")


def _record_schema(tp: type, where: str, *, dataclass_fields: bool) -> dict[str, Any]:
    hints = typing.get_type_hints(tp)
    if dataclass_fields:
        fields = [f for f in dataclasses.fields(tp) if f.init]
        props = {
            f.name: schema_for(hints[f.name], where=f"{where}.{f.name}") for f in fields
        }
        required = [
            f.name
            for f in fields
            if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
    else:
        props = {k: schema_for(v, where=f"{where}.{k}") for k, v in hints.items()}
        required = sorted(getattr(tp, "__required_keys__", hints.keys()))
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    if tp.__doc__ and dataclass_fields and not tp.__doc__.startswith(tp.__name__ + "("):
        out["description"] = inspect.cleandoc(tp.__doc__)
    return out


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameter type hints, read once when the tool is built."""
    try:
        return typing.get_type_hints(fn)
    except Exception:
        return {}


def _convert(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _convert(args[0], value)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        for a in args:
            if a is not type(None):
                try:
                    return _convert(a, value)
                except (TypeError, ValueError):
                    continue
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if (
        isinstance(tp, type)
        and dataclasses.is_dataclass(tp)
        and isinstance(value, dict)
    ):
        hints = typing.get_type_hints(tp)
        return tp(**{k: _convert(hints.get(k, Any), v) for k, v in value.items()})
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, list):
        if origin is tuple or tp is tuple:
            if args and not (len(args) == 2 and args[1] is Ellipsis):
                return tuple(_convert(a, v) for a, v in zip(args, value, strict=False))
            inner = args[0] if args else Any
            return tuple(_convert(inner, v) for v in value)
        if origin in (list, Sequence) and args:
            return [_convert(args[0], v) for v in value]
        if origin in (set, frozenset) and args:
            return origin(_convert(args[0], v) for v in value)
    if isinstance(value, dict) and origin in (dict, Mapping) and len(args) == 2:
        return {k: _convert(args[1], v) for k, v in value.items()}
    return value


class ToolRegistry:
    """Tool names mapped to the registration that owns them; names are unique."""

    __slots__ = ("_owners", "_specs")

    def __init__(self) -> None:
        self._owners: dict[str, Tool | ToolSource] = {}
        self._specs: dict[str, ToolSpec] = {}

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
        specs = list(source.tools())
        names = [s.name for s in specs]
        clash = [n for n in names if n in self._owners]
        dupes = {n for n in names if names.count(n) > 1}
        if clash or dupes:
            raise ToolRegistrationError(
                f"tool names already registered: {sorted(set(clash) | dupes)}"
            )
        for s in specs:
            self._claim(s, source)

    def owner(self, name: str) -> Tool | ToolSource | None:
        """The registration serving ``name``, or None."""
        return self._owners.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every declaration, in registration order."""
        return tuple(self._specs.values())

    def names(self) -> list[str]:
        """Every registered tool name."""
        return list(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

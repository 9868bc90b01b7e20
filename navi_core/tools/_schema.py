"""JSON schema from type hints and docstrings, and JSON arguments back to those types.

``function_schema`` declares a function's parameters (``@tool`` uses it), ``schema_for``
one type hint, ``parse_docstring`` reads the description and Google-style ``Args:``
lines, and ``convert`` turns a decoded JSON value into the annotated type (enums,
dataclasses, tuples, sets) before a tool is called.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

import orjson

from ..errors import ToolRegistrationError
from . import _pydantic as pydantic_types

__all__ = [
    "ConversionError",
    "annotated_description",
    "convert",
    "converted",
    "hoist_defs",
    "function_schema",
    "parse_docstring",
    "schema_for",
    "type_hints",
]

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


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
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


def type_hints(f: Callable[..., Any]) -> dict[str, Any]:
    """The resolved type hints of ``f``.

    Raises:
        ToolRegistrationError: a hint cannot be resolved (an unknown forward reference).
    """
    try:
        return typing.get_type_hints(f, include_extras=True)
    except Exception as exc:
        raise ToolRegistrationError(
            f"cannot read the type hints of {getattr(f, '__name__', f)!r}: {exc}"
        ) from exc


def function_schema(
    f: Callable[..., Any],
    hints: Mapping[str, Any],
    arg_docs: Mapping[str, str],
    *,
    skip: Sequence[str] = (),
) -> dict[str, Any]:
    """The JSON schema of the keyword arguments of ``f`` (``hints`` its type hints);
    the parameters in ``skip`` are injected by the caller and left out.

    Raises:
        ToolRegistrationError: a positional-only parameter, or a type with no JSON form.
    """
    sig = inspect.signature(f)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or pname in skip:
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
    return hoist_defs(schema)


def hoist_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every nested ``$defs`` (pydantic puts one in each model's
    schema) moved to the top, where its ``#/$defs/...`` references point.

    Raises:
        ToolRegistrationError: two different definitions share a name.
    """
    defs: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "$defs" and isinstance(value, dict):
                for name, definition in value.items():
                    definition = walk(definition)
                    if defs.setdefault(name, definition) != definition:
                        raise ToolRegistrationError(
                            f"two different types are both named {name!r}"
                        )
            else:
                out[key] = walk(value)
        return out

    hoisted: dict[str, Any] = walk(schema)
    if defs:
        hoisted["$defs"] = defs
    return hoisted


def annotated_description(tp: Any) -> str | None:
    """The text of ``Annotated[T, "description"]``, if ``tp`` has one."""
    if typing.get_origin(tp) is typing.Annotated:
        for meta in tp.__metadata__:
            if isinstance(meta, str):
                return meta
    return None


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
        if pydantic_types.is_pydantic_metadata(tp.__metadata__):
            base = pydantic_types.schema(tp)
        else:
            base = schema_for(args[0], where=where)
        text = annotated_description(tp)
        return {**base, "description": text} if text else base
    if pydantic_types.is_model(tp):
        return pydantic_types.schema(tp)
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
    hints = typing.get_type_hints(tp, include_extras=True)
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


def convert(tp: Any, value: Any) -> Any:
    """``value`` (decoded JSON) as the type ``tp`` names, where JSON has no such type:
    enums, dataclasses, floats from integers, tuples, sets and their nested forms.
    A value that does not convert is returned as it is."""
    if tp is str or tp is bool or tp is Any or tp is object:
        return value  # plain types first: no typing introspection for them
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value
    if tp is float:
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        if pydantic_types.has_validators(tp.__metadata__):
            return pydantic_types.validate(tp, value)
        return convert(args[0], value)
    if pydantic_types.is_model(tp):
        return pydantic_types.validate(tp, value)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        for a in args:
            if a is not type(None):
                try:
                    return convert(a, value)
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
        hints = typing.get_type_hints(tp, include_extras=True)
        return tp(**{k: converted(hints.get(k, Any), v, k) for k, v in value.items()})
    if isinstance(tp, type) and typing.is_typeddict(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp, include_extras=True)
        return {k: converted(hints.get(k, Any), v, k) for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        if origin is tuple or tp is tuple:
            if args and not (len(args) == 2 and args[1] is Ellipsis):
                pairs = zip(args, value, strict=False)
                return tuple(converted(a, v, i) for i, (a, v) in enumerate(pairs))
            inner = args[0] if args else Any
            return tuple(converted(inner, v, i) for i, v in enumerate(value))
        if origin in (list, Sequence) and args:
            return [converted(args[0], v, i) for i, v in enumerate(value)]
        if origin in (set, frozenset) and args:
            return origin(converted(args[0], v, i) for i, v in enumerate(value))
    if isinstance(value, dict) and origin in (dict, Mapping) and len(args) == 2:
        return {k: converted(args[1], v, k) for k, v in value.items()}
    return value


class ConversionError(ValueError):
    """A value inside the arguments did not convert to its annotated type: where
    (``path``: keys and indexes from the parameter down) and why (``cause``, e.g. a
    pydantic ``ValidationError`` whose own paths start at that place)."""

    def __init__(self, path: tuple[str | int, ...], cause: Exception) -> None:
        self.path = path
        self.cause = cause
        super().__init__(f"{self.where}: {cause}")

    @property
    def where(self) -> str:
        """The path as text: ``person.addresses[1].number``."""
        return pydantic_types.path_text(self.path)


def converted(tp: Any, value: Any, key: str | int) -> Any:
    """``convert(tp, value)`` for the item ``key`` of a bigger value: a failure
    becomes a ``ConversionError`` whose path starts with ``key``."""
    try:
        return convert(tp, value)
    except ConversionError as exc:
        raise ConversionError((key, *exc.path), exc.cause) from exc.cause
    except (TypeError, ValueError) as exc:
        raise ConversionError((key,), exc) from exc

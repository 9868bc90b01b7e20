"""A compiled yes/no check for the common schemas ``@tool`` and pydantic produce.

``validation.errors`` walks the schema on every call and builds messages as it goes;
for a small tool call that walk is most of the call's cost. ``compile_schema``
turns a schema into nested closures, once, when it uses only ``type`` (one name or
several), ``enum`` of scalars, ``anyOf``/``oneOf``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``prefixItems``, item and length limits,
``pattern`` and number bounds, plus any keyword ``errors`` ignores (``description``,
``title``, ``default`` ...). The closure is exact one way: it answers True only when
``errors(schema, value)`` is empty. On False, or for a schema outside that subset
(``$ref``, ``const``, ``allOf``, ``uniqueItems``, ``multipleOf``: ``compile_schema``
returns None), callers run ``errors`` as before, so every message still comes from
``validation``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from ._patterns import matcher

__all__ = ["Check", "compile_schema"]

#: a compiled schema: True only when ``validation.errors`` finds nothing
Check = Callable[[Any], bool]

#: every keyword ``validation`` reads; a schema may hold others, which both ignore
_READ: Final = frozenset(
    {
        "$ref",
        "anyOf",
        "oneOf",
        "allOf",
        "const",
        "enum",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "minItems",
        "maxItems",
        "prefixItems",
        "items",
        "uniqueItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    }
)
#: the keywords ``compile_schema`` compiles: all ``validation`` reads but these five
_COMPILED: Final = _READ - {"$ref", "allOf", "const", "uniqueItems", "multipleOf"}
_TYPE_NAMES: Final = frozenset(
    {"string", "integer", "number", "boolean", "null", "array", "object"}
)
#: ``json_type`` of the exact built-in classes; any other class goes to ``errors``
_KINDS: Final[dict[type, str]] = {
    str: "string",
    int: "integer",
    bool: "boolean",
    type(None): "null",
    list: "array",
    tuple: "array",
    dict: "object",
}
_SCALARS: Final = (str, int, float, bool, type(None))


def compile_schema(schema: Any) -> Check | None:
    """A closure answering whether ``errors(schema, value)`` is empty, or None when
    the schema uses a keyword outside the compiled subset (``$ref``, bounds ...)."""
    try:
        return _node(schema)
    except (_Outside, RecursionError):  # a schema holding itself compiles never
        return None


class _Outside(Exception):
    """The schema uses a keyword, or a form of one, the subset does not compile."""


def _kind(value: Any) -> str | None:
    """``json_type(value)`` for plain JSON values; None for a non-finite float
    (``errors`` rejects it under any schema object) and for any other class."""
    cls = value.__class__
    if cls is float:
        if value.is_integer():
            return "integer"
        return "number" if math.isfinite(value) else None
    return _KINDS.get(cls)


def _is_string(value: Any) -> bool:
    return value.__class__ is str


def _is_integer(value: Any) -> bool:
    cls = value.__class__
    return cls is int or (cls is float and value.is_integer())


def _is_number(value: Any) -> bool:
    cls = value.__class__
    return cls is int or (cls is float and math.isfinite(value))


def _is_boolean(value: Any) -> bool:
    return value.__class__ is bool


def _is_null(value: Any) -> bool:
    return value is None


#: the checks of a schema that holds nothing ``errors`` reads but one type name
_LEAVES: Final[dict[str, Check]] = {
    "string": _is_string,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": _is_boolean,
    "null": _is_null,
}


def _accept(value: Any) -> bool:
    return True


def _reject(value: Any) -> bool:
    return False


def _node(schema: Any) -> Check:
    if schema is False:
        return _reject
    if not isinstance(schema, Mapping):
        return _accept  # ``errors`` ignores a schema that is not an object
    read = schema.keys() & _READ
    if not read <= _COMPILED:
        raise _Outside
    declared = schema.get("type")
    if read == {"type"} and isinstance(declared, str) and declared in _LEAVES:
        return _LEAVES[declared]  # one call: most tool parameters are these
    union = _union(schema)
    members = _members(schema)
    kinds = _kinds(schema.get("type"))
    number = _number(schema)
    parts = {
        "object": _object(schema),
        "array": _array(schema),
        "string": _string(schema),
        "integer": number,
        "number": number,
    }
    by_kind = {kind: part for kind, part in parts.items() if part is not None}

    def check(value: Any) -> bool:
        kind = _kind(value)
        if kind is None:
            return False
        if union is not None and not union(value):
            return False
        if members is not None and (
            kind == "array"
            or kind == "object"
            or (value.__class__ is bool, value) not in members
        ):
            return False
        if kinds is not None and kind not in kinds:
            return False
        part = by_kind.get(kind)
        return part is None or part(value)

    return check


def _union(schema: Mapping[str, Any]) -> Check | None:
    """``anyOf``/``oneOf`` (``errors`` treats both as "any option fits"), None when
    absent."""
    if "anyOf" not in schema and "oneOf" not in schema:
        return None
    raw = schema.get("anyOf") or schema.get("oneOf") or []
    if not isinstance(raw, (list, tuple)):
        raise _Outside
    # ``errors`` skips options that are not schema objects
    options = [_node(o) for o in raw if isinstance(o, Mapping)]
    if not options:
        return _reject
    if len(options) == 1:
        return options[0]
    choices = tuple(options)
    return lambda value: any(c(value) for c in choices)


def _members(schema: Mapping[str, Any]) -> frozenset[tuple[bool, Any]] | None:
    """``enum`` as (is bool, value) pairs: JSON equality, where 1 == 1.0 but
    1 != true; None when absent. Only scalar options compile."""
    if "enum" not in schema:
        return None
    options = schema["enum"]
    if not isinstance(options, (list, tuple)) or not all(
        o.__class__ in _SCALARS for o in options
    ):
        raise _Outside
    return frozenset((o.__class__ is bool, o) for o in options)


def _kinds(declared: Any) -> frozenset[str] | None:
    """The ``json_type`` names ``type`` accepts ("number" takes integers too); None
    when it names no known type. Only a name or a list of names compiles."""
    if declared is None:
        return None
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, (list, tuple)) or not all(
        isinstance(n, str) for n in names
    ):
        raise _Outside
    if not _TYPE_NAMES.intersection(names):
        return None
    return frozenset(names) | ({"integer"} if "number" in names else frozenset())


def _object(schema: Mapping[str, Any]) -> Check | None:
    """``properties``, ``required`` and ``additionalProperties`` for an object value;
    None when they cannot fail."""
    if not {"properties", "required", "additionalProperties"} & schema.keys():
        return None
    raw_props = schema.get("properties", {})
    required = schema.get("required", ())
    if type(raw_props) is not dict or not isinstance(required, (list, tuple)):
        raise _Outside
    if not all(isinstance(name, str) for name in required):
        raise _Outside
    props = {name: _node(sub) for name, sub in raw_props.items()}
    extra = _node(schema.get("additionalProperties", True))
    names = tuple(required)
    open_extra = extra is _accept

    def check(value: dict[Any, Any]) -> bool:
        for name in names:
            if name not in value:
                return False
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                if not open_extra and not extra(item):
                    return False
            elif not sub(item):
                return False
        return True

    return check


def _limit(schema: Mapping[str, Any], key: str) -> float | None:
    """A count limit (``minItems`` ...), which ``errors`` compares as it is."""
    if key not in schema:
        return None
    limit = schema[key]
    if not isinstance(limit, (int, float)) or isinstance(limit, bool):
        raise _Outside
    return limit


def _array(schema: Mapping[str, Any]) -> Check | None:
    """``minItems``, ``maxItems``, ``prefixItems`` and ``items`` (ignored unless it
    is a schema object) for an array value; None when they cannot fail."""
    low, high = _limit(schema, "minItems"), _limit(schema, "maxItems")
    raw_prefix = schema.get("prefixItems", ())
    if not isinstance(raw_prefix, (list, tuple)):
        raise _Outside
    prefix = tuple(_node(s) for s in raw_prefix)
    raw_items = schema.get("items")
    items = _node(raw_items) if isinstance(raw_items, Mapping) else None
    if low is None and high is None and not prefix and items is None:
        return None
    start = len(prefix)

    def check(value: Any) -> bool:
        n = len(value)
        if (low is not None and n < low) or (high is not None and n > high):
            return False
        for sub, item in zip(prefix, value, strict=False):
            if not sub(item):
                return False
        return items is None or all(items(v) for v in value[start:])

    return check


def _string(schema: Mapping[str, Any]) -> Check | None:
    """``minLength``, ``maxLength`` and ``pattern`` (one RE2 cannot run is no rule,
    as in ``errors``) for a string value; None when they cannot fail."""
    low, high = _limit(schema, "minLength"), _limit(schema, "maxLength")
    pattern = schema.get("pattern")
    found = matcher(pattern) if isinstance(pattern, str) else None
    if low is None and high is None and found is None:
        return None

    def check(value: str) -> bool:
        n = len(value)
        if (low is not None and n < low) or (high is not None and n > high):
            return False
        return found is None or found(value)

    return check


def _number(schema: Mapping[str, Any]) -> Check | None:
    """``minimum``, ``maximum`` and the exclusive bounds for a number (a bound that
    is not a number is no rule, as in ``errors``); None when there are none."""
    bounds: list[float | None] = []
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool):
            bounds.append(bound)
        else:
            bounds.append(None)
    low, high, above, below = bounds
    if bounds == [None, None, None, None]:
        return None

    def check(value: float) -> bool:
        return (
            (low is None or value >= low)
            and (high is None or value <= high)
            and (above is None or value > above)
            and (below is None or value < below)
        )

    return check

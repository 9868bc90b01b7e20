"""Checks decoded JSON against a JSON schema, with errors a model can act on.

``errors(schema, value)`` returns one line per mismatch, each naming the path of the
offending value: "`items[1]`: expected integer, got string". It covers what ``@tool``
and pydantic declare: ``type`` (one or several), ``enum``, ``const``, ``anyOf``/
``oneOf``/``allOf``, objects (``properties``, ``required``, ``additionalProperties``),
arrays (``items``, ``prefixItems``, ``minItems``, ``maxItems``, ``uniqueItems``),
strings (``minLength``, ``maxLength``, ``pattern``), numbers (``minimum``,
``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``) and local
``$ref`` into ``$defs``/``definitions``. Keywords it does not know are ignored, so a
schema from elsewhere never rejects a value for a rule nobody can read. A ``pattern``
is ECMA-262 run on RE2, in time linear in the text (``patterns``); one RE2 cannot run
(a backreference, lookaround) is no rule here, and is logged once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import orjson

from .._ids import publish
from ..errors import NaviError
from ._patterns import matcher

__all__ = ["ArgumentError", "errors", "json_type", "summary"]

#: At most this many mismatches are reported for one value.
MAX_ERRORS: Final = 8

_TYPE_NAMES: Final = (
    "string",
    "integer",
    "number",
    "boolean",
    "null",
    "array",
    "object",
)


_BOUNDS: Final = (
    ("minimum", "at least"),
    ("maximum", "at most"),
    ("exclusiveMinimum", "greater than"),
    ("exclusiveMaximum", "less than"),
)


class ArgumentError(NaviError, ValueError):
    """A tool's arguments do not match its schema; the tool was not run."""


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value ("integer" for 3, "number" for 3.5)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def errors(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Every mismatch of ``value`` against ``schema`` (at most ``MAX_ERRORS``), as
    "`path`: what was expected, what came"; an empty list when it validates."""
    out: list[str] = []
    _Checker(schema, out).check(schema, value, "")
    return out[:MAX_ERRORS]


def summary(problems: list[str], limit: int = 5) -> str:
    """The mismatches joined for one message, with a count of those left out."""
    shown = "; ".join(problems[:limit])
    more = len(problems) - limit
    return f"{shown}; and {more} more" if more > 0 else shown


def _path_text(path: str) -> str:
    return f"`{path}`" if path else "the arguments"


def _short(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Checker:
    """One validation run: the root schema (for ``$ref``) and the error list."""

    __slots__ = ("out", "root")

    def __init__(self, root: Mapping[str, Any], out: list[str]) -> None:
        self.root = root
        self.out = out

    def fail(self, path: str, text: str) -> None:
        if len(self.out) < MAX_ERRORS:
            self.out.append(f"{_path_text(path)}: {text}")

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        seen = 0
        while "$ref" in schema and seen < 32:
            ref = schema["$ref"]
            target: Any = self.root
            if not isinstance(ref, str) or not ref.startswith("#"):
                return {}
            for key in ref[1:].split("/"):
                if not key:
                    continue
                key = key.replace("~1", "/").replace("~0", "~")
                target = target.get(key) if isinstance(target, Mapping) else None
            if not isinstance(target, Mapping):
                return {}
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest}
            seen += 1
        return schema

    def ok(self, schema: Mapping[str, Any], value: Any) -> bool:
        """Whether ``value`` validates, without recording anything."""
        return not errors(_Rooted(self.root, schema), value)

    def check(self, schema: Any, value: Any, path: str) -> None:
        if schema is False:
            self.fail(path, "no value is allowed here")
            return
        if not isinstance(schema, Mapping):
            return
        schema = self.resolve(schema)
        if "anyOf" in schema or "oneOf" in schema:
            self.check_union(
                schema.get("anyOf") or schema.get("oneOf") or [], value, path
            )
        for sub in schema.get("allOf", ()):
            self.check(sub, value, path)
        if "const" in schema and value != schema["const"]:
            self.fail(path, f"expected {_short(schema['const'])}, got {_short(value)}")
            return
        if "enum" in schema and not _member(value, schema["enum"]):
            options = ", ".join(_short(v) for v in schema["enum"])
            self.fail(path, f"expected one of {options}, got {_short(value)}")
            return
        declared = schema.get("type")
        if declared is not None and not self.check_type(declared, value, path):
            return
        kind = json_type(value)
        if kind == "object":
            self.check_object(schema, value, path)
        elif kind == "array":
            self.check_array(schema, value, path)
        elif kind == "string":
            self.check_string(schema, value, path)
        elif kind in ("integer", "number"):
            self.check_number(schema, value, path)

    def check_type(self, declared: Any, value: Any, path: str) -> bool:
        names = [declared] if isinstance(declared, str) else list(declared)
        kind = json_type(value)
        if kind in names or (kind == "integer" and "number" in names):
            return True
        known = [n for n in names if n in _TYPE_NAMES]
        if not known:
            return True
        self.fail(path, f"expected {' or '.join(known)}, got {kind}")
        return False

    def check_union(self, options: list[Any], value: Any, path: str) -> None:
        resolved = [self.resolve(o) if isinstance(o, Mapping) else o for o in options]
        if any(self.ok(o, value) for o in resolved if isinstance(o, Mapping)):
            return
        kind = json_type(value)
        same_kind = [
            o
            for o in resolved
            if isinstance(o, Mapping) and _accepts_kind(o.get("type"), kind)
        ]
        if len(same_kind) == 1:  # one form fits the value's type: say what is wrong
            self.check(same_kind[0], value, path)
            return
        forms = [_describe(o) for o in resolved if isinstance(o, Mapping)]
        self.fail(path, f"expected {' or '.join(forms)}, got {_describe_value(value)}")

    def check_object(
        self, schema: Mapping[str, Any], value: Mapping[str, Any], path: str
    ) -> None:
        props: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                self.fail(_join(path, name), "required field is missing")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            where = _join(path, str(key))
            if key in props:
                self.check(props[key], item, where)
            elif extra is False:
                allowed = ", ".join(props) or "none"
                self.fail(where, f"unexpected field (allowed: {allowed})")
            elif isinstance(extra, Mapping):
                self.check(extra, item, where)

    def check_array(self, schema: Mapping[str, Any], value: Any, path: str) -> None:
        n = len(value)
        if "minItems" in schema and n < schema["minItems"]:
            self.fail(path, f"expected at least {schema['minItems']} items, got {n}")
        if "maxItems" in schema and n > schema["maxItems"]:
            self.fail(path, f"expected at most {schema['maxItems']} items, got {n}")
        prefix = schema.get("prefixItems", ())
        for i, sub in enumerate(prefix[:n]):
            self.check(sub, value[i], f"{path}[{i}]")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i in range(len(prefix), n):
                self.check(items, value[i], f"{path}[{i}]")
        if schema.get("uniqueItems"):
            seen: list[Any] = []
            for i, item in enumerate(value):
                if item in seen:
                    self.fail(f"{path}[{i}]", f"duplicate item {_short(item)}")
                seen.append(item)

    def check_string(self, schema: Mapping[str, Any], value: str, path: str) -> None:
        n = len(value)
        if "minLength" in schema and n < schema["minLength"]:
            self.fail(
                path, f"expected at least {schema['minLength']} characters, got {n}"
            )
        if "maxLength" in schema and n > schema["maxLength"]:
            self.fail(
                path, f"expected at most {schema['maxLength']} characters, got {n}"
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            found = matcher(pattern)
            if found is not None and not found(value):
                self.fail(
                    path, f"expected text matching {pattern!r}, got {_short(value)}"
                )

    def check_number(self, schema: Mapping[str, Any], value: float, path: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(path, f"expected a finite number, got {value}")
            return
        for key, words in _BOUNDS:
            bound = schema.get(key)
            if not isinstance(bound, (int, float)) or isinstance(bound, bool):
                continue
            holds = {
                "minimum": value >= bound,
                "maximum": value <= bound,
                "exclusiveMinimum": value > bound,
                "exclusiveMaximum": value < bound,
            }[key]
            if not holds:
                self.fail(path, f"expected a number {words} {bound}, got {value}")
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step > 0:
            ratio = value / step
            if not math.isclose(ratio, round(ratio), rel_tol=0.0, abs_tol=1e-9):
                self.fail(path, f"expected a multiple of {step}, got {value}")


class _Rooted(dict[str, Any]):
    """A sub-schema that keeps the root's ``$defs`` reachable for ``$ref``."""

    def __init__(self, root: Mapping[str, Any], schema: Mapping[str, Any]) -> None:
        super().__init__(schema)
        for key in ("$defs", "definitions"):
            if key in root and key not in self:
                self[key] = root[key]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _member(value: Any, options: list[Any]) -> bool:
    # JSON equality: 1 and True are different values, 1 and 1.0 are the same
    return any(
        value == o and isinstance(value, bool) == isinstance(o, bool) for o in options
    )


def _accepts_kind(declared: Any, kind: str) -> bool:
    if declared is None:
        return False
    names = [declared] if isinstance(declared, str) else list(declared)
    return kind in names or (kind == "integer" and "number" in names)


def _describe(schema: Mapping[str, Any]) -> str:
    if "const" in schema:
        return _short(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(_short(v) for v in schema["enum"])
    declared = schema.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        return " or ".join(str(d) for d in declared)
    return "another form"


def _describe_value(value: Any) -> str:
    kind = json_type(value)
    return (
        f"{kind} {_short(value)}" if kind in ("string", "integer", "number") else kind
    )


publish(globals())

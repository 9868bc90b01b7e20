"""What one ``Tool.invoke`` costs: µs per call through the tool's call plan.

Baseline, measured in the same run: the per-call path ``invoke`` took before the
plan (``validation.errors`` walking the schema, the old ``convert`` on every
argument, every hint scanned for ``ToolContext``), kept below as ``previous_invoke``.
Both paths give the same values and errors (tests/tools/test_call_plan.py).
Run: ``python bench/bench_invoke.py`` (best of several repeats; a few seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import timeit
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

from navi_core import Tool, tool
from navi_core.tools import (
    ArgumentError,
    ToolContext,
    _pydantic as pydantic_types,
    context_parameters,
)
from navi_core.tools._validation import errors, summary


def previous_convert(tp: Any, value: Any) -> Any:
    """``schema.convert`` as it was before its plain-type fast path."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        if pydantic_types.has_validators(tp.__metadata__):
            return pydantic_types.validate(tp, value)
        return previous_convert(args[0], value)
    if pydantic_types.is_model(tp):
        return pydantic_types.validate(tp, value)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        for a in args:
            if a is not type(None):
                try:
                    return previous_convert(a, value)
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
        return tp(
            **{k: previous_convert(hints.get(k, Any), v) for k, v in value.items()}
        )
    if isinstance(tp, type) and typing.is_typeddict(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp, include_extras=True)
        return {k: previous_convert(hints.get(k, Any), v) for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        if origin is tuple or tp is tuple:
            if args and not (len(args) == 2 and args[1] is Ellipsis):
                return tuple(
                    previous_convert(a, v) for a, v in zip(args, value, strict=False)
                )
            inner = args[0] if args else Any
            return tuple(previous_convert(inner, v) for v in value)
        if origin in (list, Sequence) and args:
            return [previous_convert(args[0], v) for v in value]
        if origin in (set, frozenset) and args:
            return origin(previous_convert(args[0], v) for v in value)
    if isinstance(value, dict) and origin in (dict, Mapping) and len(args) == 2:
        return {k: previous_convert(args[1], v) for k, v in value.items()}
    return value


def previous_invoke(
    t: Tool, arguments: Mapping[str, Any], context: ToolContext | None = None
) -> Any:
    """``Tool.invoke`` before the call plan (synchronous tools)."""
    hints = t.hints
    problems = errors(t.parameters, arguments)
    if problems:
        raise ArgumentError(f"invalid arguments: {summary(problems)}")
    kwargs = {
        k: previous_convert(hints.get(k, Any), v)
        for k, v in arguments.items()
        if k not in context_parameters(hints)
    }
    if context is None:
        context = ToolContext("", t.name)
    for k in context_parameters(hints):
        kwargs[k] = context
    return t.fn(**kwargs)


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


@tool
def noop(n: int) -> str:
    return "ok"


@tool
def five(a: str, b: bool, c: float, d: int = 0, e: Any = None) -> str:
    return "ok"


@tool
def shaped(
    items: list[int], mode: Literal["fast", "slow"], label: str | None = None
) -> str:
    return "ok"


@tool
def records(point: Point, mode: Mode) -> str:
    return "ok"


@tool
def with_context(path: str, context: ToolContext) -> str:
    return "ok"


CASES: list[tuple[str, Tool, dict[str, Any]]] = [
    ("noop(n: int)", noop, {"n": 3}),
    ("five scalars", five, {"a": "x", "b": True, "c": 2, "d": 4, "e": None}),
    ("list, Literal, Optional", shaped, {"items": [1, 2, 3], "mode": "fast"}),
    ("dataclass + enum", records, {"point": {"x": 1, "y": 2}, "mode": "slow"}),
    ("ToolContext injected", with_context, {"path": "/tmp"}),
]


def best_us(call: Callable[[], Any], number: int, repeat: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ctx = ToolContext("call-1", "with_context")
    print(f"{'tool shape':<26}{'previous µs':>12}{'plan µs':>10}{'ratio':>8}")
    for label, t, arguments in CASES:
        context = ctx if t is with_context else None
        assert t.invoke(arguments, context) == previous_invoke(t, arguments, context)
        before = best_us(
            functools.partial(previous_invoke, t, arguments, context),
            args.number,
            args.repeat,
        )
        after = best_us(
            functools.partial(t.invoke, arguments, context), args.number, args.repeat
        )
        print(f"{label:<26}{before:>12.2f}{after:>10.2f}{before / after:>7.1f}x")


if __name__ == "__main__":
    main()

"""``Tool.invoke`` through its call plan gives what checking and converting every
argument on each call gives, errors included; the compiled schema check agrees with
``validation.errors`` on random schemas and values."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import enum
import functools
import math
import pickle
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic import AfterValidator, BaseModel, Field

from navi_core import Tool, tool
from navi_core.tools import ArgumentError, ToolContext, context_parameters
from navi_core.tools._fast_validation import compile_schema
from navi_core.tools._schema import convert
from navi_core.tools._validation import errors, summary


def reference_invoke(
    t: Tool, arguments: Mapping[str, Any], context: ToolContext | None = None
) -> Any:
    """``Tool.invoke`` as it was: the whole schema walked, every argument converted,
    every hint scanned for ``ToolContext`` on each call."""
    hints = t.hints
    problems = errors(t.parameters, arguments)
    if problems:
        raise ArgumentError(f"invalid arguments: {summary(problems)}")
    injected = context_parameters(hints)
    try:
        kwargs = {
            k: convert(hints.get(k, Any), v)
            for k, v in arguments.items()
            if k not in injected
        }
    except (TypeError, ValueError) as exc:
        from navi_core.tools import _pydantic as pydantic_types

        lines = pydantic_types.error_lines(exc) or [str(exc)]
        raise ArgumentError(f"invalid arguments: {summary(lines)}") from exc
    if context is None:
        context = ToolContext("", t.name)
    for k in injected:
        kwargs[k] = context
    result = t.fn(**kwargs)
    if asyncio.iscoroutine(result):
        return asyncio.run(result)
    return result


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """What a call gave, comparable across the two paths: the value with the type
    of every part, or the error's class and message."""
    try:
        return ("value", typed(call()))
    except Exception as exc:
        return ("error", (type(exc).__name__, str(exc)))


def typed(value: Any) -> Any:
    if isinstance(value, dict):
        return ("dict", sorted((repr(k), typed(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple, set, frozenset)):
        items = (
            sorted(map(repr, value)) if isinstance(value, (set, frozenset)) else value
        )
        return (type(value).__name__, [typed(v) for v in items])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    x: float
    y: float = 0.0


class Box(TypedDict):
    corner: Point
    label: str


class Person(BaseModel):
    name: str
    age: int = 0


def seen(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@tool
def noop(n: int) -> str:
    return "ok"


@tool
def plain(a: str, b: bool, c: float, d: int = 0, e: Any = None) -> dict[str, Any]:
    return seen(a=a, b=b, c=c, d=d, e=e)


@tool
def optional(x: int | None = None, y: Optional[float] = None) -> dict[str, Any]:  # noqa: UP045
    return seen(x=x, y=y)


@tool
def shapes(
    items: list[int],
    pair: tuple[int, str] = (0, ""),
    tags: set[str] | None = None,
    weights: dict[str, float] | None = None,
) -> dict[str, Any]:
    return seen(items=items, pair=pair, tags=tags, weights=weights)


@tool
def choices(color: Color, level: Level, mode: Literal["fast", "slow"]) -> str:
    return f"{color!r} {level!r} {mode}"


@tool
def records(point: Point, box: Box, path: list[Point] | None = None) -> str:
    return f"{point!r} {box!r} {path!r}"


@tool
def unions(
    a: Union[str, int],  # noqa: UP007
    b: Annotated[int, "a count"],
    c: Optional[Annotated[float, "a weight"]] = None,  # noqa: UP045
    d: Union[Literal["x"], Color] = "x",  # noqa: UP007
) -> dict[str, Any]:
    return seen(a=a, b=b, c=c, d=d)


@tool
def with_context(n: int, context: ToolContext) -> str:
    return f"{n} {context.call_id} {context.name}"


@tool
def maybe_context(label: str, context: ToolContext | None = None) -> str:
    return f"{label} {context.name if context else None}"


@tool
async def slow_add(a: int, b: float) -> float:
    await asyncio.sleep(0)
    return a + b


@tool
def validated(
    person: Person,
    count: Annotated[int, Field(ge=1, le=10)] = 1,
    word: Annotated[str, AfterValidator(str.upper)] = "x",
) -> str:
    return f"{person!r} {count} {word}"


def open_fn(**kwargs: Any) -> dict[str, Any]:
    return kwargs


OPEN = Tool("open", "", {"type": "object"}, open_fn, {})
ENUMS = Tool(
    "enums",
    "",
    {
        "type": "object",
        "properties": {"k": {"enum": [1, "one", None, True]}},
        "additionalProperties": {"type": ["integer", "string"]},
    },
    open_fn,
    {},
)

TOOLS: list[Tool] = [
    noop,
    plain,
    optional,
    shapes,
    choices,
    records,
    unions,
    with_context,
    maybe_context,
    slow_add,
    validated,
    OPEN,
    ENUMS,
]

CASES: dict[str, list[Any]] = {
    "noop": [
        {"n": 3},
        {"n": 3.0},
        {"n": 3.5},
        {"n": True},
        {"n": "3"},
        {"n": None},
        {},
        {"n": 1, "m": 2},
        {"n": math.inf},
        {"n": math.nan},
        {"n": 10**30},
        types.MappingProxyType({"n": 4}),
    ],
    "plain": [
        {"a": "x", "b": False, "c": 2, "d": 5.0},
        {"a": "x", "b": 0, "c": 2.5},
        {"a": "x", "b": True, "c": True},
        {"a": "x", "b": True, "c": -0.0, "e": [1, {"z": None}]},
        {"a": 1, "b": "no", "c": "1", "d": 1.5, "e": 2},
        {"b": True, "c": 1},
    ],
    "optional": [
        {},
        {"x": None, "y": None},
        {"x": 2.0, "y": 3},
        {"x": 2.5},
        {"x": "2"},
        {"y": False},
        {"y": math.inf},
    ],
    "shapes": [
        {"items": [1, 2.0, 3]},
        {"items": [], "pair": [1, "a"], "tags": ["a", "a"], "weights": {"w": 1}},
        {"items": [1, "2"]},
        {"items": "12"},
        {"items": [1], "pair": [1]},
        {"items": [1], "pair": [1, 2, 3]},
        {"items": [True]},
        {"items": [1], "weights": {"w": "heavy"}},
        {"items": [1], "tags": None, "weights": None},
    ],
    "choices": [
        {"color": "red", "level": 2, "mode": "fast"},
        {"color": "RED", "level": 2, "mode": "fast"},
        {"color": "blue", "level": 2.0, "mode": "slow"},
        {"color": "blue", "level": 3, "mode": "slow"},
        {"color": "blue", "level": True, "mode": "slow"},
        {"color": "blue", "level": 1, "mode": "medium"},
        {"color": "blue", "level": 1},
    ],
    "records": [
        {"point": {"x": 1}, "box": {"corner": {"x": 2, "y": 3}, "label": "b"}},
        {"point": {"x": 1.5, "y": 2}, "box": {"corner": {"x": 0}, "label": "b"}},
        {"point": {}, "box": {"corner": {"x": 0}, "label": "b"}},
        {"point": {"x": "1"}, "box": {"corner": {"x": 0}}},
        {
            "point": {"x": 1},
            "box": {"corner": {"x": 0}, "label": "b"},
            "path": [{"x": 1}, {"x": 2, "y": 3}],
        },
        {"point": {"x": 1, "z": 0}, "box": {"corner": {"x": 0}, "label": "b"}},
    ],
    "unions": [
        {"a": 1.0, "b": 2.0},
        {"a": "s", "b": 2, "c": 1, "d": "red"},
        {"a": True, "b": 2.5, "c": 1.5, "d": "x"},
        {"a": None, "b": 1, "c": None, "d": "green"},
        {"a": [], "b": 1},
    ],
    "with_context": [{"n": 1}, {"n": 1, "context": "forged"}, {"n": "1"}],
    "maybe_context": [{"label": "l"}, {"label": "l", "context": None}, {}],
    "slow_add": [{"a": 1, "b": 2}, {"a": 1.0, "b": 0.5}, {"a": 1}],
    "validated": [
        {"person": {"name": "ann"}},
        {"person": {"name": "ann", "age": 3.0}, "count": 10, "word": "hi"},
        {"person": {"name": "ann"}, "count": 0},
        {"person": {"name": "ann"}, "count": 11.0},
        {"person": {"age": 3}},
        {"person": "ann"},
    ],
    "open": [{}, {"a": 1, "b": [2.0], "c": None}, {"n": math.inf}],
    "enums": [
        {"k": 1},
        {"k": 1.0},
        {"k": True},
        {"k": "one"},
        {"k": None},
        {"k": False},
        {"k": 2},
        {"k": [1]},
        {"other": 3.0},
        {"other": 3.5},
        {"other": False},
    ],
}


@pytest.mark.parametrize(
    ("t", "arguments"),
    [(t, a) for t in TOOLS for a in CASES[t.name]],
    ids=lambda x: x.name if isinstance(x, Tool) else None,
)
def test_invoke_matches_the_reference(t: Tool, arguments: Mapping[str, Any]) -> None:
    fresh = dataclasses.replace(t)
    for _ in range(2):  # the call that works out the plan, then one that reuses it
        assert outcome(lambda: fresh.invoke(arguments)) == outcome(
            lambda: reference_invoke(fresh, arguments)
        )


def test_every_case_is_exercised_and_both_outcomes_occur() -> None:
    kinds = set()
    for t in TOOLS:
        for arguments in CASES[t.name]:
            kinds.add(outcome(functools.partial(t.invoke, arguments))[0])
    assert kinds == {"value", "error"}
    assert set(CASES) == {t.name for t in TOOLS}


@pytest.mark.parametrize(
    "t",
    [noop, plain, optional, shapes, choices, records, unions, validated, OPEN],
    ids=lambda t: t.name,
)
def test_the_schemas_tool_writes_compile(t: Tool) -> None:
    assert compile_schema(t.parameters) is not None


def test_schemas_outside_the_subset_do_not_compile() -> None:
    extras: list[dict[str, Any]] = [
        {"$ref": "#/$defs/x"},
        {"const": 1},
        {"allOf": []},
        {"uniqueItems": True},
        {"multipleOf": 2},
        {"enum": [[1]]},
        {"type": 3},
        {"anyOf": {"type": "string"}},
        {"minItems": "1"},
        {"maxLength": None},
        {"prefixItems": {}},
    ]
    for extra in extras:
        schema = {"type": "object", "properties": {"p": {"type": "integer", **extra}}}
        assert compile_schema(schema) is None, extra
    looped: dict[str, Any] = {"type": "object"}
    looped["properties"] = {"self": looped}
    assert compile_schema(looped) is None


def test_context_is_given_to_context_parameters_only() -> None:
    ctx = ToolContext("call-1", "with_context")
    assert with_context.invoke({"n": 2}, ctx) == "2 call-1 with_context"
    with pytest.raises(ArgumentError, match="`context`: unexpected field"):
        with_context.invoke({"n": 2, "context": "forged"}, ctx)
    opened = dataclasses.replace(
        with_context,
        parameters={**with_context.parameters, "additionalProperties": True},
    )
    assert opened.invoke({"n": 2, "context": "forged"}, ctx) == "2 call-1 with_context"
    assert with_context.invoke({"n": 2}) == "2  with_context"
    assert maybe_context.invoke({"label": "a"}) == "a maybe_context"


def test_async_tool_sees_the_cancel_event_of_its_context() -> None:
    started: list[bool] = []

    @tool
    async def waits(context: ToolContext) -> str:
        started.append(True)
        await asyncio.sleep(30)
        return "finished"

    ctx = ToolContext("c", "waits")
    ctx.cancelled.set()
    with pytest.raises(asyncio.CancelledError):
        waits.invoke({}, ctx)
    assert started == [True]
    assert slow_add.invoke({"a": 2, "b": 0.5}, ToolContext("c", "slow_add")) == 2.5


def test_replace_gives_a_tool_with_its_own_plan() -> None:
    assert noop.invoke({"n": 1}) == "ok"
    strict = {**noop.parameters, "properties": {"n": {"type": "string"}}}
    other = dataclasses.replace(noop, parameters=strict)
    with pytest.raises(ArgumentError, match="expected string, got integer"):
        other.invoke({"n": 1})
    assert other.invoke({"n": "1"}) == "ok"
    assert noop.invoke({"n": 1}) == "ok"
    floats = dataclasses.replace(plain, hints={**plain.hints, "d": float})
    assert floats.invoke({"a": "", "b": True, "c": 1, "d": 2})["d"] == 2.0
    assert type(floats.invoke({"a": "", "b": True, "c": 1, "d": 2})["d"]) is float
    assert type(plain.invoke({"a": "", "b": True, "c": 1, "d": 2})["d"]) is int
    assert other == dataclasses.replace(noop, parameters=strict)
    assert "plan" not in repr(other)


def add(a: int, b: int) -> int:
    return a + b


def test_copies_and_pickles_after_a_call() -> None:
    t = tool(add)
    assert t.invoke({"a": 1, "b": 2.0}) == 3
    for twin in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert twin == t
        assert twin.invoke({"a": 2, "b": 2}) == 4
        with pytest.raises(ArgumentError, match="required field is missing"):
            twin.invoke({"a": 2})


class Labelled(Tool[[int, int], int]):
    """A tool with an attribute of its own beside ``Tool``'s fields."""

    __slots__ = ("label",)
    label: str

    def __init__(self, label: str) -> None:
        base = tool(add)
        super().__init__(base.name, base.description, base.parameters, add, base.hints)
        object.__setattr__(self, "label", label)


def test_the_pickled_state_is_the_same_before_and_after_a_call() -> None:
    """What a call works out is not part of a tool's state, on every Python: a
    pickle is the same bytes, and a subclass's own attributes come along."""
    fresh, called = Labelled("sums"), Labelled("sums")
    assert called.invoke({"a": 1, "b": 2}) == 3
    assert pickle.dumps(called) == pickle.dumps(fresh)
    for twin in (
        copy.copy(called),
        copy.deepcopy(called),
        pickle.loads(pickle.dumps(called)),
    ):
        assert type(twin) is Labelled and twin.label == "sums" and twin == called
        assert twin.invoke({"a": 2, "b": 2.0}) == 4
        with pytest.raises(ArgumentError, match="required field is missing"):
            twin.invoke({"a": 2})


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (int, 3.0, 3),
        (int, 3.5, 3.5),
        (int, True, True),
        (int, math.inf, math.inf),
        (int, "3", "3"),
        (int, [3.0], [3.0]),
        (float, 3, 3.0),
        (float, True, True),
        (float, 2.5, 2.5),
        (float, None, None),
        (float, 10**20, 1e20),
        (str, 3, 3),
        (str, [1.0], [1.0]),
        (bool, 1, 1),
        (Any, 3.0, 3.0),
        (object, {"a": 1.0}, {"a": 1.0}),
        (Annotated[int, "n"], 2.0, 2),
        (int | None, 2.0, 2),
        (list[float], [1, 2.5], [1.0, 2.5]),
    ],
)
def test_convert_plain_types(tp: Any, value: Any, expected: Any) -> None:
    assert typed(convert(tp, value)) == typed(expected)


def test_convert_keeps_the_identity_of_values_it_does_not_change() -> None:
    value = [1, 2]
    assert convert(str, value) is value
    assert convert(int, value) is value
    assert convert(list[int], value) is not value  # a list type gives a new list


# --- the compiled check against validation.errors on random schemas and values ---

NAMES = ("a", "b", "c")
TYPE_NAMES = ("string", "integer", "number", "boolean", "null", "array", "object")
SCALARS = st.sampled_from(
    [0, 1, 2, -1, 3.0, 1.0, 2.5, -0.0, True, False, None, "a", "b", "", 10**20]
)
ANNOTATIONS = st.dictionaries(
    st.sampled_from(["description", "title", "default", "examples", "format"]),
    st.sampled_from(["text", 1, None, ["x"]]),
    max_size=2,
)


def type_names() -> st.SearchStrategy[Any]:
    one = st.sampled_from([*TYPE_NAMES, "unknown"])
    return st.one_of(one, st.lists(one, max_size=3))


def leaf() -> st.SearchStrategy[Any]:
    bound = st.sampled_from([0, 1, 2, -1, 2.5, 1.0, 10**20, math.nan, True, "2"])
    count = st.sampled_from([0, 1, 2, 1.5])
    keyed = st.fixed_dictionaries(
        {},
        optional={
            "type": type_names(),
            "enum": st.lists(SCALARS, max_size=4),
            "minimum": bound,
            "exclusiveMaximum": bound,
            "minLength": count,
            "maxLength": count,
            "pattern": st.sampled_from(["^a", "b$", "[", "", 3]),
        },
    )
    return st.one_of(
        st.builds(lambda k, a: {**k, **a}, keyed, ANNOTATIONS),
        st.sampled_from([True, False, {}]),
    )


def schemas() -> st.SearchStrategy[Any]:
    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        props = st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
        obj = st.fixed_dictionaries(
            {"properties": props},
            optional={
                "type": st.sampled_from(["object", ["object", "null"], "string"]),
                "required": st.lists(st.sampled_from([*NAMES, "z"]), max_size=3),
                "additionalProperties": st.one_of(st.booleans(), inner),
            },
        )
        array = st.fixed_dictionaries(
            {"items": inner},
            optional={
                "type": st.sampled_from(["array", "number"]),
                "prefixItems": st.lists(inner, max_size=2),
                "minItems": st.sampled_from([0, 1, 2, 2.5]),
                "maxItems": st.sampled_from([0, 1, 3]),
                "maximum": st.sampled_from([0, 1.5]),
            },
        )
        union = st.fixed_dictionaries(
            {st.sampled_from(["anyOf", "oneOf"]): st.lists(inner, max_size=3)},
            optional={"type": type_names(), "description": st.just("d")},
        )
        return st.one_of(obj, array, union)

    return st.recursive(leaf(), extend, max_leaves=8)


#: the values where JSON and Python disagree: bool vs integer, 3.0 as an integer,
#: non-finite floats, -0.0, None, empty text
TRICKY_VALUES: list[Any] = [True, False, 0, 1, 2, 1.0, 3.0, 2.5, -0.0, None]
TRICKY_VALUES += [math.inf, -math.inf, math.nan, "a", "b", "", "ab", 10**20, 1e20]
TRICKY = st.sampled_from(TRICKY_VALUES)


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        TRICKY,
        TRICKY,
        TRICKY,
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=3),
    )


def values() -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from([*NAMES, "z"]), inner, max_size=4),
        ),
        max_leaves=10,
    )


def flat_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """The shape ``@tool`` writes: an object of properties with plain sub-schemas."""
    return st.fixed_dictionaries(
        {
            "type": st.just("object"),
            "properties": st.dictionaries(st.sampled_from(NAMES), leaf(), max_size=3),
        },
        optional={
            "required": st.lists(st.sampled_from([*NAMES, "z"]), max_size=3),
            "additionalProperties": st.booleans(),
        },
    )


@settings(max_examples=1500, deadline=None)
@given(
    schema=flat_schemas(),
    value=st.dictionaries(st.sampled_from([*NAMES, "z"]), scalars(), max_size=4),
)
def test_compiled_check_agrees_with_errors_on_flat_schemas(
    schema: dict[str, Any], value: dict[str, Any]
) -> None:
    check = compile_schema(schema)
    assert check is not None, schema
    assert check(value) == (errors(schema, value) == []), (schema, value)


@settings(
    max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(schema=schemas(), value=values())
def test_compiled_check_agrees_with_errors(schema: Any, value: Any) -> None:
    check = compile_schema(schema)
    assert check is not None, schema
    assert check(value) == (errors(schema, value) == []), (schema, value)


@settings(max_examples=300, deadline=None)
@given(
    schema=schemas(),
    value=values(),
    extra=st.sampled_from(
        [
            {"multipleOf": 2},
            {"uniqueItems": 1},
            {"const": 1},
            {"$ref": "#"},
            {"allOf": []},
        ]
    ),
)
def test_outside_the_subset_nothing_compiles(
    schema: Any, value: Any, extra: dict[str, Any]
) -> None:
    wrapped = {"type": "object", "properties": {"a": schema, "b": extra}}
    assert compile_schema(wrapped) is None


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_arguments_invoke_as_the_reference(data: st.DataObject) -> None:
    pool: list[Tool] = [noop, plain, optional, shapes, choices, unions, ENUMS]
    t = data.draw(st.sampled_from(pool))
    keys = [*t.parameters.get("properties", {}), "other"]
    arguments = data.draw(st.dictionaries(st.sampled_from(keys), values(), max_size=5))
    assert outcome(lambda: t.invoke(arguments)) == outcome(
        lambda: reference_invoke(t, arguments)
    )

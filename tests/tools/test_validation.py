"""Arguments checked against the tool's own schema; pydantic and Annotated parameters;
async tools; ``@tool`` keeping the function; ``ToolFinished.error``."""

from __future__ import annotations

import asyncio
import enum
import inspect
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

import orjson
import pytest
from pydantic import AfterValidator, BaseModel, Field, field_validator

from navi_core import (
    Agent,
    AnyEvent,
    Scripted,
    Stream,
    Text,
    Tool,
    ToolFinished,
    ToolUse,
    TurnComplete,
    tool,
)
from navi_core.tools import ArgumentError, ToolContext
from navi_core.tools._validation import errors


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    x: float
    y: float = 0.0


class Box(TypedDict):
    corner: Point
    label: str


ran: list[Any] = []


@tool
def everything(
    items: list[int],
    mode: Literal["fast", "slow"],
    color: Color,
    box: Box,
    count: Annotated[int, Field(ge=1, le=10)] = 1,
    note: str | None = None,
) -> str:
    """Take one of each kind of parameter."""
    ran.append((items, mode, color, box, count, note))
    return "ran"


GOOD: dict[str, Any] = {
    "items": [1, 2],
    "mode": "fast",
    "color": "red",
    "box": {"corner": {"x": 1.5, "y": 2}, "label": "a"},
}


def drain(stream: Stream) -> list[AnyEvent]:
    out: list[AnyEvent] = []
    while (ev := stream.next()) is not None:
        out.append(ev)
    return out


def call_in_turn(
    t: Tool, arguments: dict[str, Any]
) -> tuple[str, bool, list[AnyEvent]]:
    """Run one real turn in which the model calls ``t``; the result text and flag."""
    use = ToolUse("c1", t.name, orjson.dumps(arguments).decode())
    agent = Agent(Scripted([[use], [Text("done")]]), tools=[t])
    events = drain(agent.run("go"))
    (result,) = agent.conversation.messages[2].tool_results
    return result.text, result.is_error, events


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"items": [1, "two"]}, "`items[1]`: expected integer, got string"),
        ({"items": "1,2"}, "`items`: expected array, got string"),
        ({"mode": "medium"}, '`mode`: expected one of "fast", "slow", got "medium"'),
        ({"color": "green"}, '`color`: expected one of "red", "blue", got "green"'),
        (
            {"box": {"corner": {"x": "left"}, "label": "a"}},
            "`box.corner.x`: expected number, got string",
        ),
        ({"box": {"corner": {"x": 1}}}, "`box.label`: required field is missing"),
        (
            {"box": {"corner": {"x": 1}, "label": "a", "z": 1}},
            "`box.z`: unexpected field",
        ),
        ({"count": 11}, "`count`: expected a number at most 10, got 11"),
        ({"count": 0}, "`count`: expected a number at least 1, got 0"),
        ({"count": 2.5}, "`count`: expected integer, got number"),
        ({"note": 5}, "`note`: expected string or null, got integer 5"),
        (
            {"extra": True},
            "`extra`: unexpected field (allowed: items, mode, color, box, count, note)",
        ),
        ({"items": [True]}, "`items[0]`: expected integer, got boolean"),
    ],
)
def test_each_kind_of_mismatch_is_an_error_result_and_the_tool_does_not_run(
    change: dict[str, Any], message: str
) -> None:
    ran.clear()
    text, is_error, events = call_in_turn(everything, {**GOOD, **change})
    assert is_error
    assert message in text, text
    assert text.startswith("Tool 'everything' was not run: invalid arguments:")
    assert ran == []
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert (
        finished.is_error and finished.error is not None and message in finished.error
    )


def test_a_missing_required_argument_is_named() -> None:
    args = dict(GOOD)
    del args["mode"]
    text, is_error, _ = call_in_turn(everything, args)
    assert is_error and "`mode`: required field is missing" in text


def test_valid_arguments_run_converted_to_the_annotated_types() -> None:
    ran.clear()
    text, is_error, events = call_in_turn(everything, {**GOOD, "count": 3.0})
    assert (text, is_error) == ("ran", False)
    ((items, mode, color, box, count, note),) = ran
    assert items == [1, 2] and mode == "fast" and color is Color.RED
    assert box["corner"] == Point(1.5, 2.0) and count == 3 and type(count) is int
    assert note is None
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.error is None


def test_several_mismatches_are_all_reported() -> None:
    problems = errors(everything.parameters, {"items": ["a", "b"], "mode": 1})
    assert "`items[0]`: expected integer, got string" in problems
    assert "`items[1]`: expected integer, got string" in problems
    assert any(p.startswith("`color`: required") for p in problems)
    assert any(p.startswith("`mode`:") for p in problems)


def test_bounds_lengths_patterns_and_tuples() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 2,
                "maxLength": 4,
                "pattern": "^[a-z]+$",
            },
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "string"}, {"type": "integer"}],
                "minItems": 2,
                "maxItems": 2,
            },
            "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
        },
    }
    assert errors(schema, {"name": "ab", "pair": ["a", 1], "ratio": 1.5}) == []
    got = errors(schema, {"name": "ABCDE", "pair": [1], "ratio": 0})
    assert "`name`: expected at most 4 characters, got 5" in got
    assert any(g.startswith("`name`: expected text matching") for g in got)
    assert "`pair`: expected at least 2 items, got 1" in got
    assert "`pair[0]`: expected string, got integer" in got
    assert "`ratio`: expected a number greater than 0, got 0" in got
    assert errors(schema, {"ratio": 0.7}) == [
        "`ratio`: expected a multiple of 0.5, got 0.7"
    ]


class Address(BaseModel):
    street: str
    number: int = Field(ge=1)


class Person(BaseModel):
    """Someone to greet."""

    name: str
    address: Address
    tags: list[str] = []


def test_pydantic_model_parameters_are_declared_checked_and_built() -> None:
    got: list[Person] = []

    @tool
    def greet(
        person: Person, loud: Annotated[bool, "shout the greeting"] = False
    ) -> str:
        """Greet a person."""
        got.append(person)
        return ("HELLO " if loud else "hello ") + person.name

    props = greet.parameters["properties"]
    assert props["loud"]["description"] == "shout the greeting"
    assert props["person"]["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert "Address" in greet.parameters["$defs"]

    ok = {"person": {"name": "Ann", "address": {"street": "Main", "number": 4}}}
    assert call_in_turn(greet, {**ok, "loud": True})[:2] == ("HELLO Ann", False)
    assert isinstance(got[0], Person) and got[0].address.number == 4

    bad = {"person": {"name": "Ann", "address": {"street": "Main", "number": 0}}}
    text, is_error, _ = call_in_turn(greet, bad)
    assert is_error
    assert "`person.address.number`: expected a number at least 1, got 0" in text
    assert len(got) == 1


class Even(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def even(cls, v: int) -> int:
        if v % 2:
            raise ValueError("must be even")
        return v


def test_a_pydantic_validator_failure_is_an_argument_error() -> None:
    @tool
    def half(value: Even) -> int:
        """Halve an even number."""
        return value.n // 2

    # the path starts at the parameter, as a type error's does
    with pytest.raises(ArgumentError, match=r"`value\.n`: Value error, must be even"):
        half.invoke({"value": {"n": 3}})
    assert half.invoke({"value": {"n": 4}}) == 2

    @tool
    def halves(values: list[Even]) -> list[int]:
        """Halve even numbers."""
        return [v.n // 2 for v in values]

    with pytest.raises(ArgumentError, match=r"`values\[1\]\.n`: Value error, must be"):
        halves.invoke({"values": [{"n": 2}, {"n": 3}]})


def test_field_description_and_bounds_reach_the_schema() -> None:
    @tool
    def pick(n: Annotated[int, Field(ge=0, lt=5, description="which one")]) -> int:
        """Pick."""
        return n

    prop = pick.parameters["properties"]["n"]
    assert prop["description"] == "which one"
    assert prop["minimum"] == 0 and prop["exclusiveMaximum"] == 5
    with pytest.raises(ArgumentError, match=r"`n`: expected a number less than 5"):
        pick.invoke({"n": 5})


def test_annotated_validator_functions_run() -> None:
    @tool
    def shout(text: Annotated[str, AfterValidator(str.upper)]) -> str:
        """Shout."""
        return text

    assert shout.invoke({"text": "hi"}) == "HI"


@tool
async def slow_add(a: int, b: int) -> int:
    """Add after a pause, asynchronously."""
    await asyncio.sleep(0.01)
    return a + b


def test_async_tool_result_is_awaited_not_a_coroutine_text() -> None:
    assert call_in_turn(slow_add, {"a": 2, "b": 3})[:2] == ("5", False)


def test_async_tool_runs_when_the_driving_thread_has_a_running_loop() -> None:
    loops: list[int] = []

    @tool
    async def where(ctx: ToolContext) -> str:
        """Say which loop and call run this."""
        loops.append(id(asyncio.get_running_loop()))
        return f"{ctx.call_id}:{threading.current_thread().name}"

    async def main() -> tuple[list[AnyEvent], str, int]:
        host_loop = id(asyncio.get_running_loop())
        use = ToolUse("c9", "where", "{}")
        agent = Agent(Scripted([[use], [Text("done")]]), tools=[where])
        events = drain(agent.run("go"))  # the host drives the turn inside its loop
        direct = where.invoke({})  # and a direct invoke on the loop's own thread
        (result,) = agent.conversation.messages[2].tool_results
        assert direct.startswith(":")
        return events, result.text, host_loop

    events, text, host_loop = asyncio.run(main())
    assert isinstance(events[-1], TurnComplete)
    assert text.startswith(("c9:", ":"))
    assert len(loops) == 2 and host_loop not in loops


def test_async_tool_exception_is_an_error_result_with_error_text() -> None:
    @tool
    async def broken() -> str:
        """Fail."""
        await asyncio.sleep(0)
        raise LookupError("no such row")

    text, is_error, events = call_in_turn(broken, {})
    assert is_error and "LookupError: no such row" in text
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.error == "Tool 'broken' failed: LookupError: no such row"


def test_the_tool_is_still_the_function() -> None:
    @tool
    def scale(values: Sequence[float], factor: float = 2.0) -> list[float]:
        """Scale values."""
        return [v * factor for v in values]

    assert scale([1.0, 2.0], factor=3.0) == [3.0, 6.0]
    sig = inspect.signature(scale)
    assert list(sig.parameters) == ["values", "factor"]
    assert sig.parameters["factor"].default == 2.0
    assert sig.return_annotation == "list[float]"
    coro = slow_add(1, 2)
    assert inspect.iscoroutine(coro)
    assert asyncio.run(coro) == 3


def test_error_text_is_short() -> None:
    @tool
    def loud() -> str:
        """Fail at length."""
        raise RuntimeError("x" * 5000)

    _, _, events = call_in_turn(loud, {})
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.error is not None and len(finished.error) <= 300
    assert finished.error.startswith("Tool 'loud' failed: RuntimeError: xxx")


def test_a_cancelled_context_cancels_the_coroutine() -> None:
    @tool
    async def wait_long(ctx: ToolContext) -> str:
        """Wait for a long time."""
        await asyncio.sleep(30)
        return "finished"

    ctx = ToolContext("c1", "wait_long")
    threading.Timer(0.1, ctx.cancelled.set).start()
    start = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        wait_long.invoke({}, ctx)
    assert time.monotonic() - start < 2

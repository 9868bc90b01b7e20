"""@tool schemas from type hints and docstrings; the registry."""

from __future__ import annotations

import enum
import functools
import inspect
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, TypedDict

import pytest

from navi_core import (
    Agent,
    Scripted,
    Text,
    Tool,
    ToolCall,
    ToolContext,
    ToolRegistrationError,
    ToolSpec,
    ToolUse,
    tool,
)
from navi_core.tools import ToolRegistry, schema_for


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    """A point on the plane."""

    x: float
    y: float = 0.0


class Box(TypedDict):
    corner: Point
    label: str


def test_schema_from_signature_and_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10, exact: bool = False) -> list[str]:
        """Search the index for documents.

        Args:
            query: words to look for.
            limit: how many results at most.
        """
        return []

    assert isinstance(search, Tool)
    assert search.name == "search"
    assert search.description == "Search the index for documents."
    assert search.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words to look for."},
            "limit": {
                "type": "integer",
                "description": "how many results at most.",
                "default": 10,
            },
            "exact": {"type": "boolean", "default": False},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert search("x") == []


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (float, {"type": "number"}),
        (type(None), {"type": "null"}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (
            dict[str, float],
            {"type": "object", "additionalProperties": {"type": "number"}},
        ),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (Color, {"enum": ["red", "blue"]}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    ],
)
def test_schema_for_types(hint: Any, schema: dict[str, Any]) -> None:
    assert schema_for(hint) == schema


def test_nested_dataclass_and_typeddict() -> None:
    s = schema_for(Box)
    assert s["type"] == "object"
    assert s["required"] == ["corner", "label"]
    corner = s["properties"]["corner"]
    assert corner["properties"] == {"x": {"type": "number"}, "y": {"type": "number"}}
    assert corner["required"] == ["x"]
    assert corner["description"] == "A point on the plane."


def test_unsupported_type_is_refused_with_its_name() -> None:
    class Opaque:
        pass

    with pytest.raises(ToolRegistrationError, match="Opaque"):

        @tool
        def bad(x: Opaque) -> None:
            """Bad."""


def test_name_and_description_overrides_and_invalid_name() -> None:
    @tool(name="lookup_v2", description="Look things up.")
    def lookup(key: str) -> str:
        """Ignored docstring."""
        return key

    assert (lookup.name, lookup.description) == ("lookup_v2", "Look things up.")
    with pytest.raises(ToolRegistrationError):
        tool(name="has space")(lambda: None)


def test_arguments_are_converted_to_annotated_types() -> None:
    seen: dict[str, Any] = {}

    @tool
    def place(p: Point, color: Color, tags: tuple[str, ...] = ()) -> str:
        """Place a point."""
        seen.update(p=p, color=color, tags=tags)
        return "ok"

    place.invoke({"p": {"x": 1, "y": 2.5}, "color": "blue", "tags": ["a"]})
    assert seen == {"p": Point(1, 2.5), "color": Color.BLUE, "tags": ("a",)}


def test_registry_refuses_duplicates_including_from_sources() -> None:
    @tool
    def dup() -> str:
        """D."""
        return ""

    reg = ToolRegistry()
    reg.register_tool(dup)
    with pytest.raises(ToolRegistrationError, match="dup"):
        reg.register_tool(dup)

    class Src:
        def tools(self) -> list[ToolSpec]:
            return [ToolSpec("other", "o", {}), ToolSpec("dup", "d", {})]

        def call_batch(self, calls: Sequence[ToolCall]) -> list[Any]:
            return []

    with pytest.raises(ToolRegistrationError, match=r"\['dup'\].*prefix"):
        reg.register_source(Src())  # the hint: how two servers keep names apart
    assert reg.names() == ["dup"]  # all or none


def test_plain_functions_are_wrapped_and_agent_registers_later() -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    agent = Agent(Scripted([]), tools=[shout])
    assert [s.name for s in agent.tool_specs()] == ["shout"]

    @tool
    def later() -> str:
        """Later."""
        return ""

    agent.register_tool(later)
    assert [s.name for s in agent.tool_specs()] == ["shout", "later"]


def test_a_tool_is_still_its_function() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool(name="minus")
    def sub(a: int, b: int = 0) -> int:
        """Subtract."""
        return a - b

    assert add(1, 2) == 3
    assert add(a=1, b=2) == 3
    assert sub(5) == 5 and sub(5, b=2) == 3
    assert isinstance(add, Tool) and isinstance(sub, Tool)
    assert (add.name, add.description, sub.name) == ("add", "Add two numbers.", "minus")
    assert add.parameters["required"] == ["a", "b"]
    assert inspect.signature(add) == inspect.signature(add.fn)
    assert list(inspect.signature(add).parameters) == ["a", "b"]
    assert "name" in inspect.signature(Tool).parameters  # the class keeps its own


def test_type_checkers_see_the_function_signature(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "user_code.py"
    source.write_text(
        textwrap.dedent(
            """
            from navi_core import Tool, tool

            @tool
            def add(a: int, b: int) -> int:
                \"\"\"Add.\"\"\"
                return a + b

            @tool(name="shout")
            def loud(text: str) -> str:
                \"\"\"Shout.\"\"\"
                return text.upper()

            reveal_type(add(1, 2))
            reveal_type(loud("x"))
            add("1", 2)  # E: wrong argument type
            tools: list[Tool] = [add, loud]

            def first(t: Tool) -> str:
                return t.name
            """
        )
    )
    out, _, status = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(source),
        ]
    )
    found = [re.search(r":(\d+): (\w+): (.*)$", line) for line in out.splitlines()]
    assert [m.groups()[:2] for m in found if m] == [
        ("14", "note"),
        ("15", "note"),
        ("16", "error"),
    ], out
    revealed = [m.group(3) for m in found if m][:2]
    assert re.fullmatch(r'Revealed type is "(builtins\.)?int"', revealed[0]), out
    assert re.fullmatch(r'Revealed type is "(builtins\.)?str"', revealed[1]), out
    assert out.splitlines()[2].endswith("[arg-type]"), out
    assert status == 1


def _plain(n: int) -> str:
    """Return n."""
    return str(n)


async def _later(n: int) -> str:
    """Return n, awaited."""
    return str(n)


def _wrapped_later() -> Any:
    @functools.wraps(_later)
    def wrapper(n: int) -> Any:
        return _later(n)

    return wrapper


def _async_wrapper_of_plain() -> Any:
    @functools.wraps(_plain)
    async def wrapper(n: int) -> str:
        return _plain(n)

    return wrapper


class _Callable:
    def __call__(self, n: int) -> str:
        return str(n)


def _with_context(n: int, ctx: ToolContext) -> str:
    """Return n and the call id."""
    return f"{n} {ctx.call_id}"


@pytest.mark.parametrize(
    ("fn", "takes"),
    [
        (_plain, False),
        (_with_context, True),
        (_later, True),
        (_wrapped_later(), True),
        (_async_wrapper_of_plain(), True),
        (functools.partial(_plain), False),
        (functools.partial(_later), True),
        (_Callable(), True),
    ],
    ids=[
        "plain",
        "context-parameter",
        "async",
        "wrapped-async",
        "async-wrapper-of-plain",
        "partial-plain",
        "partial",
        "object",
    ],
)
def test_takes_context_only_when_the_call_may_read_one(
    fn: Callable[..., Any], takes: bool
) -> None:
    if inspect.isfunction(fn):
        t: Tool = tool(name="t", description="d")(fn)
    else:  # tool() reads type hints, which a partial or an object does not have
        t = Tool("t", "d", {"type": "object", "properties": {}}, fn)
    assert t.takes_context is takes


def test_a_subclass_with_its_own_invoke_takes_a_context() -> None:
    seen: list[str] = []

    @dataclass(frozen=True, slots=True)
    class Recording(Tool):
        def invoke(self, arguments: Any, context: ToolContext | None = None) -> Any:
            seen.append(context.call_id if context is not None else "none")
            return "ok"

    t = Recording("rec", "d", {"type": "object", "properties": {}}, _plain)
    assert t.takes_context
    p = Scripted([[ToolUse("c7", "rec", "{}")], [Text("done")]])
    agent = Agent(p, tools=[t])
    list(agent.run("go"))
    assert seen == ["c7"]


def test_a_dispatched_call_gets_its_context_and_a_plain_one_runs_without() -> None:
    p = Scripted(
        [
            [
                ToolUse("c1", "_with_context", '{"n": 1}'),
                ToolUse("c2", "_plain", '{"n": 2}'),
            ],
            [Text("done")],
        ]
    )
    agent = Agent(p, tools=[tool(_with_context), tool(_plain)])
    list(agent.run("go"))
    results = agent.conversation.messages[2].tool_results
    assert [r.text for r in results] == ["1 c1", "2"]

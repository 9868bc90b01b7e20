"""@tool schemas from type hints and docstrings; the registry."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal, Optional, TypedDict

import pytest

from navi_core import Agent, Scripted, Tool, ToolRegistrationError, ToolSpec, tool
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


def test_schema_from_signature_and_docstring():
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
def test_schema_for_types(hint, schema):
    assert schema_for(hint) == schema


def test_nested_dataclass_and_typeddict():
    s = schema_for(Box)
    assert s["type"] == "object"
    assert s["required"] == ["corner", "label"]
    corner = s["properties"]["corner"]
    assert corner["properties"] == {"x": {"type": "number"}, "y": {"type": "number"}}
    assert corner["required"] == ["x"]
    assert corner["description"] == "A point on the plane."


def test_unsupported_type_is_refused_with_its_name():
    class Opaque:
        pass

    with pytest.raises(ToolRegistrationError, match="Opaque"):

        @tool
        def bad(x: Opaque) -> None:
            """Bad."""


def test_name_and_description_overrides_and_invalid_name():
    @tool(name="lookup_v2", description="Look things up.")
    def lookup(key: str) -> str:
        """Ignored docstring."""
        return key

    assert (lookup.name, lookup.description) == ("lookup_v2", "Look things up.")
    with pytest.raises(ToolRegistrationError):
        tool(name="has space")(lambda: None)


def test_arguments_are_converted_to_annotated_types():
    seen = {}

    @tool
    def place(p: Point, color: Color, tags: tuple[str, ...] = ()) -> str:
        """Place a point."""
        seen.update(p=p, color=color, tags=tags)
        return "ok"

    place.invoke({"p": {"x": 1, "y": 2.5}, "color": "blue", "tags": ["a"]})
    assert seen == {"p": Point(1, 2.5), "color": Color.BLUE, "tags": ("a",)}


def test_registry_refuses_duplicates_including_from_sources():
    @tool
    def dup() -> str:
        """D."""
        return ""

    reg = ToolRegistry()
    reg.register_tool(dup)
    with pytest.raises(ToolRegistrationError, match="dup"):
        reg.register_tool(dup)

    class Src:
        def tools(self):
            return [ToolSpec("other", "o", {}), ToolSpec("dup", "d", {})]

        def call_batch(self, calls):
            return []

    with pytest.raises(ToolRegistrationError):
        reg.register_source(Src())
    assert reg.names() == ["dup"]  # all or none


def test_plain_functions_are_wrapped_and_agent_registers_later():
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

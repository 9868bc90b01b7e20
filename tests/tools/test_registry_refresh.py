"""``ToolRegistry.refresh`` keeps the declarations in their order when a source's tools
change (an MCP server's tools/list_changed): the tools array is part of the prefix a
provider caches, so a tool that stays keeps its place (its changed declaration too), a
removed one drops out without moving the rest, and a new one comes last."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from navi_core import ToolCall, ToolSpec, tool
from navi_core.tools import ToolRegistry


def spec(name: str, description: str = "") -> ToolSpec:
    return ToolSpec(name, description or f"tool {name}", {"type": "object"})


class Source:
    """A ``ToolSource`` whose declarations the test changes (a new list each time, as
    ``MCPTools`` does after listing again)."""

    def __init__(self, *names: str) -> None:
        self.listed: list[ToolSpec] = [spec(n) for n in names]

    def tools(self) -> Sequence[ToolSpec]:
        return self.listed

    def call_batch(self, calls: Sequence[ToolCall]) -> list[Any]:
        return [c.name for c in calls]


@tool
def before() -> str:
    """Registered before the source."""
    return ""


@tool
def after() -> str:
    """Registered after the source."""
    return ""


def names(registry: ToolRegistry) -> list[str]:
    return [s.name for s in registry.specs()]


def test_tools_that_stay_keep_their_places_and_a_new_one_comes_last() -> None:
    """One removed, one added, one changed, and the rest listed in another order:
    the source's tools used to be declared again after every other registration, in
    the source's new order."""
    source = Source("a", "b", "c", "d")
    registry = ToolRegistry()
    registry.register_tool(before)
    registry.register_source(source)
    registry.register_tool(after)
    assert names(registry) == ["before", "a", "b", "c", "d", "after"]
    changed = spec("c", "c, changed")
    source.listed = [spec("e"), spec("d"), changed, spec("a")]
    specs = registry.specs()
    assert [s.name for s in specs] == ["before", "a", "c", "d", "after", "e"]
    assert specs[2] is changed
    assert registry.owner("b") is None and registry.owner("e") is source
    assert registry.names() == ["before", "a", "c", "d", "after", "e"]


def test_a_changed_declaration_alone_keeps_its_place() -> None:
    source = Source("a", "b", "c")
    registry = ToolRegistry()
    registry.register_source(source)
    registry.register_tool(after)
    source.listed = [spec("a"), spec("b", "b, changed"), spec("c")]
    specs = registry.visible_specs()
    assert [s.name for s in specs] == ["a", "b", "c", "after"]
    assert specs[1].description == "b, changed"


def test_a_listing_in_another_order_changes_nothing() -> None:
    source = Source("a", "b", "c")
    registry = ToolRegistry()
    registry.register_source(source)
    registry.register_tool(after)
    first = registry.specs()
    source.listed = list(reversed(source.listed))
    assert registry.specs() == first


def test_a_removed_tool_listed_again_later_is_new_and_comes_last() -> None:
    source = Source("a", "b", "c")
    registry = ToolRegistry()
    registry.register_source(source)
    source.listed = [spec("a"), spec("c")]
    assert names(registry) == ["a", "c"]
    source.listed = [spec("a"), spec("b"), spec("c")]
    assert names(registry) == ["a", "c", "b"]


def test_another_source_keeps_its_places_when_one_changes() -> None:
    one, two = Source("a", "b"), Source("x", "y")
    registry = ToolRegistry()
    registry.register_source(one)
    registry.register_source(two)
    one.listed = [spec("z"), spec("b")]
    two.listed = [spec("y"), spec("x", "x, changed")]
    specs = registry.specs()
    assert [s.name for s in specs] == ["b", "x", "y", "z"]
    assert specs[1].description == "x, changed"


def test_a_new_name_another_registration_holds_is_left_to_it() -> None:
    source = Source("a")
    registry = ToolRegistry()
    registry.register_source(source)
    registry.register_tool(after)
    source.listed = [spec("after"), spec("a"), spec("n")]
    assert names(registry) == ["a", "after", "n"]
    assert registry.owner("after") is after

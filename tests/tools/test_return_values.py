"""What a tool's return value reads as: values JSON cannot hold directly (a
``Decimal``, a set, an enum, a numpy array) become JSON text, also when several calls
return them at once on pool threads."""

from __future__ import annotations

import enum
import subprocess
import sys
import textwrap
from decimal import Decimal
from typing import Any

import pytest

from navi_core import Agent, Scripted, ToolUse, tool
from navi_core.conversation import TextPart


class Colour(enum.Enum):
    RED = "red"


def _result_text(value: Any) -> str:
    @tool
    def give() -> Any:
        """Return the value."""
        return value

    agent = Agent(Scripted([[ToolUse("c1", "give", "{}")], "done"]), tools=[give])
    agent.ask("go")
    (result,) = agent.conversation.dialogue()[-2].tool_results
    agent.close()
    (part,) = result.parts
    assert isinstance(part, TextPart) and not result.is_error
    return part.text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"price": Decimal("9.99")}, '{"price":"9.99"}'),
        ({"tags": {"a"}}, '{"tags":["a"]}'),
        ({"colour": Colour.RED}, '{"colour":"red"}'),
        ({1: "one"}, '{"1":"one"}'),
    ],
)
def test_values_json_cannot_hold_read_as_json_text(value: Any, text: str) -> None:
    assert _result_text(value) == text


def test_a_numpy_array_reads_as_a_json_list() -> None:
    numpy = pytest.importorskip("numpy")
    assert _result_text({"v": numpy.arange(3)}) == '{"v":[0,1,2]}'


def test_parallel_calls_returning_decimals_do_not_crash_a_fresh_process() -> None:
    """The first unknown type a process serialises may load numpy (orjson's numpy
    option); with orjson before 3.8.10 two threads doing it at once killed the
    process (SIGILL). A fresh interpreter, four calls at once, five times."""
    script = textwrap.dedent(
        """
        from decimal import Decimal
        from navi_core import Agent, Scripted, ToolUse, tool

        @tool
        def price(item: str) -> dict:
            '''Price of an item.'''
            return {"item": item, "price": Decimal("9.99")}

        calls = [ToolUse(f"c{i}", "price", f'{{"item": "i{i}"}}') for i in range(4)]
        agent = Agent(Scripted([calls, "Done."]), tools=[price])
        print(agent.ask("prices?").response)
        print(agent.conversation.dialogue()[-2].tool_results[3].parts[0].text)
        agent.close()
        """
    )
    for _ in range(5):
        run = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
        assert run.stdout.splitlines() == ["Done.", '{"item":"i3","price":"9.99"}']

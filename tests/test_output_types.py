"""Structured output at the edges of the types it takes: a type that has no JSON
schema form is the ``TypeError`` from ``run()`` that the docs promise (not a
``ToolRegistrationError``, not a ``RecursionError``); a map field keeps OpenAI's
strict mode off (strict mode takes only closed objects); a corrective message names
the answer, not "the arguments" of a tool call."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

import orjson
import pytest
from loopback import LoopbackServer, Reply

from navi_core import Agent, Scripted, StopReason
from navi_core.errors import OutputValidationError
from navi_core.output import OutputSpec
from navi_core.providers.openai_chat import OpenAIChat


@dataclass
class Meeting:
    title: str
    starts: datetime.datetime


@dataclass
class Folder:
    name: str
    children: list[Folder]


class Tree(TypedDict):
    value: int
    children: list[Tree]


@dataclass
class Scores:
    player: str
    points: dict[str, int]


@dataclass
class City:
    name: str
    population: int


@pytest.fixture
def openai(loopback: LoopbackServer) -> Iterator[OpenAIChat]:
    provider = OpenAIChat("gpt-test", base_url=loopback.url + "/v1", api_key="k")
    yield provider
    provider.close()


def openai_text(text: str) -> Reply:
    """A chat-completions stream answering ``text``."""

    def sse(obj: Any) -> bytes:
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    end = {"index": 0, "delta": {}, "finish_reason": "stop"}
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    return Reply.sse(
        sse({"id": "c", "model": "gpt-test", "choices": [choice]})
        + sse({"id": "c", "model": "gpt-test", "choices": [end]})
        + sse({"id": "c", "model": "gpt-test", "choices": [], "usage": usage})
        + b"data: [DONE]\n\n"
    )


@pytest.mark.parametrize("tp", [Meeting, Folder, Tree])
def test_a_type_without_a_json_form_is_a_type_error_before_anything_is_stored(
    tp: type[Any],
) -> None:
    """A ``datetime`` field in a dataclass raised ``ToolRegistrationError`` (a
    ``ValueError``) and a dataclass or TypedDict holding itself a ``RecursionError``;
    ``run()`` promises ``TypeError`` for a type that cannot be asked for."""
    agent = Agent(Scripted(["{}"]))
    with pytest.raises(TypeError, match=tp.__name__):
        agent.run("Plan it.", output=tp)
    assert not agent.conversation.messages
    agent.close()


def test_a_map_field_is_not_sent_as_strict(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    """``dict[str, int]`` is an object open to any key: OpenAI's strict mode refuses
    a schema with such an object, so the format is sent without ``strict``, and the
    answer still validates."""
    assert OutputSpec.of(Scores).strict is False
    assert OutputSpec.of(City).strict is True
    loopback.add(openai_text('{"player": "Ada", "points": {"round 1": 3}}'))
    agent = Agent(openai)
    done = agent.run("Scores?", output=Scores).result()
    assert done.output == Scores("Ada", {"round 1": 3})
    sent = loopback.requests[0].json["response_format"]["json_schema"]
    assert sent["strict"] is False
    assert sent["schema"]["properties"]["points"]["additionalProperties"] == {
        "type": "integer"
    }
    agent.close()


def test_an_answer_of_the_wrong_kind_is_named_as_the_answer(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    """A JSON array or null where an object is due: the corrective message and the
    final error speak of "the answer", not of a tool's "arguments"."""
    loopback.add(openai_text("[1, 2]"), openai_text("null"))
    agent = Agent(openai)
    with pytest.raises(OutputValidationError) as raised:
        agent.run("Describe Oslo.", output=City).result()
    correction = loopback.requests[1].json["messages"][-1]["content"]
    assert "the answer: expected object, got array" in correction
    assert "arguments" not in correction
    assert "the answer: expected object, got null" in str(raised.value)
    assert "arguments" not in str(raised.value)
    agent.close()


def test_a_map_answer_is_taken_in_one_request(
    loopback: LoopbackServer, openai: OpenAIChat
) -> None:
    """Control: a valid answer for a type with a map ends the turn at once."""
    loopback.add(openai_text('{"player": "Bo", "points": {}}'))
    agent = Agent(openai)
    done = agent.run("Scores?", output=Scores).result()
    assert done.stop_reason is StopReason.END_TURN
    assert done.output == Scores("Bo", {})
    assert len(loopback.requests) == 1
    agent.close()

"""Image tool results through whole turns: Scripted, both HTTP providers, SQLite."""

from __future__ import annotations

import base64
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from imagekit import decoded, encode, photo
from loopback import LoopbackServer, Reply

from navi_core import Agent, Scripted, TurnComplete, tool
from navi_core.conversation import MediaPart, TextPart, ToolResult, ToolUse
from navi_core.media import Media
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store.sqlite import SQLiteStore


def _load_wire_streams() -> ModuleType:
    """The providers' wire-format builders, shared rather than copied."""
    if "wire_streams" in sys.modules:
        return sys.modules["wire_streams"]
    path = Path(__file__).parents[1] / "providers" / "wire_streams.py"
    spec = importlib.util.spec_from_file_location("wire_streams", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["wire_streams"] = module
    spec.loader.exec_module(module)
    return module


wire = _load_wire_streams()
SCREEN = encode(photo(2400, 1800), "PNG", compress_level=1)  # over max_side: re-encoded
ICON = encode(photo(64, 48), "PNG")  # within limits: sent as it is
GARBAGE = b"\x00\x01definitely not an image\xff" * 3


@tool
def snap() -> list[object]:
    """Take a screenshot."""
    return ["here is the screen", SCREEN, GARBAGE]


@tool
def icon() -> Media:
    """Fetch the application icon."""
    return Media(ICON, "image/png")


def _run(agent: Agent, prompt: str) -> TurnComplete:
    with agent.run(prompt) as stream:
        events = list(stream)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    return done


def _check_mixed_result(result: ToolResult) -> None:
    text, image, note = result.parts
    assert text == TextPart("here is the screen")
    assert isinstance(image, MediaPart) and image.media_type == "image/jpeg"
    assert decoded(base64.b64decode(image.data)).size == (1568, 1176)
    assert note == TextPart(
        f"[image dropped: not a PNG, JPEG, GIF or WebP image ({len(GARBAGE)} bytes)]"
    )
    assert not result.is_error


def test_mixed_return_value_in_a_scripted_turn() -> None:
    provider = Scripted([[ToolUse("t1", "snap", "{}")], "I see a screen."])
    agent = Agent(provider, tools=[snap])
    done = _run(agent, "what is on screen?")
    assert (done.response, done.iterations, done.tool_calls) == (
        "I see a screen.",
        2,
        1,
    )
    (result,) = agent.conversation.messages[2].tool_results
    _check_mixed_result(result)
    # The second request carried the same parts to the model.
    (sent,) = provider.requests[1][2].tool_results
    assert sent == result


def test_openai_request_carries_the_image_as_a_data_url(
    loopback: LoopbackServer,
) -> None:
    loopback.add(Reply.sse(wire.openai_body(tool_calls=[("call_1", "icon", ["{}"])])))
    loopback.add(Reply.sse(wire.openai_body(["An icon."])))
    with OpenAIChat("gpt-test", loopback.url + "/v1", "sk-test-0000") as provider:
        done = _run(Agent(provider, tools=[icon]), "show the icon")
    assert done.response == "An icon."
    messages = loopback.requests[1].json["messages"]
    tool_msg, image_msg = messages[2], messages[3]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_1"
    assert image_msg["role"] == "user"
    (image,) = [c for c in image_msg["content"] if c["type"] == "image_url"]
    prefix = "data:image/png;base64,"
    url = image["image_url"]["url"]
    assert url.startswith(prefix)
    assert base64.b64decode(url[len(prefix) :]) == ICON


def test_anthropic_request_carries_the_image_in_the_tool_result(
    loopback: LoopbackServer,
) -> None:
    first = wire.anthropic_body(
        [("tool", ("toolu_1", "snap", ["{}"]))], stop="tool_use"
    )
    loopback.add(Reply.sse(first), Reply.sse(wire.anthropic_body([("text", ["ok"])])))
    with Anthropic("claude-test", loopback.url, "sk-ant-test-0000") as provider:
        done = _run(Agent(provider, tools=[snap]), "what is on screen?")
    assert done.response == "ok"
    (result,) = loopback.requests[1].json["messages"][2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    text, image, note = result["content"]
    assert text == {"type": "text", "text": "here is the screen"}
    assert image["type"] == "image"
    assert image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/jpeg"
    raw = base64.b64decode(image["source"]["data"])
    assert decoded(raw).size == (1568, 1176)
    assert note["type"] == "text" and note["text"].startswith("[image dropped: ")


def test_sqlite_session_reloads_with_the_media_intact(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    provider = Scripted([[ToolUse("t1", "snap", "{}")], "done"])
    with SQLiteStore(path) as store:
        agent = Agent(provider, tools=[snap], store=store)
        _run(agent, "what is on screen?")
        session = agent.session_id
        live = agent.conversation.messages[2]
        agent.close()
    with SQLiteStore(path) as store:
        stored = store.load(session).messages
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2].content == live.content
    _check_mixed_result(stored[2].tool_results[0])


@pytest.mark.parametrize("value", [b"", b"\x89PNG\r\n\x1a\n"])
def test_tool_returning_only_bad_media_still_answers(value: bytes) -> None:
    @tool
    def broken() -> bytes:
        """Return a broken image."""
        return value

    provider = Scripted([[ToolUse("t1", "broken", "{}")], "noted"])
    agent = Agent(provider, tools=[broken])
    assert _run(agent, "go").response == "noted"
    (result,) = agent.conversation.messages[2].tool_results
    (note,) = result.parts
    assert isinstance(note, TextPart) and note.text.startswith("[image dropped: ")

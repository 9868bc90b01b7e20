"""Images in user messages: every provider sends them in its API's shape, in their
place among the text, and on every later request; a message no API or store could take
is refused before it joins the conversation."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from PIL import Image
from wire_streams import anthropic_body, openai_body, responses_body

from navi_core import (
    Agent,
    Anthropic,
    MediaPart,
    OpenAIChat,
    OpenAIResponses,
    Text,
    Thinking,
    TurnComplete,
    UserMessage,
)
from navi_core.media import Media
from navi_core.providers._http import HTTPProvider


def png(width: int = 8, height: int = 6) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


PNG = png()
B64 = base64.b64encode(PNG).decode()
URL = f"data:image/png;base64,{B64}"

Maker = Callable[[str], HTTPProvider]
PROVIDERS: dict[str, tuple[Maker, Callable[[], bytes]]] = {
    "openai-chat": (lambda url: OpenAIChat("m", url + "/v1"), lambda: openai_body(["red"])),
    "anthropic": (  # without cache marks, so the blocks compare as sent
        lambda url: Anthropic("m", url, cache=False),
        lambda: anthropic_body([("text", ["red"])]),
    ),
    "openai-responses": (
        lambda url: OpenAIResponses("m", url + "/v1"),
        lambda: responses_body(["red"]),
    ),
}  # fmt: skip
EXPECTED: dict[str, Any] = {
    "openai-chat": {
        "role": "user",
        "content": [
            {"type": "text", "text": "What colour?"},
            {"type": "image_url", "image_url": {"url": URL}},
            {"type": "text", "text": "One word."},
        ],
    },
    "anthropic": {
        "role": "user",
        "content": [
            {"type": "text", "text": "What colour?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": B64},
            },
            {"type": "text", "text": "One word."},
        ],
    },
    "openai-responses": {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What colour?"},
            {"type": "input_image", "image_url": URL},
            {"type": "input_text", "text": "One word."},
        ],
    },
}


def user_items(name: str, body: dict[str, Any]) -> list[Any]:
    items = body["input"] if name == "openai-responses" else body["messages"]
    return [m for m in items if m.get("role") == "user"]


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_each_provider_sends_the_image_in_place(
    loopback: LoopbackServer, name: str
) -> None:
    make, body = PROVIDERS[name]
    loopback.add(Reply.sse(body()), Reply.sse(body()))
    with make(loopback.url) as provider:
        agent = Agent(provider)
        with agent.run(["What colour?", Media(PNG), "One word."]) as stream:
            done = list(stream)[-1]
        assert isinstance(done, TurnComplete) and done.response == "red"
        with agent.run("And now?") as stream:
            list(stream)
    first = user_items(name, loopback.requests[0].json)
    assert first == [EXPECTED[name]]
    again = user_items(name, loopback.requests[1].json)
    assert again[0] == EXPECTED[name]  # the image stays in the conversation
    (part,) = [
        b for b in agent.conversation.messages[0].content if isinstance(b, MediaPart)
    ]
    assert part == MediaPart("image/png", B64)  # within the limits: byte for byte


def test_a_large_image_is_fitted_by_the_media_pipeline(
    loopback: LoopbackServer,
) -> None:
    loopback.add(Reply.sse(openai_body(["ok"])))
    with OpenAIChat("m", loopback.url + "/v1") as provider:
        agent = Agent(provider)
        with agent.run(["look", Media(png(3000, 1000))]) as stream:
            list(stream)
    (part,) = [
        b for b in agent.conversation.messages[0].content if isinstance(b, MediaPart)
    ]
    image = Image.open(io.BytesIO(base64.b64decode(part.data)))
    assert max(image.size) == 1568 and image.size[0] > 3 * image.size[1] - 5


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        (["look", b"not an image at all"], "image 1 of the prompt: image dropped"),
        (UserMessage([Text("x"), MediaPart("image/bmp", B64)]), "'image/bmp' is not"),
        (UserMessage([MediaPart("image/jpeg", B64)]), "data is image/png, not image/jpeg"),
        (UserMessage([MediaPart("image/png", "%%%notbase64")]), "not base64"),
        (UserMessage([Text("x"), Thinking("hmm", "sig")]), "block 1 of a user message is Thinking"),
        (UserMessage([]), "at least one block"),
    ],
)  # fmt: skip
def test_a_message_that_cannot_be_sent_is_refused_before_it_joins(
    loopback: LoopbackServer, prompt: Any, message: str
) -> None:
    loopback.add(Reply.sse(openai_body(["fine"])))
    with OpenAIChat("m", loopback.url + "/v1") as provider:
        agent = Agent(provider)
        with pytest.raises(ValueError, match=message):
            agent.run(prompt)
        assert agent.conversation.messages == []
        with agent.run("still works") as stream:  # nothing poisoned the session
            done = list(stream)[-1]
        assert isinstance(done, TurnComplete) and done.response == "fine"
    assert len(loopback.requests) == 1


def test_a_prompt_item_of_another_type_is_a_type_error() -> None:
    from navi_core.providers import Scripted

    agent = Agent(Scripted(["x"]))
    with pytest.raises(TypeError, match="prompt item 1 is int"):
        agent.run(["text", 42])


def test_a_user_image_counts_and_reads_as_an_image() -> None:
    from navi_core._turn.user_input import user_message
    from navi_core.compaction._transcript import render_transcript
    from navi_core.tokens import IMAGE_TOKENS, estimate_message_tokens

    message = user_message(["look:", Media(PNG)])
    with_image = estimate_message_tokens(message)
    without = estimate_message_tokens(user_message(["look:"]))
    assert with_image - without == IMAGE_TOKENS
    assert render_transcript([message]).splitlines()[1:] == [
        "look:",
        f"[image: image/png, {len(PNG)} bytes]",
    ]

"""A user message with images is kept losslessly by every store, across a reopen; one
that cannot be stored is refused before anything is written."""

from __future__ import annotations

import base64
import io

import pytest
from conftest import StoreFactory
from PIL import Image

from navi_core import Agent, MediaPart, Text, UserMessage
from navi_core.media import Media
from navi_core.providers import Scripted


def image(fmt: str, size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 120, 240)).save(out, fmt)
    return out.getvalue()


def test_images_round_trip_through_the_store(open_store: StoreFactory) -> None:
    gif, jpeg = image("GIF", (5, 4)), image("JPEG", (9, 7))
    agent = Agent(Scripted(["a blue square", "still blue"]), store=open_store())
    sid = agent.session_id
    with agent.run(
        ["Two pictures:", Media(gif), "and", Media(jpeg, "image/jpeg")]
    ) as s:
        list(s)
    with agent.run("again?") as s:
        list(s)
    sent = agent.conversation.messages[0]
    agent.close()

    reopened = Agent(Scripted(["third"]), store=open_store(), session=sid)
    loaded = reopened.conversation.messages[0]
    assert loaded.content == sent.content  # every block, in order, byte for byte
    assert [type(b) for b in loaded.content] == [Text, MediaPart, Text, MediaPart]
    parts = [b for b in loaded.content if isinstance(b, MediaPart)]
    assert [p.media_type for p in parts] == ["image/gif", "image/jpeg"]
    assert base64.b64decode(parts[0].data) == gif
    assert base64.b64decode(parts[1].data) == jpeg
    with reopened.run("and the first one?") as s:
        list(s)
    scripted = reopened.provider
    assert isinstance(scripted, Scripted)
    assert scripted.requests[0][0].content == sent.content  # sent again after reopen
    reopened.close()


def test_a_refused_message_writes_nothing(open_store: StoreFactory) -> None:
    agent = Agent(Scripted(["ok"]), store=open_store())
    sid = agent.session_id
    bad = UserMessage([Text("x"), MediaPart("image/png", "not base64!")])
    with pytest.raises(ValueError, match="not base64"):
        agent.run(bad)
    agent.close()
    again = Agent(Scripted(["ok"]), store=open_store(), session=sid)
    assert again.conversation.messages == []
    again.close()

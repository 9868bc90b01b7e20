"""The message codec: lossless round trips, a version field, clear refusals."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, strategies as st
from storekit import EVERY_BLOCK

from navi_core import codec
from navi_core.codec import CodecError
from navi_core.conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    RedactedThinking,
    System,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
    WireIdentity,
)

_text = st.text(max_size=40)
_int = st.integers(min_value=0, max_value=2**63 - 1)
_parts = st.one_of(st.builds(TextPart, _text), st.builds(MediaPart, _text, _text))
_blocks = st.one_of(
    st.builds(Text, _text),
    st.builds(Thinking, _text, st.none() | _text),
    st.builds(RedactedThinking, _text),
    st.builds(ToolUse, _text, _text, _text),
    st.builds(
        ToolResult, _text, st.lists(_parts, max_size=3).map(tuple), st.booleans()
    ),
    st.builds(System, _text, st.sampled_from(["append", "replace"])),
    st.builds(CompactionSummary, _text),
)
_messages = st.builds(
    Message,
    st.sampled_from(["system", "user", "assistant"]),
    st.lists(_blocks, max_size=5).map(tuple),
    st.none() | st.builds(Usage, _int, _int, _int, _int, _int),
    st.none() | _text,
    st.none()
    | st.builds(
        WireIdentity,
        _text,
        st.sampled_from(["https://api.x.com/v1", "http://h:1"]),
        _text,
    ),
)


def test_every_block_type_round_trips() -> None:
    assert codec.decode(codec.encode(EVERY_BLOCK)) == EVERY_BLOCK


@given(_messages)
def test_any_message_round_trips(message: Message) -> None:
    data = codec.encode(message)
    assert codec.decode(data) == message
    assert codec.decode(data.decode()) == message
    assert codec.from_obj(orjson.loads(data)) == message


def test_encoded_form_is_versioned_and_compact() -> None:
    obj = orjson.loads(codec.encode(Message("user", (Text("hi"),))))
    assert obj == {
        "v": codec.FORMAT_VERSION,
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
    }


def test_tool_arguments_stay_the_models_exact_text() -> None:
    raw = '{ "b":1, "a" : [1.0,2e3] }'
    obj = orjson.loads(codec.encode(Message("assistant", (ToolUse("c", "t", raw),))))
    assert obj["content"][0]["input"] == raw


def test_newer_format_is_refused_with_a_clear_message() -> None:
    obj = codec.to_obj(Message("user", (Text("hi"),)))
    obj["v"] = codec.FORMAT_VERSION + 1
    with pytest.raises(CodecError, match="newer than this navi_core reads"):
        codec.from_obj(obj)


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'{"role": "user", "content": []}', "format version"),
        (b'{"v": 1, "role": "robot", "content": []}', "invalid role"),
        (b'{"v": 1, "role": "user", "content": [{"type": "video"}]}', "unknown block"),
        (
            b'{"v": 1, "role": "user", "content": [{"type": "text"}]}',
            "'text' must be str",
        ),
        (
            b'{"v": 1, "role": "user", "content": [], "usage": {"input": true}}',
            "'input' must be int",
        ),
        (
            b'{"v":1,"role":"user","content":[{"type":"tool_result","tool_use_id":"c",'
            b'"parts":[{"type":"gif"}],"is_error":false}]}',
            "unknown tool-result part",
        ),
        (
            b'{"v":1,"role":"user","content":[{"type":"system","text":"x","mode":"x"}]}',
            "'mode'",
        ),
    ],
)
def test_malformed_input_names_the_problem(data: bytes, complaint: str) -> None:
    with pytest.raises(CodecError, match=complaint):
        codec.decode(data)


def test_unencodable_text_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="cannot encode user message"):
        codec.encode(Message("user", (Text("lone \ud800 surrogate"),)))


def test_unknown_block_object_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="cannot encode block type"):
        codec.encode(Message("user", ("just a str",)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("https://user:sk-secret@host/v1", "https://host/v1"),
        ("https://host/v1?api_key=sk-secret&version=2", "https://host/v1?version=2"),
        ("https://host/v1?X-Auth-Token=sk-secret", "https://host/v1"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ],
)
def test_stored_base_url_carries_no_credentials(url: str, public: str) -> None:
    message = Message("assistant", (Text("x"),), wire=WireIdentity("s", url, "m"))
    data = codec.encode(message)
    assert b"sk-secret" not in data
    assert codec.decode(data).wire == WireIdentity("s", public, "m")
    row = codec.stored_row(message)
    assert row.base_url == public
    assert (row.role, row.api_style, row.model) == ("assistant", "s", "m")

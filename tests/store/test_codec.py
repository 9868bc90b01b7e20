"""The message codec: lossless round trips, a version field, clear refusals."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest
from hypothesis import given, strategies as st
from storekit import EVERY_BLOCK, child_env

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
    scrub_text,
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


def test_lone_surrogates_are_stored_as_replacement_characters() -> None:
    # os.listdir gives names like this for bytes that are not UTF-8
    name = "report-\udce9t\udcc3.txt"
    message = Message(
        "user",
        (
            Text(f"read {name}"),
            ToolResult("c1", (TextPart(name), TextPart("ok \ud83d\ude00")), True),
        ),
        wire=WireIdentity("s", "http://h:1", "model-\ud800"),
    )
    decoded = codec.decode(codec.encode(message))
    assert decoded.content == (
        Text("read report-\ufffdt\ufffd.txt"),
        ToolResult(
            "c1",
            (TextPart("report-\ufffdt\ufffd.txt"), TextPart("ok \U0001f600")),
            True,
        ),
    )
    assert decoded.wire == WireIdentity("s", "http://h:1", "model-\ufffd")
    row = codec.stored_row(message)
    assert codec.decode(row.body) == decoded
    assert row.model == "model-\ufffd"  # the columns hold what the body holds


def test_valid_text_is_returned_unchanged() -> None:
    for text in ("plain", "héllo \x00 \u2028 😀", ""):
        assert codec.valid_text(text) is text
    assert codec.valid_text("a\udc80b\ud800") == "a\ufffdb\ufffd"


def test_an_integer_beyond_64_bits_is_a_codec_error() -> None:
    message = Message("assistant", (Text("lone \ud800"),), Usage(2**64, 0, 0, 0, 0))
    with pytest.raises(CodecError, match="cannot encode assistant message"):
        codec.encode(message)


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
        # unparsable (an unclosed IPv6 host): cut down, never kept as it was
        ("http://user:sk-secret@[::1/v1", "http://[::1/v1"),
        ("http://user:sk-secret@[::1/v1?token=sk-secret", "http://[::1/v1"),
        # a password holding "#", "/" or "?" splits the URL before its "@"
        ("http://user:sk#secret@[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("http://user:12/sk-secret@host/v1", "http://host/v1"),
        ("http://user:12?sk-secret@host/v1", "http://host/v1"),
        ("https://host/v1#access_token=sk-secret", "https://host/v1"),
        ("https://host/v1;key=sk-secret/chat", "https://host/v1/chat"),
        ("https://host/v1?version=2;api_key=sk-secret", "https://host/v1?version=2"),
        ("https://host:99999/v1?key=sk-secret", "https://host:99999/v1"),
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


def test_public_wire_is_cached_per_identity() -> None:
    url = "https://me:sk-secret@host/v1"
    first = codec.public_wire(WireIdentity("s", url, "m"))
    assert first == WireIdentity("s", "https://host/v1", "m")
    assert codec.public_wire(WireIdentity("s", url, "m")) is first


def test_stored_row_makes_the_wire_identity_public_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[WireIdentity] = []
    real = codec.public_wire

    def counting(wire: WireIdentity) -> WireIdentity:
        calls.append(wire)
        return real(wire)

    monkeypatch.setattr(codec, "public_wire", counting)
    wire = WireIdentity("s", "https://me:sk-secret@host/v1", "m")
    row = codec.stored_row(Message("assistant", (Text("x"),), wire=wire))
    assert calls == [wire]
    assert row.base_url == "https://host/v1"
    assert b"sk-secret" not in row.body


def test_codec_imports_no_http_client() -> None:
    """Providers build their wire identity with it: it must stay cheap to import."""
    code = "import sys, navi_core.codec; print(sorted({'httpx', 'psycopg'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "[]\n"


def test_scrub_text_keeps_valid_messages_and_blocks_as_they_are() -> None:
    image = MediaPart("image/png", "AAAA")
    valid = Message(
        "user",
        (
            Text("héllo"),
            ToolResult("c1", (TextPart("ok"), image)),
            System("rules", "replace"),
            CompactionSummary("sum"),
        ),
    )
    assert scrub_text(valid) is valid
    broken = Message(
        "user",
        (
            Text("fine"),
            ToolResult("c1", (TextPart("a\udc80"), image, TextPart("ok")), True),
            System("r\ud800", "replace"),
            CompactionSummary("s\udc80"),
        ),
    )
    clean = scrub_text(broken)
    assert clean.content == (
        Text("fine"),
        ToolResult("c1", (TextPart("a\ufffd"), image, TextPart("ok")), True),
        System("r\ufffd", "replace"),
        CompactionSummary("s\ufffd"),
    )
    assert clean.content[0] is broken.content[0]  # a valid block is not copied
    assert clean.content[1].parts[1] is image


def test_an_estimated_usage_is_stored_as_estimated_and_old_rows_read_as_reported() -> (
    None
):
    message = Message("assistant", (Text("hi"),), Usage(12, 3, estimated=True))
    obj = codec.to_obj(message)
    assert obj["usage"]["estimated"] is True
    assert codec.from_obj(obj).usage == Usage(12, 3, estimated=True)
    reported = codec.to_obj(Message("assistant", (Text("hi"),), Usage(12, 3)))
    assert "estimated" not in reported["usage"]  # rows as older versions wrote them
    assert codec.from_obj(reported).usage == Usage(12, 3)

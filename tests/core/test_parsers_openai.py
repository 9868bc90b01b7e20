"""OpenAIChatParser: recorded chat-completions streams and each chunk rule, both twins."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from chunking import DATA, chunkings, feed_all, run

from navi_core._deltas import (
    DONE,
    ERROR,
    FINISH,
    MODEL,
    TEXT,
    THINKING,
    TOOL_ARGS,
    TOOL_START,
    USAGE,
)
from navi_core.errors import MalformedStream


def parse(core: ModuleType, raw: bytes) -> list[tuple[Any, ...]]:
    """Parse under every chunking; all must agree."""
    return feed_all(core.OpenAIChatParser, raw)


def sse(*payloads: Any) -> bytes:
    return b"".join(
        b"data: " + (p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n\n"
        for p in payloads
    )


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> Any:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "model": "m", "choices": [choice], **extra}


def text_of(deltas: list[tuple[Any, ...]], kind: int = TEXT) -> str:
    return "".join(d[1] for d in deltas if d[0] == kind)


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


@pytest.mark.parametrize(
    ("name", "text", "finish", "usage"),
    [
        (
            "openai/text_with_usage.sse",
            "I'm unable to provide real-time weather updates. To get the current "
            "weather in San Francisco, I recommend checking a reliable weather "
            "website or a weather app.",
            "stop",
            (USAGE, 14, 30, 0, 0, 0),
        ),
        ("openai/finish_length.sse", '{"', "length", (USAGE, 79, 1, 0, 0, 0)),
        (  # the refusal field's pieces, then a plain "stop": a refusal
            "openai/refusal.sse",
            "I'm sorry, I can't assist with that request.",
            "refusal",
            (USAGE, 79, 11, 0, 0, 0),
        ),
        (
            "openai/n3_multi_choice.sse",
            '{"city":"San Francisco","temperature":65,"units":"f"}',
            "stop",
            (USAGE, 79, 42, 0, 0, 0),
        ),
        (
            "synthetic/openai_crlf_comments.sse",
            "Hello world",
            "stop",
            (USAGE, 5, 2, 0, 0, 0),
        ),
    ],
)
def test_recorded_text_streams(
    core: ModuleType, name: str, text: str, finish: str, usage: tuple[int, ...]
) -> None:
    deltas = parse(core, fixture(name))
    assert deltas[0][0] == MODEL
    assert text_of(deltas) == text
    assert all(d[1] for d in deltas if d[0] == TEXT)
    assert deltas[-3:] == [(FINISH, finish), usage, (DONE,)]
    assert {d[0] for d in deltas} == {MODEL, TEXT, FINISH, USAGE, DONE}


def test_model_is_reported_once(core: ModuleType) -> None:
    deltas = parse(core, fixture("openai/text_with_usage.sse"))
    assert [d for d in deltas if d[0] == MODEL] == [(MODEL, "gpt-4o-2024-08-06")]


def test_single_tool_call(core: ModuleType) -> None:
    deltas = parse(core, fixture("openai/tool_call_single.sse"))
    assert deltas[:3] == [
        (MODEL, "gpt-4o-2024-08-06"),
        (TOOL_START, 0, "call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather"),
        (TOOL_ARGS, 0, '{"'),
    ]
    args = "".join(d[2] for d in deltas if d[0] == TOOL_ARGS)
    assert json.loads(args) == {"city": "New York City"}
    assert deltas[-3:] == [(FINISH, "tool_calls"), (USAGE, 44, 16, 0, 0, 0), (DONE,)]


def test_parallel_tool_calls(core: ModuleType) -> None:
    deltas = parse(core, fixture("openai/tool_calls_parallel.sse"))
    starts = [d for d in deltas if d[0] == TOOL_START]
    assert starts == [
        (TOOL_START, 0, "call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs"),
        (TOOL_START, 1, "call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price"),
    ]
    args = [
        "".join(d[2] for d in deltas if d[0] == TOOL_ARGS and d[1] == i) for i in (0, 1)
    ]
    assert json.loads(args[0]) == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert json.loads(args[1]) == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert deltas.index(starts[1]) > max(
        i for i, d in enumerate(deltas) if d[0] == TOOL_ARGS and d[1] == 0
    )
    assert not [d for d in deltas if d[0] == TEXT]


def test_unicode_line_separators_stay_in_text(core: ModuleType) -> None:
    deltas = parse(core, fixture("synthetic/openai_unicode_line_separators.sse"))
    assert text_of(deltas) == " culpa \u2028 next \u2029 paraизвестни 😀"  # noqa: RUF001
    assert deltas[-2:] == [(FINISH, "stop"), (DONE,)]


def test_framing_corner_cases(core: ModuleType) -> None:
    deltas = parse(core, fixture("synthetic/sse_framing_corner_cases.sse"))
    assert deltas == [(TEXT, "joined"), (TEXT, " no-space"), (FINISH, "stop"), (DONE,)]


def test_truncated_stream_keeps_its_last_event(core: ModuleType) -> None:
    deltas = parse(core, fixture("synthetic/openai_truncated_no_done.sse"))
    assert deltas == [
        (MODEL, "synthetic/model"),
        (TEXT, "This stream is trunc"),
        (TEXT, "ated"),
    ]


USAGE_CHUNK = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


@pytest.mark.parametrize("usage", [True, False])
def test_a_body_ending_cleanly_after_a_finish_reason_is_done(
    core: ModuleType, usage: bool
) -> None:
    """Some servers end the body after the finish reason (and usage), no ``[DONE]``:
    the model ended its answer, so the stream is complete."""
    raw = sse(chunk({"content": "hi"}, "stop"), *([USAGE_CHUNK] if usage else []))
    assert parse(core, raw) == [
        (MODEL, "m"),
        (TEXT, "hi"),
        (FINISH, "stop"),
        *([(USAGE, 3, 1, 0, 0, 0)] if usage else []),
        (DONE,),
    ]
    assert parse(core, raw + b": keep-alive\n\n")[-1] == (DONE,)


@pytest.mark.parametrize(
    "tail",
    [
        b"",  # no finish reason came
        b"data: " + json.dumps(USAGE_CHUNK).encode() + b"\n",  # no blank line after
        b"data: " + json.dumps(USAGE_CHUNK).encode(),  # the line unfinished
        b": keep-al",  # a comment cut short
    ],
)
def test_a_body_ending_mid_event_or_with_no_finish_reason_is_not_done(
    core: ModuleType, tail: bytes
) -> None:
    raw = sse(chunk({"content": "hi"}, "stop" if tail else None)) + tail
    assert (DONE,) not in parse(core, raw)


def test_azure_prompt_filter_stream(core: ModuleType) -> None:
    lines = fixture("vercel-ai-jsonl/azure_openai_prompt_filter_first_chunk.jsonl")
    raw = sse(*[line for line in lines.splitlines() if line], b"[DONE]")
    deltas = parse(core, raw)
    assert deltas == [
        (MODEL, "gpt-5-nano-2025-08-07"),
        (TEXT, "Capital"),
        (TEXT, " of"),
        (TEXT, " Denmark"),
        (TEXT, "."),
        (FINISH, "stop"),
        (USAGE, 15, 78, 0, 0, 64),
        (DONE,),
    ]


def test_reasoning_fields(core: ModuleType) -> None:
    raw = sse(
        chunk({"reasoning_content": "vllm "}),
        chunk({"reasoning": "ollama"}),
        chunk({"reasoning_content": None, "reasoning": "or"}),
        chunk({"reasoning_content": "", "content": "answer"}),
    )
    assert parse(core, raw) == [
        (MODEL, "m"),
        (THINKING, "vllm "),
        (THINKING, "ollama"),
        (THINKING, "or"),
        (TEXT, "answer"),
    ]


def test_refusal_and_null_content(core: ModuleType) -> None:
    raw = sse(chunk({"content": None, "refusal": "no"}), chunk({"content": ""}))
    assert parse(core, raw) == [(MODEL, "m"), (TEXT, "no")]


@pytest.mark.parametrize(
    ("deltas", "finish", "expected"),
    [
        ([{"refusal": "I can't"}, {"refusal": " help."}], "stop", "refusal"),
        ([{"content": "Sure", "refusal": "no"}], "stop", "refusal"),  # one chunk
        ([{"content": "Hi", "refusal": None}, {"refusal": ""}], "stop", "stop"),
        ([{"refusal": "no"}], "length", "length"),
        ([{"refusal": "no"}], "content_filter", "content_filter"),
        ([{"refusal": "no"}], "tool_calls", "tool_calls"),
        (  # a tool call in the response: what the finish says, not a refusal
            [{"refusal": "no"}, {"tool_calls": [{"index": 0, "id": "c"}]}],
            "stop",
            "stop",
        ),
    ],
)
def test_a_refusal_piece_makes_a_plain_stop_a_refusal(
    core: ModuleType, deltas: list[dict[str, Any]], finish: str, expected: str
) -> None:
    """OpenAI refuses through the ``refusal`` field and ends with "stop"; an empty or
    null field (the first chunk of every gpt-4o stream) refuses nothing."""
    raw = sse(*(chunk(d) for d in deltas), chunk({}, finish), b"[DONE]")
    got = parse(core, raw)
    assert got[-2:] == [(FINISH, expected), (DONE,)]


def test_a_refusal_in_another_choice_refuses_nothing(core: ModuleType) -> None:
    other = {"index": 1, "delta": {"refusal": "no"}, "finish_reason": None}
    raw = sse({"choices": [other]}, chunk({"content": "Hi"}, "stop"))
    assert parse(core, raw) == [(MODEL, "m"), (TEXT, "Hi"), (FINISH, "stop"), (DONE,)]


def test_whole_tool_call_in_one_chunk(core: ModuleType) -> None:
    call = {"id": "c", "function": {"name": "f", "arguments": '{"a":1}'}}
    raw = sse(chunk({"tool_calls": [{"index": 0, **call}]}, "tool_calls"))
    assert parse(core, raw) == [
        (MODEL, "m"),
        (TOOL_START, 0, "c", "f"),
        (TOOL_ARGS, 0, '{"a":1}'),
        (FINISH, "tool_calls"),
        (DONE,),
    ]


def test_tool_call_without_id_name_or_index(core: ModuleType) -> None:
    raw = sse(
        chunk({"tool_calls": [{"function": {"arguments": "{"}}, {"function": {}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "}"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": {"x": [1]}}}]}),
    )
    assert parse(core, raw)[1:] == [
        (TOOL_START, 0, "", ""),
        (TOOL_ARGS, 0, "{"),
        (TOOL_START, 1, "", ""),
        (TOOL_ARGS, 1, "}"),
        (TOOL_ARGS, 0, '{"x":[1]}'),
    ]


def ollama_call(call_id: str, path: Any, **index: Any) -> dict[str, Any]:
    """A whole call as Ollama sends one, in a chunk of its own; ``path`` an object
    keeps its arguments an object (builds before 0.20)."""
    args = path if isinstance(path, dict) else json.dumps({"path": path})
    function = {"name": "read_file", "arguments": args}
    return {**index, "id": call_id, "type": "function", "function": function}


@pytest.mark.parametrize(
    "index",
    [{"index": 0}, {}],  # Ollama 0.20 (ollama#15457); builds with no index (#7881)
)
def test_ollama_calls_sharing_an_index_stay_apart(
    core: ModuleType, index: dict[str, Any]
) -> None:
    raw = sse(
        chunk({"role": "assistant", "content": "", "tool_calls": [ollama_call("call_a1", "a", **index)]}),
        chunk({"role": "assistant", "content": "", "tool_calls": [ollama_call("call_b2", "b", **index)]}),
        chunk({"role": "assistant", "content": ""}, "tool_calls"),
        b"[DONE]",
    )  # fmt: skip
    assert parse(core, raw)[1:] == [
        (TOOL_START, 0, "call_a1", "read_file"),
        (TOOL_ARGS, 0, '{"path": "a"}'),
        (TOOL_START, 1, "call_b2", "read_file"),
        (TOOL_ARGS, 1, '{"path": "b"}'),
        (FINISH, "tool_calls"),
        (DONE,),
    ]


def test_whole_calls_with_no_id_or_index_stay_apart(core: ModuleType) -> None:
    raw = sse(
        chunk({"tool_calls": [{"function": {"name": "f", "arguments": {"p": "a"}}}]}),
        chunk({"tool_calls": [{"function": {"name": "f", "arguments": {"p": "b"}}}]}),
        chunk({"tool_calls": [{"function": {"name": "g", "arguments": '{"p":'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": ' "c"}'}}]}),
        chunk({"tool_calls": [{"function": {"name": "h", "arguments": "{}"}}]}),
    )
    assert parse(core, raw)[1:] == [
        (TOOL_START, 0, "", "f"),
        (TOOL_ARGS, 0, '{"p":"a"}'),
        (TOOL_START, 1, "", "f"),
        (TOOL_ARGS, 1, '{"p":"b"}'),
        (TOOL_START, 2, "", "g"),
        (TOOL_ARGS, 2, '{"p":'),
        (TOOL_ARGS, 2, ' "c"}'),  # read by the compiled fast path too: kept whole
        (TOOL_START, 3, "", "h"),
        (TOOL_ARGS, 3, "{}"),
    ]


def test_pieces_go_to_the_newest_call_at_their_index(core: ModuleType) -> None:
    """A later call at another index takes the next free ordinal, not its index."""

    def piece(index: int, args: str, **call: Any) -> Any:
        function = {"arguments": args, **({"name": call.pop("name")} if call else {})}
        return chunk({"tool_calls": [{"index": index, **call, "function": function}]})

    raw = sse(
        piece(0, "", id="a", name="f"),
        piece(0, "{}"),
        piece(0, "", id="b", name="g"),
        piece(0, '{"x":'),
        piece(0, "1}"),
        piece(1, "[", id="c", name="h"),
        piece(1, "]"),
        piece(0, ""),
    )
    assert parse(core, raw)[1:] == [
        (TOOL_START, 0, "a", "f"),
        (TOOL_ARGS, 0, "{}"),
        (TOOL_START, 1, "b", "g"),
        (TOOL_ARGS, 1, '{"x":'),
        (TOOL_ARGS, 1, "1}"),
        (TOOL_START, 2, "c", "h"),
        (TOOL_ARGS, 2, "["),
        (TOOL_ARGS, 2, "]"),
    ]


@pytest.mark.parametrize(
    "pieces",
    [
        # OpenAI: id and name in the first piece only
        [{"id": "c", "function": {"name": "f", "arguments": ""}},
         {"function": {"arguments": '{"a":'}}, {"function": {"arguments": "1}"}}],
        # another id in the argument pieces, no name (Poolside, poolsideai/pool#9)
        [{"id": "c", "function": {"name": "f", "arguments": ""}},
         {"id": "d", "function": {"arguments": '{"a":'}},
         {"id": "d", "function": {"arguments": "1}"}}],
        # the same id and name again in every piece (vLLM's last piece, LiteLLM)
        [{"id": "c", "function": {"name": "f", "arguments": '{"a":'}},
         {"id": "c", "function": {"name": "f", "arguments": "1}"}}],
        # the name in every piece, the id in the first only or nowhere (NVIDIA NIM)
        [{"id": "c", "function": {"name": "f", "arguments": "{}"}},
         {"function": {"name": "f", "arguments": ""}}],
        [{"function": {"name": "f", "arguments": '{"a":'}},
         {"function": {"name": "f", "arguments": "1}"}},
         {"function": {"name": "f", "arguments": ""}}],
    ],
)  # fmt: skip
def test_the_pieces_of_one_call_stay_one_call(
    core: ModuleType, pieces: list[dict[str, Any]]
) -> None:
    raw = sse(*(chunk({"tool_calls": [{"index": 0, **p}]}) for p in pieces))
    deltas = parse(core, raw)[1:]
    assert deltas[0] == (TOOL_START, 0, pieces[0].get("id", ""), "f")
    assert {d[:2] for d in deltas[1:]} == {(TOOL_ARGS, 0)}
    assert json.loads("".join(d[2] for d in deltas[1:])) in ({}, {"a": 1})


def test_model_change_and_empty_model(core: ModuleType) -> None:
    raw = sse(
        {"model": "", "choices": []},
        {"model": "a", "choices": []},
        {"model": "a", "choices": []},
        {"model": "b", "choices": []},
        {"choices": []},
    )
    assert parse(core, raw) == [(MODEL, "a"), (MODEL, "b")]


def test_other_choices_are_ignored(core: ModuleType) -> None:
    raw = sse(
        {
            "choices": [
                {"index": 1, "delta": {"content": "one"}, "finish_reason": "stop"}
            ]
        },
        {"choices": [{"delta": {"content": "zero"}}]},
        {
            "choices": [
                {"index": 2, "delta": {"content": "x"}},
                {"index": 0, "delta": {"content": "!"}},
            ]
        },
    )
    assert parse(core, raw) == [(TEXT, "zero"), (TEXT, "!")]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 10, "completion_tokens": 3}, (USAGE, 10, 3, 0, 0, 0)),
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": 50,
                "prompt_tokens_details": {"cached_tokens": 40},
                "completion_tokens_details": {"reasoning_tokens": 20},
            },
            (USAGE, 60, 50, 40, 0, 20),
        ),
        (
            {
                "prompt_tokens": 7,
                "completion_tokens": None,
                "prompt_tokens_details": None,
                "completion_tokens_details": {"reasoning_tokens": None},
            },
            (USAGE, 7, 0, 0, 0, 0),
        ),
        ({}, (USAGE, 0, 0, 0, 0, 0)),
    ],
)
def test_usage(
    core: ModuleType, usage: dict[str, Any], expected: tuple[int, ...]
) -> None:
    assert parse(core, sse({"choices": [], "usage": usage})) == [expected]


def test_null_usage_is_skipped(core: ModuleType) -> None:
    assert parse(core, sse({"choices": [], "usage": None})) == []


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"type": "server_error", "message": "boom"}, (ERROR, "server_error", "boom")),
        ({"code": "rate_limit", "message": "slow"}, (ERROR, "rate_limit", "slow")),
        ({"code": 429, "message": "slow"}, (ERROR, "429", "slow")),
        (  # a status code is the kind, beside a class name as type (vLLM)
            {"type": "BadRequestError", "code": 400, "message": "no"},
            (ERROR, "400", "no"),
        ),
        (
            {"type": "server_error", "code": 7, "message": "x"},
            (ERROR, "server_error", "x"),
        ),
        ({"message": "bare"}, (ERROR, "error", "bare")),
        ("plain text", (ERROR, "error", "plain text")),
    ],
)
def test_error_object(core: ModuleType, error: Any, expected: tuple[Any, ...]) -> None:
    assert parse(core, sse(chunk({"content": "hi"}), {"error": error})) == [
        (MODEL, "m"),
        (TEXT, "hi"),
        expected,
    ]


@pytest.mark.parametrize("kind", ['"error"', '"\\u0065rror"'])
def test_a_flat_error_object_is_an_error(core: ModuleType, kind: str) -> None:
    """vLLM before 0.10 sends its error's fields at the top of the chunk."""
    flat = (
        f'{{"object":{kind},"message":"bad input","type":"BadRequestError",'
        '"param":null,"code":400}'
    ).encode()
    assert parse(core, sse(chunk({"content": "hi"}), flat)) == [
        (MODEL, "m"),
        (TEXT, "hi"),
        (ERROR, "400", "bad input"),
    ]


def test_a_chunk_s_own_object_field_is_not_an_error(core: ModuleType) -> None:
    raw = sse({"object": "chat.completion.chunk", **chunk({"content": "hi"})})
    assert parse(core, raw) == [(MODEL, "m"), (TEXT, "hi")]


def test_anything_after_done_is_ignored(core: ModuleType) -> None:
    raw = sse(chunk({"content": "a"}), b"[DONE]", b"{not json", chunk({"content": "b"}))
    assert parse(core, raw) == [(MODEL, "m"), (TEXT, "a"), (DONE,)]
    parser = core.OpenAIChatParser()
    assert parser.feed(raw) == [(MODEL, "m"), (TEXT, "a"), (DONE,)]
    assert parser.feed(b"data: more\n\n") == []
    assert parser.close() == []


def test_unknown_fields_and_events_are_ignored(core: ModuleType) -> None:
    raw = b"event: delta\nid: 4\n" + sse(
        chunk({"content": "a", "audio": {"x": 1}}, x=[1])
    )
    assert parse(core, raw) == [(MODEL, "m"), (TEXT, "a")]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'{"choices": [', "invalid JSON in SSE event at byte 14: '{\"choices\": ['"),
        (b"[1, 2]", "SSE event at byte 14 is not a JSON object: '[1, 2]'"),
        (b"", "invalid JSON in SSE event at byte 14: ''"),
        (
            b'{"choices": [{"index": 0, "delta": {"content": 5}}]}',
            "unexpected JSON structure in SSE event at byte 14: "
            '\'{"choices": [{"index": 0, "delta": {"content": 5}}]}\'',
        ),
        (
            b'{"choices": "abc"}',
            'unexpected JSON structure in SSE event at byte 14: \'{"choices": "abc"}\'',
        ),
    ],
)
def test_malformed_payload(core: ModuleType, payload: bytes, message: str) -> None:
    raw = b": ping\n\nid: 1\ndata: " + payload + b"\n\n"
    for chunks in chunkings(raw):
        with pytest.raises(MalformedStream) as info:
            run(core.OpenAIChatParser(), chunks)
        assert info.value.offset == 14
        assert str(info.value) == message


def test_malformed_excerpt_is_short(core: ModuleType) -> None:
    raw = b'data: {"content": "' + b"s" * 10_000 + b"\n\n"
    with pytest.raises(MalformedStream) as info:
        core.OpenAIChatParser().feed(raw)
    assert info.value.offset == 0
    assert len(str(info.value)) < 140


def test_invalid_utf8_in_json_is_replaced(core: ModuleType) -> None:
    raw = b'data: {"choices":[{"delta":{"content":"a\xffb"}}]}\n\n'
    assert parse(core, raw) == [(TEXT, "a\ufffdb")]


def test_trailing_spaces_after_json(core: ModuleType) -> None:
    assert parse(core, sse(b'{"choices":[{"delta":{"content":"x"}}]}    ')) == [
        (TEXT, "x")
    ]


def test_good_deltas_before_an_error_are_returned_first(core: ModuleType) -> None:
    good = sse(chunk({"content": "kept"}))
    parser = core.OpenAIChatParser()
    assert parser.feed(good + b"data: oops\n\n") == [(MODEL, "m"), (TEXT, "kept")]
    with pytest.raises(MalformedStream) as info:
        parser.feed(b"")
    assert info.value.offset == len(good)
    with pytest.raises(MalformedStream) as again:
        parser.close()
    assert again.value is info.value


def test_oversize_event(core: ModuleType) -> None:
    parser = core.OpenAIChatParser(max_event_bytes=32)
    with pytest.raises(MalformedStream) as info:
        parser.feed(sse(chunk({"content": "x" * 40})))
    assert info.value.offset == 0


def test_feed_after_close(core: ModuleType) -> None:
    parser = core.OpenAIChatParser()
    assert parser.close() == []
    with pytest.raises(ValueError, match="after close"):
        parser.feed(b"data: [DONE]\n\n")


@pytest.mark.parametrize(
    "payload",
    [
        b'{"m\\u006fdel":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}',
        b'{"model":"\\u006d","choices":[{"index":0,"delta":{"content":"hi"}}]}',
        b'{"model":"m","ch\\u006fices":[{"index":0,"delta":{"content":"hi"}}]}',
        b'{"model":"m","choices":[{"ind\\u0065x":0,"delta":{"content":"hi"}}]}',
        b'{"model":"m","choices":[{"index":0,"d\\u0065lta":{"content":"hi"}}]}',
        b'{"model":"m","choices":[{"index":0,"delta":{"c\\u006fntent":"hi"}}]}',
        b'{"model":"m","choices":[{"index":0,"delta":{"content":"\\u0068i"}}]}',
        b'{"model":"m","choices":[{"index":0,"delta":{"r\\u006fle":"x","content":"hi"}}]}',
        b'{"model":"m","choices":[{"index":0,"delta":{"role":"\\u0061","content":"hi"}}]}',
    ],
)  # fmt: skip
def test_escaped_keys_and_values_mean_what_they_decode_to(
    core: ModuleType, payload: bytes
) -> None:
    assert parse(core, sse(payload)) == [(MODEL, "m"), (TEXT, "hi")]


def test_escaped_tool_calls_and_finish_reason(core: ModuleType) -> None:
    raw = sse(
        b'{"choices":[{"index":0,"delta":{"tool_c\\u0061lls":[{"index":0,'
        b'"\\u0069d":"c","function":{"n\\u0061me":"f\\u0031",'
        b'"\\u0061rguments":"{\\"a\\u0022:1}"}}]}}]}',
        b'{"choices":[{"index":0,"delta":{},"finish_r\\u0065ason":"tool_c\\u0061lls"}]}',
    )
    assert parse(core, raw) == [
        (TOOL_START, 0, "c", "f1"),
        (TOOL_ARGS, 0, '{"a":1}'),
        (FINISH, "tool_calls"),
        (DONE,),
    ]


def test_an_escaped_spelling_of_the_same_model_is_not_a_new_model(
    core: ModuleType,
) -> None:
    raw = sse(
        chunk({"content": "a"}, model="gpt-4o"),
        b'{"model":"gpt\\u002d4o","choices":[{"index":0,"delta":{"content":"b"}}]}',
        chunk({"content": "c"}, model="gpt-4o"),
        b'{"model":"gpt\\u002d4o","choices":[{"index":0,"delta":{"content":"d"}}]}',
        b'{"model":"o\\u0033","choices":[{"index":0,"delta":{"content":"e"}}]}',
        chunk({"content": "f"}, model="gpt-4o"),
    )
    assert parse(core, raw) == [
        (MODEL, "gpt-4o"),
        (TEXT, "a"),
        (TEXT, "b"),
        (TEXT, "c"),
        (TEXT, "d"),
        (MODEL, "o3"),
        (TEXT, "e"),
        (MODEL, "gpt-4o"),
        (TEXT, "f"),
    ]


def test_an_error_excerpt_is_the_first_80_bytes(core: ModuleType) -> None:
    """The excerpt is cut in bytes: 80 bytes of two-byte characters are 40 of them."""
    with pytest.raises(MalformedStream) as info:
        core.OpenAIChatParser().feed(b"data: " + "é".encode() * 100 + b"\n\n")
    assert str(info.value) == f"invalid JSON in SSE event at byte 0: {'é' * 40!r}"

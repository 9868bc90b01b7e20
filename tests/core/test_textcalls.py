"""Tool calls written as text: the cases of vLLM's and llama.cpp's tool-call parser
tests (their inputs and the calls they expect), recovered by both cores at every chunk
boundary, and the two cores agreeing delta for delta."""

from __future__ import annotations

import itertools
import json
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from navi_core._deltas import DONE, FINISH, TEXT, THINKING, TOOL_ARGS, TOOL_START, USAGE

TOOLS: dict[str, dict[str, str]] = {
    name: {}
    for name in (
        "get_weather", "get_current_temperature", "final_answer", "search",
        "get_db_config", "do_thing", "getOpenIncidentsTool", "searchTool",
        "complexTool", "simpleTool", "parserTool", "add", "add_this_and_that",
        "multiply_numbers", "special_function", "python",
    )
}  # fmt: skip
TOOLS["get_current_weather"] = {"city": "string", "state": "string", "unit": "string"}
TOOLS["calculate_area"] = {"shape": "string", "dimensions": "object", "precision": "integer"}  # fmt: skip
TOOLS["test_types"] = {"int_param": "integer", "float_param": "number", "bool_param": "boolean", "str_param": "string", "obj_param": "object"}  # fmt: skip

Call = tuple[str, Any]

#: (id, mode, model output, expected calls (name, decoded arguments), expected text)
CASES: list[tuple[str, str, str, list[Call], str]] = [
    # vLLM tests/tool_parsers/test_hermes_tool_parser.py
    ("hermes-plain", "hermes",
     "This is some prior text that has nothing to do with tool calling.", [],
     "This is some prior text that has nothing to do with tool calling."),
    ("hermes-bool", "hermes",
     '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>',
     [("final_answer", {"trigger": True})], ""),
    ("hermes-temperature", "hermes",
     '<tool_call>{"name": "get_current_temperature","arguments": {"location":'
     '"San Francisco, California, United States", "unit": "celsius"}}</tool_call>',
     [("get_current_temperature",
       {"location": "San Francisco, California, United States", "unit": "celsius"})],
     ""),
    ("hermes-content-first", "hermes",
     'Sure, let me check the weather.<tool_call>{"name": "get_weather", '
     '"arguments": {"city": "NYC"}}</tool_call>',
     [("get_weather", {"city": "NYC"})], "Sure, let me check the weather."),
    ("hermes-two", "hermes",
     '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
     '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>',
     [("search", {"q": "cats"}), ("search", {"q": "dogs"})], ""),
    ("hermes-until-eos", "hermes",
     '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}',
     [("final_answer", {"trigger": True})], ""),
    ("hermes-serialized-arguments", "hermes",
     '<tool_call>\n{"name": "get_db_config", '
     '"arguments": "{\\"param\\": \\"max_connections\\"}"}\n</tool_call>',
     [("get_db_config", {"param": "max_connections"})], ""),
    ("hermes-bare-string-arguments", "hermes",
     '<tool_call>\n{"name": "do_thing", "arguments": "hello"}\n</tool_call>',
     [("do_thing", "hello")], ""),
    # llama.cpp tests/test-chat.cpp: Hermes 2 Pro / Qwen 2.5 with text before the call
    ("hermes-after-thinking", "hermes",
     '<think>I should call special_function</think>\n<tool_call>\n{"name": '
     '"special_function", "arguments": {"arg1": 1}}\n</tool_call>',
     [("special_function", {"arg1": 1})], ""),
    ("hermes-newline-separated", "auto",
     '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>'
     '\n<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>',
     [("special_function", {"arg1": 1}), ("python", {"code": "print(1)"})], ""),
    # vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py
    ("qwen-single", "qwen",
     "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n"
     "</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\n"
     "fahrenheit\n</parameter>\n</function>\n</tool_call>",
     [("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})],
     ""),
    ("qwen-with-content", "qwen",
     "Sure! Let me check the weather for you.<tool_call>\n<function=get_current_weather>"
     "\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n"
     "<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
     [("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})],
     "Sure! Let me check the weather for you."),
    ("qwen-multiline-param", "qwen",
     "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n"
     '</parameter>\n<parameter=dimensions>\n{"width": 10, \n "height": 20}\n'
     "</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>",
     [("calculate_area",
       {"shape": "rectangle", "dimensions": {"width": 10, "height": 20}, "precision": 2})],
     ""),
    ("qwen-parallel", "qwen",
     "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n"
     "</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n"
     "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_current_weather>"
     "\n<parameter=city>\nOrlando\n</parameter>\n<parameter=state>\nFL\n</parameter>\n"
     "<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
     [("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}),
      ("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "fahrenheit"})],
     ""),
    ("qwen-typed", "qwen",
     "Let me calculate that area for you.<tool_call>\n<function=calculate_area>\n"
     '<parameter=shape>\ncircle\n</parameter>\n<parameter=dimensions>\n{"radius": 15.5}'
     "\n</parameter>\n<parameter=precision>\n3\n</parameter>\n</function>\n</tool_call>",
     [("calculate_area",
       {"shape": "circle", "dimensions": {"radius": 15.5}, "precision": 3})],
     "Let me calculate that area for you."),
    ("qwen-no-wrapper", "qwen",
     "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
     "<parameter=state>\nTX\n</parameter>\n</function>",
     [("get_current_weather", {"city": "Dallas", "state": "TX"})], ""),
    ("qwen-type-conversion", "qwen",
     "<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n"
     "<parameter=float_param>\n3.14\n</parameter>\n<parameter=bool_param>\ntrue\n"
     "</parameter>\n<parameter=str_param>\nhello world\n</parameter>\n"
     '<parameter=obj_param>\n{"key": "value"}\n</parameter>\n</function>\n</tool_call>',
     [("test_types", {"int_param": 42, "float_param": 3.14, "bool_param": True,
                      "str_param": "hello world", "obj_param": {"key": "value"}})],
     ""),
    # vLLM tests/tool_parsers/test_llama3_json_tool_parser.py
    ("llama-with-arguments", "llama",
     '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}',
     [("searchTool", {"query": "test query", "limit": 10})], ""),
    ("llama-no-json", "llama", "This is just some text without any tool calls", [],
     "This is just some text without any tool calls"),
    ("llama-invalid-json", "llama",
     '{"name": "invalidTool", "parameters": {invalid json}', [],
     '{"name": "invalidTool", "parameters": {invalid json}'),
    ("llama-arguments-key", "llama",
     '{"name": "searchTool", "arguments": {"query": "test"}}',
     [("searchTool", {"query": "test"})], ""),
    ("llama-semicolons", "llama",
     '{"name": "searchTool", "parameters": {"query": "test1"}}; '
     '{"name": "getOpenIncidentsTool", "parameters": {}}; '
     '{"name": "searchTool", "parameters": {"query": "test2"}}',
     [("searchTool", {"query": "test1"}), ("getOpenIncidentsTool", {}),
      ("searchTool", {"query": "test2"})], ""),
    ("llama-semicolons-spaced", "llama",
     '{"name": "searchTool", "parameters": {"query": "test1"}} ; '
     '{"name": "getOpenIncidentsTool", "parameters": {}} ; '
     '{"name": "searchTool", "parameters": {"query": "test2"}}',
     [("searchTool", {"query": "test1"}), ("getOpenIncidentsTool", {}),
      ("searchTool", {"query": "test2"})], ""),
    ("llama-deep", "llama",
     '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": '
     '{"level4": {"value": "deep"}}}}}}',
     [("complexTool",
       {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}})], ""),
    ("llama-brackets-in-strings", "llama",
     '{"name": "searchTool", "parameters": {"query": "test {value} [complex]",'
     '"nested": {"inner": "more {brackets}"}}}',
     [("searchTool",
       {"query": "test {value} [complex]", "nested": {"inner": "more {brackets}"}})],
     ""),
    ("llama-escaped-quotes", "llama",
     '{"name": "parserTool", "parameters": {"text": "He said \\"Hello {world}\\""}}',
     [("parserTool", {"text": 'He said "Hello {world}"'})], ""),
    ("llama-missing-name", "llama", '{"parameters": {}}', [], '{"parameters": {}}'),
    ("llama-missing-parameters", "llama", '{"name": "toolWithoutParams"}', [],
     '{"name": "toolWithoutParams"}'),
    ("llama-brace-in-trailing-text", "llama",
     '{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.',
     [("searchTool", {"query": "test"})], " I used {searchTool} for this."),
    ("llama-newline-separator", "llama",
     '{"name": "searchTool", "parameters": {"query": "test1"}}\n'
     '{"name": "getOpenIncidentsTool", "parameters": {}}',
     [("searchTool", {"query": "test1"}), ("getOpenIncidentsTool", {})], ""),
    # llama.cpp tests/test-chat.cpp: Llama 3.x with the python tag
    ("llama-python-tag", "llama",
     '<|python_tag|>{"name": "special_function", "parameters": {"arg1": 1}}',
     [("special_function", {"arg1": 1})], ""),
    # vLLM tests/tool_parsers/test_mistral_tool_parser.py
    ("mistral-pre-v11", "mistral",
     '[TOOL_CALLS][{"name": "add", "arguments":{"a": 3.5, "b": 4}}]',
     [("add", {"a": 3.5, "b": 4})], ""),
    ("mistral-pre-v11-two", "mistral",
     '[TOOL_CALLS] [ {"name":"add" , "arguments" : {"a": 3, "b": 4} }, '
     '{"name": "multiply_numbers", "arguments": {"a": 5, "b": 6}} ]',
     [("add", {"a": 3, "b": 4}), ("multiply_numbers", {"a": 5, "b": 6})], ""),
    ("mistral-v11", "mistral", '[TOOL_CALLS]add_this_and_that[ARGS]{"a": 3.5, "b": 4}',
     [("add_this_and_that", {"a": 3.5, "b": 4})], ""),
    ("mistral-v11-two", "mistral",
     '[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": 4}[TOOL_CALLS]multiply_numbers[ARGS]'
     '{"a": 6, "b": 7}',
     [("add", {"a": 3.5, "b": 4}), ("multiply_numbers", {"a": 6, "b": 7})], ""),
    ("mistral-v11-content-first", "mistral",
     'Let me add them. [TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}',
     [("add", {"a": 1, "b": 2})], "Let me add them. "),
    # false starts and answers that look like calls, given back as text
    ("tooltip", "auto", "Hover the <tooltip> to see <tool> tips [TOOL] {x}", [],
     "Hover the <tooltip> to see <tool> tips [TOOL] {x}"),
    ("json-answer", "auto", '{"answer": 42, "name": "x"}', [], '{"answer": 42, "name": "x"}'),
    ("unknown-name-auto", "auto",
     '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', [],
     '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'),
    ("auto-picks-mistral", "auto", '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}]',
     [("add", {"a": 1})], ""),
    ("auto-picks-qwen", "auto",
     "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
     [("add", {"a": 1})], ""),
    ("off", "off", '<tool_call>{"name": "add", "arguments": {}}</tool_call>', [],
     '<tool_call>{"name": "add", "arguments": {}}</tool_call>'),
]  # fmt: skip


class _NoParser:
    def feed(self, data: bytes) -> list[Any]:
        return []

    def close(self) -> list[Any]:
        return []


def scan(
    core: ModuleType, mode: str, pieces: list[str], think: Any = None
) -> list[Any]:
    """The deltas of a content arriving in ``pieces``, then ``[DONE]``; adjacent text
    and thinking merged (how they were cut is not part of the result)."""
    tc = core.TextCalls(_NoParser(), mode, TOOLS, think, 7, "t_")
    out: list[Any] = []
    for piece in pieces:
        out += tc.scan([(TEXT, piece)])
    out += tc.scan([(FINISH, "stop"), (DONE,)])
    merged: list[Any] = []
    for d in out:
        if merged and d[0] in (TEXT, THINKING) and merged[-1][0] == d[0]:
            merged[-1] = (d[0], merged[-1][1] + d[1])
        else:
            merged.append(d)
    return merged


def calls_and_text(deltas: list[Any]) -> tuple[list[Call], str]:
    starts = {d[1]: d[3] for d in deltas if d[0] == TOOL_START}
    args = {d[1]: d[2] for d in deltas if d[0] == TOOL_ARGS}
    calls = [(starts[i], json.loads(args.get(i, "{}"))) for i in sorted(starts)]
    return calls, "".join(d[1] for d in deltas if d[0] == TEXT)


def cut(text: str, points: list[int]) -> list[str]:
    marks = sorted({p % (len(text) + 1) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(marks)]


@pytest.mark.parametrize(
    ("mode", "output", "calls", "text"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_recovers_the_calls_the_reference_parsers_expect(
    both_cores: tuple[ModuleType, ModuleType],
    mode: str,
    output: str,
    calls: list[Call],
    text: str,
) -> None:
    think = ("<think>", "</think>")
    for core in both_cores:
        whole = scan(core, mode, [output], think)
        assert calls_and_text(whole) == (calls, text)
        assert scan(core, mode, list(output), think) == whole  # one character a time
        finish = [d[1] for d in whole if d[0] == FINISH]
        assert finish[-1] == ("tool_calls" if calls else "stop")


@settings(deadline=None, max_examples=60)
@given(
    case=st.sampled_from(CASES), points=st.lists(st.integers(0, 10_000), max_size=12)
)
def test_every_chunk_boundary_gives_the_same_deltas_on_both_cores(
    both_cores: tuple[ModuleType, ModuleType], case: Any, points: list[int]
) -> None:
    _, mode, output, _, _ = case
    py, cy = both_cores
    think = ("<think>", "</think>")
    expected = scan(py, mode, [output], think)
    pieces = cut(output, points)
    assert scan(py, mode, pieces, think) == expected
    assert scan(cy, mode, pieces, think) == expected


@pytest.mark.parametrize(
    ("output", "thinking", "text"),
    [
        ("<think>plan it</think>\n\nThe answer.", "plan it", "The answer."),
        ("\n  <think>x</think>y", "x", "y"),
        ("No tags <think>here</think>", "", "No tags <think>here</think>"),
        (
            "<thinking>is not the tag</thinking>",
            "",
            "<thinking>is not the tag</thinking>",
        ),
        ("<think>unclosed to the end", "unclosed to the end", ""),
    ],
)
def test_reasoning_tags_at_the_start_become_thinking(
    both_cores: tuple[ModuleType, ModuleType], output: str, thinking: str, text: str
) -> None:
    for core in both_cores:
        for pieces in ([output], list(output)):
            deltas = scan(core, "auto", pieces, ("<think>", "</think>"))
            assert "".join(d[1] for d in deltas if d[0] == THINKING) == thinking
            assert "".join(d[1] for d in deltas if d[0] == TEXT) == text


def test_malformed_arguments_keep_the_name_and_the_raw_text(
    both_cores: tuple[ModuleType, ModuleType],
) -> None:
    """The dispatcher answers such a call with its invalid-arguments error."""
    output = '<tool_call>{"name": "search", "arguments": {"q": "x",}}</tool_call>'
    for core in both_cores:
        deltas = scan(core, "hermes", [output])
        assert [d[3] for d in deltas if d[0] == TOOL_START] == ["search"]
        raw = "".join(d[2] for d in deltas if d[0] == TOOL_ARGS)
        assert raw == '{"q": "x",}'
        assert not any(d[0] == TEXT for d in deltas)


def test_usage_is_estimated_only_when_the_stream_sent_none(
    both_cores: tuple[ModuleType, ModuleType],
) -> None:
    for core in both_cores:
        deltas = scan(core, "auto", ["Hello there, how are you today?"])
        usage = [d for d in deltas if d[0] == USAGE]
        # the prompt's estimate; the assembler estimates the output from the message
        assert usage == [(USAGE, 7, 0, 0, 0, 0, True)]
        tc = core.TextCalls(_NoParser(), "auto", TOOLS, None, lambda: 99)
        sent = (USAGE, 10, 5, 0, 0, 0)
        out = tc.scan([(TEXT, "hi"), sent, (DONE,)])
        assert [d for d in out if d[0] == USAGE] == [sent]


def test_plain_text_passes_through_as_the_same_tuples(
    both_cores: tuple[ModuleType, ModuleType],
) -> None:
    """No marker character: the delta itself goes on, nothing copied or held."""
    for core in both_cores:
        tc = core.TextCalls(_NoParser(), "auto", TOOLS, ("<think>", "</think>"))
        first = (TEXT, "Hello")
        tc.scan([first])
        delta = (TEXT, " plain words, nothing else")
        assert tc.scan([delta])[0] is delta


def test_native_calls_keep_their_indexes_and_text_calls_follow(
    both_cores: tuple[ModuleType, ModuleType],
) -> None:
    for core in both_cores:
        tc = core.TextCalls(_NoParser(), "auto", TOOLS, None, 0, "t_")
        out = tc.scan(
            [
                (TOOL_START, 0, "native", "search"),
                (TOOL_ARGS, 0, "{}"),
                (TEXT, '<tool_call>{"name": "add", "arguments": {}}</tool_call>'),
                (DONE,),
            ]
        )
        starts = [d for d in out if d[0] == TOOL_START]
        assert starts == [
            (TOOL_START, 0, "native", "search"),
            (TOOL_START, 1, "t_1", "add"),
        ]
        assert tc.recovered == 1


def test_bad_settings_are_refused(both_cores: tuple[ModuleType, ModuleType]) -> None:
    for core in both_cores:
        with pytest.raises(ValueError, match="text_tool_calls"):
            core.TextCalls(_NoParser(), "xml")
        with pytest.raises(ValueError, match="reasoning_tags"):
            core.TextCalls(_NoParser(), "auto", None, ("<think>", ""))


@pytest.mark.parametrize(
    ("head", "rest"),
    [
        (
            '<tool_call>\n{"name": "search", "arguments": {"q": "ca',
            'ts"}}\n</tool_call>',
        ),
        (
            "<tool_call>\n<function=add>\n<parameter=a>\n1",
            "\n</parameter>\n</function>",
        ),
    ],
)
def test_a_call_starts_once_its_name_has_arrived(
    both_cores: tuple[ModuleType, ModuleType], head: str, rest: str
) -> None:
    """The start goes out while the arguments are still arriving; they follow."""
    for core in both_cores:
        tc = core.TextCalls(_NoParser(), "auto", TOOLS, None, 0, "t_")
        early = tc.scan([(TEXT, head)])
        assert [d[0] for d in early] == [TOOL_START]
        later = tc.scan([(TEXT, rest), (DONE,)])
        assert [d[0] for d in later][:1] == [TOOL_ARGS]
        assert [d for d in later if d[0] == TOOL_START] == []
        assert later[0][1] == early[0][1]

"""The core's ``Assembler``: delta tuples to events and block text, on both twins.

Unit tests run on each twin (the ``core`` fixture); the hypothesis tests compare the
twins on random delta sequences cut into random batches, and check that coalescing
changes only how the same text is grouped into events.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from navi_core import _deltas as D
from navi_core.events import (
    ModelInfo,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)

EVENTS = (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ModelInfo)
DIFF = settings(deadline=None, max_examples=300)


class StreamError(Exception):
    """What ``on_error`` makes of an in-stream error delta."""


def on_error(kind: Any, message: Any) -> BaseException:
    return StreamError(f"{kind}: {message}")


def run(
    core: Any, batches: list[list[tuple[Any, ...]]], coalesce: bool = False
) -> tuple[list[Any], Any]:
    asm = core.Assembler(EVENTS, on_error, coalesce)
    out: list[Any] = []
    for batch in batches:
        asm.feed(batch, out.append)
    return out, asm


def test_text_thinking_and_tool_calls_become_events_and_blocks(core: Any) -> None:
    events, asm = run(
        core,
        [
            [(D.MODEL, "m1"), (D.THINKING, "hm"), (D.SIGNATURE, "sig")],
            [(D.TEXT, "he"), (D.TEXT, ""), (D.TEXT, "llo")],
            [
                (D.TOOL_START, 0, "c1", "add"),
                (D.TOOL_ARGS, 0, '{"a":'),
                (D.TOOL_ARGS, 0, "1}"),
            ],
            [(D.USAGE, 3, 4, 0, 0, 0), (D.FINISH, "tool_calls"), (D.DONE,)],
        ],
    )
    assert events == [
        ModelInfo("m1"),
        ThinkingDelta("hm"),
        TextDelta("he"),
        TextDelta("llo"),
        ToolCallStart(0, "c1", "add"),
        ToolCallDelta(0, '{"a":'),
        ToolCallDelta(0, "1}"),
    ]
    assert asm.blocks() == [
        (2, "hm", "sig"),
        (0, "hello", None),
        (4, '{"a":1}', ("c1", "add")),
    ]
    assert asm.shown() == (5, 2, 1)
    assert (asm.done, asm.finish_reason, asm.usage) == (
        True,
        "tool_calls",
        (3, 4, 0, 0, 0),
    )


def test_events_are_real_frozen_instances(core: Any) -> None:
    (ev,), _ = run(core, [[(D.TEXT, "x")]])
    assert (
        type(ev) is TextDelta
        and ev == TextDelta("x")
        and hash(ev) == hash(TextDelta("x"))
    )
    assert repr(ev) == "TextDelta(text='x')"
    with pytest.raises(AttributeError):
        ev.text = "y"  # type: ignore[misc]
    match ev:
        case TextDelta(text):
            assert text == "x"


def test_arguments_before_their_call_raise_after_pushing_what_came_first(
    core: Any,
) -> None:
    asm = core.Assembler(EVENTS, on_error, True)
    out: list[Any] = []
    with pytest.raises(ValueError, match="tool call 2 before it started"):
        asm.feed([(D.TEXT, "a"), (D.TEXT, "b"), (D.TOOL_ARGS, 2, "{}")], out.append)
    assert out == [TextDelta("ab")]


def test_an_error_delta_raises_what_on_error_made(core: Any) -> None:
    asm = core.Assembler(EVENTS, on_error)
    with pytest.raises(StreamError, match="overloaded: busy"):
        asm.feed([(D.ERROR, "overloaded", "busy")], lambda ev: None)


def test_a_tool_call_without_an_id_gets_a_unique_one(core: Any) -> None:
    events, _ = run(core, [[(D.TOOL_START, 0, "", "f"), (D.TOOL_START, 1, None, "g")]])
    ids = [ev.id for ev in events]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)


def test_long_responses_keep_few_pieces_and_all_their_text(core: Any) -> None:
    _, asm = run(core, [[(D.TEXT, "ab")] * 1000, [(D.TEXT, "c")]])
    assert asm.blocks() == [(0, "ab" * 1000 + "c", None)]


def test_coalescing_joins_one_batch_per_kind_and_call(core: Any) -> None:
    events, _ = run(
        core,
        [
            [(D.TEXT, "a"), (D.TEXT, "b"), (D.THINKING, "t"), (D.TEXT, "c")],
            [(D.TEXT, "d"), (D.TOOL_START, 0, "c0", "f"), (D.TOOL_START, 1, "c1", "g")],
            [(D.TOOL_ARGS, 0, "{"), (D.TOOL_ARGS, 0, "}"), (D.TOOL_ARGS, 1, "[]")],
        ],
        coalesce=True,
    )
    assert events == [
        TextDelta("ab"),
        ThinkingDelta("t"),
        TextDelta("c"),
        TextDelta("d"),
        ToolCallStart(0, "c0", "f"),
        ToolCallStart(1, "c1", "g"),
        ToolCallDelta(0, "{}"),
        ToolCallDelta(1, "[]"),
    ]


@pytest.mark.parametrize("coalesce", [False, True])
def test_an_empty_thinking_opens_the_block_its_signature_seals(
    core: Any, coalesce: bool
) -> None:
    """A parser's mark of a thinking block with no text (Anthropic's display
    "omitted"): that block's signature is its own, not appended to the one before;
    signature pieces with nothing between them stay one signature."""
    events, asm = run(
        core,
        [
            [(D.THINKING, "A"), (D.SIGNATURE, "SIG-A"), (D.THINKING, "")],
            [(D.SIGNATURE, "SIG-"), (D.SIGNATURE, "B")],
            [(D.TEXT, "x"), (D.THINKING, ""), (D.SIGNATURE, "C")],
        ],
        coalesce,
    )
    assert events == [ThinkingDelta("A"), TextDelta("x")]
    assert asm.blocks() == [
        (D.BLOCK_SEALED_THINKING, "A", "SIG-A"),
        (D.BLOCK_SEALED_THINKING, "", "SIG-B"),
        (D.BLOCK_TEXT, "x", None),
        (D.BLOCK_SEALED_THINKING, "", "C"),
    ]
    assert asm.shown() == (1, 1, 0)


def test_the_events_tuple_is_checked(core: Any) -> None:
    with pytest.raises(ValueError, match="5 classes"):
        core.Assembler((TextDelta,), on_error)


# --- differential ----------------------------------------------------------------

PIECE = st.text(st.sampled_from("ab é😀\n"), max_size=4)
DELTA = st.one_of(
    st.tuples(st.just(D.TEXT), PIECE),
    st.tuples(st.just(D.THINKING), PIECE),
    st.tuples(st.just(D.SIGNATURE), st.sampled_from(["s", "sig"])),
    st.tuples(st.just(D.REDACTED_THINKING), st.just("data")),
    st.tuples(
        st.just(D.TOOL_START),
        st.integers(0, 2),
        st.sampled_from(["c", "d"]),
        st.just("f"),
    ),
    st.tuples(st.just(D.TOOL_ARGS), st.integers(0, 2), PIECE),
    st.tuples(st.just(D.FINISH), st.sampled_from(["stop", "length"])),
    st.tuples(
        st.just(D.USAGE),
        st.integers(0, 9),
        st.integers(0, 9),
        st.just(0),
        st.just(0),
        st.just(0),
    ),
    st.tuples(st.just(D.MODEL), st.sampled_from(["m1", "m2"])),
    st.tuples(st.just(D.REASONING_ITEM), st.just('{"type":"reasoning"}')),
    st.tuples(st.just(D.DONE)),
)


def cut(deltas: list[tuple[Any, ...]], cuts: list[int]) -> list[list[tuple[Any, ...]]]:
    points = sorted({c % (len(deltas) + 1) for c in cuts})
    return [
        deltas[a:b] for a, b in zip([0, *points], [*points, len(deltas)], strict=True)
    ]


def outcome(core: Any, batches: list[list[tuple[Any, ...]]], coalesce: bool) -> Any:
    """Events, blocks (tool ids made stable) and the failure, if any."""
    asm = core.Assembler(EVENTS, on_error, coalesce)
    out: list[Any] = []
    error = None
    try:
        for batch in batches:
            asm.feed(batch, out.append)
    except ValueError as exc:
        error = str(exc)
    return out, asm.blocks(), asm.shown(), asm.usage, asm.finish_reason, asm.done, error


@DIFF
@given(
    st.lists(DELTA, max_size=40),
    st.lists(st.integers(0, 99), max_size=8),
    st.booleans(),
)
def test_the_twins_agree(
    both_cores: tuple[Any, Any],
    deltas: list[tuple[Any, ...]],
    cuts: list[int],
    coalesce: bool,
) -> None:
    py, cy = both_cores
    batches = cut(deltas, cuts)
    assert outcome(py, batches, coalesce) == outcome(cy, batches, coalesce)


@DIFF
@given(st.lists(DELTA, max_size=40), st.lists(st.integers(0, 99), max_size=8))
def test_coalescing_only_regroups(
    both_cores: tuple[Any, Any], deltas: list[tuple[Any, ...]], cuts: list[int]
) -> None:
    batches = cut(deltas, cuts)
    for core in both_cores:
        plain = outcome(core, batches, False)
        joined = outcome(core, batches, True)
        assert plain[1:] == joined[1:]  # the same blocks, usage, failure
        assert len(joined[0]) <= len(plain[0])
        assert flatten(plain[0]) == flatten(joined[0])


def flatten(events: list[Any]) -> list[tuple[Any, ...]]:
    """Events with adjacent deltas of one kind (and call) merged: what coalescing may do."""
    out: list[tuple[Any, ...]] = []
    key: tuple[Any, ...]
    for ev in events:
        if isinstance(ev, TextDelta | ThinkingDelta):
            key, text = (type(ev).__name__,), ev.text
        elif isinstance(ev, ToolCallDelta):
            key, text = ("args", ev.index), ev.arguments
        else:
            out.append((ev,))
            continue
        if out and out[-1][:-1] == key:
            out[-1] = (*key, out[-1][-1] + text)
        else:
            out.append((*key, text))
    return out


def test_the_compiled_core_leaves_its_delta_events_to_reference_counting(
    both_cores: tuple[Any, Any],
) -> None:
    import gc

    _, cy = both_cores
    events, _ = run(
        cy, [[(D.TEXT, "a"), (D.TOOL_START, 0, "c", "f"), (D.TOOL_ARGS, 0, "{}")]]
    )
    assert [gc.is_tracked(ev) for ev in events] == [False, True, False]
    assert events == [
        TextDelta("a"),
        ToolCallStart(0, "c", "f"),
        ToolCallDelta(0, "{}"),
    ]

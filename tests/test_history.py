"""``History``: a request's messages as a view of the conversation, copying nothing.

It must behave as the tuple of its messages would (what requests held before), keep
showing the same messages whatever is done to the conversation later, and tell in
O(1) that a later view of the same conversation extends it.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, strategies as st

from navi_core import Agent, Config, Scripted
from navi_core.conversation import Conversation, History, Message, System, Text
from navi_core.providers.base import ProviderRequest


def said(text: str, role: str = "user") -> Message:
    return Message(role, (Text(text),))  # type: ignore[arg-type]


def test_a_view_is_the_tuple_of_its_messages() -> None:
    messages = [said(f"m{i}") for i in range(6)]
    view = History(messages, 4)
    expected = tuple(messages[:4])
    assert len(view) == 4 and tuple(view) == expected and list(view) == list(expected)
    assert view == expected and expected == view and (view != expected) is False
    assert hash(view) == hash(expected)
    assert view[0] is messages[0] and view[-1] is messages[3]
    assert view[1:3] == expected[1:3] and isinstance(view[1:3], tuple)
    assert view[::-1] == expected[::-1] and view[::2] == expected[::2]
    assert list(reversed(view)) == list(reversed(expected))
    extra = said("x")
    assert view + (extra,) == (*expected, extra)  # noqa: RUF005 (testing +)
    assert (extra,) + view == (extra, *expected)  # noqa: RUF005
    assert view + view == expected * 2
    assert messages[3] in view and messages[4] not in view
    assert view.index(messages[2]) == 2 and view.count(messages[1]) == 1
    assert repr(view) == repr(expected)
    with pytest.raises(IndexError):
        view[4]
    with pytest.raises(IndexError):
        view[-5]
    assert view != expected[:3] and view != list(expected)


@given(
    size=st.integers(0, 12),
    n=st.integers(0, 12),
    start=st.none() | st.integers(-14, 14),
    stop=st.none() | st.integers(-14, 14),
    step=st.none() | st.integers(-3, 3).filter(bool),
)
def test_slices_and_indexes_match_a_tuple(
    size: int, n: int, start: int | None, stop: int | None, step: int | None
) -> None:
    messages = [said(f"m{i}") for i in range(size)]
    n = min(n, size)
    view, expected = History(messages, n), tuple(messages[:n])
    assert view[start:stop:step] == expected[start:stop:step]
    for i in range(-n, n):
        assert view[i] is expected[i]


def test_a_view_keeps_its_messages_whatever_the_conversation_does() -> None:
    conv = Conversation([said("a"), said("b", "assistant")])
    first = conv.history()
    conv.messages.append(said("c"))
    second = conv.history()
    assert first == (conv.messages[0], conv.messages[1]) and len(second) == 3
    assert second.extends(first) and not first.extends(second)
    kept = tuple(second)
    del conv.messages[0]  # an edit: the conversation indexes a new list
    conv.messages.insert(0, said("z"))
    conv.messages[1] = said("q", "assistant")
    third = conv.history()
    assert tuple(second) == kept and tuple(first) == kept[:2]
    assert not third.extends(second) and third[0].content == (Text("z"),)
    conv.messages = [said("new")]  # a list assigned whole
    assert tuple(second) == kept and conv.history() == (conv.messages[0],)


def test_system_messages_are_left_out_as_in_dialogue() -> None:
    conv = Conversation(
        [Message("system", (System("rules"),)), said("hi"), said("yo", "assistant")]
    )
    assert conv.history() == tuple(conv.dialogue())
    assert conv.system_prompt() == "rules"


def test_views_of_different_lists_compare_by_their_messages() -> None:
    messages = [said("a"), said("b")]
    copy = list(messages)
    assert History(messages) == History(copy) and History(messages) != History(copy, 1)
    assert not History(messages).extends(History(copy, 1))  # cannot tell in O(1)
    assert not History(messages).extends(tuple(messages))


def test_a_view_pickles_as_its_messages() -> None:
    messages = [said("a"), said("b"), said("c")]
    view = pickle.loads(pickle.dumps(History(messages, 2)))
    assert isinstance(view, History) and view == tuple(messages[:2])


@pytest.mark.parametrize("index", ["1", 1.0, None, (0,)])
def test_an_index_that_is_no_integer_is_a_type_error_as_for_a_tuple(
    index: object,
) -> None:
    view = History([said("a"), said("b")])
    with pytest.raises(TypeError):
        tuple(view)[index]  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        view[index]  # type: ignore[call-overload]


def test_scripted_requests_is_a_list_a_test_can_clear_and_reassign() -> None:
    """``Scripted.requests`` was a plain list of lists: code that clears it between
    turns, appends to it or assigns it must keep working, and each entry shows the
    messages as they were when the request was opened."""
    provider = Scripted([[Text("one")], [Text("two")], [Text("three")]])
    agent = Agent(provider)
    list(agent.run("a"))
    assert [len(r) for r in provider.requests] == [1]
    provider.requests.clear()
    list(agent.run("b"))
    assert [len(r) for r in provider.requests] == [3]
    assert provider.requests is provider.requests  # one list, kept between reads
    provider.requests = []
    history = [said("x")]
    provider.open(ProviderRequest(history, None, (), Config())).close()
    history.append(said("y", "assistant"))  # the caller's list changes after open
    assert provider.requests == [[history[0]]]

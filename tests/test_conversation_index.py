"""``Conversation`` keeps what it found, and still sees every change to its messages."""

from __future__ import annotations

import copy
import dataclasses
import pickle

from navi_core.conversation import (
    Conversation,
    Message,
    MessageList,
    System,
    Text,
    UserMessage,
)


def system(text: str, mode: str = "append") -> Message:
    return Message("system", (System(text, mode),))  # type: ignore[arg-type]


def answer(text: str) -> Message:
    return Message("assistant", (Text(text),))


def check(conv: Conversation) -> None:
    """The cached answers equal a scan from scratch."""
    fresh = Conversation(list(conv.messages))
    assert conv.dialogue() == [m for m in conv.messages if m.role != "system"]
    assert conv.system_prompt() == fresh.system_prompt()


def test_appends_are_seen_without_a_rescan() -> None:
    conv = Conversation([system("be brief"), UserMessage("hi")])
    check(conv)
    for i in range(50):
        conv.messages.append(answer(f"a{i}"))
        conv.messages.append(UserMessage(f"q{i}"))
        check(conv)
    conv.messages.extend([system("also kind"), answer("ok")])
    conv.messages += [UserMessage("more")]
    check(conv)
    assert conv.system_prompt() == "be brief\n\nalso kind"


def test_every_edit_is_seen() -> None:
    conv = Conversation(
        [system("one"), UserMessage("a"), answer("b"), UserMessage("c")]
    )
    check(conv)
    conv.messages[1] = UserMessage("A")
    check(conv)
    assert conv.dialogue()[0].text == "A"
    conv.messages[:] = [system("two", "replace"), UserMessage("x")]
    check(conv)
    assert conv.system_prompt() == "two"
    conv.messages.insert(0, system("zero"))
    check(conv)
    del conv.messages[-1]
    check(conv)
    conv.messages.append(UserMessage("y"))
    conv.messages.pop()
    conv.messages.append(UserMessage("z"))
    check(conv)
    assert [m.text for m in conv.dialogue()] == ["z"]
    conv.messages.remove(conv.messages[0])
    conv.messages.reverse()
    check(conv)
    conv.messages.clear()
    check(conv)
    assert conv.dialogue() == [] and conv.system_prompt() is None


def test_a_plain_list_assigned_later_is_read_whole_every_time() -> None:
    conv = Conversation()
    assert isinstance(conv.messages, MessageList)
    plain = [UserMessage("a")]
    conv.messages = plain
    check(conv)
    plain[0] = UserMessage("b")  # no edit count to tell: read whole again
    assert conv.dialogue()[0].text == "b"


def test_the_constructor_takes_any_list_and_equality_ignores_the_index() -> None:
    a = Conversation([UserMessage("a")], "s1")
    b = Conversation([UserMessage("a")], "s1")
    a.dialogue()
    assert a == b and type(a.messages) is MessageList
    assert a.messages == [UserMessage("a")]
    assert "_index" not in repr(a)


def test_dialogue_returns_a_copy() -> None:
    conv = Conversation([UserMessage("a")])
    conv.dialogue().append(UserMessage("b"))
    assert len(conv.dialogue()) == 1


def test_sort_takes_its_keyword_arguments() -> None:
    conv = Conversation([UserMessage("b"), system("s"), UserMessage("a")])
    check(conv)
    conv.messages.sort(key=lambda m: m.text)
    check(conv)
    assert [m.text for m in conv.dialogue()] == ["a", "b"]
    conv.messages.sort(key=lambda m: m.text, reverse=True)
    check(conv)
    assert [m.text for m in conv.dialogue()] == ["b", "a"]


def test_the_index_is_no_field_of_the_dataclass() -> None:
    # asdict() is how a user exports a conversation: it holds the messages and the
    # session id, not a private cache (which also is not plain data).
    conv = Conversation([system("s"), UserMessage("a")], "s1")
    check(conv)
    assert [f.name for f in dataclasses.fields(conv)] == ["messages", "session_id"]
    assert dataclasses.asdict(conv) == {
        "messages": [dataclasses.asdict(m) for m in conv.messages],
        "session_id": "s1",
    }
    assert dataclasses.astuple(conv)[1] == "s1"


def test_copies_and_pickles_keep_their_answers_apart() -> None:
    conv = Conversation([system("s"), UserMessage("a")], "s1")
    check(conv)
    for other in (
        copy.deepcopy(conv),
        pickle.loads(pickle.dumps(conv)),
        dataclasses.replace(conv, messages=list(conv.messages)),
    ):
        assert other == conv
        check(other)
        other.messages.append(system("more"))
        other.messages[1] = UserMessage("b")
        check(other)
        check(conv)
        assert conv.system_prompt() == "s" and other.system_prompt() == "s\n\nmore"
        assert [m.text for m in conv.dialogue()] == ["a"]

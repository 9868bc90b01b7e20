"""Bodies assembled from kept JSON are byte-for-byte ``orjson.dumps(build_body(...))``.

Random conversations for every HTTP provider, sent as an agent loop sends them (each
request extends the previous one), then out of order (a rebuild from the per-message
cache), with images, tool results, thinking from this and other APIs, and cache
breakpoints on and off.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from unittest import mock

import httpx
import orjson
from faultkit import openai_stream
from hypothesis import given, settings, strategies as st
from loopback import LoopbackServer, Reply

from navi_core import Agent
from navi_core.conversation import (
    Block,
    CompactionSummary,
    Conversation,
    MediaPart,
    Message,
    RedactedThinking,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    WireIdentity,
)
from navi_core.providers import body_cache
from navi_core.providers._http import HTTPProvider
from navi_core.providers.anthropic import Anthropic
from navi_core.providers.base import ProviderRequest
from navi_core.providers.body_cache import CACHE, MessageCache, split_body
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.providers.openai_responses import OpenAIResponses
from navi_core.tools import ToolSpec

URL = "http://127.0.0.1:9"


@dataclass(frozen=True)
class Settings:
    max_output_tokens: int | None = None
    temperature: float | None = None
    coalesce_deltas: bool = False


ids = st.sampled_from(["call_1", "call_2", "call_3"])
texts = st.text(max_size=12)
reasoning = orjson.dumps(
    {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc", "summary": []}
).decode()
wires = st.sampled_from(
    [
        None,
        WireIdentity("openai-chat", URL, "m"),
        WireIdentity("openai-responses", URL, "m"),
        WireIdentity("anthropic-messages", URL, "m"),
        WireIdentity("anthropic-messages", URL, "other"),
    ]
)
media = st.builds(MediaPart, st.sampled_from(["image/png", "image/jpeg"]), texts)
parts = st.lists(st.one_of(st.builds(TextPart, texts), media), max_size=3)
user_blocks: st.SearchStrategy[Block] = st.one_of(
    st.builds(Text, texts),
    st.builds(CompactionSummary, texts),
    media,
    st.builds(ToolResult, ids, parts.map(tuple), st.booleans()),
)
arguments = st.sampled_from(['{"a": 1}', '{"q": "x"}', "{", "[]", ""])
assistant_blocks: st.SearchStrategy[Block] = st.one_of(
    st.builds(Text, texts),
    st.builds(ToolUse, ids, st.sampled_from(["look", "read"]), arguments),
    st.builds(Thinking, texts, st.sampled_from([None, "", "sig", reasoning])),
    st.builds(RedactedThinking, texts),
)
messages = st.one_of(
    st.builds(
        Message,
        st.just("user"),
        st.lists(user_blocks, max_size=4).map(tuple),
    ),
    st.builds(
        Message,
        st.just("assistant"),
        st.lists(assistant_blocks, max_size=4).map(tuple),
        wire=wires,
    ),
)
specs = st.lists(
    st.builds(
        ToolSpec,
        st.sampled_from(["look", "read"]),
        texts,
        st.just({"type": "object", "properties": {}}),
    ),
    max_size=2,
).map(tuple)
configs = st.builds(
    Settings,
    st.one_of(st.none(), st.integers(1, 100)),
    st.one_of(st.none(), st.floats(0, 1)),
)


def providers() -> list[HTTPProvider]:
    return [
        OpenAIChat("m", URL),
        OpenAIChat("m", URL, max_tokens_field="max_completion_tokens", top_p=0.5),
        OpenAIResponses("m", URL),
        OpenAIResponses("other", URL, reasoning={"effort": "low"}),
        Anthropic("m", URL),
        Anthropic("m", URL, cache=False),
        Anthropic("other", URL, thinking={"type": "enabled", "budget_tokens": 64}),
        OpenAIChat("m", URL, send_reasoning=False),
    ]


def same(provider: HTTPProvider, request: ProviderRequest) -> None:
    expected = orjson.dumps(provider.build_body(request))
    assert provider.encode_body(request) == expected


@settings(max_examples=150, deadline=None)
@given(
    st.lists(messages, max_size=14),
    st.one_of(st.none(), st.just(""), texts),
    specs,
    configs,
    st.data(),
)
def test_growing_conversations_match(
    history: list[Message],
    system: str | None,
    tools: tuple[ToolSpec, ...],
    config: Settings,
    data: st.DataObject,
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(history)), max_size=5)))
    for provider in providers():
        for cut in [*cuts, len(history)]:
            same(provider, ProviderRequest(tuple(history[:cut]), system, tools, config))
        # out of order: a shorter conversation, then the same again
        shorter = ProviderRequest(
            tuple(history[: len(history) // 2]), system, (), config
        )
        same(provider, shorter)
        same(provider, shorter)
        provider.close()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(messages, max_size=14),
    st.one_of(st.none(), st.just(""), texts),
    st.sampled_from([1, 2, 40, 300]),
    st.data(),
)
def test_bodies_in_parts_match_whatever_the_part_size(
    history: list[Message], system: str | None, alone: int, data: st.DataObject
) -> None:
    """With any threshold for a part of its own, the parts of a conversation growing
    as a Stream sends it (``Conversation.history()``) join to the built body."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(history)), max_size=6)))
    with mock.patch.object(body_cache, "_ALONE", alone):
        for provider in providers():
            conversation = Conversation()
            for cut in [*cuts, len(history)]:
                conversation.messages.extend(history[len(conversation) : cut])
                request = ProviderRequest(
                    conversation.history(), system, (), Settings()
                )
                parts = provider.encode_parts(request)
                assert all(parts)
                assert b"".join(parts) == orjson.dumps(provider.build_body(request))
            provider.close()


def test_cached_images_follow_the_tool_names() -> None:
    """A tool result's image label names the call's tool; a kept encoding follows it."""
    result = Message("user", (ToolResult("call_1", (MediaPart("image/png", "AAAA"),)),))
    for provider in providers()[:4]:
        for name in ("look", "read"):
            call = Message("assistant", (ToolUse("call_1", name, "{}"),))
            same(provider, ProviderRequest((call, result), None, (), Settings()))
        same(provider, ProviderRequest((result,), None, (), Settings()))
        provider.close()


def test_options_that_replace_the_messages_are_honoured() -> None:
    provider = OpenAIChat("m", URL, messages=[{"role": "user", "content": "fixed"}])
    request = ProviderRequest((Message("user", (Text("hi"),)),), None, (), Settings())
    assert orjson.loads(provider.encode_body(request))["messages"][0]["content"] == (
        "fixed"
    )
    same(provider, request)


def test_split_body_brackets_the_array() -> None:
    bodies: list[dict[str, object]] = [
        {"a": 1, "m": [], "b": [2]},
        {"m": []},
        {"m": [], "z": None},
    ]
    for body in bodies:
        before, after = split_body(body, "m")
        assert orjson.loads(before + b"1,2" + after)["m"] == [1, 2]
        assert before + after == orjson.dumps(body)


def test_the_cache_is_bounded_and_keeps_what_it_holds() -> None:
    cache = MessageCache(limit=10)
    kept = [Message("user", (Text(str(i)),)) for i in range(25)]
    for message in kept:
        cache.put(message, "k", message.text, 1)
    assert len(cache) <= 10
    assert cache.get(kept[-1], "k") == "24"
    assert cache.get(kept[0], "k") is None
    assert cache.get(Message("user", (Text("24"),)), "k") is None  # not by equality


def test_the_cache_is_bounded_in_bytes() -> None:
    cache = MessageCache(max_bytes=1000)
    kept = [Message("user", (Text(str(i)),)) for i in range(40)]
    for message in kept:
        cache.put(message, "k", message.text, 100)
    assert cache.nbytes <= 1000 + 100
    assert cache.nbytes == 100 * len(cache)
    assert cache.get(kept[-1], "k") == "39"
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


def test_one_provider_serves_many_threads() -> None:
    """Threads sharing a provider, each with its own growing conversation."""
    provider = Anthropic("m", URL)
    failures: list[int] = []

    def session(worker: int) -> None:
        history: tuple[Message, ...] = ()
        for i in range(60):
            text = (Text(f"w{worker} m{i}"),)
            message = (
                Message("user", text) if i % 2 == 0 else Message("assistant", text)
            )
            history += (message,)
            request = ProviderRequest(history, "sys", (), Settings())
            if provider.encode_body(request) != orjson.dumps(
                provider.build_body(request)
            ):
                failures.append(worker)

    threads = [threading.Thread(target=session, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    provider.close()


def _sent_reasoning(provider: OpenAIChat, history: Sequence[Message]) -> list[object]:
    """The reasoning_content of each assistant message in the body for ``history``,
    which must be the built body."""
    request = ProviderRequest(history, "sys", (), Settings())
    same(provider, request)
    messages = orjson.loads(provider.encode_body(request))["messages"]
    return [m.get("reasoning_content") for m in messages if m["role"] == "assistant"]


def test_a_kept_message_follows_its_turn() -> None:
    """An own assistant message's JSON depends on its place: its reasoning goes back in
    a turn that called a tool (from the call on), not in a turn that called none. The
    same message object in both places (a fork, a rebuilt conversation, twice in one
    body), in any order, and for a provider of the same wire that sends no reasoning,
    never gets another place's form from the cache."""
    CACHE.clear()
    sending, quiet = OpenAIChat("m", URL), OpenAIChat("m", URL, send_reasoning=False)
    own = sending.wire
    assert quiet.wire == own
    ask, again = Message("user", (Text("q"),)), Message("user", (Text("again"),))
    call = Message(
        "assistant", (Thinking("plan"), ToolUse("c1", "look", "{}")), wire=own
    )
    seen = Message("user", (ToolResult("c1", (TextPart("seen"),)),))
    answer = Message("assistant", (Thinking("why"), Text("done")), wire=own)
    plain = (ask, answer)
    tooled = (ask, call, seen, answer)
    later = (*tooled, again, answer)  # the same answer, then in a turn without calls
    for _ in range(2):
        assert _sent_reasoning(sending, plain) == [None]
        assert _sent_reasoning(sending, tooled) == ["plan", "why"]
        assert _sent_reasoning(quiet, tooled) == [None, None]
        assert _sent_reasoning(sending, later) == ["plan", "why", None]
        assert _sent_reasoning(quiet, later) == [None, None, None]
        assert _sent_reasoning(sending, tooled[:2]) == ["plan"]
    for provider in (sending, quiet):
        provider.close()


def test_a_growing_conversation_carries_its_turn_over() -> None:
    """Each request encodes only the messages added since the last one: whether the
    turn has called a tool is carried over too, so an answer added after the call's
    results is sent as a tool turn's, and a new user message ends that turn."""
    CACHE.clear()
    provider = OpenAIChat("m", URL)
    own = provider.wire

    def think(text: str, *calls: ToolUse) -> Message:
        return Message("assistant", (Thinking(text), *calls), wire=own)

    conversation = Conversation([Message("user", (Text("q"),))])
    steps: list[tuple[list[Message], list[object]]] = [
        ([think("plan", ToolUse("c1", "look", "{}"))], ["plan"]),
        ([Message("user", (ToolResult("c1", (TextPart("seen"),)),))], ["plan"]),
        ([think("why")], ["plan", "why"]),
        ([Message("user", (Text("again"),)), think("easy")], ["plan", "why", None]),
        ([Message("user", (Text("more"),))], ["plan", "why", None]),
        ([think("also")], ["plan", "why", None, None]),
    ]
    for added, expected in steps:
        conversation.messages.extend(added)
        assert _sent_reasoning(provider, conversation.history()) == expected
    provider.close()


def test_a_message_is_encoded_once_across_requests() -> None:
    CACHE.clear()
    provider = OpenAIChat("m", URL)
    history = tuple(Message("user", (Text(f"q{i}"),)) for i in range(40))
    for n in range(1, 41):
        same(provider, ProviderRequest(history[:n], None, (), Settings()))
    assert len(CACHE) == 40
    provider.close()


def test_the_bytes_sent_over_http_are_the_built_body(loopback: LoopbackServer) -> None:
    """``open`` sends ``encode_body``: what the server receives is the built body."""
    history: tuple[Message, ...] = ()
    providers = [
        OpenAIChat("m", f"{loopback.url}/v1"),
        OpenAIResponses("m", f"{loopback.url}/v1"),
        Anthropic("m", loopback.url),
    ]
    expected: list[bytes] = []
    for i in range(8):
        call = ToolUse(f"call_{i}", "look", f'{{"i": {i}}}')
        result = ToolResult(
            f"call_{i}", (TextPart(f"seen {i}"), MediaPart("image/png", "AA"))
        )
        history += (
            Message("assistant", (Text("looking"), call)),
            Message("user", (result,)),
        )
        request = ProviderRequest(history, "be brief", (), Settings())
        for provider in providers:
            loopback.add(Reply.sse(b""))
            provider.open(request).close()
            expected.append(orjson.dumps(provider.build_body(request)))
    assert [r.body for r in loopback.requests] == expected
    for provider in providers:
        provider.close()


def test_a_long_conversation_is_sent_in_parts_with_its_length(
    loopback: LoopbackServer,
) -> None:
    """Past ``_ALONE`` bytes the kept JSON goes to the socket as it is kept: the server
    still receives exactly the built body, sized by Content-Length, never chunked."""
    providers = [
        OpenAIChat("m", f"{loopback.url}/v1"),
        OpenAIResponses("m", f"{loopback.url}/v1"),
        Anthropic("m", loopback.url, cache=True),
    ]
    conversation = Conversation([Message("user", (Text("go"),))])
    expected: list[bytes] = []
    parted = 0
    for i in range(45):  # ~4.5 KiB per round: the kept JSON passes 128 KiB
        call = ToolUse(f"call_{i}", "look", f'{{"i": {i}}}')
        result = ToolResult(f"call_{i}", (TextPart(f"line {i} é\n" * 400),))
        conversation.messages += [
            Message("assistant", (Text("looking"), call)),
            Message("user", (result,)),
        ]
        request = ProviderRequest(conversation.history(), "be brief", (), Settings())
        for provider in providers:
            parts = provider.encode_parts(request)
            if sum(map(len, parts)) > 160 * 1024:  # the oldest chunk is >= 64 KiB
                assert len(parts) > 1 and max(map(len, parts)) >= 64 * 1024
                parted += 1
            assert b"".join(parts) == orjson.dumps(provider.build_body(request))
            loopback.add(Reply.sse(b""))
            provider.open(request).close()
            expected.append(orjson.dumps(provider.build_body(request)))
    assert parted >= 20
    assert [r.body for r in loopback.requests] == expected
    for r in loopback.requests:
        assert r.headers["content-length"] == str(len(r.body))
        assert "transfer-encoding" not in r.headers
    for provider in providers:
        provider.close()


def test_a_list_of_messages_grown_or_edited_in_place_is_encoded_anew() -> None:
    """``ProviderRequest.messages`` may be any sequence: a list the caller keeps and
    appends to (or edits) between requests must not pass for the one encoded before,
    or the body would leave out what was added."""
    for provider in providers():
        history = [Message("user", (Text("one"),))]
        same(provider, ProviderRequest(history, None, (), Settings()))
        history += [Message("assistant", (Text("two"),)), Message("user", (Text("3"),))]
        request = ProviderRequest(history, None, (), Settings())
        same(provider, request)
        assert b'"3"' in provider.encode_body(request)
        history[0] = Message("user", (Text("ONE"),))
        same(provider, request)
        del history[1:]
        same(provider, request)
        provider.close()


def test_request_hooks_of_a_client_passed_in_can_read_the_body(
    loopback: LoopbackServer,
) -> None:
    """An httpx request hook (a logger, a signer) reads ``request.content``: a body
    in parts is joined for a client with such hooks, so the hook sees the bytes sent."""
    seen: list[bytes] = []

    def hook(request: httpx.Request) -> None:
        seen.append(request.content)

    long = Message("user", (Text("x" * (200 * 1024)),))
    for make in (
        lambda c: OpenAIChat("m", f"{loopback.url}/v1", client=c),
        lambda c: OpenAIResponses("m", f"{loopback.url}/v1", client=c),
        lambda c: Anthropic("m", loopback.url, client=c),
    ):
        with httpx.Client(event_hooks={"request": [hook]}) as client:
            provider = make(client)
            history = [long, Message("assistant", (Text("ok"),))]
            for turn in range(2):  # the second request has kept chunks to send
                history.append(Message("user", (Text(f"turn {turn}"),)))
                request = ProviderRequest(tuple(history), None, (), Settings())
                loopback.add(Reply.sse(b""))
                provider.open(request).close()
                assert seen[-1] == orjson.dumps(provider.build_body(request))
                history.append(Message("assistant", (Text("ok"),)))
    assert [r.body for r in loopback.requests] == seen
    assert len(seen) == 6


def test_a_subclass_that_overrides_encode_body_sends_its_bytes(
    loopback: LoopbackServer,
) -> None:
    """``open`` sends ``encode_body``'s bytes (the contract): a provider subclass that
    overrides only ``encode_body`` is not bypassed by the parts of its base class."""

    class Tagged(OpenAIChat):
        def encode_body(self, request: ProviderRequest) -> bytes:
            body = super().encode_body(request)
            return body[:-1] + b',"tag":"mine"}'

    class Both(Tagged):  # overriding both: the parts are sent
        def encode_parts(self, request: ProviderRequest) -> list[bytes]:
            return [b"".join(super().encode_parts(request))[:-1], b',"tag":"parts"}']

    long = Message("user", (Text("x" * (200 * 1024)),))
    request = ProviderRequest((long,), None, (), Settings())
    for cls, tag in ((Tagged, "mine"), (Both, "parts")):
        with cls("m", f"{loopback.url}/v1") as provider:
            for _ in range(2):
                loopback.add(Reply.sse(b""))
                provider.open(request).close()
                sent = loopback.requests[-1]
                assert orjson.loads(sent.body)["tag"] == tag
                assert sent.headers["content-length"] == str(len(sent.body))


def test_an_entry_lives_as_long_as_its_message() -> None:
    """The cache keeps no message alive: a conversation that ended takes its bytes
    with it, and its ids, reused by new messages, find nothing."""
    cache = MessageCache()
    message = Message("user", (Text("gone soon"),))
    cache.put(message, "k", b"bytes", 100)
    ref = weakref.ref(message)
    assert len(cache) == 1 and cache.nbytes == 100
    del message
    gc.collect()
    assert ref() is None  # the entry did not keep it alive
    assert len(cache) == 0 and cache.nbytes == 0
    for i in range(200):  # ids are reused: none finds another message's bytes
        assert cache.get(Message("user", (Text(str(i)),)), "k") is None


def test_messages_freed_by_a_collection_inside_put_leave_the_cache_whole() -> None:
    """A message in a reference cycle is freed by the collector, on whatever thread
    allocates at that moment, the cache's own ``put`` included: its entry goes
    without a deadlock or a lost entry of another message."""
    cache = MessageCache(limit=64)
    kept = []
    threshold = gc.get_threshold()
    gc.set_threshold(1)  # a collection at almost every allocation: inside put too
    try:
        for i in range(2000):
            cyclic = Message("user", (Text(f"cycle {i}"),))
            holder: list[object] = [cyclic]
            holder.append(holder)  # freed only by the cyclic collector
            cache.put(cyclic, "k", b"x", 1)
            del cyclic, holder
            message = Message("user", (Text(f"kept {i}"),))
            kept.append(message)
            cache.put(message, "k", f"v{i}", 1)
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert cache.nbytes == len(cache) <= 64 + 1
    assert cache.get(kept[-1], "k") == "v1999"
    survivors = [m for m in kept if cache.get(m, "k") is not None]
    assert len(survivors) == len(cache)


def test_ended_conversations_leave_nothing_for_the_collector(
    loopback: LoopbackServer,
) -> None:
    """Turns of agents that are dropped leave no message behind in the process-wide
    cache, so the collector has nothing of theirs to walk; only the last request's
    messages stay, which the provider compares the next request with."""
    CACHE.clear()
    provider = OpenAIChat("m", loopback.url + "/v1", "k")
    for _ in range(20):
        loopback.add(Reply.sse(openai_stream("done")))
    for i in range(20):
        agent = Agent(provider)
        agent.ask(f"question {i}")
        agent.close()
    del agent
    gc.collect()
    assert len(CACHE) == 1  # the last prompt
    (entry,) = CACHE.table.values()
    assert entry[0]().text == "question 19"
    provider.close()


def _outputs() -> list[object]:
    from dataclasses import make_dataclass

    from navi_core.output import OutputSpec

    point = make_dataclass("Point", [("x", int), ("y", int)])
    other = make_dataclass("Other", [("name", str)])
    return [None, OutputSpec.of(point), OutputSpec.of(point), OutputSpec.of(other)]


def _look(description: str) -> ToolSpec:
    return ToolSpec("look", description, {"type": "object", "properties": {}})


_OUTPUTS = _outputs()
#: few values, most of them twice as distinct equal objects, so that consecutive
#: requests often differ in one part of their frame only
_FRAMES = st.tuples(
    st.sampled_from([None, "", "be brief", "be brief", "other"]),
    st.sampled_from([(), (_look("a"),), (_look("a"),), (_look("b"),)]),
    st.sampled_from([Settings(), Settings(), Settings(max_output_tokens=5)]),
    st.sampled_from(range(len(_OUTPUTS))),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, max_size=8), st.lists(_FRAMES, min_size=1, max_size=8))
def test_requests_whose_tools_system_config_or_output_change_match(
    history: list[Message],
    frames: list[tuple[str | None, tuple[ToolSpec, ...], Settings, int]],
) -> None:
    """One provider, each request with its own system prompt, tools, config and output
    (equal ones often, as fresh objects): the kept frame of the body is used only for a
    request it belongs to."""
    for provider in providers():
        for k, (system, tools, config, output) in enumerate(frames):
            cut = min(len(history), k * 2)
            request = ProviderRequest(
                tuple(history[:cut]),
                system,
                tools,
                config,
                _OUTPUTS[output],  # type: ignore[arg-type]
            )
            same(provider, request)
        provider.close()

"""``next()``'s hot path (``core.Reader``): the same turn as the phase machine's path.

A read with nothing else due runs in the core, and a ``DeltaStream`` whose class keeps
the core's ``produce`` is fed there from fields taken once. These tests hold that path
to the one ``next(timeout)`` takes through ``Stream._advance``, on random responses cut
into random batches, and check the close handshake a read takes part in.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from loopback import LoopbackServer, Reply

from navi_core import (
    Agent,
    AnyEvent,
    BadRequest,
    Config,
    MessageComplete,
    ModelInfo,
    NullStore,
    RetryPolicy,
    ServerError,
    StopReason,
    Stream,
    TextDelta,
    ThinkingDelta,
    TurnComplete,
    _deltas as D,
)
from navi_core._secrets import MAX_MESSAGE_CHARS
from navi_core.conversation import WireIdentity
from navi_core.events import Event
from navi_core.providers._http import ResponseStream
from navi_core.providers.base import ProviderRequest
from navi_core.providers.delta_stream import DeltaStream
from navi_core.providers.openai_chat import OpenAIChat

WIRE = WireIdentity("scripted", "scripted://reader", "reader")
ONCE = Config(retry=RetryPolicy(max_attempts=1))
SECRET = "sk-reader-0123456789abcdef"


class Overriding(DeltaStream):
    """A response class with its own ``produce``: the reader goes through it."""

    __slots__ = ("calls",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0

    def produce(self, queue: deque[Event]) -> bool:
        self.calls += 1
        return super().produce(queue)


class Batches:
    """Answers each request with the next response's batches (any iterable)."""

    def __init__(
        self, responses: Sequence[Any], cls: type[DeltaStream] = DeltaStream
    ) -> None:
        self.wire = WIRE
        self._responses = iter(responses)
        self._cls = cls
        self.opened: list[DeltaStream] = []

    def open(self, request: ProviderRequest) -> DeltaStream:
        stream = self._cls(iter(next(self._responses)), self.wire)
        self.opened.append(stream)
        return stream

    def close(self) -> None:
        pass


def outcome(stream: Stream, timeout: float | None) -> list[object]:
    """What a host sees: each event's kind and content, then the error if any."""
    seen: list[object] = []
    while True:
        try:
            ev = stream.next(timeout)
        except Exception as exc:  # the turn's failure, compared by kind and text
            seen.append((type(exc).__name__, str(exc)))
            return seen
        if ev is None:
            return seen
        seen.append(shape(ev))


def ended_as_cancel(events: list[object]) -> object:
    """The response of the cancelled ``TurnComplete`` that ``events`` (an ``outcome``)
    ends with."""
    done = events[-1]
    assert isinstance(done, tuple) and done[:2] == (
        "TurnComplete",
        StopReason.CANCELLED,
    )
    return done[2]


def close_in_thread(stream: Stream) -> threading.Event:
    """Close ``stream`` on a new thread; the event is set once ``close()`` returned."""
    closed = threading.Event()

    def close() -> None:
        stream.close()
        closed.set()

    threading.Thread(target=close, daemon=True).start()
    return closed


def shape(ev: AnyEvent) -> object:
    if isinstance(ev, TextDelta | ThinkingDelta):
        return (type(ev).__name__, ev.text)
    if isinstance(ev, ModelInfo):
        return ("ModelInfo", ev.model)
    if isinstance(ev, MessageComplete):
        return ("MessageComplete", ev.message.content, ev.usage)
    if isinstance(ev, TurnComplete):
        return ("TurnComplete", ev.stop_reason, ev.response, ev.iterations, ev.usage)
    return type(ev).__name__


def turn(
    batches: list[list[tuple[Any, ...]]],
    timeout: float | None,
    cls: type[DeltaStream] = DeltaStream,
) -> tuple[list[object], list[object]]:
    agent = Agent(Batches([batches], cls), store=NullStore(), config=ONCE)
    seen = outcome(agent.run("q"), timeout)
    return seen, [m.content for m in agent.conversation.messages]


_piece = st.text(alphabet="ab é🙂\n", min_size=0, max_size=6)
_delta = st.one_of(
    st.tuples(st.just(D.TEXT), _piece),
    st.tuples(st.just(D.THINKING), _piece),
    st.tuples(st.just(D.MODEL), st.sampled_from(["m1", "m2"])),
)
_ending = st.sampled_from(["done", "no terminator", "bad arguments", "server error"])


class _Fails:
    """Batches that raise a ``ServerError`` after the ones given."""

    def __init__(self, batches: list[list[tuple[Any, ...]]]) -> None:
        self._batches = iter(batches)

    def __iter__(self) -> Iterator[list[tuple[Any, ...]]]:
        return self

    def __next__(self) -> list[tuple[Any, ...]]:
        for batch in self._batches:
            return batch
        raise ServerError("the upstream went away")


@settings(max_examples=150, deadline=None)
@given(
    body=st.lists(_delta, max_size=30),
    ending=_ending,
    cuts=st.lists(st.integers(0, 34), max_size=12),
)
def test_the_hot_path_gives_the_turn_the_phase_machine_gives(
    body: list[tuple[Any, ...]], ending: str, cuts: list[int]
) -> None:
    deltas = [(D.MODEL, "m1"), *body]
    if ending == "bad arguments":
        deltas.append((D.TOOL_ARGS, 7, '{"x"'))
    if ending == "done":
        deltas += [(D.FINISH, "stop"), (D.USAGE, 3, 4, 0, 0, 0), (D.DONE,)]
    edges = sorted({0, len(deltas), *(min(c, len(deltas)) for c in cuts)})
    batches = [deltas[a:b] for a, b in pairwise(edges)]
    batches.insert(len(batches) // 2, [])  # a read that held no whole event

    def run(timeout: float | None, cls: type[DeltaStream]) -> object:
        if ending == "server error":
            agent = Agent(
                Batches([_Fails(batches)], cls), store=NullStore(), config=ONCE
            )
            return outcome(agent.run("q"), timeout), [
                m.content for m in agent.conversation.messages
            ]
        return turn(batches, timeout, cls)

    hot = run(None, DeltaStream)
    assert hot == run(30.0, DeltaStream)  # ctl.deadline set: Stream._advance reads
    assert hot == run(None, Overriding)  # the reader calls the class's produce


def test_a_class_that_overrides_produce_is_read_through_it() -> None:
    batches = [[(D.TEXT, "a")], [(D.TEXT, "b")], [(D.FINISH, "stop"), (D.DONE,)]]
    provider = Batches([batches], Overriding)
    agent = Agent(provider, store=NullStore())
    seen = outcome(agent.run("q"), None)
    assert [s for s in seen if isinstance(s, tuple) and s[0] == "TextDelta"] == [
        ("TextDelta", "a"),
        ("TextDelta", "b"),
    ]
    (opened,) = provider.opened
    assert isinstance(opened, Overriding) and opened.calls == 3


def test_an_error_inside_the_stream_is_redacted_on_the_hot_path() -> None:
    class Leaks:
        def __iter__(self) -> Iterator[list[tuple[Any, ...]]]:
            yield [(D.TEXT, "partial")]
            raise ServerError(f"upstream said: bad key {SECRET}")

    class Provider(Batches):
        def open(self, request: ProviderRequest) -> DeltaStream:
            return ResponseStream(iter(Leaks()), self.wire, secrets=[SECRET])

    agent = Agent(Provider([]), store=NullStore(), config=ONCE)
    stream = agent.run("q")
    assert isinstance(stream.next(), TextDelta)
    with pytest.raises(ServerError) as info:
        while stream.next():
            pass
    assert SECRET not in str(info.value)
    assert info.value.__context__ is None  # the original is not chained either


def test_a_read_that_closes_its_own_stream_does_not_deadlock() -> None:
    holder: list[Stream] = []

    def body() -> Iterator[list[tuple[Any, ...]]]:
        yield [(D.TEXT, "one")]
        holder[0].close()  # on the driving thread, inside a read
        yield [(D.TEXT, "two")]
        yield [(D.FINISH, "stop"), (D.DONE,)]

    agent = Agent(Batches([body()]), store=NullStore())
    stream = agent.run("q")
    holder.append(stream)
    seen: list[list[object]] = []
    t = threading.Thread(target=lambda: seen.append(outcome(stream, None)))
    t.start()
    t.join(10)
    assert not t.is_alive(), "next() deadlocked on a close from inside its read"
    (events,) = seen
    assert ("TextDelta", "two") in events  # the read that was under way returned
    assert ended_as_cancel(events) == "onetwo"  # the answer so far is kept
    assert stream.next() is None
    assert agent.conversation.messages[-1].text == "onetwo"


def test_a_close_from_another_thread_waits_for_the_read_under_way() -> None:
    reading, release = threading.Event(), threading.Event()

    def body() -> Iterator[list[tuple[Any, ...]]]:
        yield [(D.TEXT, "one")]
        reading.set()
        release.wait(10)  # a read no stop can interrupt
        yield [(D.TEXT, "two")]
        yield [(D.FINISH, "stop"), (D.DONE,)]

    agent = Agent(Batches([body()]), store=NullStore())
    stream = agent.run("q")
    got: list[list[object]] = []
    driver = threading.Thread(target=lambda: got.append(outcome(stream, None)))
    driver.start()
    assert reading.wait(10)
    closed = close_in_thread(stream)
    assert not closed.wait(0.3), "close() ran while next() was inside a read"
    release.set()
    assert closed.wait(10)
    driver.join(10)
    assert not driver.is_alive()
    (events,) = got
    assert ("TextDelta", "two") in events  # the read under way returned its event
    assert ended_as_cancel(events) == "onetwo"  # the answer so far is kept
    assert stream.next() is None


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_an_in_stream_error_is_clipped_without_secrets_to_redact(
    loopback: LoopbackServer, timeout: float | None
) -> None:
    # a local server with no key: the server's error text is still cut to size, on
    # the hot path (timeout None) and through produce on the worker (a timeout)
    words = "upstream said: " + "w" * 3_000
    chunk = {"choices": [{"index": 0, "delta": {"content": "par"}}]}
    error = {"error": {"message": words, "type": "invalid_request_error"}}
    body = b"".join(b"data: %b\n\n" % json.dumps(o).encode() for o in (chunk, error))
    loopback.add(Reply.sse(body))
    with OpenAIChat("gpt-test", loopback.url) as provider:
        agent = Agent(provider, store=NullStore(), config=ONCE)
        seen = outcome(agent.run("hi"), timeout)
    failure = seen[-1]
    assert isinstance(failure, tuple) and failure[0] == "BadRequest"
    message = str(failure[1])
    assert message.startswith("upstream said: www")
    assert len(message) == MAX_MESSAGE_CHARS and message.endswith("...")


class _SlowShown(DeltaStream):
    """Keeps the core's ``produce``; says what it showed only once ``release`` is set
    (a step of the failed read that runs after the phase moved on)."""

    __slots__ = ()
    inside = threading.Event()
    release = threading.Event()

    def shown(self) -> tuple[int, int, int]:
        self.inside.set()
        self.release.wait(10)
        return super().shown()


@pytest.mark.parametrize("retryable", [False, True])
def test_a_close_from_another_thread_waits_while_a_failed_read_is_handled(
    retryable: bool,
) -> None:
    _SlowShown.inside.clear()
    _SlowShown.release.clear()
    error = ServerError("went away") if retryable else BadRequest("refused")

    def body() -> Iterator[list[tuple[Any, ...]]]:
        yield [(D.TEXT, "one")]
        raise error

    fast = Config(retry=RetryPolicy(max_attempts=2, initial_delay_ms=1, jitter=False))
    agent = Agent(Batches([body()], _SlowShown), store=NullStore(), config=fast)
    stream = agent.run("q")
    got: list[object] = []

    def drive() -> None:
        try:
            got.append(outcome(stream, None))
        except BaseException as exc:  # escaped the stream: the test fails below
            got.append(exc)

    driver = threading.Thread(target=drive)
    driver.start()
    assert _SlowShown.inside.wait(10)
    closed = close_in_thread(stream)
    waited = not closed.wait(0.3)
    _SlowShown.release.set()
    assert closed.wait(10)
    driver.join(10)
    assert not driver.is_alive()
    assert waited, "close() ran while next() was handling the failed read"
    (events,) = got
    assert isinstance(events, list)
    assert ended_as_cancel(events) == ""  # the failed attempt's text is dropped

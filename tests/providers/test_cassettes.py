"""Cassettes: a turn recorded from a server replays offline through the same parsers,
event for event; a request that drifts from the recording fails at once, clearly."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body, drain, request

from navi_core import (
    Agent,
    Anthropic,
    Config,
    MessageComplete,
    OpenAIResponses,
    ProviderRetry,
    RetryPolicy,
    TextDelta,
    ThinkingDelta,
    ToolDispatchComplete,
    ToolFinished,
    TurnComplete,
    tool,
)
from navi_core.codec import to_obj
from navi_core.conversation import Text
from navi_core.errors import IncompleteResponse, TransportError
from navi_core.events import Event
from navi_core.providers._http import HTTPProvider
from navi_core.testing import CassetteMismatch, Recorder, Replay

DATA = Path(__file__).parent.parent / "data"
CASSETTE = DATA / "cassettes" / "responses_calculator.jsonl"
FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=5, jitter=False))
PROMPT = "Compute (12 + 7) * 3 * 10 with the calculator."


@tool
def calculator(a: float, b: float, op: str) -> str:
    """A minimal calculator.

    Args:
        a: first operand.
        b: second operand.
        op: add, subtract, multiply or divide.
    """
    result = {"add": a + b, "subtract": a - b, "multiply": a * b}.get(op, a / b)
    return f"{result:g}"


def turn(agent: Agent, prompt: str) -> list[Event]:
    """The turn's events, tool run times zeroed (the only values that vary)."""
    with agent.run(prompt) as stream:
        return [
            replace(e, seconds=0.0) if isinstance(e, ToolFinished) else e
            for e in stream
        ]


def record_calculator(loopback: LoopbackServer, path: Path) -> list[Event]:
    """The recorded real-API session served over loopback, through a Recorder."""
    for name in (
        "reasoning_tool_call",
        "tool_call_1",
        "tool_call_2",
        "text_after_tools",
    ):
        raw = (DATA / "sse" / "openai-responses" / f"{name}.sse").read_bytes()
        loopback.add(Reply.sse(raw, chunk=1000))
    provider = OpenAIResponses(
        "gpt-5.1-codex-max", loopback.url + "/v1", "sk-never-recorded-123"
    )
    with Recorder(provider, path) as recorder:
        return turn(Agent(recorder, tools=[calculator], config=FAST), PROMPT)


def test_a_recorded_turn_replays_offline_event_for_event(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    path = tmp_path / "turn.jsonl"
    live = record_calculator(loopback, path)
    assert isinstance(live[-1], TurnComplete)
    assert "sk-never-recorded-123" not in path.read_text()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 5  # the head, then one line per response
    head = orjson.loads(lines[0])
    assert (
        head["api_style"] == "openai-responses" and head["model"] == "gpt-5.1-codex-max"
    )
    # every byte of the first response, in the pieces its reads returned
    first = (DATA / "sse" / "openai-responses" / "reasoning_tool_call.sse").read_bytes()
    assert sum(orjson.loads(lines[1])["chunk_sizes"]) == len(first)
    served = len(loopback.requests)

    with Replay(path) as replay:
        agent = Agent(replay, tools=[calculator], config=FAST)
        replayed = turn(agent, PROMPT)
        assert replay.remaining == 0
    assert len(loopback.requests) == served  # nothing went over the network
    # the same events; each turn has its own id
    assert live[-1].turn_id != replayed[-1].turn_id  # type: ignore[attr-defined]
    assert [_same_turn(e) for e in replayed] == [_same_turn(e) for e in live]
    assert [to_obj(m) for m in agent.conversation.messages][1:] == [
        to_obj(e.message)
        for e in live
        if isinstance(e, MessageComplete | ToolDispatchComplete)
    ]


def test_the_committed_cassette_replays_the_real_api_session() -> None:
    """tests/data/cassettes/responses_calculator.jsonl: the session recorded from the
    real Responses API (tests/data/sse/openai-responses), as a Recorder writes it."""
    with Replay(CASSETTE) as replay:
        agent = Agent(replay, tools=[calculator], config=FAST)
        events = turn(agent, PROMPT)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.response, done.iterations, done.tool_calls) == (
        "The final result is **570**.", 4, 3)  # fmt: skip
    assert done.usage.prompt_total == 134 + 221 + 260 + 299


def test_a_drifted_request_fails_clearly() -> None:
    with Replay(CASSETTE) as replay:
        agent = Agent(replay, tools=[calculator], config=FAST)
        with pytest.raises(CassetteMismatch) as caught:
            turn(agent, "Compute (12 + 8) * 3 * 10 with the calculator.")
    assert str(caught.value) == (
        "responses_calculator.jsonl: request 1 differs from the recording at "
        "messages[0].content[0].text: recorded 'Compute (12 + 7) * 3 * 10 with the "
        "calculator.', sent 'Compute (12 + 8) * 3 * 10 with the calculator.'"
    )


def test_a_changed_tool_is_drift_too() -> None:
    @tool
    def calculator(a: float, b: float) -> str:  # the op parameter is gone
        """A minimal calculator."""
        return str(a + b)

    with Replay(CASSETTE) as replay:
        agent = Agent(replay, tools=[calculator], config=FAST)
        with pytest.raises(CassetteMismatch, match=r"at tools\[0\]\.parameters\."):
            turn(agent, PROMPT)


def test_a_request_past_the_end_fails(tmp_path: Path, loopback: LoopbackServer) -> None:
    loopback.add(Reply.sse(anthropic_body([("text", ["hello"])])))
    path = tmp_path / "one.jsonl"
    with Recorder(Anthropic("claude-x", loopback.url), path) as recorder:
        turn(Agent(recorder), "hi")
    with Replay(path) as replay:
        agent = Agent(replay)
        assert isinstance(turn(agent, "hi")[-1], TurnComplete)
        with pytest.raises(CassetteMismatch, match="request 2 was not recorded"):
            turn(agent, "again")


def test_error_statuses_replay_as_the_same_errors(
    tmp_path: Path, loopback: LoopbackServer
) -> None:
    limited = Reply.json(
        429, {"error": {"message": "slow down"}}, [("retry-after", "0")]
    )
    loopback.add(limited, Reply.sse(anthropic_body([("text", ["fine"])])))
    path = tmp_path / "retry.jsonl"
    with Recorder(
        Anthropic("claude-x", loopback.url, "sk-ant-secret-999"), path
    ) as rec:
        live = turn(Agent(rec, config=FAST), "hi")
    assert "sk-ant-secret-999" not in path.read_text()
    with Replay(path) as replay:
        replayed = turn(Agent(replay, config=FAST), "hi")
    retries = [e for e in replayed if isinstance(e, ProviderRetry)]
    assert [(r.error, r.status_code, r.retry_after_ms) for r in retries] == [
        ("RateLimited", 429, 0)
    ]
    assert [type(e) for e in replayed] == [type(e) for e in live]


def test_only_http_providers_are_recorded(tmp_path: Path) -> None:
    from navi_core.providers import Scripted

    with pytest.raises(TypeError, match=r"records an HTTP provider .* not Scripted"):
        Recorder(Scripted(["x"]), tmp_path / "x.jsonl")  # type: ignore[arg-type]


def test_a_file_that_is_not_a_cassette_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match="not a version 1 cassette"):
        Replay(path)


def _same_turn(ev: object) -> object:
    """``ev`` with a ``TurnComplete``'s random turn id blanked."""
    return dataclasses.replace(ev, turn_id="") if isinstance(ev, TurnComplete) else ev


# -- secrets a server echoes never reach the cassette ---------------------------------

#: a key with characters that JSON, percent-encoding and repr each spell differently
ECHOED_KEY = 'sk-rec/"ECHO+7f3e x1'
USER, PASSWORD = "ann", "pw/ECHO-pass+9"


def _forms(secret: str) -> set[str]:
    """Every spelling of ``secret`` a server may echo or a file may hold."""
    import base64
    import json
    from urllib.parse import quote, quote_plus

    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe="")}
    forms |= {json.dumps(f)[1:-1] for f in list(forms)}
    forms |= {json.dumps(f)[1:-1] for f in list(forms)}  # JSON inside JSON
    return forms | {base64.b64encode(secret.encode()).decode()}


def _echoes(secrets: list[str], escaped: bool = False) -> str:
    """Text that echoes each secret as servers do: as it is and in a URL, and when
    ``escaped`` JSON-escaped too (JSON quoted in a plain-text body)."""
    from urllib.parse import quote

    parts = []
    for s in secrets:
        parts += [s, quote(s, safe="")]
        parts += [orjson.dumps(s).decode()[1:-1]] if escaped else []
    return " | ".join(parts)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize("auth", ["x-api-key", "bearer", "url"])
def test_a_key_the_server_echoes_is_redacted_from_the_cassette(
    auth: str, loopback: LoopbackServer, tmp_path: Path
) -> None:
    """401, 429 and a streamed body echo the request's credentials: the header key,
    the Basic credentials httpx makes of URL user info, a key in the query."""
    import base64
    from urllib.parse import quote

    from faultkit import openai_stream

    from navi_core import AuthFailed, OpenAIChat, ProviderError

    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    provider: HTTPProvider
    if auth == "x-api-key":
        provider = Anthropic("claude-x", loopback.url, ECHOED_KEY)
        secrets = [ECHOED_KEY]
        stream = anthropic_body([("text", ["your key ", _echoes(secrets)])])
    else:
        url = loopback.url + "/v1"
        key = ECHOED_KEY
        secrets = [ECHOED_KEY]
        if auth == "url":
            creds = f"{USER}:{quote(PASSWORD, safe='')}@"
            url = url.replace("://", f"://{creds}") + "?api-key=" + quote(key)
            key, secrets = "", [PASSWORD, ECHOED_KEY, f"Basic {basic}"]
        provider = OpenAIChat("m", url, key or None)
        stream = openai_stream(f"your key {_echoes(secrets)}")
    echo = _echoes(secrets)
    loopback.add(
        Reply.json(401, {"error": {"message": f"invalid key {echo}"}}),
        Reply.text(429, f"slow down, {_echoes(secrets, True)}", [("retry-after", "0")]),
        Reply.sse(stream, chunk=7),  # the key split across network reads
    )
    path = tmp_path / "echo.jsonl"
    with Recorder(provider, path) as recorder:
        agent = Agent(recorder, config=FAST)
        with pytest.raises(AuthFailed):
            turn(agent, "hi")
        live = turn(agent, "hi again")
    assert isinstance(live[-1], TurnComplete)
    assert ECHOED_KEY in live[-1].response  # the live turn saw the echo
    sent = loopback.requests[0]
    if auth == "url":
        assert sent.headers["authorization"] == f"Basic {basic}"
    assert len(path.read_bytes().splitlines()) == 4  # head, 401, 429, the stream

    text = path.read_text()
    decoded = "\n".join(
        s for line in text.splitlines() for s in _strings(orjson.loads(line))
    )
    for secret in [*secrets, PASSWORD, basic]:
        for form in _forms(secret):
            assert form not in text, (secret, form)
            assert form not in decoded, (secret, form)
    assert "[REDACTED]" in decoded

    # the redacted cassette still replays: the same errors, then the redacted text
    with Replay(path) as replay:
        agent = Agent(replay, config=FAST)
        with pytest.raises(ProviderError) as failed:
            turn(agent, "hi")
        assert failed.value.status_code == 401
        replayed = turn(agent, "hi again")
    done = replayed[-1]
    assert isinstance(done, TurnComplete) and "your key [REDACTED]" in done.response
    assert ECHOED_KEY not in done.response
    assert [type(e) for e in replayed] == [type(e) for e in live]


def test_a_key_inside_the_prompt_replays_and_is_never_quoted(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """The key in a prompt is redacted in the cassette: replaying the same prompt
    matches it, and a drifted prompt's mismatch never quotes what was sent there."""
    key = "sk-prompt-key-0123456789"
    loopback.add(Reply.sse(anthropic_body([("text", ["noted"])])))
    path = tmp_path / "c.jsonl"
    provider = Anthropic("claude-test", base_url=loopback.url, api_key=key)
    with Recorder(provider, path) as recorder:
        turn(Agent(recorder, config=FAST), f"my key is {key}")
    assert key not in path.read_text()

    replayed = turn(Agent(Replay(path), config=FAST), f"my key is {key}")
    assert isinstance(replayed[-1], TurnComplete)

    drifted = f"my key is {key}, remember it"
    with pytest.raises(CassetteMismatch) as caught:
        turn(Agent(Replay(path), config=FAST), drifted)
    assert key not in str(caught.value)
    assert "not shown" in str(caught.value)


# -- a key the model streams in pieces, split across SSE events -----------------------

#: what the model says, streamed in 5-character deltas that cut the key in pieces
STREAMED_KEY = "sk-test-SECRET123-streamed"
SAID = f"your key is {STREAMED_KEY}, keep it safe"
SAID_REDACTED = SAID.replace(STREAMED_KEY, "[REDACTED]")
APIS = ["openai-chat", "openai-responses", "anthropic"]


def _fives(text: str) -> list[str]:
    """``text`` in 5-character pieces, as a model streams it."""
    return [text[i : i + 5] for i in range(0, len(text), 5)]


def _provider(
    api: str, url: str, key: str, client: httpx.Client | None = None
) -> HTTPProvider:
    from navi_core import OpenAIChat

    if api == "openai-chat":
        return OpenAIChat("m", url + "/v1", key, client=client)
    if api == "openai-responses":
        return OpenAIResponses("m", url + "/v1", key, client=client)
    return Anthropic("claude-x", url, key, client=client)


def _recorded(path: Path, number: int = 1) -> tuple[bytes, list[int]]:
    """Response ``number``'s body as the cassette holds it, and its read sizes."""
    entry = orjson.loads(path.read_bytes().splitlines()[number])
    body: bytes = entry["body_text"].encode()
    sizes: list[int] = entry["chunk_sizes"]
    assert sum(sizes) == len(body)
    return body, sizes


def _streams(body: bytes) -> dict[str, str]:
    """Each text stream of an SSE body, its deltas joined: ``text`` (the answer),
    ``thinking`` (reasoning), ``args 0``, ``args 1``... (each tool call's arguments)."""
    out: dict[str, str] = {}

    def add(name: str, piece: object) -> None:
        assert isinstance(piece, str)
        out[name] = out.get(name, "") + piece

    for line in body.splitlines():
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            continue
        event = orjson.loads(line[5:])
        kind = event.get("type")
        for choice in event.get("choices", []):  # chat completions
            delta = choice["delta"]
            if delta.get("content") is not None:
                add("text", delta["content"])
            if "reasoning_content" in delta:
                add("thinking", delta["reasoning_content"])
            for call in delta.get("tool_calls", []):
                add(f"args {call['index']}", call["function"]["arguments"])
        if kind == "content_block_delta":  # anthropic
            delta, index = event["delta"], event["index"]
            if "text" in delta:
                add("text", delta["text"])
            if "thinking" in delta:
                add("thinking", delta["thinking"])
            if "partial_json" in delta:
                add(f"args {index - 1}", delta["partial_json"])  # block 0: text
        if kind == "response.output_text.delta":  # responses
            add("text", event["delta"])
        if kind == "response.reasoning_summary_text.delta":
            add("thinking", event["delta"])
        if kind == "response.function_call_arguments.delta":
            add(f"args {event['output_index'] - 1}", event["delta"])  # 0: text
    return out


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[list[bytes]]:
    """The network reads of each response the Recorder writes, in cassette order."""
    from navi_core import testing

    taken: list[list[bytes]] = []
    entry = testing._Take.entry

    def spy(take: testing._Take, *args: Any) -> bytes:
        taken.append(list(take.chunks))
        return entry(take, *args)

    monkeypatch.setattr(testing._Take, "entry", spy)
    return taken


Paced = Callable[..., Reply]


@pytest.fixture
def paced(monkeypatch: pytest.MonkeyPatch) -> Paced:
    """``paced(data, size=40)``: an event-stream reply written ``size`` bytes at a
    time, a pause between, so the client reads it in many pieces; and none of an
    event's bytes is sent before the client has read every byte of the events before
    it (the Recorder's tap counts them). So the reads end at every event's end
    whatever the machine's load, and anywhere else as the timing falls: a test of
    the cuts around the key always has cuts before it and after it."""
    from navi_core import testing

    read = threading.Condition()
    taken = [0]
    chunk = testing._Take.chunk

    def spy(take: testing._Take, data: bytes) -> None:
        chunk(take, data)
        with read:
            taken[0] += len(data)
            read.notify_all()

    monkeypatch.setattr(testing._Take, "chunk", spy)

    def make(data: bytes, size: int = 40) -> Reply:
        ends = [m.end() for m in re.finditer(rb"\r?\n\r?\n", data)]
        if not ends or ends[-1] != len(data):
            ends.append(len(data))

        def body() -> Iterator[bytes | float]:
            with read:
                before = taken[0]  # what the client read of the earlier responses
            for at, end in pairwise([0, *ends]):

                def sent_read(at: int = at) -> bool:
                    return taken[0] - before >= at

                with read:  # the events before this one were all read
                    read.wait_for(sent_read, timeout=10)
                for i in range(at, end, size):
                    yield data[i : min(i + size, end)]
                    yield 0.001

        return Reply(body=body())

    return make


def _cuts_kept(read: list[bytes], body: bytes, sizes: list[int]) -> None:
    """The boundaries of the network reads (``read``) are still cuts of the recorded
    ``body`` (cut at ``sizes``) outside the events that changed: as they were before
    the first, shifted by the change in length after the last."""
    from itertools import accumulate

    def common(a: bytes, b: bytes) -> int:
        """The length of the bytes ``a`` and ``b`` start with alike."""
        pairs = enumerate(zip(a, b, strict=False))
        return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))

    sent = b"".join(read)
    cuts, old = set(accumulate(sizes)), list(accumulate(len(r) for r in read))
    same = common(sent, body)
    same_end = common(sent[::-1], body[::-1])
    same_end = len(sent) - min(same_end, len(sent) - same, len(body) - same)
    ends = [m.end() for m in re.finditer(rb"\r?\n\r?\n", sent)]  # of the events
    head = max([0, *(e for e in ends if e <= same)])  # the first changed event
    tail = min([len(sent), *(e for e in ends if e >= same_end)])  # the last's end
    kept = [b for b in old if b <= head]
    moved = [b for b in old if b >= tail]
    assert kept and moved  # the reads cut the body both before and after the key
    assert all(b in cuts for b in kept), (kept, sorted(cuts))
    assert all(b + len(body) - len(sent) in cuts for b in moved), (moved, sorted(cuts))


@pytest.mark.parametrize("api", APIS)
def test_a_key_streamed_across_events_is_redacted(
    api: str,
    loopback: LoopbackServer,
    tmp_path: Path,
    reads: list[list[bytes]],
    paced: Paced,
) -> None:
    """The model echoes the key in 5-character deltas (answer and reasoning): no
    byte pattern sees it whole, yet the cassette holds it nowhere, even in pieces,
    and replays ``[REDACTED]`` in its place, the rest of the text unchanged."""
    from wire_streams import openai_body, responses_body

    thought = f"the user's key, {STREAMED_KEY}, must not be repeated"
    if api == "openai-chat":
        stream = openai_body(_fives(SAID), reasoning=_fives(thought))
    elif api == "openai-responses":
        stream = responses_body(_fives(SAID), reasoning=[(_fives(thought), "enc")])
    else:
        stream = anthropic_body(
            [("thinking", (_fives(thought), "sig")), ("text", _fives(SAID))]
        )
    loopback.add(paced(stream))
    path = tmp_path / "streamed.jsonl"
    with Recorder(_provider(api, loopback.url, STREAMED_KEY), path) as recorder:
        live = turn(Agent(recorder, config=FAST), "hi")
    done = live[-1]
    assert isinstance(done, TurnComplete) and done.response == SAID  # it was echoed

    body, sizes = _recorded(path)
    assert STREAMED_KEY not in path.read_text()
    streams = _streams(body)
    assert streams["text"] == SAID_REDACTED
    assert streams["thinking"] == thought.replace(STREAMED_KEY, "[REDACTED]")
    _cuts_kept(reads[0], body, sizes)

    with Replay(path) as replay:
        replayed = turn(Agent(replay, config=FAST), "hi")
    done = replayed[-1]
    assert isinstance(done, TurnComplete) and done.response == SAID_REDACTED
    said = "".join(e.text for e in replayed if isinstance(e, TextDelta))
    thinking = "".join(e.text for e in replayed if isinstance(e, ThinkingDelta))
    assert (said, thinking) == (SAID_REDACTED, streams["thinking"])
    # the same events, but for the deltas emptied of the key's later pieces
    deltas = TextDelta | ThinkingDelta
    assert [type(e) for e in replayed if not isinstance(e, deltas)] == [
        type(e) for e in live if not isinstance(e, deltas)
    ]


@pytest.mark.parametrize("api", APIS)
def test_a_key_streamed_across_tool_argument_deltas_is_redacted(
    api: str,
    loopback: LoopbackServer,
    tmp_path: Path,
    reads: list[list[bytes]],
    paced: Paced,
) -> None:
    """The key (with a quote: JSON-escaped in the arguments) split across a tool
    call's argument deltas, interleaved with another call's where the API streams
    calls in parallel: the cassette's arguments hold ``[REDACTED]`` instead, still
    valid JSON, and the replayed turn calls the tool with it."""
    from wire_streams import openai_body, responses_body

    seen: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note a text.

        Args:
            text: what to note.
        """
        seen.append(text)
        return "noted"

    texts = [f"key {ECHOED_KEY} here", "nothing secret in this one"]
    fragments = [_fives(orjson.dumps({"text": t}).decode()) for t in texts]
    calls = [(f"call_{i}", "note", f) for i, f in enumerate(fragments)]
    if api == "openai-chat":
        first = openai_body(["calling"], tool_calls=calls)  # fragments interleaved
        then = openai_body(["noted"])
    elif api == "openai-responses":
        first = responses_body(["calling"], tool_calls=calls)
        then = responses_body(["noted"])
    else:
        blocks = [("text", ["calling"]), *(("tool", c) for c in calls)]
        first = anthropic_body(blocks, stop="tool_use")
        then = anthropic_body([("text", ["noted"])])
    loopback.add(paced(first), Reply.sse(then))
    path = tmp_path / "args.jsonl"
    with Recorder(_provider(api, loopback.url, ECHOED_KEY), path) as recorder:
        live = turn(Agent(recorder, tools=[note], config=FAST), "hi")
    assert isinstance(live[-1], TurnComplete)
    assert seen == texts  # the live tool saw the key

    body, sizes = _recorded(path)
    text = path.read_text()
    for form in _forms(ECHOED_KEY):
        assert form not in text, form
    streams = _streams(body)
    redacted = texts[0].replace(ECHOED_KEY, "[REDACTED]")
    assert orjson.loads(streams["args 0"]) == {"text": redacted}
    assert streams["args 1"] == "".join(fragments[1])  # untouched
    _cuts_kept(reads[0], body, sizes)

    seen.clear()
    with Replay(path) as replay:
        replayed = turn(Agent(replay, tools=[note], config=FAST), "hi")
        assert replay.remaining == 0
    assert isinstance(replayed[-1], TurnComplete)
    assert seen == [redacted, texts[1]]


def test_only_the_events_holding_the_key_are_rewritten(
    loopback: LoopbackServer,
    tmp_path: Path,
    reads: list[list[bytes]],
    paced: Paced,
) -> None:
    """A response without the key is written byte for byte, cut where it was read;
    in one with the key, every event that held none of it keeps its bytes (comments,
    ``data:`` without a space, spaced JSON, CRLF line ends, ``[DONE]``)."""
    import json

    from wire_streams import openai_body

    plain = openai_body(_fives("nothing secret here, only text"))
    events = [b": keep-alive"]
    for piece in _fives(SAID):
        chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": piece}}]}
        events.append(b"data:" + json.dumps(chunk).encode())
    events += [
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}',
        b'data: {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}',
        b"data: [DONE]",
    ]
    keyed = b"".join(e + b"\r\n\r\n" for e in events)
    loopback.add(paced(plain, 7), paced(keyed, 7))
    path = tmp_path / "two.jsonl"
    with Recorder(_provider("openai-chat", loopback.url, STREAMED_KEY), path) as rec:
        agent = Agent(rec, config=FAST)
        turn(agent, "hi")
        assert turn(agent, "again")[-1].response == SAID  # type: ignore[attr-defined]

    body, sizes = _recorded(path, 1)
    assert body == plain
    assert sizes == [len(r) for r in reads[0]]  # cut where it was read

    body, sizes = _recorded(path, 2)
    start = SAID.index(STREAMED_KEY)
    holding = {i // 5 for i in range(start, start + len(STREAMED_KEY))}
    written = body.split(b"\r\n\r\n")
    assert len(written) == len(events) + 1 and written[-1] == b""
    for n, (was, now) in enumerate(zip(events, written, strict=False)):
        if n - 1 in holding:  # event 0 is the comment
            assert was != now and now.startswith(b"data:{")
        else:
            assert was == now, n
    assert _streams(body)["text"] == SAID_REDACTED
    _cuts_kept(reads[1], body, sizes)


def _sse_event(name: str, obj: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {orjson.dumps(obj).decode()}\n\n".encode()


def _text_block(i: int, opening: str, *deltas: str) -> bytes:
    """An Anthropic text block whose opening event already carries ``opening``."""
    block = {"type": "text", "text": opening}
    out = _sse_event(
        "content_block_start",
        {"type": "content_block_start", "index": i, "content_block": block},
    )
    for d in deltas:
        delta = {"type": "text_delta", "text": d}
        out += _sse_event(
            "content_block_delta",
            {"type": "content_block_delta", "index": i, "delta": delta},
        )
    return out + _sse_event(
        "content_block_stop", {"type": "content_block_stop", "index": i}
    )


def _anthropic_message(*blocks: bytes) -> bytes:
    start: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 5},
    }
    return (
        _sse_event("message_start", {"type": "message_start", "message": start})
        + b"".join(blocks)
        + _sse_event("message_delta", end)
        + _sse_event("message_stop", {"type": "message_stop"})
    )


def _chat_lines(text: str) -> bytes:
    """A chat-completions event whose JSON is spread over several ``data:`` lines."""
    chunk = {"choices": [{"index": 0, "delta": {"content": text}}]}
    spread = orjson.dumps(chunk, option=orjson.OPT_INDENT_2).decode()
    return ("data: " + spread.replace("\n", "\ndata: ") + "\n\n").encode()


_KEY = "sk-ant-test-SECRET-abcdef123456"
_SPLIT_BODIES = {
    "data over several lines": (
        "openai-chat",
        _chat_lines("key " + _KEY[:9])
        + _chat_lines(_KEY[9:] + " ok")
        + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        + b"data: [DONE]\n\n",
    ),
    "two text blocks": (
        "anthropic",
        _anthropic_message(
            _text_block(0, "", "key " + _KEY[:9]), _text_block(1, "", _KEY[9:] + " ok")
        ),
    ),
    "a block's opening text": (
        "anthropic",
        _anthropic_message(_text_block(0, "key " + _KEY[:9], _KEY[9:] + " ok")),
    ),
}


@pytest.mark.parametrize("case", sorted(_SPLIT_BODIES))
def test_a_key_split_where_the_answer_joins_it_is_redacted(
    tmp_path: Path, loopback: LoopbackServer, case: str
) -> None:
    api, body = _SPLIT_BODIES[case]
    loopback.add(Reply.sse(body))
    path = tmp_path / "c.jsonl"
    recorder = Recorder(_provider(api, loopback.url, _KEY), path)
    with recorder, Agent(recorder) as live:
        assert _KEY in live.ask("hi").response  # the model did echo it
    with Agent(Replay(path)) as replayed:
        answer = replayed.ask("hi").response
    assert answer == "key [REDACTED] ok"
    assert _KEY[:9].encode() not in path.read_bytes()


# -- a key cut anywhere: between reads, between events, where the body stops ----------

#: a key none of whose 4-character pieces occurs in the bodies around it
CUT_KEY = "sk-Q7xZr2Lm4Np8Tv6WyB3k"
CUT_SAID = f"your key is {CUT_KEY}, keep it safe"
CUT_SAID_REDACTED = CUT_SAID.replace(CUT_KEY, "[REDACTED]")
#: the pieces of the key a cassette must not hold (any longer piece holds one)
CUT_PIECES = {CUT_KEY[i : i + 4] for i in range(len(CUT_KEY) - 3)}


class _Reads(httpx.SyncByteStream):
    """A response body arriving in the reads given, then ending, or with ``reset``
    breaking as a connection reset by the peer does."""

    def __init__(self, reads: list[bytes], reset: bool) -> None:
        self.reads, self.reset = reads, reset

    def __iter__(self) -> Iterator[bytes]:
        yield from self.reads
        if self.reset:
            raise httpx.ReadError("connection reset by peer")


def _answer_body(api: str, pieces: list[str]) -> bytes:
    from wire_streams import openai_body, responses_body

    if api == "openai-chat":
        return openai_body(pieces)
    if api == "openai-responses":
        return responses_body(pieces)  # its output_text.done holds the whole text
    return anthropic_body([("text", pieces)])


def _key_splits() -> list[list[str]]:
    """``CUT_SAID`` as a model may stream it: the key cut between two deltas at each
    place (whole in one of them at either end), and one character per delta."""
    at = CUT_SAID.index(CUT_KEY)
    splits = [[CUT_SAID[: at + n], CUT_SAID[at + n :]] for n in range(len(CUT_KEY) + 1)]
    return [*splits, [CUT_SAID[:at], *CUT_KEY, CUT_SAID[at + len(CUT_KEY) :]]]


def _key_cuts(raw: bytes, pieces: list[str]) -> list[int]:
    """The places a read can end that cut the key differently: before, inside and
    just past each JSON string holding some of it, and at its event's end and the
    byte before (a blank line half read)."""
    at, end = CUT_SAID.index(CUT_KEY), CUT_SAID.index(CUT_KEY) + len(CUT_KEY)
    spans, start = [], 0
    for piece in pieces:
        spans.append((piece, start))
        start += len(piece)
    spans.append((CUT_SAID, 0))  # the whole text, as a closing event repeats it
    places: set[int] = set()
    for piece, start in spans:
        lo, hi = max(at, start) - start, min(end, start + len(piece)) - start
        if lo >= hi:
            continue
        needle = orjson.dumps(piece)
        for found in re.finditer(re.escape(needle), raw):
            places.update(range(found.start() + 1 + lo, found.start() + hi + 3))
            event_end = raw.index(b"\n\n", found.end()) + 2
            places.update((event_end - 1, event_end))
    return sorted(p for p in places if 0 < p < len(raw))


def _record_reads(
    recorder: Recorder, feed: list[tuple[list[bytes], bool]]
) -> list[str]:
    """Record one response per (reads, reset) of ``feed`` (the recorder's provider
    answers with ``feed[0]``, then ``feed[1]``...); the text each streamed live."""
    said = []
    for _ in feed:
        stream = recorder.open(request("hi"))
        queue: deque[Event] = deque()
        try:
            while not stream.produce(queue):
                pass
        except TransportError:
            pass
        finally:
            stream.close()
        said.append("".join(e.text for e in queue if isinstance(e, TextDelta)))
    return said


def _trailing_key(text: str) -> int:
    """How many characters at the end of ``text`` start the key (fewer than 4)."""
    return next((n for n in range(3, 0, -1) if text.endswith(CUT_KEY[:n])), 0)


@pytest.mark.parametrize("api", APIS)
def test_a_key_cut_anywhere_by_the_reads_never_reaches_the_cassette(
    api: str, tmp_path: Path
) -> None:
    """Every way the network can cut a streamed key, deterministically: the key
    cut between two deltas at each place (and one character per delta), each body
    read in two reads cut at each place around the key, in one-byte reads, and cut
    off at each of those places by a connection reset (a retry follows, and a
    cancelled turn stops reading there too). No cassette holds the key or any piece
    of it four characters long, each cut-off text is the redacted answer's start,
    and the read sizes still add up to the body."""
    feed: list[tuple[list[bytes], bool]] = []
    for pieces in _key_splits():
        raw = _answer_body(api, pieces)
        feed.append(([raw[i : i + 1] for i in range(len(raw))], False))
        for cut in _key_cuts(raw, pieces):
            feed += [([raw[:cut], raw[cut:]], False), ([raw[:cut]], True)]
    answers = iter(feed)

    def respond(_: httpx.Request) -> httpx.Response:
        reads, reset = next(answers)
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Reads(reads, reset))

    path = tmp_path / "cuts.jsonl"
    with (
        httpx.Client(transport=httpx.MockTransport(respond)) as client,
        Recorder(_provider(api, "http://127.0.0.1:9", CUT_KEY, client), path) as rec,
    ):
        said = _record_reads(rec, feed)

    lines = path.read_text().splitlines()[1:]
    assert len(lines) == len(feed) > 300
    for n, (line, (_, reset), live) in enumerate(zip(lines, feed, said, strict=True)):
        found = sorted(p for p in CUT_PIECES if p in line)
        assert not found, (n, found, line[-300:])
        entry = orjson.loads(line)
        body: bytes = entry["body_text"].encode()
        assert sum(entry["chunk_sizes"]) == len(body) and all(entry["chunk_sizes"])
        events = body[: body.rfind(b"\n\n") + 2]  # an unfinished one left aside
        text = _streams(events).get("text", "")
        if not reset:
            assert live == CUT_SAID  # the live turn saw the key
            assert text == CUT_SAID_REDACTED, n
            assert entry["complete"] is True
        else:
            assert entry["complete"] is False
            kept = text[: len(text) - _trailing_key(text)]
            assert CUT_SAID_REDACTED.startswith(kept), (n, text)

    # each replays: the redacted answer, or a response that ended too soon
    with Replay(path) as replay:
        for n, (_, reset) in enumerate(feed):
            if not reset:
                _, message = drain(replay, request("hi"))
                assert message.content == (Text(CUT_SAID_REDACTED),), n
            else:
                with pytest.raises(IncompleteResponse):
                    drain(replay, request("hi"))
        assert replay.remaining == 0


@pytest.mark.parametrize("kind", ["text", "json"])
def test_a_key_cut_by_the_error_body_cap_is_neither_shown_nor_recorded(
    kind: str, loopback: LoopbackServer, tmp_path: Path
) -> None:
    """An error body is read up to 64 KiB: one that echoes the key where the cap
    falls keeps only the key's start, which no pattern of the whole key finds. At
    every place the cap can cut it, neither the error (which shows the end of a
    long message) nor the cassette holds a piece of it."""
    from navi_core import AuthFailed, OpenAIChat

    cap = 64 * 1024
    said = " invalid key "
    opening = '{"error":{"message":"' if kind == "json" else ""
    for kept in range(1, len(CUT_KEY)):
        filler = "x" * (cap - len(opening) - len(said) - kept)
        text = f"{opening}{filler}{said}{CUT_KEY} was refused"
        if kind == "json":
            loopback.add(Reply.json(401, {"error": {"message": text[len(opening) :]}}))
        else:
            loopback.add(Reply.text(401, text))
    path = tmp_path / "capped.jsonl"
    provider = OpenAIChat("m", loopback.url + "/v1", CUT_KEY)
    with Recorder(provider, path) as recorder:
        for kept in range(1, len(CUT_KEY)):
            with pytest.raises(AuthFailed) as caught:
                recorder.open(request("hi"))
            message = str(caught.value)
            # the start of the key, from four characters on, is redacted
            end = CUT_KEY[:kept] if kept < 4 else "[REDACTED]"
            assert message.endswith(said + end), (kept, message[-80:])
            assert not [p for p in CUT_PIECES if p in message], (kept, message[-80:])
    lines = path.read_text().splitlines()[1:]
    assert len(lines) == len(CUT_KEY) - 1
    for kept, line in enumerate(lines, 1):
        assert not [p for p in CUT_PIECES if p in line], (kept, line[-80:])
        body = orjson.loads(line)["body_text"]
        assert body.startswith(opening + "xxx") and "x" * 1000 in body


def test_an_answer_cut_off_inside_the_key_keeps_none_of_it(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """``max_tokens`` stops the model inside the key it was echoing: the finished
    response's cassette holds none of that start. An answer that only ends as a key
    begins ("task-a", "sk-ant-...") is kept as it is."""
    key = "sk-ant-api03-Q7xZr2Lm4Np8Tv6WyB3k"
    loopback.add(
        Reply.sse(
            anthropic_body(
                [("text", ["your key is ", key[:9], key[9:14]])], stop="max_tokens"
            )
        ),
        Reply.sse(anthropic_body([("text", ["now run ", "task-a"])])),
    )
    path = tmp_path / "stopped.jsonl"
    with Recorder(Anthropic("claude-x", loopback.url, key), path) as recorder:
        agent = Agent(recorder, config=FAST)
        first = turn(agent, "hi")[-1]
        second = turn(agent, "again")[-1]
    assert isinstance(first, TurnComplete) and first.response.endswith(key[:14])
    assert isinstance(second, TurnComplete) and second.response == "now run task-a"
    text = path.read_text()
    assert not [key[i : i + 4] for i in range(8, 11) if key[i : i + 4] in text]
    assert _streams(_recorded(path, 1)[0])["text"] == "your key is [REDACTED]"
    assert _streams(_recorded(path, 2)[0])["text"] == "now run task-a"
    # it replays: the second request holds the first answer as its replay gave it
    with Replay(path) as replay:
        agent = Agent(replay, config=FAST)
        assert turn(agent, "hi")[-1].response == "your key is [REDACTED]"  # type: ignore[attr-defined]
        assert turn(agent, "again")[-1].response == "now run task-a"  # type: ignore[attr-defined]

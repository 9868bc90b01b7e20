"""Cassettes: a turn recorded from a server replays offline through the same parsers,
event for event; a request that drifts from the recording fails at once, clearly."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body

from navi_core import (
    Agent,
    Anthropic,
    Config,
    MessageComplete,
    OpenAIResponses,
    ProviderRetry,
    RetryPolicy,
    ToolDispatchComplete,
    ToolFinished,
    TurnComplete,
    tool,
)
from navi_core.codec import to_obj
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

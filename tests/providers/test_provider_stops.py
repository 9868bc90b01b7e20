"""Responses the provider stopped, over real HTTP on loopback: a content filter or a
refusal ends the turn ``REFUSED`` (chat completions ``finish_reason:
"content_filter"``, Anthropic ``stop_reason: "refusal"``, Responses
``incomplete_details.reason: "content_filter"``, OpenAI's refusal field in either
API), Anthropic's ``pause_turn`` ends it ``PAUSED``, and a bare chat ``finish_reason:
"error"`` is a ``ServerError``, retried. ``navi-core run`` and the piped chat say so."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import (
    anthropic_body,
    fixture,
    openai_body,
    openai_chunk,
    responses_body,
)

from navi_core import (
    Agent,
    Anthropic,
    Config,
    OpenAIChat,
    OpenAIResponses,
    ProviderRetry,
    ResponseDiscarded,
    RetryPolicy,
    StopReason,
    ToolFinished,
    TurnComplete,
    tool,
)
from navi_core.conversation import Message
from navi_core.errors import ServerError
from navi_core.events import Event
from navi_core.store.sqlite import SQLiteStore
from navi_core.stream import Stream

FAST = Config(retry=RetryPolicy(initial_delay_ms=1, max_delay_ms=20, jitter=False))
KEY = "sk-stop-test-0123456789abcdef"


def _events(stream: Stream) -> list[Event]:
    with stream:
        return list(stream)


def _done(events: list[Event]) -> TurnComplete:
    done = events[-1]
    assert isinstance(done, TurnComplete)
    return done


def _chat(loopback: LoopbackServer) -> OpenAIChat:
    return OpenAIChat("gpt-test", loopback.url + "/v1", KEY)


def _anthropic(loopback: LoopbackServer) -> Anthropic:
    return Anthropic("claude-test", loopback.url, KEY)


def _refused_once(
    events: list[Event], agent: Agent, loopback: LoopbackServer, text: str
) -> None:
    """The turn ended REFUSED after one request, ``text`` its answer and stored with
    the stop reason "refusal"."""
    done = _done(events)
    assert done.stop_reason is StopReason.REFUSED
    assert done.response == text
    stored = _last(agent)
    assert (stored.text, stored.stop_reason) == (text, "refusal")
    assert len(loopback.requests) == 1


def _last(agent: Agent) -> Message:
    return agent.conversation.messages[-1]


# -- REFUSED: the provider's filter withheld or cut the answer ------------------------


def test_chat_content_filter_ends_the_turn_refused(loopback: LoopbackServer) -> None:
    loopback.add(
        Reply.sse(openai_body(["Step one: take ", "the"], finish="content_filter"))
    )
    with _chat(loopback) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("how?"))
    done = _done(events)
    assert done.stop_reason is StopReason.REFUSED
    assert done.stop_reason.value == "refused"
    assert done.response == "Step one: take the"
    stored = _last(agent)
    assert (stored.role, stored.text, stored.stop_reason) == (
        "assistant",
        "Step one: take the",
        "refusal",
    )
    assert len(loopback.requests) == 1  # no retry, no corrective request


def test_anthropic_refusal_ends_the_turn_refused(loopback: LoopbackServer) -> None:
    loopback.add(
        Reply.sse(
            anthropic_body([("text", ["Sure, the first ", "part"])], stop="refusal")
        )
    )
    with _anthropic(loopback) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("how?"))
    _refused_once(events, agent, loopback, "Sure, the first part")


def test_an_anthropic_refusal_with_no_text_is_refused_not_empty(
    loopback: LoopbackServer,
) -> None:
    """The recorded refusal: an empty text block, then ``stop_reason: "refusal"``. It
    ends REFUSED (it raised EmptyAssistantResponse); nothing is stored for it, so the
    dialogue ends with the question, as after a cancel that streamed nothing."""
    loopback.add(Reply.sse(fixture("anthropic/refusal.sse")))
    with _anthropic(loopback) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("how?"))
    done = _done(events)
    assert (done.stop_reason, done.response, done.iterations) == (
        StopReason.REFUSED,
        "",
        1,
    )
    assert [m.role for m in agent.conversation.messages] == ["user"]


def test_responses_content_filter_ends_the_turn_refused(
    loopback: LoopbackServer,
) -> None:
    loopback.add(
        Reply.sse(responses_body(["Part of ", "it"], incomplete="content_filter"))
    )
    with OpenAIResponses("gpt-test", loopback.url + "/v1", KEY) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("how?"))
    _refused_once(events, agent, loopback, "Part of it")


def test_chat_refusal_field_ends_the_turn_refused(loopback: LoopbackServer) -> None:
    """The recorded gpt-4o refusal: its pieces come in ``delta.refusal``, then a plain
    ``finish_reason: "stop"``."""
    loopback.add(Reply.sse(fixture("openai/refusal.sse")))
    with _chat(loopback) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("how?"))
    _refused_once(
        events, agent, loopback, "I'm sorry, I can't assist with that request."
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(fixture("openai/text_with_usage.sse"), id="recorded-null"),
        pytest.param(
            openai_chunk({"role": "assistant", "content": None, "refusal": ""})
            + openai_body(["Hello", " there."]),
            id="empty",
        ),
    ],
)
def test_an_empty_chat_refusal_field_is_a_plain_answer(
    loopback: LoopbackServer, body: bytes
) -> None:
    loopback.add(Reply.sse(body))
    with _chat(loopback) as provider:
        agent = Agent(provider, config=FAST)
        done = _done(_events(agent.run("hi")))
    assert done.stop_reason is StopReason.END_TURN and done.response
    assert (_last(agent).text, _last(agent).stop_reason) == (done.response, "end_turn")


def _responses_refusal(pieces: list[str]) -> bytes:
    """A Responses stream as the API refuses: a message item whose one content part is
    a refusal, streamed as ``response.refusal.delta`` events, then a completed
    response (status "completed", no ``incomplete_details``)."""
    seq = iter(range(100))
    response: dict[str, object] = {"id": "resp_r", "object": "response",
                                   "model": "gpt-test", "status": "in_progress",
                                   "output": [], "usage": None}  # fmt: skip
    message: dict[str, object] = {"id": "msg_r", "type": "message", "role": "assistant",
                                  "status": "in_progress", "content": []}  # fmt: skip
    where: dict[str, object] = {"item_id": "msg_r", "output_index": 0,
                                "content_index": 0}  # fmt: skip
    part = {"type": "refusal", "refusal": "".join(pieces)}

    def ev(kind: str, **members: object) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **members})

    usage = {"input_tokens": 12, "output_tokens": 9}
    return b"".join(
        [
            ev("response.created", response=response),
            ev("response.output_item.added", output_index=0, item=message),
            ev("response.content_part.added", **where,
               part={"type": "refusal", "refusal": ""}),
            *(ev("response.refusal.delta", **where, delta=piece) for piece in pieces),
            ev("response.refusal.done", **where, refusal=part["refusal"]),
            ev("response.content_part.done", **where, part=part),
            ev("response.output_item.done", output_index=0,
               item={**message, "status": "completed", "content": [part]}),
            ev("response.completed",
               response={**response, "status": "completed", "usage": usage}),
        ]
    )  # fmt: skip


def test_responses_refusal_deltas_end_the_turn_refused(
    loopback: LoopbackServer,
) -> None:
    loopback.add(Reply.sse(_responses_refusal(["I'm sorry, ", "I can't help."])))
    with OpenAIResponses("gpt-test", loopback.url + "/v1", KEY) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("how?"))
    _refused_once(events, agent, loopback, "I'm sorry, I can't help.")


@dataclass
class City:
    name: str
    country: str


def test_a_refused_structured_answer_ends_refused_without_a_retry(
    loopback: LoopbackServer,
) -> None:
    """``output=T``: the cut answer is not reviewed (no corrective request, no
    OutputValidationError); ``output`` is None. Chat completions answers in text,
    Anthropic through the final_answer tool, which is answered as not run."""
    loopback.add(
        Reply.sse(openai_body(['{"name": "Par'], finish="content_filter")),
        Reply.sse(
            anthropic_body(
                [("tool", ("toolu_1", "final_answer", ['{"name": "Par']))],
                stop="refusal",
            )
        ),
    )
    with _chat(loopback) as provider:
        agent = Agent(provider, config=FAST)
        done = _done(_events(agent.run("capital of France?", output=City)))
    assert (done.stop_reason, done.output) == (StopReason.REFUSED, None)
    assert _last(agent).stop_reason == "refusal"
    with _anthropic(loopback) as provider:
        agent = Agent(provider, config=FAST)
        done = _done(_events(agent.run("capital of France?", output=City)))
    assert (done.stop_reason, done.output) == (StopReason.REFUSED, None)
    assistant, results = agent.conversation.messages[1:]
    assert assistant.stop_reason == "refusal"
    (result,) = results.tool_results
    assert result.is_error and "not run" in result.text
    assert len(loopback.requests) == 2  # one each


def test_the_calls_of_a_refused_response_do_not_run(loopback: LoopbackServer) -> None:
    ran: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    calls = [("call_1", "delete", ['{"path": "/tmp/x"}'])]
    loopback.add(Reply.sse(openai_body(tool_calls=calls, finish="content_filter")))
    with _chat(loopback) as provider:
        agent = Agent(provider, tools=[delete], config=FAST)
        events = _events(agent.run("clean up"))
    done = _done(events)
    assert done.stop_reason is StopReason.REFUSED and ran == []
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.is_error and "content filter" in (finished.error or "")
    roles = [m.role for m in agent.conversation.messages]
    assert roles == ["user", "assistant", "user"]  # every call keeps its answer
    (result,) = agent.conversation.messages[2].tool_results
    assert (result.tool_use_id, result.is_error) == ("call_1", True)
    assert done.tool_calls == 1 and len(loopback.requests) == 1


# -- a bare finish_reason "error" is a ServerError -------------------------------------


def test_a_bare_finish_reason_error_is_a_server_error_and_retried(
    loopback: LoopbackServer,
) -> None:
    loopback.add(
        Reply.sse(openai_body(["half an ans"], finish="error")),
        Reply.sse(openai_body(["The whole answer."])),
    )
    with _chat(loopback) as provider:
        agent = Agent(provider, config=FAST)
        events = _events(agent.run("hi"))
    done = _done(events)
    assert (done.stop_reason, done.response) == (
        StopReason.END_TURN,
        "The whole answer.",
    )
    (discarded,) = [e for e in events if isinstance(e, ResponseDiscarded)]
    assert discarded.text_chars == len("half an ans")
    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert retry.error == "ServerError"
    assert 'finish_reason "error"' in retry.message
    assert [m.text for m in agent.conversation.messages] == ["hi", "The whole answer."]


def test_a_bare_finish_reason_error_fails_the_turn_once_retries_run_out(
    loopback: LoopbackServer,
) -> None:
    """The same retryable ServerError as OpenRouter's shape, which sends an error
    object beside ``finish_reason: "error"`` (its message wins there)."""
    openrouter = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "error": {"code": 502, "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    loopback.add(
        Reply.sse(openai_body(["par"], finish="error")),
        Reply.sse(b"data: " + orjson.dumps(openrouter) + b"\n\n"),
    )
    config = Config(retry=RetryPolicy(max_attempts=1))
    raised: list[ServerError] = []
    with _chat(loopback) as provider:
        agent = Agent(provider, config=config)
        for _ in range(2):
            with agent.run("hi") as stream, pytest.raises(ServerError) as info:
                for _ in stream:
                    pass
            raised.append(info.value)
    bare, shaped = raised
    assert type(bare) is type(shaped) is ServerError
    assert bare.retryable and shaped.retryable
    assert bare.message == (
        'the server ended the response with finish_reason "error" and no error '
        "object saying why"
    )
    assert shaped.message == "Provider disconnected"
    assert [m.role for m in agent.conversation.messages] == ["user", "user"]


# -- PAUSED: Anthropic's pause_turn ----------------------------------------------------


def _sse(kind: str, obj: dict[str, object]) -> bytes:
    return f"event: {kind}\n".encode() + b"data: " + orjson.dumps(obj) + b"\n\n"


def _paused_server_tool_turn() -> bytes:
    """A web search the API ran itself, then ``stop_reason: "pause_turn"``: the
    server_tool_use and web_search_tool_result blocks navi_core does not keep."""
    start: dict[str, object] = {
        "type": "message",
        "id": "msg_p",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 30, "output_tokens": 1},
    }
    search: dict[str, object] = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
    }
    found: dict[str, object] = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://example.com",
                     "title": "Example", "encrypted_content": "abc"}],
    }  # fmt: skip
    return b"".join(
        [
            _sse("message_start", {"type": "message_start", "message": start}),
            _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {**search, "input": {}}}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "input_json_delta",
                                                   "partial_json": '{"query": "x"}'}}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("content_block_start", {"type": "content_block_start", "index": 1,
                                         "content_block": found}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 1}),
            _sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": "pause_turn"},
                                   "usage": {"output_tokens": 12}}),
            _sse("message_stop", {"type": "message_stop"}),
        ]
    )  # fmt: skip


def test_anthropic_pause_turn_ends_the_turn_paused(loopback: LoopbackServer) -> None:
    loopback.add(
        Reply.sse(anthropic_body([("text", ["Let me search."])], stop="pause_turn")),
        Reply.sse(_paused_server_tool_turn()),
    )
    with _anthropic(loopback) as provider:
        agent = Agent(provider, config=FAST)
        done = _done(_events(agent.run("news?")))
        assert (done.stop_reason, done.response) == (
            StopReason.PAUSED,
            "Let me search.",
        )
        assert done.stop_reason.value == "paused"
        assert (_last(agent).text, _last(agent).stop_reason) == (
            "Let me search.",
            "pause_turn",
        )
        # only server-tool blocks: nothing navi_core keeps, still PAUSED (not empty)
        done = _done(_events(agent.run("and now?")))
    assert (done.stop_reason, done.response) == (StopReason.PAUSED, "")
    assert len(loopback.requests) == 2


# -- the commands ----------------------------------------------------------------------


def _navi(
    *args: str, cwd: Path, stdin: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NAVI_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY, **extra)
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _stored(db: Path) -> list[Message]:
    with SQLiteStore(db) as store:
        (info,) = store.list()
        return list(store.load(info.id).messages)


def test_run_says_a_chat_content_filter_refused_and_exits_3(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        Reply.sse(openai_body(["Step one: ", "take"], finish="content_filter"))
    )
    db = tmp_path / "navi.db"
    result = _navi(
        "run", "how?", "--model", "m", "--base-url", f"{loopback.url}/v1",
        "--db", str(db), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    out = result.stdout
    assert "assistant: Step one: take\n" in out
    assert (
        "[refused: the model refused, or the provider's content filter withheld the answer]"
        in out
    )
    assert "[refused] 1 response" in out and "[end_turn]" not in out
    stored = _stored(db)
    assert [(m.role, m.text, m.stop_reason) for m in stored] == [
        ("user", "how?", None),
        ("assistant", "Step one: take", "refusal"),
    ]
    assert len(loopback.requests) == 1


def test_run_says_an_anthropic_refusal_refused_and_exits_3(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(Reply.sse(fixture("anthropic/refusal.sse")))
    result = _navi(
        "run", "how?", "--model", "claude-test", "--anthropic", "--base-url",
        loopback.url, "--db", str(tmp_path / "navi.db"), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert (
        "[refused: the model refused, or the provider's content filter" in result.stdout
    )
    assert "[refused] 1 response" in result.stdout


def test_run_says_a_pause_turn_paused(loopback: LoopbackServer, tmp_path: Path) -> None:
    loopback.add(
        Reply.sse(anthropic_body([("text", ["Searching."])], stop="pause_turn"))
    )
    result = _navi(
        "run", "news?", "--model", "claude-test", "--anthropic", "--base-url",
        loopback.url, "--db", str(tmp_path / "navi.db"), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "assistant: Searching.\n" in result.stdout
    assert "[paused: the provider paused its own server tools" in result.stdout
    assert "[paused] 1 response" in result.stdout


def test_run_retries_a_bare_finish_reason_error(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        Reply.sse(openai_body(["half"], finish="error")),
        Reply.sse(openai_body(["whole"])),
    )
    result = _navi(
        "run", "hi", "--model", "m", "--base-url", f"{loopback.url}/v1",
        "--db", str(tmp_path / "navi.db"), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "assistant: half\n[the response above was discarded]\n" in out
    assert "[attempt 1/4 failed (ServerError): retrying in" in out
    assert "assistant: whole\n[end_turn] 1 response" in out


def test_piped_chat_notes_a_refused_answer(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(
        Reply.sse(openai_body(["Step one: ", "take"], finish="content_filter")),
        Reply.sse(openai_body(["Hello."])),
    )
    result = _navi(
        "chat", "--model", "m", "--base-url", f"{loopback.url}/v1",
        "--db", str(tmp_path / "navi.db"), cwd=tmp_path, stdin="how?\nhi\n",
        HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"),
        XDG_STATE_HOME=str(tmp_path / ".state"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Step one: take" in out
    assert (
        "⊘ refused: the model refused, or the provider's content filter withheld the answer"
        in out
    )
    assert "[refused]" in out and "Hello." in out

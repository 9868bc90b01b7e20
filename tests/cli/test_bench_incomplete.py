"""``navi-core bench`` against servers that cut streams: every cut response is counted
and warned about, and no speed is computed over one.

A cut is what llama-cpp-python's server sends to a stream when a second request
arrives: ``[DONE]`` with no ``finish_reason`` before it. The client raises
``IncompleteResponse`` and retries; a turn whose every attempt is cut fails. Complete
responses here send no usage chunk, so their tokens are counted from deltas, and pace
their deltas, so their decode speed has a known ceiling.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import openai_body

from navi_core.cli.main import main

PAUSE = 0.01
WORDS = [f"w{i} " for i in range(6)]
#: a complete response's decode speed cannot exceed this: one token per pause
CEILING = 1 / PAUSE
WARNING = (
    "cut off before the end (IncompleteResponse): the server may cut streams under "
    "concurrency; speeds count complete responses only"
)


def _events(body: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]


def _without(body: bytes, marker: bytes) -> bytes:
    return b"".join(e for e in _events(body) if marker not in e)


def whole() -> Reply:
    """A complete answer of ``WORDS``: one delta per pause, no usage chunk."""
    body: list[bytes | float] = []
    for event in _events(_without(openai_body(WORDS), b'"usage"')):
        body += [event, PAUSE]
    return Reply(body=body[:-1])


def cut(words: int = 200, hold: float = 0.0) -> Reply:
    """``words`` deltas in one burst, then (after ``hold`` s) ``[DONE]`` with no
    ``finish_reason``: a burst like this, timed as a response, is thousands of tok/s."""
    burst = [f"b{i} " for i in range(words)]
    body = _without(openai_body(burst), b'"finish_reason":"stop"')
    done = b"data: [DONE]\n\n"
    return Reply(body=[body.replace(done, b""), hold, done])


def bench(server: LoopbackServer, *flags: str) -> int:
    return main(
        ["bench", "--base-url", f"{server.url}/v1", "--model", "fake", "--no-progress",
         *flags]
    )  # fmt: skip


def check_speeds(data: dict[str, Any]) -> None:
    """Every figure comes from complete responses of ``WORDS`` alone."""
    responses = data["responses"]
    assert responses
    for r in responses:
        assert r["tokens"] == len(WORDS)
        assert r["ttft"] is not None and 0 <= r["ttft"] <= r["seconds"]
        assert r["tokens_per_second"] is not None
        assert r["tokens_per_second"] <= CEILING * 1.05, r
        # a gap per delta after the first, none across a retry
        assert len(r["gaps"]) == len(WORDS) - 1
        assert max(r["gaps"]) < r["seconds"]
    totals = data["totals"]
    assert totals["output_tokens"] == len(WORDS) * len(responses)
    assert totals["tokens_per_second"] == pytest.approx(
        totals["output_tokens"] / totals["wall_seconds"]
    )
    metrics = data["metrics"]
    assert metrics["tokens_per_second"]["n"] == len(responses)
    assert metrics["tokens_per_second"]["p99"] <= CEILING * 1.05
    assert metrics["itl"]["n"] == (len(WORDS) - 1) * len(responses)


def test_cut_responses_are_counted_and_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "run.json"
    with LoopbackServer() as server:
        server.add(
            cut(), whole(),  # turn 0: cut once, then answered
            cut(), cut(), cut(), cut(),  # turn 1: every attempt cut, the turn fails
            whole(),  # turn 2
        )  # fmt: skip
        status = bench(server, "--turns", "3", "--json", str(out_json))
        assert server.pending == 0
    assert status == 1  # a turn failed
    out = capsys.readouterr().out
    assert f"warning: 5 responses were {WARNING}" in out
    assert "cut-off responses 5 (4 retried, 1 failed a turn)" in out
    assert "error: IncompleteResponse:" in out
    data = orjson.loads(out_json.read_bytes())
    totals = data["totals"]
    assert totals["incomplete_responses"] == 5
    assert totals["incomplete_retried"] == 4
    assert totals["incomplete_failed_turns"] == 1
    assert totals["failed_turns"] == 1 and totals["responses"] == 2
    assert data["warnings"] == [f"5 responses were {WARNING}"]
    turns = sorted(data["turn_samples"], key=lambda t: t["turn"])
    assert [t["incomplete"] for t in turns] == [1, 4, 0]
    assert [r["incomplete_before"] for r in data["responses"]] == [1, 0]
    check_speeds(data)


def test_speeds_count_complete_responses_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cut burst of 200 deltas is neither tokens nor time of the response that
    follows it: the retried response is timed from its own request."""
    out_json = tmp_path / "run.json"
    with LoopbackServer() as server:
        server.add(cut(), whole(), whole())
        assert bench(server, "--turns", "2", "--json", str(out_json)) == 0
    check_speeds(orjson.loads(out_json.read_bytes()))


def test_a_run_without_cuts_says_so_and_warns_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "run.json"
    with LoopbackServer() as server:
        server.add(whole(), whole())
        status = bench(server, "--turns", "2", "--json", str(out_json))
    assert status == 0
    out = capsys.readouterr().out
    assert "cut-off responses 0" in out
    assert "warning" not in out
    data = orjson.loads(out_json.read_bytes())
    assert data["totals"]["incomplete_responses"] == 0
    assert data["warnings"] == []
    check_speeds(data)


def test_one_cut_response_is_named_in_the_singular(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LoopbackServer() as server:
        server.add(cut(), whole())
        assert bench(server, "--turns", "1") == 0
    out = capsys.readouterr().out
    assert f"warning: 1 response was {WARNING}" in out
    assert "cut-off responses 1 (1 retried, 0 failed a turn)" in out


def test_tool_overhead_ends_at_the_first_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The request after a tool call is cut and retried: the tool round trip ends when
    that request is first sent, not after the cut attempt and the retry's wait."""
    hold = 0.5
    call = openai_body(tool_calls=[("call_1", "add", ['{"a": 2, "b": 3}'])])
    out_json = tmp_path / "run.json"
    with LoopbackServer() as server:
        server.add(Reply.sse(call), cut(words=3, hold=hold), whole())
        status = bench(
            server, "--turns", "1", "--tools", "--steps", "1", "--json", str(out_json)
        )
        requests = [r.json for r in server.requests]
    assert status == 0, capsys.readouterr()
    assert [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"] == [
        "5.0"
    ]
    data = orjson.loads(out_json.read_bytes())
    first, answer = data["responses"]
    assert first["tool_calls"] == 1
    assert first["tool_overhead"] is not None and first["tool_overhead"] < hold
    assert answer["ttft"] is not None and 0 <= answer["ttft"] < hold
    assert answer["incomplete_before"] == 1


class CuttingServer(LoopbackServer):
    """Cuts every stream still running when another request arrives, as
    llama-cpp-python's server does; counts the streams it cut."""

    def __init__(self, words: int) -> None:
        super().__init__()
        self.words = words
        self.arrivals = 0
        self.cuts = 0

    def _take_reply_locked(self) -> Reply:
        self.arrivals += 1
        return Reply(body=self._stream(self.arrivals))

    def _stream(self, mine: int) -> Iterator[bytes | float]:
        texts = [f"w{i} " for i in range(self.words)]
        usage = {"prompt_tokens": 9, "completion_tokens": self.words}
        events = _events(openai_body(texts, usage=usage))
        # the finish_reason, usage and [DONE] go out together: past them, nothing cuts
        body = [*events[:-3], b"".join(events[-3:])]
        for i, event in enumerate(body):
            with self._lock:
                if self.arrivals > mine:
                    self.cuts += 1
                    yield b"data: [DONE]\n\n"
                    return
            if i:
                yield PAUSE
            yield event


def test_a_server_cutting_under_concurrency_is_counted_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "run.json"
    words = 30  # 0.3 s a stream: the two workers' requests overlap
    with CuttingServer(words) as server:
        status = bench(
            server, "--concurrency", "2", "--turns", "2", "--json", str(out_json)
        )
        cuts = server.cuts
    assert cuts >= 1
    out = capsys.readouterr().out
    data = orjson.loads(out_json.read_bytes())
    totals = data["totals"]
    assert status == (1 if totals["failed_turns"] else 0)
    assert totals["incomplete_responses"] == cuts
    assert totals["incomplete_retried"] + totals["incomplete_failed_turns"] == cuts
    assert totals["incomplete_failed_turns"] == totals["failed_turns"]
    noun = "response was" if cuts == 1 else "responses were"
    assert f"warning: {cuts} {noun} {WARNING}" in out
    assert totals["responses"] == 4 - totals["failed_turns"]
    for r in data["responses"]:
        assert r["tokens"] == words  # usage of the complete response alone
        assert 0 <= r["ttft"] <= r["seconds"]
        assert r["tokens_per_second"] <= CEILING * 1.05
        assert len(r["gaps"]) == words - 1

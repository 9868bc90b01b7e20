"""Counts the server did not report are shown as estimated: the chat's status line,
``navi-core run``'s summary and ``navi-core bench``'s table, which also counts calls written as text apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply

from navi_core.cli.bench.report import table
from navi_core.cli.chat.render import Painter, status_line
from navi_core.cli.console import turn_summary
from navi_core.cli.main import main
from navi_core.conversation import Usage
from navi_core.events import StopReason, TurnComplete


def _done(usage: Usage) -> TurnComplete[Any]:
    return TurnComplete(StopReason.END_TURN, "hi", 1, 0, usage)


def test_the_status_line_marks_estimated_counts() -> None:
    painter = Painter(color=False, width=lambda: 80)
    estimated = status_line(_done(Usage(12, 3, estimated=True)), 0.5, None, painter)
    assert "12 in / 3 out tokens (estimated)" in estimated
    reported = status_line(_done(Usage(12, 3)), 0.5, None, painter)
    assert "12 in / 3 out tokens" in reported and "estimated" not in reported


def test_the_run_summary_marks_estimated_counts() -> None:
    estimated = turn_summary(_done(Usage(12, 3, estimated=True)), "s" * 12)
    assert "[end_turn] 1 response, 0 tool calls, 12 in / 3 out tokens (estimated)" in (
        estimated
    )
    assert "estimated" not in turn_summary(_done(Usage(12, 3)), "s" * 12)


def test_estimated_usage_adds_up_as_estimated() -> None:
    assert (Usage(1, 1) + Usage(2, 2, estimated=True)).estimated
    assert not (Usage(1, 1) + Usage(2, 2)).estimated


def test_bench_counts_calls_written_as_text_apart() -> None:
    totals = {"turns": 1, "failed_turns": 0, "responses": 2, "tool_calls": 3,
              "text_tool_calls": 2, "estimated_responses": 2, "output_tokens": 9,
              "wall_seconds": 1.0, "tokens_per_second": 9.0, "client_cpu_seconds": 0.1,
              "client_cpu_share": 0.1, "cpu_count": 2}  # fmt: skip
    summary = {"metrics": {"ttft": None, "itl": None, "tokens_per_second": None,
                           "tool_overhead": None, "turn": None},
               "totals": totals, "workload": {"tools": True}, "errors": []}  # fmt: skip
    text = table(summary)
    assert "tool calls 1 native / 2 written as text" in text
    assert "output tokens 9 (estimated)" in text


def _local(*texts: str) -> bytes:
    """A stream with the content ``texts`` and no usage, as llama-cpp-python sends."""
    out = [
        b"data: "
        + orjson.dumps(
            {"id": "c", "model": "fake",
             "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]}
        )
        + b"\n\n"
        for t in texts
    ]  # fmt: skip
    stop = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return b"".join(out) + b"data: " + orjson.dumps(stop) + b"\n\ndata: [DONE]\n\n"


def test_bench_reports_a_call_written_as_text_against_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    out_json = tmp_path / "run.json"
    with LoopbackServer() as server:
        server.add(Reply.sse(_local(call[:20], call[20:])), Reply.sse(_local("3.")))
        status = main(
            ["bench", "--base-url", f"{server.url}/v1", "--model", "fake", "--tools",
             "--steps", "1", "--turns", "1", "--no-progress", "--json", str(out_json)]
        )  # fmt: skip
    assert status == 0
    assert "tool calls 0 native / 1 written as text" in capsys.readouterr().out
    totals = orjson.loads(out_json.read_bytes())["totals"]
    assert (totals["tool_calls"], totals["text_tool_calls"]) == (1, 1)
    assert totals["estimated_responses"] == 2

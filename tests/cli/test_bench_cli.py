"""``navi-core bench`` against a loopback OpenAI-compatible server that runs tool loops.

The server answers like a model asked to chain additions: while a turn has fewer than
``steps`` tool results it calls ``add``, then it streams a text answer in chunks with
short pauses between them (so inter-token gaps exist). Everything goes over real HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer, Reply
from terminal_check import HOSTILE, leaks

from navi_core.cli.bench.report import percentiles, table
from navi_core.cli.main import main


def _chunk(
    delta: dict[str, Any] | None, finish: str | None = None, **extra: Any
) -> bytes:
    choices = [] if delta is None else [
        {"index": 0, "delta": delta, "finish_reason": finish}
    ]  # fmt: skip
    obj = {"id": "c", "object": "chat.completion.chunk", "model": "fake",
           "choices": choices, **extra}  # fmt: skip
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _usage(tokens: int) -> bytes:
    usage = {
        "prompt_tokens": 20,
        "completion_tokens": tokens,
        "total_tokens": 20 + tokens,
    }
    return _chunk(None, usage=usage) + b"data: [DONE]\n\n"


WORDS = ["The ", "answer ", "is ", "forty", "-two", "."]


class ToolLoopServer(LoopbackServer):
    """Calls ``add`` until the turn holds ``steps`` tool results, then answers."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def _take_reply_locked(self) -> Reply:
        messages = self.requests[-1].json["messages"]
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        results = sum(m["role"] == "tool" for m in messages[last_user:])
        if results < self.steps:
            call = {"index": 0, "id": f"call_{len(self.requests)}", "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}  # fmt: skip
            body: list[bytes | float] = [
                _chunk({"role": "assistant", "tool_calls": [call]}),
                0.002,
                _chunk({}, "tool_calls") + _usage(12),
            ]
            return Reply(body=body)
        body = [_chunk({"role": "assistant", "content": ""})]
        for word in WORDS:
            body += [0.002, _chunk({"content": word})]
        body.append(_chunk({}, "stop") + _usage(len(WORDS)))
        return Reply(body=body)


def bench(server: LoopbackServer, *flags: str) -> int:
    return main(["bench", "--base-url", f"{server.url}/v1", "--model", "fake", *flags])


def test_tool_loops_from_several_workers_are_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_png = tmp_path / "run.json", tmp_path / "run.png"
    with ToolLoopServer(steps=2) as server:
        status = bench(
            server, "--concurrency", "3", "--turns", "2", "--tools", "--steps", "2",
            "--json", str(out_json), "--png", str(out_png),
        )  # fmt: skip
        requests = [r.json for r in server.requests]
    assert status == 0
    captured = capsys.readouterr()
    assert "6/6 turns" in captured.err  # the progress bar reached the end
    for label in ("time to first token", "inter-token latency", "tool round-trip"):
        assert label in captured.out
    data = orjson.loads(out_json.read_bytes())
    totals = data["totals"]
    assert totals["turns"] == 6 and totals["failed_turns"] == 0
    assert totals["responses"] == len(requests) == 18  # 3 responses per turn
    assert totals["tool_calls"] == 12
    assert totals["output_tokens"] == 12 * 12 + 6 * len(WORDS)
    assert totals["client_cpu_seconds"] > 0 and totals["client_cpu_share"] > 0
    assert all(
        t["iterations"] == 3 and t["tool_calls"] == 2 for t in data["turn_samples"]
    )
    metrics = data["metrics"]
    assert metrics["ttft"]["n"] == 18
    assert metrics["tool_overhead"]["n"] == 12  # every response that called a tool
    assert metrics["itl"]["n"] >= 6 * (len(WORDS) - 1)
    assert metrics["ttft"]["p50"] <= metrics["ttft"]["p99"]
    # the tool really ran: its sum went back to the server
    outputs = {
        m["content"] for r in requests for m in r["messages"] if m["role"] == "tool"
    }
    assert outputs == {"5.0"}
    # a worker's second turn carries its first turn's history
    # system, turn 1 (user, 2 x (call, result), answer), then user, 2 x (call, result)
    assert max(len(r["messages"]) for r in requests) == 1 + 6 + 1 + 2 * 2
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plain_turns_have_no_tool_overhead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "plain.json"
    with ToolLoopServer(steps=0) as server:
        status = bench(server, "--turns", "3", "--no-progress", "--json", str(out_json))
    assert status == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    data = orjson.loads(out_json.read_bytes())
    assert data["totals"]["responses"] == 3 and data["totals"]["tool_calls"] == 0
    assert data["metrics"]["tool_overhead"] is None
    assert all(r["tool_overhead"] is None for r in data["responses"])
    assert data["metrics"]["tokens_per_second"]["n"] == 3


def test_failed_turns_are_counted_and_named(capsys: pytest.CaptureFixture[str]) -> None:
    refusal = {"error": {"message": "model not loaded", "type": "invalid_request"}}
    with LoopbackServer() as server:
        server.add(Reply.json(400, refusal), Reply.json(400, refusal))
        status = bench(server, "--turns", "2", "--no-progress")
    assert status == 1
    out = capsys.readouterr().out
    assert "2 failed" in out and "model not loaded" in out


def test_an_unwritable_json_file_fails_after_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "run.json"
    with ToolLoopServer(steps=0) as server:
        status = bench(server, "--no-progress", "--turns", "1", "--json", str(target))
    assert status == 1
    captured = capsys.readouterr()
    assert "time to first token" in captured.out
    assert captured.err.startswith("error:") and "run.json" in captured.err


@pytest.mark.parametrize(
    "flag", ["--concurrency", "--turns", "--steps", "--max-tokens"]
)
def test_counts_below_one_are_refused(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["bench", "--model", "m", "--base-url", "http://127.0.0.1:9", flag, "0"])
        == 2
    )
    assert f"{flag} must be at least 1" in capsys.readouterr().err


def test_percentiles_interpolate_between_ranks() -> None:
    stats = percentiles([4.0, 1.0, 3.0, 2.0, 5.0])
    assert stats is not None
    assert stats["p50"] == 3.0 and stats["mean"] == 3.0 and stats["n"] == 5
    assert stats["p90"] == pytest.approx(4.6)
    assert percentiles([]) is None


def test_tools_asked_but_never_called_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A model that answers in text though ``--tools`` was given: the table says no
    tool round trip was measured, instead of a bare ``-`` row."""
    with ToolLoopServer(steps=0) as server:
        status = bench(server, "--turns", "2", "--no-progress", "--tools")
    assert status == 0
    out = capsys.readouterr().out
    assert "tool calls 0" in out
    assert "--tools was given but the model called no tool" in out


def test_small_values_keep_three_significant_digits() -> None:
    """Loopback gaps are fractions of a microsecond: the ms column still shows them,
    and values that fill the column keep the metric's own decimals."""
    gaps = percentiles([0.00000042, 0.0000005, 0.000037])
    slow = percentiles([0.0123, 0.0456, 0.0789])
    metrics: dict[str, Any] = {
        "ttft": slow, "itl": gaps, "tokens_per_second": None,
        "tool_overhead": None, "turn": None,
    }  # fmt: skip
    totals = {"turns": 1, "failed_turns": 0, "responses": 1, "tool_calls": 0,
              "output_tokens": 3, "wall_seconds": 1.0, "tokens_per_second": 3.0,
              "client_cpu_seconds": 0.1, "client_cpu_share": 0.1, "cpu_count": 2}  # fmt: skip
    summary = {"metrics": metrics, "totals": totals, "workload": {"tools": False},
               "errors": []}  # fmt: skip
    lines = {
        line[:28].strip(): line[28:].split() for line in table(summary).splitlines()
    }
    assert lines["inter-token latency"][0] == "0.000500"  # p50, in ms
    assert float(lines["inter-token latency"][2]) == pytest.approx(0.0363, rel=0.01)
    assert lines["time to first token"][0] == "45.600"


def test_a_server_error_is_named_inert(capsys: pytest.CaptureFixture[str]) -> None:
    with LoopbackServer() as server:
        server.add(Reply.json(400, {"error": {"message": HOSTILE}}))
        status = bench(server, "--turns", "1", "--no-progress")
    assert status == 1
    out = capsys.readouterr().out
    assert "error: BadRequest: A␛]52;c;SGVsbG8=␇B" in out
    assert leaks(out) == [], out


def test_the_png_help_names_a_pip_command_that_works_from_a_clone(
    tmp_path: Path,
) -> None:
    """navi-core is not on PyPI: ``pip install navi-core[bench]`` would fail; the
    README installs from a clone, as the bench page does (``'.[bench]'``)."""
    import subprocess
    import sys

    from test_chat import ROOT, chat_env

    result = subprocess.run(
        [sys.executable, "-m", "navi_core", "bench", "--help"],
        cwd=tmp_path,
        env=chat_env(tmp_path),  # this checkout's navi_core
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert (
        "--png FILE write a chart (needs matplotlib, in the bench extra: "
        "pip install '.[bench]' from a clone)"
    ) in text, text
    assert "navi-core[bench]" not in text
    doc = (ROOT / "docs" / "commands" / "bench.md").read_text(encoding="utf-8")
    assert "pip install '.[bench]'" in doc

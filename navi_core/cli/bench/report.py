"""What ``navi-core bench`` prints and writes: a summary table, JSON and a PNG chart.

The summary holds percentiles (p50, p90, p99, mean) of time to first token,
inter-token latency, per-response decode speed, tool round-trip overhead and turn
time, plus the totals: tokens, aggregate tokens/s and the client's own CPU share
(process CPU time over wall time; 100 % is one core busy the whole run).

Responses cut off before their API's terminal marker (``IncompleteResponse``) are
counted and warned about; every speed and token count covers complete responses only,
since a cut stream's burst of deltas timed as a response reads as thousands of tok/s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ..._extras import install_command
from .._terminal_text import terminal_safe
from .workload import BenchResult

__all__ = [
    "incomplete_warning",
    "percentiles",
    "summarize",
    "table",
    "write_json",
    "write_png",
]

#: (key, label, unit scale, unit, decimals)
METRICS = (
    ("ttft", "time to first token", 1e3, "ms", 3),
    ("itl", "inter-token latency", 1e3, "ms", 3),
    ("tokens_per_second", "decode speed per response", 1.0, "tok/s", 0),
    ("tool_overhead", "tool round-trip overhead", 1e3, "ms", 3),
    ("turn", "turn time", 1.0, "s", 3),
)


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    """p50, p90, p99 (linear between ranks), mean and count; None when empty."""
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        pos = q * (len(ordered) - 1)
        low = int(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return {
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "mean": sum(ordered) / len(ordered),
        "n": float(len(ordered)),
    }


def incomplete_warning(count: int) -> str:
    """What to say when ``count`` responses were cut off."""
    were = "response was" if count == 1 else "responses were"
    return (
        f"{count} {were} cut off before the end (IncompleteResponse): the server may "
        "cut streams under concurrency; speeds count complete responses only"
    )


def summarize(result: BenchResult) -> dict[str, Any]:
    """The run as plain data (what ``--json`` writes, without the raw samples)."""
    responses = result.responses
    series: dict[str, list[float]] = {
        "ttft": [r.ttft for r in responses if r.ttft is not None],
        "itl": [g for r in responses for g in r.gaps],
        "tokens_per_second": [
            s for r in responses if (s := r.tokens_per_second) is not None
        ],
        "tool_overhead": [
            r.tool_overhead for r in responses if r.tool_overhead is not None
        ],
        "turn": [t.seconds for t in result.turns if t.error is None],
    }
    tokens = sum(r.tokens for r in responses)
    retried = sum(t.incomplete_retried for t in result.turns)
    cut_turns = sum(t.ended_incomplete for t in result.turns)
    cut = retried + cut_turns
    wall = result.wall
    work = result.workload
    return {
        "model": result.model,
        "base_url": result.base_url,
        "workload": {
            "concurrency": work.concurrency,
            "turns": work.turns,
            "tools": work.tools,
            "steps": work.steps,
            "max_tokens": work.max_tokens,
        },
        "totals": {
            "turns": len(result.turns),
            "failed_turns": sum(t.error is not None for t in result.turns),
            "responses": len(responses),
            "incomplete_responses": cut,
            "incomplete_retried": retried,
            "incomplete_failed_turns": cut_turns,
            "tool_calls": sum(r.tool_calls for r in responses),
            "text_tool_calls": sum(r.text_calls for r in responses),
            "output_tokens": tokens,
            "estimated_responses": sum(r.estimated for r in responses),
            "wall_seconds": wall,
            "tokens_per_second": tokens / wall if wall > 0 else 0.0,
            "client_cpu_seconds": result.cpu,
            "client_cpu_share": result.cpu / wall if wall > 0 else 0.0,
            "cpu_count": os.cpu_count() or 1,
        },
        "metrics": {key: percentiles(series[key]) for key, *_ in METRICS},
        "errors": sorted({t.error for t in result.turns if t.error is not None}),
        "warnings": [incomplete_warning(cut)] if cut else [],
    }


def _cell(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` places, or more (up to 6) until it shows three
    significant digits: loopback inter-token gaps are fractions of a microsecond."""
    while decimals < 6 and value and abs(value) < 10 ** (2 - decimals):
        decimals += 1
    return f"{value:>12.{decimals}f}"


def table(summary: dict[str, Any]) -> str:
    """The summary as a text table. Each error, which may quote a server's body, is
    one line with its controls shown as marks (``terminal_safe``)."""
    head = "".join(f"{q:>12}" for q in ("p50", "p90", "p99", "mean"))
    lines = [f"{'metric':<28}{head}  unit   n"]
    for key, label, scale, unit, decimals in METRICS:
        stats = summary["metrics"][key]
        if stats is None:
            lines.append(f"{label:<28}{'-':>12}{'-':>12}{'-':>12}{'-':>12}  {unit}")
            continue
        cells = "".join(
            _cell(stats[q] * scale, decimals) for q in ("p50", "p90", "p99", "mean")
        )
        lines.append(f"{label:<28}{cells}  {unit:<6} {int(stats['n'])}")
    t = summary["totals"]
    text_calls = t.get("text_tool_calls", 0)  # calls the model wrote as text
    lines += [
        "",
        f"turns {t['turns']} ({t['failed_turns']} failed), responses {t['responses']}, "
        f"tool calls {t['tool_calls'] - text_calls} native / {text_calls} written "
        f"as text, output tokens {t['output_tokens']}"
        + (" (estimated)" if t.get("estimated_responses") else ""),
        _cut_line(t),
        f"wall {t['wall_seconds']:.2f} s, aggregate {t['tokens_per_second']:.1f} tok/s, "
        f"client CPU {t['client_cpu_seconds']:.2f} s = {t['client_cpu_share']:.1%} of "
        f"one core ({t['cpu_count']} cores)",
    ]
    if summary["workload"]["tools"] and not t["tool_calls"]:
        lines.append(
            "note: --tools was given but the model called no tool, so no tool"
            " round trip was measured (does the server run a model that calls tools?)"
        )
    lines += [f"warning: {w}" for w in summary.get("warnings", ())]
    lines += [f"error: {terminal_safe(' '.join(e.split()))}" for e in summary["errors"]]
    return "\n".join(lines)


def _cut_line(totals: dict[str, Any]) -> str:
    """The count of cut-off responses, always shown: 0 says the run was clean (as
    does a summary that holds no count)."""
    count = totals.get("incomplete_responses", 0)
    if not count:
        return "cut-off responses 0"
    return (
        f"cut-off responses {count} ({totals['incomplete_retried']} retried, "
        f"{totals['incomplete_failed_turns']} failed a turn)"
    )


def write_json(path: Path, result: BenchResult, summary: dict[str, Any]) -> None:
    """The summary and every raw sample, as JSON."""
    data = dict(summary)
    data["responses"] = [
        {
            "worker": r.worker,
            "turn": r.turn,
            "iteration": r.iteration,
            "seconds": r.seconds,
            "ttft": r.ttft,
            "tokens": r.tokens,
            "tool_calls": r.tool_calls,
            "text_tool_calls": r.text_calls,
            "estimated": r.estimated,
            "tool_overhead": r.tool_overhead,
            "tokens_per_second": r.tokens_per_second,
            "gaps": r.gaps,
            "incomplete_before": r.incomplete_before,
        }
        for r in result.responses
    ]
    data["turn_samples"] = [
        {
            "worker": t.worker,
            "turn": t.turn,
            "seconds": t.seconds,
            "iterations": t.iterations,
            "tool_calls": t.tool_calls,
            "stop_reason": t.stop_reason,
            "error": t.error,
            "incomplete": t.incomplete,
            "ended_incomplete": t.ended_incomplete,
        }
        for t in result.turns
    ]
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))


def check_png() -> None:
    """Fail before the run, not after it, when matplotlib is missing.

    Raises:
        ImportError: with the extra to install.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "--png needs matplotlib: " + install_command("bench")
        ) from exc


def write_png(path: Path, result: BenchResult, summary: dict[str, Any]) -> None:
    """Four panels: TTFT and inter-token latency histograms, decode speed, turns."""
    check_png()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    responses = result.responses
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    ttft = [r.ttft * 1e3 for r in responses if r.ttft is not None]
    gaps = [g * 1e3 for r in responses for g in r.gaps]
    speed = [s for r in responses if (s := r.tokens_per_second) is not None]
    turns = sorted(result.turns, key=lambda t: (t.turn, t.worker))
    axes[0][0].hist(ttft or [0.0], bins=30, color="#3b75af")
    axes[0][0].set(title="time to first token", xlabel="ms", ylabel="responses")
    axes[0][1].hist(gaps or [0.0], bins=50, color="#519e3e")
    axes[0][1].set(title="inter-token latency", xlabel="ms", ylabel="tokens")
    axes[0][1].set_yscale("log")
    axes[1][0].hist(speed or [0.0], bins=30, color="#ef8636")
    axes[1][0].set(title="decode speed per response", xlabel="tok/s")
    axes[1][1].scatter(
        [t.turn for t in turns], [t.seconds for t in turns], s=12, color="#8d69b8"
    )
    axes[1][1].set(title="turn time by turn index", xlabel="turn", ylabel="s")
    totals = summary["totals"]
    work = summary["workload"]
    cut = totals["incomplete_responses"]
    fig.suptitle(
        f"{summary['model']} at {summary['base_url']}: concurrency "
        f"{work['concurrency']}, {totals['turns']} turns, "
        f"{totals['tokens_per_second']:.0f} tok/s, client CPU "
        f"{totals['client_cpu_share']:.0%}"
        + (f", {cut} responses cut off" if cut else "")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

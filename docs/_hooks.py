"""MkDocs hooks: tables rendered from benchmark JSON, and fences cleaned of test marks.

``<!-- bench-table: FILE.json -->`` in a page becomes the table of a ``navi-core bench
--json`` file kept in ``docs/data/``, and ``<!-- bench-results: FILE.json -->`` the
tables a ``bench/`` script wrote with ``--json`` (``bench/_record.py``), with the
command that wrote them: the numbers on the site are the ones a run printed. A code fence's ``test="..."``/``lint="..."``/``reason="..."`` settings are for
``tests/test_docs.py`` and are removed before the page is rendered; the others (a
``title="..."``) are kept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
MARKER = re.compile(r"<!-- bench-table: (?P<file>[\w.-]+\.json) -->")
RESULTS = re.compile(r"<!-- bench-results: (?P<file>[\w.-]+\.json) -->")
FENCE_LINE = re.compile(r'^[ \t]*```+\w+(?:[ \t]+\w+="[^"]*")+[ \t]*$', re.M)
#: the settings of a fence that only tests/test_docs.py reads
TEST_SETTING = re.compile(r'[ \t]+(?:test|lint|reason)="[^"]*"')

#: (key in "metrics", label, scale to the unit, unit, decimals)
METRICS = (
    ("ttft", "time to first token", 1e3, "ms", 2),
    ("itl", "inter-token latency", 1e6, "µs", 2),
    ("tokens_per_second", "decode speed per response", 1.0, "tok/s", 0),
    ("tool_overhead", "tool round-trip overhead", 1e3, "ms", 2),
    ("turn", "turn time", 1e3, "ms", 2),
)


def bench_table(data: dict[str, Any]) -> str:
    """The Markdown table and totals line of one ``navi-core bench --json`` file."""
    rows = [
        "| metric | p50 | p90 | p99 | mean | unit | samples |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label, scale, unit, decimals in METRICS:
        stats = data["metrics"].get(key)
        if not stats:
            continue
        cells = [
            f"{stats[q] * scale:,.{decimals}f}" for q in ("p50", "p90", "p99", "mean")
        ]
        rows.append(f"| {label} | {' | '.join(cells)} | {unit} | {int(stats['n']):,} |")
    work, tot = data["workload"], data["totals"]
    tools = f", tool loops of {work['steps']} calls" if work["tools"] else ""
    rows.append("")
    rows.append(
        f"Workload: {work['concurrency']} worker(s) x {work['turns']} turns{tools}, "
        f"`--max-tokens {work['max_tokens']}`, model `{data['model']}`. "
        f"Totals: {tot['turns']} turns ({tot['failed_turns']} failed), "
        f"{tot['responses']} responses ({tot['incomplete_responses']} cut off), "
        f"{tot['tool_calls']} tool calls, {tot['output_tokens']:,} output tokens in "
        f"{tot['wall_seconds']:.2f} s: {tot['tokens_per_second']:,.0f} tok/s aggregate; "
        f"client CPU {tot['client_cpu_share']:.0%} of one core "
        f"({tot['cpu_count']} cores)."
    )
    return "\n".join(rows)


def results_tables(data: dict[str, Any]) -> str:
    """The tables, goals and command of one ``bench/`` script's ``--json`` file."""
    out = [
        f"`{data['command']}` ({data['core']} core, Python {data['python']}, "
        f"{data['cpus']} CPUs, {data['date']}):",
        "",
    ]
    for t in data["tables"]:
        out.append(f"**{_cell(t['title'])}**")
        out.append("")
        out.append("| " + " | ".join(map(_cell, t["columns"])) + " |")
        out.append("|" + "---|" * len(t["columns"]))
        out.extend("| " + " | ".join(map(_cell, row)) + " |" for row in t["rows"])
        if t.get("note"):
            out += ["", _cell(t["note"])]
        out.append("")
    for g in data.get("goals", ()):
        out.append(f"- {_cell(g['goal'])}: {'met' if g['met'] else '**missed**'}")
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(markdown: str, data_dir: Path = DATA) -> str:
    """``markdown`` with its bench-table markers rendered and fence settings removed."""

    def table(match: re.Match[str]) -> str:
        path = data_dir / match["file"]
        return bench_table(json.loads(path.read_text(encoding="utf-8")))

    def results(match: re.Match[str]) -> str:
        path = data_dir / match["file"]
        return results_tables(json.loads(path.read_text(encoding="utf-8")))

    def fence(match: re.Match[str]) -> str:
        return TEST_SETTING.sub("", match[0]).rstrip()

    markdown = RESULTS.sub(results, MARKER.sub(table, markdown))
    return FENCE_LINE.sub(fence, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: every page's Markdown passes through ``render``."""
    return render(markdown)

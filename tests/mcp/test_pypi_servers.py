"""Real MCP servers from PyPI (``mcp-server-time``, ``mcp-server-git``, in the
``test`` extra) driven through ``MCPTools`` over stdio in an agent turn. Skipped when
they are not installed; under ``CI=true`` a missing one fails instead."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from navi_core import Agent, MCPTools, Scripted, Text, ToolUse
from navi_core.conversation import ToolResult


def server(module: str, *args: str) -> list[str]:
    """The argv that runs ``module``'s server, or a skip (a failure on CI)."""
    if importlib.util.find_spec(module) is None:
        package = module.replace("_", "-")
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI is set but {package} is not installed (the test extra)")
        pytest.skip(f"{package} is not installed (pip install {package})")
    return [sys.executable, "-m", module, *args]


def turn(tools: MCPTools, *calls: ToolUse) -> list[ToolResult]:
    """Run a turn whose model makes ``calls``; the results, in order."""
    agent = Agent(Scripted([list(calls), [Text("done")]]), tools=[tools])
    with agent.run("go") as stream:
        list(stream)
    return list(agent.conversation.messages[-2].tool_results)


def text(result: ToolResult) -> str:
    assert not result.is_error, result
    return "".join(getattr(p, "text", "") for p in result.parts)


def test_mcp_server_time_converts_and_tells_the_time() -> None:
    argv = server("mcp_server_time", "--local-timezone", "UTC")
    with MCPTools(argv) as tools:
        assert {s.name for s in tools.tools()} >= {"get_current_time", "convert_time"}
        convert = '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'
        now, converted = turn(
            tools,
            ToolUse("c1", "get_current_time", '{"timezone": "UTC"}'),
            ToolUse("c2", "convert_time", convert),
        )
    assert '"timezone": "UTC"' in text(now)
    assert "T21:00:00+09:00" in text(converted)  # Tokyo keeps no summer time


def test_mcp_server_git_reads_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=Navi", "-c", "user.email=navi@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "notes.txt").write_text("tide tables\n", encoding="utf-8")
    subprocess.run([*git, "add", "notes.txt"], cwd=repo, check=True)
    subprocess.run(
        [*git, "-c", "commit.gpgsign=false", "commit", "-qm", "Add the tide notes"],
        cwd=repo,
        check=True,
    )
    (repo / "notes.txt").write_text("tide tables, revised\n", encoding="utf-8")
    argv = server("mcp_server_git", "--repository", str(repo))
    where = f'{{"repo_path": "{repo}"}}'
    with MCPTools(argv) as tools:
        log, status, diff = turn(
            tools,
            ToolUse("c1", "git_log", f'{{"repo_path": "{repo}", "max_count": 1}}'),
            ToolUse("c2", "git_status", where),
            ToolUse("c3", "git_diff_unstaged", where),
        )
    assert "Add the tide notes" in text(log)
    assert "notes.txt" in text(status)
    assert "+tide tables, revised" in text(diff)

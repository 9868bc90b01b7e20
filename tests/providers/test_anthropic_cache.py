"""Anthropic prompt caching: the breakpoints each request carries (at most four, on
the tools, the system prompt and the two newest user messages), none with
``cache=False``, and the cache usage the API reports."""

from __future__ import annotations

from typing import Any

from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body

from navi_core import Agent, Anthropic, MessageComplete, Usage, tool
from navi_core.providers.anthropic import MAX_BREAKPOINTS, mark_cache_breakpoints


@tool
def read(path: str) -> str:
    """Read a file.

    Args:
        path: the file.
    """
    return f"contents of {path}"


@tool
def grep(pattern: str) -> str:
    """Search the files.

    Args:
        pattern: what to look for.
    """
    return "no match"


def marked(body: dict[str, Any]) -> list[str]:
    """Where the cache_control marks are, in prefix order."""
    out = [f"tool {t['name']}" for t in body.get("tools", ()) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        out += ["system" for b in system if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        for j, block in enumerate(content):
            if "cache_control" in block:
                assert block["cache_control"] == {"type": "ephemeral"}
                assert j == len(content) - 1  # the last block of its message
                out.append(f"{message['role']} {i} {block['type']}")
    return out


def tool_loop(loopback: LoopbackServer, cache: bool) -> tuple[Agent, list[Usage]]:
    for step in range(3):
        loopback.add(
            Reply.sse(
                anthropic_body(
                    [("tool", (f"toolu_{step}", "read", [f'{{"path":"f{step}"}}']))],
                    stop="tool_use",
                    usage={"input_tokens": 7, "cache_read_input_tokens": 1000 * step,
                           "cache_creation_input_tokens": 300, "output_tokens": 1},
                )
            )
        )  # fmt: skip
    loopback.add(Reply.sse(anthropic_body([("text", ["done"])])))
    usages: list[Usage] = []
    with Anthropic("claude-x", loopback.url, cache=cache) as provider:
        agent = Agent(provider, tools=[read, grep], system="You review code.")
        with agent.run("Read f0, f1 and f2.") as stream:
            usages = [e.usage for e in stream if isinstance(e, MessageComplete)]
    return agent, usages


def test_breakpoints_on_tools_system_and_the_two_newest_user_messages(
    loopback: LoopbackServer,
) -> None:
    _, usages = tool_loop(loopback, cache=True)
    bodies = [r.json for r in loopback.requests]
    assert marked(bodies[0]) == ["tool grep", "system", "user 0 text"]
    assert bodies[0]["system"] == [
        {
            "type": "text",
            "text": "You review code.",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert marked(bodies[1]) == [
        "tool grep",
        "system",
        "user 0 text",
        "user 2 tool_result",
    ]
    assert marked(bodies[3]) == [
        "tool grep",
        "system",
        "user 4 tool_result",
        "user 6 tool_result",
    ]
    for body in bodies:
        assert len(marked(body)) <= MAX_BREAKPOINTS
    # the usage the server reported, cache buckets apart from fresh input
    assert usages[1] == Usage(7, 7, 1000, 300, 0)
    assert [u.cache_read for u in usages[:3]] == [0, 1000, 2000]
    assert all(u.cache_write == 300 and u.input == 7 for u in usages[:3])
    assert usages[2].prompt_total == 7 + 2000 + 300


def test_no_marks_without_cache(loopback: LoopbackServer) -> None:
    tool_loop(loopback, cache=False)
    for request in loopback.requests:
        assert b"cache_control" not in request.body
        assert request.json["system"] == "You review code."


def test_never_more_than_four_marks() -> None:
    body: dict[str, Any] = {
        "tools": [{"name": "a"}, {"name": "b"}],
        "system": "s",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "1"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "2"}]},
            {"role": "user", "content": [{"type": "text", "text": "3"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "4"}]},
            {"role": "user", "content": [{"type": "text", "text": "5"}]},
        ],
    }
    assert mark_cache_breakpoints(body) == 4
    assert marked(body) == ["tool b", "system", "user 2 text", "user 4 text"]
    bare: dict[str, Any] = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    }
    assert mark_cache_breakpoints(bare) == 1

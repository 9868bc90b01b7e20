"""The error texts navi_core writes as tool results, pinned byte for byte: the model
reads them, and every module takes them from ``tools._results.ResultText``."""

from __future__ import annotations

from navi_core import hooks
from navi_core.conversation import TextPart, ToolResult, ToolUse
from navi_core.tools._results import (
    BLOCKED_BY_HOOK,
    ResultText,
    cancelled_before_start,
    failure_text,
    interrupted_results,
)
from navi_core.tools._validation import ArgumentError

T = ResultText


def _text(result: ToolResult) -> str:
    assert result.is_error
    (part,) = result.parts
    assert isinstance(part, TextPart)
    return part.text


def test_every_text_is_pinned() -> None:
    boom = ValueError("boom")
    assert T.NO_OUTPUT == "(no output)"
    assert T.unknown("x", ["a", "b"]) == "Unknown tool 'x'; available tools: a, b."
    assert T.unknown("x", []) == "Unknown tool 'x'; available tools: none."
    assert T.not_json("x", "cut short", '{"a": 1' + "z" * 300) == (
        "Tool 'x' was not run: its arguments are not a complete JSON object "
        "(cut short). Arguments received: " + repr('{"a": 1' + "z" * 193)
    )
    assert T.bad_arguments("x", boom) == (
        "Tool 'x' was not run: boom. Fix the arguments and call it again."
    )
    assert T.failed("x", boom) == "Tool 'x' failed: ValueError: boom"
    assert T.failed("x", ValueError()) == "Tool 'x' failed: ValueError"
    assert T.unusable("x", boom) == (
        "Tool 'x' returned an unusable value: ValueError: boom"
    )
    assert T.cancelled_before_start("x") == "Tool 'x' was cancelled before it started."
    assert T.cancelled_while_running("x") == (
        "Tool 'x' was cancelled while it ran: it may or may not have taken effect. "
        "Check before calling it again."
    )
    assert T.interrupted("x") == (
        "Tool 'x' was interrupted before it returned a result: it may or may not "
        "have taken effect, and it was not run again. Check before calling it again."
    )
    assert T.did_not_run("x") == "Tool 'x' did not run."
    assert T.held("x") == "Tool 'x' was not run: it waited for approval."
    assert T.denied("x", "no") == "Tool 'x' was not approved by the user: no"
    assert T.denied("x", "  ") == "Tool 'x' was not approved by the user."
    assert T.superseded("x") == (
        "Tool 'x' did not run: the user sent a new message instead of running it."
    )
    assert BLOCKED_BY_HOOK == "Tool {name!r} was blocked by a tool_start hook."
    assert hooks.BLOCKED_BY_HOOK is BLOCKED_BY_HOOK
    assert T.blocked_by_hook("x") == "Tool 'x' was blocked by a tool_start hook."
    assert T.vetoed("x", " too risky ") == "Tool 'x' was blocked: too risky"
    assert T.vetoed("x", "") == "Tool 'x' was blocked: no reason given"
    assert T.vetoed("x", "Tool 'x' may not run now.") == "Tool 'x' may not run now."


def test_helpers_use_the_table() -> None:
    uses = [ToolUse("c1", "x", "{}")]
    (r,) = cancelled_before_start(uses).tool_results
    assert _text(r) == T.cancelled_before_start("x")
    (r,) = interrupted_results(uses).tool_results
    assert _text(r) == T.interrupted("x")
    assert failure_text("x", ArgumentError("bad")) == T.bad_arguments(
        "x", ArgumentError("bad")
    )
    assert failure_text("x", OSError("gone")) == "Tool 'x' failed: OSError: gone"
    veto = hooks.veto_result("c1", "x", hooks.Veto("nope"))
    assert _text(veto) == "Tool 'x' was blocked: nope"

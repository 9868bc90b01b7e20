"""What a tool returned, turned into the parts of its ``ToolResult``; the error
results navi_core writes itself (unknown, interrupted, cancelled calls), every text of
them in one table, ``ResultText``."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final, final

import orjson

from .. import media
from ..config import ImageLimits
from ..conversation import (
    MediaPart,
    Message,
    Part,
    TextPart,
    ToolResult,
    ToolUse,
    WireIdentity,
    decode_arguments,
)
from ._validation import ArgumentError

__all__ = [
    "BLOCKED_BY_HOOK",
    "ResultText",
    "cancelled_before_start",
    "cut_off_results",
    "describe",
    "error_result",
    "failure_text",
    "interrupted_results",
    "provider_stopped_results",
    "short_error",
    "to_parts",
]


#: what the model reads when an ``on_tool_start`` hook raised (``hooks.BLOCKED_BY_HOOK``)
BLOCKED_BY_HOOK: Final = "Tool {name!r} was blocked by a tool_start hook."

#: ``output.OUTPUT_TOOL``, the tool a structured answer comes through, which no tool
#: owns (not imported: ``output`` imports this package); test_output pins that they match
_OUTPUT_TOOL: Final = "final_answer"


def describe(exc: BaseException) -> str:
    """``Type: message`` (or just ``Type``), for error texts."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@final
class ResultText:
    """Every text navi_core writes as a tool call's result itself, one line each.

    The model reads these (and tests pin several): change one only on purpose.
    ``name`` is the called tool's name.
    """

    #: a tool returned None
    NO_OUTPUT: Final = "(no output)"

    @staticmethod
    def unknown(name: str, known: Sequence[str]) -> str:
        """No tool or source owns ``name``; ``known``: the names that exist (the
        output tool, which none owns, gets ``output_not_alone``)."""
        if name == _OUTPUT_TOOL:
            return ResultText.output_not_alone(name)
        return f"Unknown tool {name!r}; available tools: {', '.join(known) or 'none'}."

    @staticmethod
    def output_not_alone(name: str) -> str:
        """Not run: a call of the output tool that the turn did not take as its
        structured answer. The turn takes one made on its own, so this is one made
        beside other calls (which run), or one in a turn that asks for no structured
        answer."""
        return (
            f"Tool {name!r} was not run: it is accepted only on its own, after the "
            "results of your other calls, in a turn that asks for a structured "
            "answer. Call it again now, alone, if it is one of your tools; otherwise "
            "give the answer as your reply."
        )

    @staticmethod
    def not_json(name: str, problem: str, received: str) -> str:
        """Not run: the arguments ``received`` are no JSON object (``problem`` says why)."""
        return (
            f"Tool {name!r} was not run: its arguments are not a complete "
            f"JSON object ({problem}). Arguments received: {received[:200]!r}"
        )

    @staticmethod
    def bad_arguments(name: str, exc: BaseException) -> str:
        """Not run: the arguments do not match the schema (``exc``: ArgumentError)."""
        return f"Tool {name!r} was not run: {exc}. Fix the arguments and call it again."

    @staticmethod
    def failed(name: str, exc: BaseException) -> str:
        """The tool (or its source's batch) raised ``exc``."""
        return f"Tool {name!r} failed: {describe(exc)}"

    @staticmethod
    def unusable(name: str, exc: BaseException) -> str:
        """A source's value for the call could not be turned into result parts."""
        return f"Tool {name!r} returned an unusable value: {describe(exc)}"

    @staticmethod
    def cancelled_before_start(name: str) -> str:
        """A cancel stopped the call before it started."""
        return f"Tool {name!r} was cancelled before it started."

    @staticmethod
    def cut_off(name: str, whole: bool) -> str:
        """Not run: the response reached its output token limit in the middle of a
        call (``whole``: this call's arguments were complete, a later call's not)."""
        if whole:
            return (
                f"Tool {name!r} was not run: the response it was part of reached the "
                "output token limit before its last tool call was complete."
            )
        return (
            f"Tool {name!r} was not run: the response reached the output token limit "
            "before the call's arguments were complete."
        )

    @staticmethod
    def provider_stopped(name: str, why: str) -> str:
        """Not run: the provider stopped the response the call was part of (``why``
        says how: a content filter, ``StopReason.REFUSED``; a pause, ``PAUSED``)."""
        return f"Tool {name!r} was not run: {why}."

    @staticmethod
    def cancelled_while_running(name: str) -> str:
        """A cancel abandoned the call while it ran."""
        return (
            f"Tool {name!r} was cancelled while it ran: it may or may not "
            "have taken effect. Check before calling it again."
        )

    @staticmethod
    def interrupted(name: str) -> str:
        """A crash, abort or close ended the run before the call's result was kept."""
        return (
            f"Tool {name!r} was interrupted before it returned a result: it may or "
            "may not have taken effect, and it was not run again. Check before "
            "calling it again."
        )

    @staticmethod
    def did_not_run(name: str) -> str:
        """A call of the batch that has no result and never ran."""
        return f"Tool {name!r} did not run."

    @staticmethod
    def held(name: str) -> str:
        """The call was held for approval (the batch's own result message)."""
        return f"Tool {name!r} was not run: it waited for approval."

    @staticmethod
    def denied(name: str, reason: str) -> str:
        """The user denied the held call, saying ``reason`` (may be blank)."""
        why = f": {reason}" if reason.strip() else "."
        return f"Tool {name!r} was not approved by the user{why}"

    @staticmethod
    def superseded(name: str) -> str:
        """A held call left behind by a new user message."""
        return (
            f"Tool {name!r} did not run: the user sent a new message "
            "instead of running it."
        )

    @staticmethod
    def blocked_by_hook(name: str) -> str:
        """An ``on_tool_start`` hook raised (its text is never shown)."""
        return BLOCKED_BY_HOOK.format(name=name)

    @staticmethod
    def vetoed(name: str, reason: str) -> str:
        """A hook's ``Veto(reason)``; a reason naming the tool first is used as is."""
        reason = reason.strip()
        if reason.startswith(f"Tool {name!r}"):
            return reason
        return f"Tool {name!r} was blocked: {reason or 'no reason given'}"


def to_parts(value: Any, limits: ImageLimits | None = None) -> tuple[Part, ...]:
    """Turn what a tool returned into result parts.

    str becomes text; bytes, ``Media`` and Pillow images become media parts (bad media
    becomes a short note); a list mixing text and media becomes several parts; any other
    JSON-able value becomes its JSON text.
    """
    if isinstance(value, str):
        return (TextPart(value),)
    if isinstance(value, (TextPart, MediaPart)):
        return (value,)
    if value is None:
        return (TextPart(ResultText.NO_OUTPUT),)
    if isinstance(value, (int, float, dict)):
        return (TextPart(_json_text(value)),)
    lim = limits or ImageLimits()
    if media.is_media(value):
        return (media.to_part(value, lim),)
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, (TextPart, MediaPart)) or media.is_media(v) for v in value
    ):
        parts: list[Part] = []
        for item in value:
            if isinstance(item, (TextPart, MediaPart)):
                parts.append(item)
            elif isinstance(item, str):
                parts.append(TextPart(item))
            elif media.is_media(item):
                parts.append(media.to_part(item, lim))
            else:
                parts.append(TextPart(_json_text(item)))
        return tuple(parts)
    return (TextPart(_json_text(value)),)


def _json_text(value: Any) -> str:
    def fallback(obj: Any) -> Any:
        if isinstance(obj, enum.Enum):
            return obj.value
        if isinstance(obj, (set, frozenset)):
            return list(obj)
        return str(obj)

    return orjson.dumps(
        value,
        default=fallback,
        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
    ).decode()


def error_result(call_id: str, text: str) -> ToolResult:
    """An error result the model can read."""
    return ToolResult(call_id, (TextPart(text),), is_error=True)


def interrupted_results(
    uses: Sequence[ToolUse],
    wire: WireIdentity | None = None,
    known: Mapping[str, ToolResult] | None = None,
) -> Message:
    """Results for calls whose run was interrupted (crash, abort, close).

    Calls whose result is ``known`` keep it; the others get an error result saying
    they may or may not have run. They are never re-run by navi_core.
    """
    known = known or {}
    results = tuple(
        known.get(u.id) or error_result(u.id, ResultText.interrupted(u.name))
        for u in uses
    )
    return Message("user", results, wire=wire)


def cancelled_before_start(
    uses: Sequence[ToolUse], wire: WireIdentity | None = None
) -> Message:
    """Results for calls a cancel stopped before any of them ran."""
    return Message(
        "user",
        tuple(
            error_result(u.id, ResultText.cancelled_before_start(u.name)) for u in uses
        ),
        wire=wire,
    )


def cut_off_results(
    uses: Sequence[ToolUse], wire: WireIdentity | None = None
) -> Message | None:
    """Results for the calls of a response that reached its output token limit while
    a call's arguments were incomplete (not one JSON object): none of its calls runs,
    since the model did not finish the response. None when every call is whole."""
    whole = [isinstance(decode_arguments(u.input), dict) for u in uses]
    if all(whole):
        return None
    results = tuple(
        error_result(u.id, ResultText.cut_off(u.name, w))
        for u, w in zip(uses, whole, strict=True)
    )
    return Message("user", results, wire=wire)


def provider_stopped_results(
    uses: Sequence[ToolUse], why: str, wire: WireIdentity | None = None
) -> Message:
    """Results for the calls of a response the provider stopped (its content filter,
    a refusal, a paused server-tool turn): none of them runs."""
    return Message(
        "user",
        tuple(
            error_result(u.id, ResultText.provider_stopped(u.name, why)) for u in uses
        ),
        wire=wire,
    )


def failure_text(name: str, exc: BaseException) -> str:
    """The error result of a call that raised (or whose source returned ``exc``)."""
    if isinstance(exc, ArgumentError):
        return ResultText.bad_arguments(name, exc)
    return ResultText.failed(name, exc)


#: ``ToolFinished.error`` is cut to this many characters.
ERROR_TEXT_CHARS = 300


def short_error(parts: Sequence[Part]) -> str:
    """A result's text on one line, cut to ``ERROR_TEXT_CHARS`` (``ToolFinished.error``)."""
    text = " ".join(" ".join(p.text for p in parts if isinstance(p, TextPart)).split())
    text = text or "failed"
    cut = ERROR_TEXT_CHARS
    return text if len(text) <= cut else text[: cut - 3] + "..."

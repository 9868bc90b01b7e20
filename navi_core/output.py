"""Structured output: ``agent.run(prompt, output=T)`` puts a validated ``T`` in
``TurnComplete.output``.

``T`` is a dataclass, a TypedDict or a pydantic model. ``OutputSpec`` holds its JSON
schema and the request fields each API takes: OpenAI chat completions gets
``response_format`` (``json_schema``, strict when the schema allows it); Anthropic gets
a ``final_answer`` tool with the schema as its input and a ``tool_choice`` that makes
the model call it. ``OutputCheck`` reviews each final response of the turn: a valid
answer ends the turn; an invalid one gets one corrective message naming what is
wrong, and a second invalid answer raises ``OutputValidationError``. A ``final_answer``
call made beside other tool calls is no final answer: the other calls run, and it gets
an error result (``ResultText.output_not_alone``) asking for it again, alone.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .conversation import Message, TextPart, ToolResult, ToolUse, UserMessage
from .errors import OutputValidationError, ToolRegistrationError
from .tools import _pydantic as pydantic_types
from .tools._schema import convert, hoist_defs, schema_for
from .tools._validation import errors, summary

__all__ = ["OUTPUT_TOOL", "OutputCheck", "OutputSpec"]

#: The tool through which an Anthropic model hands over the structured answer
#: (``tools._results`` names it too, for its error text, without importing this module).
OUTPUT_TOOL: Final = "final_answer"
_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
#: how ``tools._validation`` names the root of a value (a tool's arguments)
_ROOT: Final = re.compile(r"^the arguments\b")
_FENCE: Final = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """What the turn's answer must be: the type, a name for it and its JSON schema."""

    type: Any = field(compare=False)
    name: str
    schema: dict[str, Any] = field(hash=False)

    @classmethod
    def of(cls, tp: Any) -> OutputSpec:
        """The spec of a dataclass, TypedDict or pydantic model.

        Raises:
            TypeError: ``tp`` is none of those, or one with a field that has no JSON
                schema form (a ``datetime`` in a dataclass, a dataclass that holds
                itself).
        """
        record = isinstance(tp, type) and (
            dataclasses.is_dataclass(tp)
            or typing.is_typeddict(tp)
            or pydantic_types.is_model(tp)
        )
        if not record:
            raise TypeError(
                f"output= takes a dataclass, TypedDict or pydantic model, not {tp!r}"
            )
        try:
            found = schema_for(tp, where=f"output {tp.__name__}")
        except ToolRegistrationError as exc:
            raise TypeError(str(exc)) from exc
        except RecursionError:  # a dataclass or TypedDict that holds itself
            raise TypeError(
                f"output= cannot ask for {tp.__name__}: it refers to itself; use a "
                "pydantic model for a recursive type"
            ) from None
        schema = _closed(hoist_defs(found))
        schema.pop("title", None)
        name = _NAME_CHARS.sub("_", tp.__name__)[:64] or "output"
        return cls(tp, name, schema)

    @property
    def strict(self) -> bool:
        """Whether OpenAI's strict mode can take the schema: every object lists all
        its properties as required and allows no others."""
        return _strict(self.schema)

    def openai_response_format(self) -> dict[str, Any]:
        """The chat-completions ``response_format`` field."""
        return {
            "type": "json_schema",
            "json_schema": {
                "name": self.name,
                "schema": self.schema,
                "strict": self.strict,
            },
        }

    def responses_text_format(self) -> dict[str, Any]:
        """The Responses API ``text`` field: the same JSON schema as ``format``."""
        return {
            "format": {
                "type": "json_schema",
                "name": self.name,
                "schema": self.schema,
                "strict": self.strict,
            }
        }

    def anthropic_fields(
        self, tools: list[dict[str, Any]], *, thinking: bool
    ) -> dict[str, Any]:
        """The Messages ``tools`` (the output tool added) and ``tool_choice`` fields.

        The model must call a tool: the output tool alone, or any tool when others
        are declared; with extended thinking (which refuses a forced tool) it may
        choose, and a text answer is reviewed as JSON.
        """
        declared = {
            "name": OUTPUT_TOOL,
            "description": f"Give the final answer as {self.name}. Call it once, "
            "alone (no other tool call in the same response), when the answer is "
            "complete.",
            "input_schema": self.schema,
        }
        choice: dict[str, Any]
        if thinking:
            choice = {"type": "auto"}
        elif tools:
            choice = {"type": "any"}
        else:
            choice = {"type": "tool", "name": OUTPUT_TOOL}
        return {"tools": [*tools, declared], "tool_choice": choice}

    def parse(self, value: Any) -> tuple[Any, list[str]]:
        """``value`` (decoded JSON) as the type, or the problems found with it."""
        problems = errors(self.schema, value)
        if problems:  # the checker names the root as tool arguments
            return None, [_ROOT.sub("the answer", p, count=1) for p in problems]
        try:
            if pydantic_types.is_model(self.type):
                return pydantic_types.validate(self.type, value), []
            return convert(self.type, value), []
        except (TypeError, ValueError) as exc:
            return None, pydantic_types.error_lines(exc) or [str(exc)]


class OutputCheck:
    """The review of one turn's structured answer; ``value`` holds it once valid.
    Without a spec (a turn that asked for no structured answer) it reviews nothing."""

    __slots__ = ("retries", "spec", "value")

    def __init__(self, spec: OutputSpec | None) -> None:
        self.spec = spec
        self.retries = 0
        self.value: Any = None

    def review(
        self, message: Message, commit: Callable[[Message], None]
    ) -> bool | None:
        """Judge a completed response, committing what answers it: the output
        tool's result, or the corrective message.

        Returns:
            None when it is not a final answer (no spec, or it calls other tools,
            which run as usual: an output-tool call among them is answered as not
            run, ``ResultText.output_not_alone``, and counts as no retry); False
            when the answer is valid (the turn ends); True when a corrective retry
            was committed (the model answers again).
        Raises:
            OutputValidationError: the answer is invalid after the corrective retry.
        """
        spec = self.spec
        if spec is None:
            return None
        uses = message.tool_uses
        mine = [u for u in uses if u.name == OUTPUT_TOOL]
        if uses and len(mine) != len(uses):
            return None
        cut = message.stop_reason == "max_tokens"
        if mine and cut and not mine[-1].input:  # cut before its input came
            value, problems = None, [f"the {OUTPUT_TOOL} call has no input"]
        elif mine:
            value, problems = self._decode_tool(spec, mine[-1])
        else:
            value, problems = self._decode_text(spec, message.text)
        if cut and problems:
            problems = ["it was cut off at the output token limit", *problems]
        if not problems:
            self.value = value
            if mine:
                commit(_results(mine, "Answer recorded.", is_error=False))
            return False
        text = summary(problems)
        if self.retries >= 1:
            raise OutputValidationError(
                f"the answer is not a valid {spec.name}, also after a "
                f"corrective retry: {text}"
            )
        self.retries += 1
        if mine:
            note = (
                f"Invalid {spec.name}: {text}. Call {OUTPUT_TOOL} again "
                "with corrected input."
            )
            commit(_results(mine, note, is_error=True))
        else:
            note = (
                f"Your answer is not a valid {spec.name}: {text}. Reply again "
                "with only the JSON value, matching the schema."
            )
            commit(UserMessage(note))
        return True

    @staticmethod
    def _decode_tool(spec: OutputSpec, use: ToolUse) -> tuple[Any, list[str]]:
        try:
            value = orjson.loads(use.input or "{}")
        except orjson.JSONDecodeError as exc:
            return None, [f"the {OUTPUT_TOOL} input is not JSON ({exc})"]
        return spec.parse(value)

    @staticmethod
    def _decode_text(spec: OutputSpec, text: str) -> tuple[Any, list[str]]:
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1).strip()
        if not body:
            return None, ["the answer is empty; expected a JSON object"]
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return None, [f"the answer is not JSON ({exc})"]
        return spec.parse(value)


def _results(uses: list[ToolUse], text: str, *, is_error: bool) -> Message:
    """One result per output-tool call, so every ``ToolUse`` keeps its answer."""
    results = tuple(ToolResult(u.id, (TextPart(text),), is_error) for u in uses)
    return Message("user", results)


def _closed(node: Any) -> Any:
    """Every object schema that does not say otherwise allows no other properties
    (the answer type ignores extras anyway, and strict mode needs it)."""
    if isinstance(node, list):
        return [_closed(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(v) for k, v in node.items()}
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def _strict(node: Any) -> bool:
    if isinstance(node, list):
        return all(_strict(n) for n in node)
    if not isinstance(node, dict):
        return True
    if node.get("type") == "object":  # a map (``dict[str, T]``) is an open object
        props = node.get("properties", {})
        if node.get("additionalProperties") is not False:
            return False
        if set(node.get("required", ())) != set(props):
            return False
    if "default" in node:
        return False
    return all(_strict(v) for k, v in node.items() if k != "enum")

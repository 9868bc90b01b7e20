"""Anthropic Messages API: ``POST {base_url}/v1/messages`` with ``stream: true``.

The body is parsed by the core's ``AnthropicParser``. Thinking blocks go back with
their signature unchanged and redacted thinking with its data, as the API requires
for tool use with extended thinking. Messages of the same role next to each other are
merged, because the API wants the roles to alternate.

Prompt caching (``cache=True``, the default) marks at most four cache breakpoints
(``cache_control: {"type": "ephemeral"}``, the API's limit) on every request: the last
tool declaration, the system prompt, the newest user message and the user message
before it. The API caches the prefix up to each breakpoint; the next request of an
agent loop repeats that prefix, so it is read back at a tenth of the input price
instead of billed in full (writing it costs 1.25 times, once).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from .. import core
from .._secrets import check_url_credentials
from ..config import Pricing, Timeout
from ..conversation import (
    Block,
    CompactionSummary,
    MediaPart,
    Message,
    RedactedThinking,
    Text,
    TextPart,
    Thinking,
    ToolResult,
    ToolUse,
    WireIdentity,
)
from ..tools._tool import ToolSpec
from ._http import HTTP_DEFAULTS, HTTPProvider, HTTPSettings, Parser, json_object
from .base import ProviderRequest
from .body_cache import AnthropicEncoder, BodyFrame, split_body
from .openai_chat import SUMMARY_PREFIX
from .wire import own_blocks

__all__ = [
    "DEFAULT_BASE_URL",
    "MAX_BREAKPOINTS",
    "Anthropic",
    "build_messages",
    "mark_cache_breakpoints",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"


class Anthropic(HTTPProvider):
    """The Anthropic Messages API (or a server that speaks it).

    ``base_url`` defaults to ``ANTHROPIC_BASE_URL`` or the Anthropic API (no ``/v1``,
    as in Anthropic's SDK); ``api_key`` to ``ANTHROPIC_API_KEY``, sent as
    ``x-api-key`` when known. ``max_tokens`` is required by the API;
    ``Config.max_output_tokens`` wins when set. ``thinking`` is sent as given, e.g.
    ``{"type": "enabled", "budget_tokens": 2048}``. ``cache`` places prompt-cache
    breakpoints (see the module docstring). ``options`` are copied into every
    request body and win over the fields built here.
    ``timeout``, ``http2``, ``headers`` and ``client`` are the keywords every HTTP
    provider takes (``HTTPSettings`` describes them).
    """

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks
    api_style = "anthropic-messages"
    path = "/v1/messages"
    endpoint_paths = ("/v1/messages", "/messages")

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        timeout: Timeout = HTTP_DEFAULTS.timeout,
        http2: bool = HTTP_DEFAULTS.http2,
        headers: Mapping[str, str] | None = HTTP_DEFAULTS.headers,
        client: httpx.Client | None = HTTP_DEFAULTS.client,
        anthropic_version: str = "2023-06-01",
        cache: bool = True,
        pricing: Pricing | None = None,
        **options: Any,
    ) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if base_url is None:
            base_url = os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        check_url_credentials(base_url, api_key)  # they would go beside the key
        if api_key is None:
            api_key = os.environ.get("ANTHROPIC_API_KEY") or None
        auth = {"anthropic-version": anthropic_version}
        if api_key:
            auth["x-api-key"] = api_key
        settings = HTTPSettings(timeout, http2, headers, client)
        super().__init__(model, base_url, auth=auth, settings=settings)
        self._max_tokens = max_tokens
        self._thinking = dict(thinking) if thinking is not None else None
        self._cache = cache
        self._options = options
        #: USD per million tokens (``TurnComplete.cost``); None: the price table's
        self.pricing = pricing
        self._encoder = AnthropicEncoder(self._encode, self.wire, marks=cache)
        self._frame = BodyFrame()

    def _parser(self) -> Parser:
        return core.AnthropicParser()

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The Messages JSON body for ``request`` (``options`` applied last)."""
        return self._body(request, build_messages(request.messages, self.wire))

    def encode_parts(self, request: ProviderRequest) -> list[bytes]:
        """``orjson.dumps(build_body(request))`` in parts, from the messages' kept JSON.

        The newest two user messages carry cache breakpoints, so only they are
        rendered again; mark_cache_breakpoints marks the tools and system here.
        """
        if "messages" in self._options:
            return super().encode_parts(request)
        before, after = self._frame.get(
            request, lambda: split_body(self._body(request, []), "messages")
        )
        return self._encoder.join(request.messages, before, after)

    def _encode(self, message: Message) -> list[dict[str, Any]]:
        if message.role == "assistant":
            return _assistant_blocks(own_blocks(message, self.wire))
        return _user_blocks(message)

    def _body(self, request: ProviderRequest, messages: list[Any]) -> dict[str, Any]:
        config = request.config
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": config.max_output_tokens or self._max_tokens,
            "messages": messages,
            "stream": True,
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [_tool(spec) for spec in request.tools]
        if self._cache:
            mark_cache_breakpoints(body)
        if self._thinking is not None:
            body["thinking"] = self._thinking
        if config.temperature is not None:
            body["temperature"] = config.temperature
        if request.output is not None:
            tools = body.get("tools", [])
            thinking = (
                self._thinking is not None and self._thinking.get("type") != "disabled"
            )
            body.update(request.output.anthropic_fields(tools, thinking=thinking))
        body.update(self._options)
        return body


def build_messages(
    messages: Iterable[Message], wire: WireIdentity | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` array: content blocks, same-role neighbours merged.

    With ``wire`` (the receiving API), thinking signatures and redacted thinking that
    another API wrote are left out (``providers.wire``).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            blocks = _assistant_blocks(
                message.content if wire is None else own_blocks(message, wire)
            )
        elif message.role == "user":
            blocks = _user_blocks(message)
        else:
            continue
        if not blocks:
            continue
        if out and out[-1]["role"] == message.role:
            merged = out[-1]["content"] + blocks
            # Stable: tool results lead a user message, everything else keeps order.
            merged.sort(key=_not_tool_result)
            out[-1]["content"] = merged
        else:
            out.append({"role": message.role, "content": blocks})
    return out


def _not_tool_result(block: dict[str, Any]) -> bool:
    return bool(block["type"] != "tool_result")


def _assistant_blocks(content: Iterable[Block]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, Text):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolUse):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": json_object(block.input) or {},
                }
            )
        elif isinstance(block, Thinking):
            # The API rejects thinking without the signature it issued; thinking
            # that never got one (a cut stream, another provider) stays local.
            if block.signature:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": block.text,
                        "signature": block.signature,
                    }
                )
        elif isinstance(block, RedactedThinking):
            blocks.append({"type": "redacted_thinking", "data": block.data})
    return blocks


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResult):
            results.append(_tool_result(block))
        elif isinstance(block, Text):
            if block.text:
                others.append({"type": "text", "text": block.text})
        elif isinstance(block, CompactionSummary):
            others.append({"type": "text", "text": SUMMARY_PREFIX + block.text})
        elif isinstance(block, MediaPart):
            others.append(_image(block))
    return results + others


def _tool_result(result: ToolResult) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in result.parts:
        if isinstance(part, TextPart):
            if part.text:
                content.append({"type": "text", "text": part.text})
        elif isinstance(part, MediaPart):
            content.append(_image(part))
    return {
        "type": "tool_result",
        "tool_use_id": result.tool_use_id,
        "is_error": result.is_error,
        "content": content,
    }


def _image(part: MediaPart) -> dict[str, Any]:
    source = {"type": "base64", "media_type": part.media_type, "data": part.data}
    return {"type": "image", "source": source}


_EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
"""The most ``cache_control`` marks the Messages API takes in one request."""


def mark_cache_breakpoints(body: dict[str, Any]) -> int:
    """Mark the cache breakpoints of a Messages body in place; return how many.

    In prefix order: the last tool, the system prompt (turned into a text block), the
    last block of the user message before the newest one (what the previous request
    of a loop marked, so its prefix is read back), and the last block of the newest
    one (written for the next request). Never more than ``MAX_BREAKPOINTS``.
    """
    marks: list[dict[str, Any]] = []
    tools = body.get("tools")
    if tools:
        marks.append(tools[-1])
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system}]
        marks.append(body["system"][-1])
    users = [m for m in body["messages"] if m["role"] == "user" and m["content"]]
    marks.extend(m["content"][-1] for m in users[-2:])
    for block in marks[-MAX_BREAKPOINTS:]:
        block["cache_control"] = dict(_EPHEMERAL)
    return min(len(marks), MAX_BREAKPOINTS)


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.parameters,
    }

"""The OpenAI Responses API: ``POST {base_url}/responses``, streamed and stateless.

Every request carries the whole conversation (``store: false``; nothing is kept on the
server between requests) and asks for ``reasoning.encrypted_content``, so reasoning
items come back in the stream and are sent back, unchanged, with the next request;
the body is parsed by the core's ``OpenAIResponsesParser``. Input items keep the
conversation's order: an assistant message becomes its reasoning items, ``message``
text and ``function_call`` items; each tool result a ``function_call_output`` paired by
``call_id``, with images returned by tools following in one user message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx
import orjson

from .. import core
from ..config import Pricing, Timeout
from ..conversation import (
    CompactionSummary,
    MediaPart,
    Message,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    WireIdentity,
)
from ..tools._tool import ToolSpec
from ._http import HTTP_DEFAULTS, HTTPProvider, HTTPSettings, Parser, json_object
from .base import ProviderRequest
from .body_cache import BodyFrame, FlatEncoder, split_body
from .openai_chat import SUMMARY_PREFIX, openai_endpoint
from .wire import own_blocks

__all__ = ["OpenAIResponses", "build_input"]


class OpenAIResponses(HTTPProvider):
    """The OpenAI Responses API (or a server that speaks it), without server state.

    ``base_url`` defaults to ``OPENAI_BASE_URL`` or the OpenAI API (ending in ``/v1``);
    ``api_key`` to ``OPENAI_API_KEY``. ``options`` are copied into every request body
    and win over the fields built here, e.g. ``reasoning={"effort": "low",
    "summary": "auto"}``.
    ``timeout``, ``http2``, ``headers`` and ``client`` are the keywords every HTTP
    provider takes (``HTTPSettings`` describes them).
    """

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks
    api_style = "openai-responses"
    path = "/responses"
    endpoint_paths = ("/responses", "/chat/completions")

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: Timeout = HTTP_DEFAULTS.timeout,
        http2: bool = HTTP_DEFAULTS.http2,
        headers: Mapping[str, str] | None = HTTP_DEFAULTS.headers,
        client: httpx.Client | None = HTTP_DEFAULTS.client,
        pricing: Pricing | None = None,
        **options: Any,
    ) -> None:
        base_url, auth = openai_endpoint(base_url, api_key)
        settings = HTTPSettings(timeout, http2, headers, client)
        super().__init__(model, base_url, auth=auth, settings=settings)
        self._options = options
        #: USD per million tokens (``TurnComplete.cost``); None: the price table's
        self.pricing = pricing
        self._encoder = FlatEncoder(self.api_style, self._encode, self.wire)
        self._frame = BodyFrame()

    def _parser(self) -> Parser:
        return core.OpenAIResponsesParser()

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The Responses JSON body for ``request`` (``options`` applied last)."""
        return self._body(request, build_input(request.messages, self.wire))

    def encode_parts(self, request: ProviderRequest) -> list[bytes]:
        """``orjson.dumps(build_body(request))`` in parts, from the messages' kept JSON."""
        if "input" in self._options:
            return super().encode_parts(request)
        before, after = self._frame.get(
            request, lambda: split_body(self._body(request, []), "input")
        )
        return self._encoder.join(request.messages, before, b"", after)

    def _encode(self, message: Message, names: dict[str, str]) -> list[dict[str, Any]]:
        if message.role == "assistant":
            return _assistant(message, self.wire, names)
        if message.role == "user":
            return _user(message, names)
        return []

    def _body(self, request: ProviderRequest, items: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": items,
            "stream": True,
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [_tool(spec) for spec in request.tools]
        config = request.config
        if config.max_output_tokens is not None:
            body["max_output_tokens"] = config.max_output_tokens
        if config.temperature is not None:
            body["temperature"] = config.temperature
        if request.output is not None:
            body["text"] = request.output.responses_text_format()
        body.update(self._options)
        return body


def build_input(
    messages: Iterable[Message], wire: WireIdentity
) -> list[dict[str, Any]]:
    """The ``input`` items for ``messages``; reasoning only goes back where it came from."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in messages:
        if message.role == "assistant":
            out.extend(_assistant(message, wire, names))
        elif message.role == "user":
            out.extend(_user(message, names))
    return out


def _assistant(
    message: Message, wire: WireIdentity, names: dict[str, str]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in own_blocks(message, wire):
        if isinstance(block, Text):
            if block.text:
                out.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ToolUse):
            names[block.id] = block.name
            arguments = block.input if json_object(block.input) is not None else "{}"
            out.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": arguments,
                }
            )
        elif isinstance(block, Thinking) and block.signature:
            item = _reasoning_item(block.signature)
            if item is not None:
                out.append(item)
    # a reasoning item must be followed by an item of its response (OpenAI: "provided
    # without its required following item"): one a response cut off after reasoning
    # (max_output_tokens) would fail every later request of the session
    while out and out[-1].get("type") == "reasoning":
        out.pop()
    return out


def _reasoning_item(raw: str) -> dict[str, Any] | None:
    """The reasoning item a ``Thinking`` signature holds, or None if it holds none.

    An item without ``encrypted_content`` (a server that ignored ``include``) is not
    sent: without server state its id alone names nothing and the request would fail.
    """
    try:
        item = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    return item if item.get("encrypted_content") else None


def _user(message: Message, names: Mapping[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResult):
            images = [p for p in block.parts if isinstance(p, MediaPart)]
            text = block.text
            if not text and images:
                text = f"[{len(images)} image(s) attached in the next user message]"
            out.append(
                {"type": "function_call_output", "call_id": block.tool_use_id,
                 "output": text}
            )  # fmt: skip
            if images:
                name = names.get(block.tool_use_id)
                label = f"{name} ({block.tool_use_id})" if name else block.tool_use_id
                media.append(
                    {"type": "input_text", "text": f"Image(s) from tool call {label}:"}
                )
                media.extend(_image(p) for p in images)
        elif isinstance(block, Text):
            if block.text:
                content.append({"type": "input_text", "text": block.text})
        elif isinstance(block, CompactionSummary):
            content.append({"type": "input_text", "text": SUMMARY_PREFIX + block.text})
        elif isinstance(block, MediaPart):
            content.append(_image(block))
    content = media + content
    if content:
        out.append({"role": "user", "content": content})
    return out


def _image(part: MediaPart) -> dict[str, Any]:
    url = f"data:{part.media_type};base64,{part.data}"
    return {"type": "input_image", "image_url": url}


def _tool(spec: ToolSpec) -> dict[str, Any]:
    # strict said outright: left out, the Responses API makes a tool strict when it
    # can, filling in optional parameters, which chat completions never does
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "strict": False,
    }

"""OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

``POST {base_url}/chat/completions`` with ``stream: true`` and usage in the stream;
the body is parsed by the core's ``OpenAIChatParser``. The request mapping keeps the
conversation's order: an assistant message carries its text and ``tool_calls`` (and,
in a turn that called a tool, the reasoning its own server streamed, as
``reasoning_content``), each tool result becomes a ``tool`` message, and images returned
by tools follow in one user message (chat completions only accepts images from the user).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import orjson

from .. import core
from .._ids import new_id
from .._secrets import check_url_credentials
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
from ..tokens import estimate_request_tokens, estimate_tokens
from ..tools._tool import ToolSpec
from ._body import Tap
from ._http import HTTP_DEFAULTS, HTTPProvider, HTTPSettings, Parser, json_object
from .base import ProviderRequest
from .body_cache import BodyFrame, FlatEncoder, split_body, tool_turns
from .delta_stream import DeltaStream

__all__ = [
    "DEFAULT_BASE_URL",
    "REFUSES_REASONING",
    "SUMMARY_PREFIX",
    "TEXT_CALL_ID_PREFIX",
    "TEXT_TOOL_CALLS",
    "OpenAIChat",
    "build_messages",
    "openai_endpoint",
]

SUMMARY_PREFIX = "Summary of the earlier conversation:\n\n"
"""How a ``CompactionSummary`` is introduced when it is sent as user text."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"

TEXT_TOOL_CALLS = ("auto", "off", "hermes", "qwen", "llama", "mistral")
"""The values of ``OpenAIChat(text_tool_calls=...)``."""

TEXT_CALL_ID_PREFIX = "call_text_"
"""How the id of a tool call recovered from the content (written as text) begins."""

REFUSES_REASONING = ("api.openai.com", "groq.com", "cerebras.ai")
"""Hosts (and their subdomains) that ``OpenAIChat(send_reasoning=None)`` sends no
``reasoning_content``: Groq and Cerebras refuse an assistant message that has one
(400 "property 'reasoning_content' is unsupported"); OpenAI streams none to send."""


def openai_endpoint(
    base_url: str | None, api_key: str | None
) -> tuple[str, dict[str, str]]:
    """The base URL and auth header of an OpenAI-style provider: the arguments, else
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, else the public API without a key.

    Raises:
        ValueError: an ``api_key`` given with a base URL that has user info.
    """
    if base_url is None:
        base_url = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    check_url_credentials(base_url, api_key)  # the URL's would replace the key
    if api_key is None:
        api_key = os.environ.get("OPENAI_API_KEY") or None
    return base_url, ({"authorization": f"Bearer {api_key}"} if api_key else {})


class OpenAIChat(HTTPProvider):
    """An OpenAI-compatible chat-completions endpoint.

    ``base_url`` defaults to ``OPENAI_BASE_URL`` or the OpenAI API; ``api_key`` to
    ``OPENAI_API_KEY``; without a key no Authorization header is sent (local servers).
    ``max_tokens_field`` names the body field ``Config.max_output_tokens`` goes to
    ("max_completion_tokens" for OpenAI's reasoning models). ``options`` are copied
    into every request body and win over the fields built here.
    ``require_finish_reason``: a stream whose ``[DONE]`` (or end) comes with no
    ``finish_reason`` is an ``IncompleteResponse``, retried, never a finished answer;
    ``False`` for a server that never sends one.
    ``text_tool_calls``: tool calls the model writes as text in its content (Hermes,
    Qwen3-Coder XML, Llama 3 JSON, Mistral markup) become tool calls; ``"auto"`` takes
    any of these formats naming an offered tool, a format's name only that format
    (any tool name), ``"off"`` none. ``reasoning_tags``: content that opens with the
    first tag is thinking up to the second (None: never).
    ``send_reasoning``: the reasoning this endpoint and model streamed
    (``reasoning_content``, ``reasoning`` or tags) goes back as ``reasoning_content``
    on its assistant messages of every turn that called a tool, from the first call
    on, in every later request: DeepSeek's and Kimi's thinking modes refuse a tool
    loop without it (400). Turns without tool calls, and reasoning of another
    endpoint or model, are never sent. None: sent except to the hosts in
    ``REFUSES_REASONING``; False: never.
    ``timeout``, ``http2``, ``headers`` and ``client`` are the keywords every HTTP
    provider takes (``HTTPSettings`` describes them).
    """

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks
    api_style = "openai-chat"
    path = "/chat/completions"
    endpoint_paths = ("/chat/completions", "/responses")

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
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        require_finish_reason: bool = True,
        pricing: Pricing | None = None,
        text_tool_calls: Literal[
            "auto", "off", "hermes", "qwen", "llama", "mistral"
        ] = "auto",
        reasoning_tags: tuple[str, str] | None = ("<think>", "</think>"),
        send_reasoning: bool | None = None,
        **options: Any,
    ) -> None:
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                "max_tokens_field must be 'max_tokens' or 'max_completion_tokens'"
            )
        if text_tool_calls not in TEXT_TOOL_CALLS:
            raise ValueError(
                f"text_tool_calls must be one of {', '.join(TEXT_TOOL_CALLS)}"
            )
        if reasoning_tags is not None and (
            len(reasoning_tags) != 2 or not all(reasoning_tags)
        ):
            raise ValueError("reasoning_tags must be two non-empty strings, or None")
        base_url, auth = openai_endpoint(base_url, api_key)
        settings = HTTPSettings(timeout, http2, headers, client)
        super().__init__(model, base_url, auth=auth, settings=settings)
        self._max_tokens_field = max_tokens_field
        self.require_finish = require_finish_reason
        #: USD per million tokens (``TurnComplete.cost``); None: the price table's
        self.pricing = pricing
        self._options = options
        if send_reasoning is None:
            send_reasoning = not _refuses_reasoning(self.base_url)
        #: the receiver whose own reasoning goes back (None: no reasoning is sent)
        self._reasoning_to = self.wire if send_reasoning else None
        self._encoder = FlatEncoder(
            self.api_style, self._encode, self.wire, turns=bool(send_reasoning)
        )
        self.text_tool_calls = text_tool_calls
        self.reasoning_tags = reasoning_tags
        self._opening = threading.local()  # the request open() is sending
        self._frame = BodyFrame()

    def open(self, request: ProviderRequest, *, tap: Tap | None = None) -> DeltaStream:
        """Send ``request`` and return its open response (``HTTPProvider.open``)."""
        self._opening.request = request
        try:
            return super().open(request, tap=tap)
        finally:
            self._opening.request = None

    def _parser(self) -> Parser:
        request: ProviderRequest | None = getattr(self._opening, "request", None)
        parser = core.OpenAIChatParser()
        if request is None:
            return parser
        return core.TextCalls(
            parser,
            self.text_tool_calls if request.tools else "off",
            {spec.name: _types(spec) for spec in request.tools},
            self.reasoning_tags,
            lambda: _prompt_estimate(request),
            f"{TEXT_CALL_ID_PREFIX}{new_id()[:8]}_",
        )

    @property
    def send_reasoning(self) -> bool:
        """Whether this provider's own reasoning goes back in tool turns (the
        ``send_reasoning`` keyword, None resolved by the base URL's host)."""
        return self._reasoning_to is not None

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The chat-completions JSON body for ``request`` (``options`` applied last)."""
        messages = build_messages(request.messages, request.system, self._reasoning_to)
        return self._body(request, messages)

    def encode_parts(self, request: ProviderRequest) -> list[bytes]:
        """``orjson.dumps(build_body(request))`` in parts, from the messages' kept JSON."""
        if "messages" in self._options:
            return super().encode_parts(request)
        before, first, after = self._frame.get(request, lambda: self._frame_of(request))
        return self._encoder.join(request.messages, before, first, after)

    def _frame_of(self, request: ProviderRequest) -> tuple[bytes, bytes, bytes]:
        """The body's JSON before the messages, the system message's, and after."""
        before, after = split_body(self._body(request, []), "messages")
        system = request.system
        first = orjson.dumps({"role": "system", "content": system}) if system else b""
        return before, first, after

    def _encode(
        self, message: Message, names: dict[str, str], tool_turn: bool = False
    ) -> list[dict[str, Any]]:
        if message.role == "assistant":
            sent = tool_turn and _reasoning_goes_back(message, self._reasoning_to)
            return [_assistant(message, names, sent)]
        if message.role == "user":
            return _user(message, names)
        return []

    def _body(self, request: ProviderRequest, messages: list[Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [_tool(spec) for spec in request.tools]
        config = request.config
        if config.max_output_tokens is not None:
            body[self._max_tokens_field] = config.max_output_tokens
        if config.temperature is not None:
            body["temperature"] = config.temperature
        if request.output is not None:
            body["response_format"] = request.output.openai_response_format()
        body.update(self._options)
        return body


def build_messages(
    messages: Iterable[Message],
    system: str | None,
    reasoning_to: WireIdentity | None = None,
) -> list[dict[str, Any]]:
    """The ``messages`` array: the system prompt first, then the dialogue in order.

    ``reasoning_to``: the endpoint and model the array is for; the reasoning of its
    own assistant messages goes back as ``reasoning_content`` in the turns that called
    a tool (``tool_turns``). None: no reasoning is sent.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    names: dict[str, str] = {}
    messages = list(messages)
    for message, tool_turn in zip(messages, tool_turns(messages), strict=True):
        if message.role == "assistant":
            sent = tool_turn and _reasoning_goes_back(message, reasoning_to)
            out.append(_assistant(message, names, sent))
        elif message.role == "user":
            out.extend(_user(message, names))
    return out


def _refuses_reasoning(base_url: str) -> bool:
    """True when ``base_url``'s host is one of ``REFUSES_REASONING`` or under one."""
    host = (urlsplit(base_url).hostname or "").rstrip(".")
    return any(host == h or host.endswith("." + h) for h in REFUSES_REASONING)


def _reasoning_goes_back(message: Message, receiver: WireIdentity | None) -> bool:
    """True when ``message``'s reasoning may go to ``receiver``: the endpoint and model
    that streamed it (a message without a wire identity has no known author)."""
    return receiver is not None and message.wire == receiver


def _assistant(
    message: Message, names: dict[str, str], reasoning: bool = False
) -> dict[str, Any]:
    # Chat completions has no thinking of its own. The reasoning a server streamed
    # (reasoning_content, reasoning, or <think> tags) goes back to that server as
    # reasoning_content when ``reasoning``: DeepSeek and Kimi refuse a tool loop
    # without it, and chat templates (Qwen3, GLM, MiniMax) render it within the loop.
    # No signature, redacted thinking or reasoning item of another API is sent.
    text = "".join(b.text for b in message.content if isinstance(b, Text))
    calls = []
    for block in message.content:
        if isinstance(block, ToolUse):
            names[block.id] = block.name
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {
                        "name": block.name,
                        "arguments": block.input
                        if json_object(block.input) is not None
                        else "{}",
                    },
                }
            )
    # "" rather than null beside tool calls: OpenAI takes either, and some local
    # servers (llama-cpp-python's) fail on null
    wire: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning:
        thought = "".join(
            b.text
            for b in message.content
            if isinstance(b, Thinking) and not b.signature
        )
        if thought:
            wire["reasoning_content"] = thought
    if calls:
        wire["tool_calls"] = calls
    return wire


def _user(message: Message, names: Mapping[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    content: list[dict[str, Any]] = []  # the user's own text and images, in order
    media: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResult):
            images = [p for p in block.parts if isinstance(p, MediaPart)]
            text = block.text
            if not text and images:
                text = f"[{len(images)} image(s) attached in the next user message]"
            out.append(
                {"role": "tool", "tool_call_id": block.tool_use_id, "content": text}
            )
            if images:
                name = names.get(block.tool_use_id)
                label = f"{name} ({block.tool_use_id})" if name else block.tool_use_id
                media.append(
                    {"type": "text", "text": f"Image(s) from tool call {label}:"}
                )
                media.extend(_image(p) for p in images)
        elif isinstance(block, Text):
            texts.append(block.text)
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, CompactionSummary):
            texts.append(SUMMARY_PREFIX + block.text)
            content.append({"type": "text", "text": SUMMARY_PREFIX + block.text})
        elif isinstance(block, MediaPart):  # an image the user sent, in its place
            content.append(_image(block))
    if media or len(content) > len(texts):
        media.extend(c for c in content if c["type"] != "text" or c["text"])
        out.append({"role": "user", "content": media})
    elif texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _image(part: MediaPart) -> dict[str, Any]:
    url = f"data:{part.media_type};base64,{part.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _types(spec: ToolSpec) -> dict[str, str]:
    """Each parameter's JSON type, where the schema names one."""
    properties = spec.parameters.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        name: schema["type"]
        for name, schema in properties.items()
        if isinstance(schema, dict) and isinstance(schema.get("type"), str)
    }


def _prompt_estimate(request: ProviderRequest) -> int:
    """The request's estimated prompt size, for a server that reports no usage."""
    system = estimate_tokens(request.system) if request.system else 0
    return system + estimate_request_tokens(request.messages, request.tools)


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }

"""What the client answers when an MCP server asks something of it: sampling through
a provider the user allowed (``SamplingPolicy``), elicitation through a callback or the
running call's stream, and roots. Anything not allowed is refused with an error."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..conversation import Message, Role, Text
from ..events import Event, MessageComplete
from ..providers.base import Provider, ProviderRequest
from ._wire import MCPError

__all__ = ["Elicit", "Requests", "SamplingPolicy"]

#: ``(message, requested_schema) -> content or None``: the user's answer (None declines)
Elicit = Callable[[str, Mapping[str, Any]], "Mapping[str, Any] | None"]
#: JSON-RPC code of a refused request (the method is not offered to this server)
_REFUSED: Final = -32601


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    """Lets an MCP server ask ``provider`` for a completion (``sampling/createMessage``).

    Each request gets at most ``max_tokens`` output tokens (less when the server asks
    for less), and the server at most ``max_requests`` of them over the life of the
    ``MCPTools``; past that, and without a policy, the server gets an error.
    """

    __module__ = "navi_core.mcp"  # its public path, in reprs and docs

    provider: Provider
    max_tokens: int = 1024
    max_requests: int = 20


@dataclass(frozen=True, slots=True)
class _Settings:
    """The request config a sampling request sends (``RequestConfig``)."""

    max_output_tokens: int | None
    temperature: float | None
    coalesce_deltas: bool = True


class Requests:
    """Answers one server's requests: ``answer(method, params) -> result``.

    An elicitation goes to the ``elicit`` callback, else to the ``ask`` given with it
    (the running call's stream asks the user), else it is declined.
    """

    def __init__(
        self,
        sampling: SamplingPolicy | None,
        elicit: Elicit | None,
        roots: Sequence[str | Path],
    ) -> None:
        self.sampling = sampling
        self.elicit = elicit
        self.roots = [Path(r).resolve() for r in roots]
        self.sampled = 0
        self._lock = threading.Lock()

    def capabilities(self) -> dict[str, Any]:
        """The client capabilities these answers amount to."""
        caps: dict[str, Any] = {"elicitation": {"form": {}}}
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.roots:
            caps["roots"] = {"listChanged": False}
        return caps

    def answer(
        self, method: str, params: Mapping[str, Any], ask: Elicit | None = None
    ) -> Any:
        if method == "sampling/createMessage":
            return self._sample(params)
        if method == "elicitation/create":
            return self._elicit(params, ask)
        if method == "roots/list" and self.roots:
            return {
                "roots": [
                    {"uri": r.as_uri(), "name": r.name or str(r)} for r in self.roots
                ]
            }
        raise _refused(f"{method} is not offered by this client")

    def _elicit(self, params: Mapping[str, Any], ask: Elicit | None) -> dict[str, Any]:
        message = str(params.get("message", ""))
        schema = params.get("requestedSchema")
        schema = schema if isinstance(schema, dict) else {}
        ask = self.elicit or ask
        if ask is None:
            return {"action": "decline"}
        content = ask(message, schema)
        if content is None:
            return {"action": "decline"}
        return {"action": "accept", "content": dict(content)}

    def _sample(self, params: Mapping[str, Any]) -> dict[str, Any]:
        policy = self.sampling
        if policy is None:
            raise _refused("sampling is not allowed for this server")
        with self._lock:
            if self.sampled >= policy.max_requests:
                raise _refused(
                    f"sampling limit reached ({policy.max_requests} requests)", -1
                )
            self.sampled += 1
        wanted = params.get("maxTokens")
        limit = policy.max_tokens
        if isinstance(wanted, int) and 0 < wanted < limit:
            limit = wanted
        temperature = params.get("temperature")
        request = ProviderRequest(
            messages=tuple(_messages(params.get("messages"))),
            system=str(params["systemPrompt"]) if params.get("systemPrompt") else None,
            tools=(),
            config=_Settings(
                limit,
                float(temperature) if isinstance(temperature, (int, float)) else None,
            ),
        )
        reply = _complete(policy.provider, request)
        stop = {"max_tokens": "maxTokens", "end_turn": "endTurn"}.get(
            reply.stop_reason or "end_turn", "endTurn"
        )
        return {
            "role": "assistant",
            "content": {"type": "text", "text": reply.text},
            "model": policy.provider.wire.model,
            "stopReason": stop,
        }


def _refused(text: str, code: int = _REFUSED) -> MCPError:
    error = MCPError(text)
    error.code = code
    return error


def _messages(raw: Any) -> list[Message]:
    """Sampling messages as conversation messages (text; other content named)."""
    out: list[Message] = []
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, dict):
            continue
        role: Role = "assistant" if item.get("role") == "assistant" else "user"
        blocks = item.get("content")
        texts = []
        for block in blocks if isinstance(blocks, list) else [blocks]:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                texts.append(f"[{block.get('type', 'content')} not shown]")
        out.append(Message(role, (Text("\n".join(texts)),)))
    return out


def _complete(provider: Provider, request: ProviderRequest) -> Message:
    """The provider's whole answer to ``request``."""
    stream = provider.open(request)
    queue: deque[Event] = deque()
    try:
        while True:
            done = stream.produce(queue)
            while queue:
                event = queue.popleft()
                if isinstance(event, MessageComplete):
                    return event.message
            if done:
                raise MCPError("the sampling provider ended without a message")
    finally:
        stream.close()

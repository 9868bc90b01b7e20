"""OpenTelemetry spans for agent turns, following the GenAI semantic conventions.

``instrument(agent)`` (the ``otel`` extra: ``pip install '.[otel]'`` in a clone) makes every turn of ``agent``
report three kinds of span to the global tracer provider (or the one given):

* ``invoke_agent {name}``: the whole turn, from ``run()`` to ``TurnComplete`` or the
  failure (``gen_ai.operation.name = invoke_agent``, ``gen_ai.conversation.id``, the
  turn's summed usage, iterations, tool calls and stop reason);
* ``chat {model}`` (kind CLIENT): one per provider response, from the request to the
  finished message (``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` and the
  cache buckets, ``gen_ai.response.finish_reasons``, ``server.address``);
* ``execute_tool {name}``: one per tool call (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``), with ``error.type`` when it failed.

A failed span has status ERROR and ``error.type`` (the error's class). No message text,
tool argument, header or key is put on a span: only names, counts and the public base
URL's host. What the server names (the response's model, a tool call's name and id) is
put on a span with the provider's credentials redacted (``_secrets.redact``): a server
that echoes the key there does not get it into the trace.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlsplit

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
except ImportError as exc:  # pragma: no cover - depends on the install
    from ._extras import install_command

    raise ImportError(
        f"navi_core.tracing needs OpenTelemetry: {install_command('otel')}"
    ) from exc

from ._secrets import redact
from .agent import Agent
from .conversation import Usage, WireIdentity
from .events import (
    Event,
    MessageComplete,
    ModelInfo,
    ToolFinished,
    ToolStarted,
    TurnComplete,
)
from .providers.base import Provider, ProviderRequest, ProviderStream
from .stream import Stream

__all__ = ["TracedProvider", "TracedResponse", "TracedStream", "instrument"]

_PROVIDER_NAMES: Final = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic-messages": "anthropic",
}


def _usage_attributes(usage: Usage) -> dict[str, int]:
    return {
        "gen_ai.usage.input_tokens": usage.prompt_total,
        "gen_ai.usage.output_tokens": usage.output,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
    }


def _provider_secrets(provider: object) -> tuple[str, ...]:
    """The credentials ``provider`` sends (``HTTPProvider.secrets``), looked for through
    the wrappers that keep the provider they wrap as ``.provider`` (``Recorder``, a
    ``TracedProvider``); empty for a provider that sends none (``Scripted``)."""
    for _ in range(8):  # a chain of wrappers, never a cycle
        found = getattr(provider, "secrets", None)
        if isinstance(found, tuple) and all(isinstance(s, str) for s in found):
            return found
        provider = getattr(provider, "provider", None)
        if provider is None:
            break
    return ()


def _fail(span: Span, exc: BaseException) -> None:
    span.set_attribute("error.type", type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    span.end()


class TracedResponse:
    """A provider response inside its ``chat`` span, ended when the message is."""

    __slots__ = ("_ended", "_model", "_secrets", "_span", "_stream")

    def __init__(
        self, stream: ProviderStream, span: Span, secrets: tuple[str, ...] = ()
    ) -> None:
        self._stream = stream
        self._span = span
        self._model: str | None = None
        self._ended = False
        self._secrets = secrets  # redacted from what the server names

    def produce(self, queue: deque[Event]) -> bool:
        start = len(queue)
        try:
            done = self._stream.produce(queue)
        except BaseException as exc:
            self._end(exc)
            raise
        for event in list(queue)[start:]:
            if isinstance(event, ModelInfo):
                self._model = redact(event.model, self._secrets)
            elif isinstance(event, MessageComplete):
                span = self._span
                span.set_attributes(_usage_attributes(event.usage))
                if self._model:
                    span.set_attribute("gen_ai.response.model", self._model)
                if event.message.stop_reason:
                    finish = (event.message.stop_reason,)
                    span.set_attribute("gen_ai.response.finish_reasons", finish)
        if done:
            self._end(None)
        return done

    def shown(self) -> tuple[int, int, int]:
        """What the traced response returned so far (see ``DeltaStream.shown``), so a
        failed attempt is discarded as it is untraced."""
        shown = getattr(self._stream, "shown", None)
        return shown() if callable(shown) else (0, 0, 0)

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            if not self._ended:  # closed before the message was complete
                self._span.set_attribute("error.type", "closed")
                self._end(None)

    def _end(self, exc: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        if exc is None:
            self._span.end()
        else:
            _fail(self._span, exc)


class TracedProvider:
    """``provider`` with a ``chat`` span around each response it opens."""

    def __init__(self, provider: Provider, tracer: Tracer) -> None:
        self.provider = provider
        self._tracer = tracer
        #: the credentials the provider sends (never show them): kept off every span
        self.secrets = _provider_secrets(provider)

    @property
    def wire(self) -> WireIdentity:
        """The wrapped provider's identity."""
        return self.provider.wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        """Open the response inside a new ``chat`` span (a child of the turn's)."""
        wire = self.provider.wire
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _PROVIDER_NAMES.get(wire.api_style, wire.api_style),
            "gen_ai.request.model": wire.model,
        }
        host = urlsplit(wire.base_url).hostname
        if host:
            attributes["server.address"] = host
        if request.config.max_output_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.config.max_output_tokens
        if request.config.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.config.temperature
        span = self._tracer.start_span(
            f"chat {wire.model}", kind=SpanKind.CLIENT, attributes=attributes
        )
        try:
            with trace.use_span(span, end_on_exit=False):
                stream = self.provider.open(request)
        except BaseException as exc:
            _fail(span, exc)
            raise
        return TracedResponse(stream, span, self.secrets)

    def close(self) -> None:
        """Close the wrapped provider."""
        self.provider.close()


class TracedStream:
    """A ``Stream`` whose turn runs inside an ``invoke_agent`` span.

    It has the stream's methods and attributes; tool calls become ``execute_tool``
    spans as their ``ToolStarted`` / ``ToolFinished`` events pass.
    """

    def __init__(
        self,
        stream: Stream,
        span: Span,
        tracer: Tracer,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._stream = stream
        self._span = span
        self._tracer = tracer
        self._tools: dict[str, Span] = {}
        self._ended = False
        self._secrets = secrets  # redacted from the model's tool names and call ids

    def next(self, *args: Any, **kwargs: Any) -> Any:
        """``Stream.next``, inside the turn's span."""
        try:
            with trace.use_span(self._span, end_on_exit=False):
                event = self._stream.next(*args, **kwargs)
        except BaseException as exc:
            self._end(exc)
            raise
        self._observe(event)
        return event

    def _observe(self, event: Any) -> None:
        if isinstance(event, ToolStarted):
            context = trace.set_span_in_context(self._span)
            name, call_id = self._shown(event.name), self._shown(event.call_id)
            self._tools[event.call_id] = self._tracer.start_span(
                f"execute_tool {name}",
                context=context,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.type": "function",
                },
            )
        elif isinstance(event, ToolFinished):
            span = self._tools.pop(event.call_id, None)
            if span is None:  # started before instrumenting: date it back
                start = time.time_ns() - int(event.seconds * 1e9)
                name, call_id = self._shown(event.name), self._shown(event.call_id)
                span = self._tracer.start_span(
                    f"execute_tool {name}",
                    context=trace.set_span_in_context(self._span),
                    start_time=start,
                    attributes={"gen_ai.operation.name": "execute_tool",
                                "gen_ai.tool.name": name,
                                "gen_ai.tool.call.id": call_id},
                )  # fmt: skip
            if event.is_error:
                span.set_attribute("error.type", "tool_error")
                span.set_status(Status(StatusCode.ERROR, "the tool failed"))
            span.end()
        elif isinstance(event, TurnComplete):
            span = self._span
            span.set_attributes(_usage_attributes(event.usage))
            span.set_attribute("navi.turn.stop_reason", str(event.stop_reason.value))
            span.set_attribute("navi.turn.iterations", event.iterations)
            span.set_attribute("navi.turn.tool_calls", event.tool_calls)
            self._end(None)

    def _shown(self, text: str) -> str:
        """``text`` the model or server wrote, the provider's credentials redacted."""
        return redact(text, self._secrets)

    def _end(self, exc: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        for span in self._tools.values():
            span.set_attribute("error.type", "interrupted")
            span.end()
        self._tools.clear()
        if exc is None:
            self._span.end()
        else:
            _fail(self._span, exc)

    def close(self) -> None:
        """``Stream.close``; a turn closed before it ended is recorded as cancelled."""
        try:
            with trace.use_span(self._span, end_on_exit=False):
                self._stream.close()
        finally:
            if not self._ended:
                self._span.set_attribute("error.type", "cancelled")
                self._end(None)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        event = self.next()
        if event is None:
            raise StopIteration
        return event

    def __enter__(self) -> TracedStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def instrument(agent: Agent, tracer_provider: Any = None) -> Agent:
    """Trace every later turn of ``agent``; returns ``agent``.

    ``tracer_provider`` defaults to OpenTelemetry's global one. Calling it twice on
    one agent changes nothing.
    """
    if isinstance(agent.provider, TracedProvider):
        return agent
    tracer = trace.get_tracer("navi_core", tracer_provider=tracer_provider)
    traced = TracedProvider(agent.provider, tracer)
    agent.provider = traced
    run, resume = agent.run, agent.resume

    def start(opener: Any, *args: Any, **kwargs: Any) -> Any:
        span = tracer.start_span(
            "invoke_agent navi_core",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "navi_core",
                "gen_ai.conversation.id": agent.session_id,
            },
        )
        try:
            with trace.use_span(span, end_on_exit=False):
                stream = opener(*args, **kwargs)
        except BaseException as exc:
            _fail(span, exc)
            raise
        return TracedStream(stream, span, tracer, traced.secrets)

    setattr(agent, "run", lambda *a, **k: start(run, *a, **k))  # noqa: B010
    setattr(agent, "resume", lambda *a, **k: start(resume, *a, **k))  # noqa: B010
    return agent

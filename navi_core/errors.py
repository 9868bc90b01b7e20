"""The navi_core exception tree, grouped by what the caller can do about it.

NaviError
├── ProviderError(message, status_code, retry_after_ms)     retryable: ClassVar[bool]
│   ├── RateLimited · Overloaded · ServerError · TransportError · MalformedStream  (True)
│   │   ├── IncompleteResponse  (MalformedStream) no terminal marker: cut off, not done
│   │   └── NotAnEventStream    (MalformedStream, False) a web page or XML with a 2xx
│   └── AuthFailed · BadRequest · ContextOverflow                                 (False)
├── StreamPoisoned          a Stream failed earlier; ``__cause__`` is that failure
├── EmptyAssistantResponse  the model answered with nothing at all
├── NoCompactionPrompt      compaction was needed but no summary prompt is configured
├── Cancelled               the host cancelled the turn
├── ThinkingStall           a response streamed only thinking past the configured limit
├── SteeringQueueFull       more than ``Config.max_steering`` steering messages wait
├── NothingToCompact        a compaction by hand found fewer than two messages to summarise
├── OutputValidationError   the structured answer stayed invalid after a corrective retry
├── SessionError            persistence: SessionNotFound, AmbiguousSession, SessionBusy
│                           (SessionLockLost: a lock taken away, e.g. on failover)
├── ToolRegistrationError   a duplicate or invalid tool
└── ApprovalNotPending      approve/deny named a call that waits for no decision
"""

from __future__ import annotations

from typing import ClassVar

from ._ids import publish

__all__ = [
    "AmbiguousSession",
    "ApprovalNotPending",
    "AuthFailed",
    "BadRequest",
    "Cancelled",
    "ContextOverflow",
    "EmptyAssistantResponse",
    "IncompleteResponse",
    "MalformedStream",
    "NotAnEventStream",
    "NaviError",
    "NoCompactionPrompt",
    "NothingToCompact",
    "OutputValidationError",
    "Overloaded",
    "ProviderError",
    "RateLimited",
    "ServerError",
    "SessionBusy",
    "SessionError",
    "SessionLockLost",
    "SessionNotFound",
    "SteeringQueueFull",
    "StreamPoisoned",
    "ThinkingStall",
    "ToolRegistrationError",
    "TransportError",
]


class NaviError(Exception):
    """Base class of every error navi_core raises on purpose."""


class ProviderError(NaviError):
    """A model provider failed to give a complete response.

    ``retryable`` is a class attribute: the retry loop asks it instead of keeping a
    list of types. The message is the provider's own text, never headers or keys.
    """

    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.retry_after_ms = retry_after_ms

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status_code={self.status_code!r}, "
            f"retry_after_ms={self.retry_after_ms!r})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        # keyword-only constructor arguments: rebuild from the instance dict
        return (_rebuild, (type(self), self.message, dict(vars(self))))


def _rebuild(
    cls: type[ProviderError], message: str, state: dict[str, object]
) -> ProviderError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class RateLimited(ProviderError):
    """HTTP 429: too many requests; retried after the provider's retry-after."""

    retryable = True


class Overloaded(ProviderError):
    """HTTP 529 or an ``overloaded_error`` event: the provider is busy."""

    retryable = True


class ServerError(ProviderError):
    """HTTP 5xx (and 409): the provider failed on its side."""

    retryable = True


class TransportError(ProviderError):
    """Connect/read/write failure, a timeout, or HTTP 408: the bytes did not arrive."""

    retryable = True


class MalformedStream(ProviderError):
    """The response body broke the SSE or JSON rules, or ended before its terminator.

    ``offset`` is the byte offset in the response body where the problem was found.
    """

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        status_code: int | None = None,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(
            message, status_code=status_code, retry_after_ms=retry_after_ms
        )
        self.offset = offset


class IncompleteResponse(MalformedStream):
    """The response ended without its API's terminal marker: chat completions sent no
    ``finish_reason`` before ``[DONE]`` or the end of the body, Responses no
    ``response.completed``, Anthropic no ``message_stop``.

    A server that cuts a stream (a dropped connection, a server serving a second
    request) leaves half an answer that looks whole; it is retried like a dropped
    connection and never reported as ``END_TURN``.
    """


class NotAnEventStream(MalformedStream):
    """A 2xx response that is a web page or an XML document, not an event stream: a
    captive portal's or a proxy's login page, or a wrong ``base_url``. The message
    names the media type, the URL and the start of the page's text.

    A login page stays one however often it is asked for: not retried.
    """

    retryable = False


class AuthFailed(ProviderError):
    """HTTP 401/403: the key is missing, wrong or lacks permission."""


class BadRequest(ProviderError):
    """Any other 4xx: the request itself is wrong; retrying cannot help."""


class ContextOverflow(ProviderError):
    """The prompt does not fit the model's context window; compaction may help once."""


class StreamPoisoned(NaviError):
    """Raised by every ``Stream.next()`` after the turn failed; ``__cause__`` is why."""


class EmptyAssistantResponse(NaviError):
    """The model completed a response with no text, thinking or tool call."""


class NoCompactionPrompt(NaviError):
    """Compaction was required but ``CompactionConfig.prompt`` is not set."""


class Cancelled(NaviError):
    """The turn was cancelled by the host (``Stream.cancel()`` or a tool)."""


class ThinkingStall(NaviError):
    """A response streamed ``Config.max_thinking_chars`` of thinking with no text or
    tool call; it was aborted and is not retried."""


class SteeringQueueFull(NaviError):
    """``Config.max_steering`` steering messages wait already; this one was refused."""


class NothingToCompact(NaviError):
    """Fewer than two messages could be summarised."""


class OutputValidationError(NaviError, ValueError):
    """The model's structured answer did not validate, also after one corrective retry."""


class SessionError(NaviError):
    """A session store could not do what was asked."""


class SessionNotFound(SessionError, LookupError):
    """No session has that id or id prefix."""


class AmbiguousSession(SessionError, LookupError):
    """The id prefix matches more than one session."""


class SessionBusy(SessionError):
    """Another driver (thread, process or host) holds this session."""


class SessionLockLost(SessionBusy):
    """This driver's session lock was taken from it (its database connection ended),
    so it writes nothing more: another driver may hold the session now."""


class ToolRegistrationError(NaviError, ValueError):
    """A tool name is taken already, or a tool cannot be described as a JSON schema."""


class ApprovalNotPending(NaviError, LookupError):
    """``approve``/``deny`` named a call that is not waiting for a decision."""


publish(globals())

"""Provider failures mapped to the navi_core error tree (HTTP status, stream errors)."""

from __future__ import annotations

import re

from ..errors import (
    AuthFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
)

__all__ = ["error_for_status", "error_for_stream", "is_context_overflow"]


_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded"
    r"|max(?:imum)? context length"
    r"|maximum model length"
    r"|prompt (?:is )?too long"
    r"|context window"
    r"|exceeds? (?:the )?(?:available )?context"
    r"|too many tokens"
    r"|input is too long"
    r"|requested \d+ tokens"
    r"|exceed_context_size"
    r"|context size",
    re.IGNORECASE,
)


def is_context_overflow(text: str) -> bool:
    """True when a provider's error text says the prompt outgrew the context window.

    Covers OpenAI (``context_length_exceeded``), Anthropic ("prompt is too long"),
    vLLM ("maximum context length", "longer than the maximum model length"), llama.cpp
    ("exceeds the available context size", ``exceed_context_size_error``) and Ollama
    ("prompt too long; exceeded max context length", "exceeds the context length").
    """
    return _OVERFLOW.search(text) is not None


def error_for_status(
    status: int,
    message: str,
    *,
    retry_after_ms: int | None = None,
    kind: str | None = None,
) -> ProviderError:
    """Map an HTTP error status and the provider's message to an error instance.

    ``kind`` is the provider's own error type or code when the body named one
    (``overloaded_error``, ``context_length_exceeded``, ``exceed_context_size_error``);
    it refines the status: an overload is an overload whatever the status says.
    """
    cls: type[ProviderError]
    overflow = is_context_overflow(message) or (
        kind is not None and is_context_overflow(kind)
    )
    if status == 429:
        cls = RateLimited
    elif status == 529 or kind == "overloaded_error":
        cls = Overloaded
    elif status in (400, 413, 422, 500) and overflow:
        cls = ContextOverflow
    elif status >= 500:
        cls = ServerError
    elif status in (401, 403):
        cls = AuthFailed
    else:
        cls = BadRequest
    return cls(message, status_code=status, retry_after_ms=retry_after_ms)


_STREAM_ERRORS: dict[str, type[ProviderError]] = {
    "overloaded_error": Overloaded,
    "rate_limit_error": RateLimited,
    "rate_limit_exceeded": RateLimited,
    "api_error": ServerError,
    "server_error": ServerError,
    "internal_server_error": ServerError,
    "timeout_error": ServerError,
    "authentication_error": AuthFailed,
    "permission_error": AuthFailed,
    "invalid_request_error": BadRequest,
    "context_length_exceeded": ContextOverflow,
}


def error_for_stream(kind: str, message: str) -> ProviderError:
    """Map an error object sent inside a stream to an error instance.

    Unknown kinds are treated as server errors (retryable): the response broke off.
    """
    if is_context_overflow(kind) or is_context_overflow(message):
        return ContextOverflow(message or kind)
    cls = _STREAM_ERRORS.get(kind, ServerError)
    return cls(message or kind)

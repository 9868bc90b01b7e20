"""Provider failures mapped to the navi_core error tree.

An HTTP status, the error body's own message and type, or an error object sent inside
a stream become one ``ProviderError`` subclass. Messages are the provider's words,
with secrets redacted and cut to size (``_secrets.redact``); a long one keeps its
head and its end (``shorten``), and a JSON body is read for the fields that name the
problem (``error_fields``).

Statuses: 429 ``RateLimited``; 529 (or an ``overloaded_error``) ``Overloaded``; a
context-length message on 400/413/422/500 ``ContextOverflow``; 408 Request Timeout
``TransportError`` (the request did not reach the server in time, like a timeout on
our side); 409 Conflict ``ServerError`` (a lock or a concurrent update on the
provider's side); other 5xx ``ServerError``; 401/403 ``AuthFailed``; any other 4xx
``BadRequest``. 408 and 409 are retried, as the OpenAI and Anthropic SDKs retry them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .._secrets import MAX_MESSAGE_CHARS, clip, redact
from ..errors import (
    AuthFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
    TransportError,
)

__all__ = [
    "OVERFLOW_WORDING",
    "OverflowWording",
    "error_fields",
    "error_for_status",
    "error_for_stream",
    "error_from_body",
    "is_context_overflow",
    "provider_message",
    "shorten",
]

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
    r"|context size"
    # the servers of OVERFLOW_WORDING, in its order
    r"|context length of only"
    r"|greater than the context length"
    r"|input token count \(?\d+\)? exceeds the maximum number of tokens"
    r"|maximum prompt length is \d+"
    r"|`inputs` must have less than \d+ tokens"
    r"|`inputs` tokens \+ `max_new_tokens` must be <=",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class OverflowWording:
    """A server's own context-overflow error, as it sends it, and where it is from."""

    server: str
    status: int
    body: str
    source: str


OVERFLOW_WORDING: Final[tuple[OverflowWording, ...]] = (
    OverflowWording(
        "LM Studio",
        400,
        '{"error": "Trying to keep the first 111490 tokens when context the '
        "overflows. However, the model is loaded with context length of only 32768 "
        "tokens, which is not enough. Try to load the model with a larger context "
        'length, or provide a shorter input"}',
        "lmstudio-ai/lmstudio-bug-tracker#546 (LM Studio 0.3.13 server log)",
    ),
    OverflowWording(
        "LM Studio (llama.cpp engine)",
        400,
        '{"error": "The number of tokens to keep from the initial prompt is greater '
        "than the context length (n_keep: 13055>= n_ctx: 4096). Try to load the "
        'model with a larger context length, or provide a shorter input."}',
        "Gitlawb/openclaude#353 (the response body of LM Studio's /v1 API)",
    ),
    OverflowWording(
        "Gemini",
        400,
        '{"error": {"code": 400, "message": "The input token count (1200293) '
        'exceeds the maximum number of tokens allowed (1048576).", "status": '
        '"INVALID_ARGUMENT"}}',
        "google-gemini/gemini-cli#6678 (generativelanguage API response)",
    ),
    OverflowWording(
        "xAI",
        400,
        '{"code": "Client specified an invalid argument", "error": "This '
        "model's maximum prompt length is 131072 but the request contains 136973 "
        'tokens."}',
        "cline/cline#3120 (api.x.ai chat completions, grok-3)",
    ),
    OverflowWording(
        "TGI",
        422,
        '{"error": "Input validation error: `inputs` tokens + `max_new_tokens` '
        'must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`", '
        '"error_type": "validation"}',
        "huggingface/text-generation-inference router/src/validation.rs "
        "(ValidationError::MaxTotalTokens, sent as 422)",
    ),
    OverflowWording(
        "TGI",
        422,
        '{"error": "Input validation error: `inputs` must have less than 4095 '
        'tokens. Given: 5012", "error_type": "validation"}',
        "huggingface/text-generation-inference router/src/validation.rs "
        "(ValidationError::InputLength, sent as 422)",
    ),
)
"""Recorded context-overflow responses of servers whose wording the generic patterns
missed; ``is_context_overflow`` matches every one (tests/providers/test_overflow_wording.py)."""


def is_context_overflow(text: str) -> bool:
    """True when a provider's error text says the prompt outgrew the context window.

    Covers OpenAI (``context_length_exceeded``), Anthropic ("prompt is too long"),
    vLLM ("maximum context length", "longer than the maximum model length"), llama.cpp
    ("exceeds the available context size", ``exceed_context_size_error``), Ollama
    ("prompt too long; exceeded max context length", "exceeds the context length"),
    and the servers of ``OVERFLOW_WORDING`` (LM Studio, Gemini, xAI, TGI).
    """
    return _OVERFLOW.search(text) is not None and not _output_alone_too_large(text)


#: (output limit, window) in the wordings that name both: vLLM's
#: "'max_tokens' ... is too large: 5000. This model's maximum context length is 4096",
#: TGI's "must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`"
_OUTPUT_LIMITS = (
    re.compile(r"is too large: (?P<out>\d+)\. This model's maximum context length is "
               r"(?P<window>\d+)"),
    re.compile(r"must be <= (?P<window>\d+)\. Given: \d+ `inputs` tokens and "
               r"(?P<out>\d+) `max_new_tokens`"),
)  # fmt: skip


def _output_alone_too_large(text: str) -> bool:
    """True when the error says the output limit alone fills the window: a request
    no compaction can fix (the prompt is not what is too long)."""
    for pattern in _OUTPUT_LIMITS:
        found = pattern.search(text)
        if found is not None:
            return int(found["out"]) >= int(found["window"])
    return False


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
    408 becomes a retryable ``TransportError`` and 409 a retryable ``ServerError``
    (see the module docstring).
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
    elif status == 408:
        cls = TransportError
    elif status == 409 or status >= 500:  # 409: a conflict on the provider's side
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
    "insufficient_quota": BadRequest,  # retrying cannot help: the account is out
    "context_length_exceeded": ContextOverflow,
}


def error_for_stream(kind: str, message: str) -> ProviderError:
    """Map an error object sent inside a stream to an error instance.

    A kind that is an HTTP status (OpenRouter and vLLM send ``"code": 429``) is
    mapped as that status would be. Other unknown kinds are treated as server errors
    (retryable): the response broke off.
    """
    if is_context_overflow(kind) or is_context_overflow(message):
        return ContextOverflow(message or kind)
    if len(kind) == 3 and kind.isascii() and kind.isdigit() and kind[0] in "45":
        cls = type(error_for_status(int(kind), message or kind))
        return cls(message or kind)  # no status_code: the response's own was 200
    cls = _STREAM_ERRORS.get(kind, ServerError)
    return cls(message or kind)


def provider_message(
    body: bytes, secrets: Sequence[str] = ()
) -> tuple[str, str | None]:
    """(message, kind) from an error body; kind is the error's code or type, if any.

    Reads OpenAI ``{"error": {"message", "type", "code"}}``, Anthropic ``{"type":
    "error", "error": {"type", "message"}}``, vLLM's flat ``{"message", "type"}``,
    Ollama's ``{"error": "..."}`` and FastAPI's ``{"detail": ...}``; anything else is
    taken as text. Secrets are redacted before the message is cut to size.
    """
    message, kind = error_fields(body)
    if message is None:
        message = _summary(body, secrets)
    if kind is not None:
        kind = redact(kind, secrets)
    return shorten(redact(message, secrets)), kind


def error_fields(body: bytes) -> tuple[str | None, str | None]:
    """The message and kind of a JSON error object; (None, None) when there is none.

    The message is what names the problem: ``error.message`` (or a flat
    ``message``, an ``error`` string, FastAPI's ``detail``, each validation item as
    ``loc: msg``), with the ``param`` it names.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    message: Any = None
    kind: str | None = None
    holder: Mapping[str, Any] = data
    err = data.get("error")
    if isinstance(err, dict):
        message, kind, holder = err.get("message"), _kind(err), err
        if message is None and "detail" in err:
            message = _detail(err["detail"])
    elif isinstance(err, str):
        message = err
    elif "message" in data:
        message, kind = data["message"], _kind(data)
    elif "detail" in data:
        message = _detail(data["detail"])
    if message is None:
        return None, kind
    if not isinstance(message, str):
        message = orjson.dumps(message).decode()
    param = holder.get("param")
    if isinstance(param, str) and param and param not in message:
        message = f"{message} (param: {param})"
    return message, kind


def _detail(detail: Any) -> Any:
    """FastAPI's ``detail``: a text, or validation items read as ``loc: msg``."""
    if not isinstance(detail, list) or not all(isinstance(d, dict) for d in detail):
        return detail
    items = []
    for d in detail:
        loc = d.get("loc")
        where = ".".join(str(x) for x in loc) if isinstance(loc, list) else ""
        msg = d.get("msg") or d.get("message") or orjson.dumps(d).decode()
        items.append(f"{where}: {msg}" if where else str(msg))
    return "; ".join(items)


def _summary(body: bytes, secrets: Sequence[str] = ()) -> str:
    """A body without a message field as one line: a JSON object as every field name
    with the start of its value (a long object still shows what it is about), any
    other body as its text. Each value is redacted before it is cut, so a cut never
    leaves part of a secret behind."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not data:
        return " ".join(body.decode("utf-8", "replace").split())
    share = max(24, 400 // max(len(data), 1))
    parts = []
    for key, value in data.items():
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        text = redact(text, secrets)
        if len(text) > share:
            text = text[: share - 1] + "…"
        parts.append(f"{key}: {text}")
    return "; ".join(parts)


def shorten(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` in at most ``limit`` characters: its head and its end, with how much
    was left out between them (an error names its problem at the start or at the
    end: both stay)."""
    if len(text) <= limit:
        return text
    if limit < 80:
        return text[:limit]
    tail = limit // 4
    head = limit - tail - len(f" …[{len(text)} characters cut]… ")
    cut = len(text) - head - tail
    return f"{text[:head]} …[{cut} characters cut]… {text[-tail:]}"


def _kind(err: Mapping[str, Any]) -> str | None:
    code, type_ = err.get("code"), err.get("type")
    if isinstance(code, str) and code:
        return code
    return type_ if isinstance(type_, str) and type_ else None


def error_from_body(
    status: int,
    reason: str,
    body: bytes,
    *,
    retry_after_ms: int | None = None,
    secrets: Sequence[str] = (),
) -> ProviderError:
    """The mapped error for a non-2xx response: the provider's message, or the status."""
    message, kind = provider_message(body, secrets)
    if not message:  # the reason phrase is the server's text too: it may echo a key
        message = clip(redact(f"HTTP {status} {reason}".rstrip(), secrets))
    return error_for_status(status, message, retry_after_ms=retry_after_ms, kind=kind)

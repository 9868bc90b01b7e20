"""Where httpx failures and error responses become navi_core errors, secrets redacted.

``map_transport_errors`` turns httpx request failures into ``TransportError``;
``parse_retry_after`` reads the server's retry hint, bounded by ``MAX_RETRY_AFTER_MS``;
``read_capped`` reads at most 64 KiB of an error body; ``scrubbed`` redacts secrets
from a ``ProviderError`` raised inside a stream. Messages name the failure only and
are clipped (``navi_core._secrets``).
"""

from __future__ import annotations

import copy
import email.utils
import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timezone

import httpx

from .._secrets import clip, redact
from ..errors import ProviderError, TransportError

__all__ = [
    "MAX_RETRY_AFTER_MS",
    "map_transport_errors",
    "parse_retry_after",
    "read_capped",
    "scrubbed",
]

_MAX_ERROR_BODY = 64 * 1024
_NUMBER = re.compile(r"\s*(\d+(?:\.\d*)?)\s*")

MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000
"""Longest server retry hint taken as given (one day); longer or endless ones are cut.

``RetryPolicy.max_delay_ms`` caps the actual wait; this bound keeps an absurd header
(hundreds of digits, a date in the year 9999) a number instead of an OverflowError.
"""


@contextmanager
def map_transport_errors(secrets: Sequence[str] = ()) -> Iterator[None]:
    """Re-raise httpx request failures as ``TransportError`` from the original.

    The message names the failure only: no URL query, header or key is copied.
    """
    try:
        yield
    except httpx.TimeoutException as exc:
        _scrub_chain(exc, secrets)
        raise TransportError(_describe("timed out", exc, secrets)) from exc
    except httpx.RequestError as exc:
        _scrub_chain(exc, secrets)
        raise TransportError(_describe("request failed", exc, secrets)) from exc


def _scrub_chain(exc: BaseException, secrets: Sequence[str]) -> None:
    """Redact the messages of ``exc`` and of every exception it chains: they become
    the cause of what the caller sees, and tracebacks print causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(
            redact(a, secrets) if isinstance(a, str) else a for a in current.args
        )
        current = current.__cause__ or current.__context__


def _describe(what: str, exc: Exception, secrets: Sequence[str]) -> str:
    detail = redact(str(exc), secrets)
    name = type(exc).__name__
    return clip(f"{what}: {name}: {detail}" if detail else f"{what}: {name}")


def parse_retry_after(
    headers: Mapping[str, str], *, now: float | None = None
) -> int | None:
    """The server's retry hint in milliseconds, or None when it sent none we can read.

    ``retry-after-ms`` wins; then ``Retry-After`` as seconds (int or float) or as an
    HTTP date (the wait until then, never negative). Hints above
    ``MAX_RETRY_AFTER_MS`` (or too large for a float) become that bound, so a hostile
    or broken header still leaves a retryable error. ``now`` is a Unix time for tests.
    """
    if not isinstance(headers, httpx.Headers):
        headers = httpx.Headers(headers)
    raw = headers.get("retry-after-ms")
    if raw is not None:
        ms = _non_negative(raw)
        if ms is not None:
            return _bounded_ms(ms)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _non_negative(raw)
    if seconds is not None:
        return _bounded_ms(seconds * 1000)
    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    wait = when.timestamp() - (time.time() if now is None else now)
    return _bounded_ms(max(0.0, wait * 1000))


def _bounded_ms(ms: float) -> int:
    """A non-negative wait in ms as an int, at most ``MAX_RETRY_AFTER_MS``."""
    if not math.isfinite(ms) or ms >= MAX_RETRY_AFTER_MS:
        return MAX_RETRY_AFTER_MS
    return math.ceil(ms)


def _non_negative(raw: str) -> float | None:
    match = _NUMBER.fullmatch(raw)
    return float(match.group(1)) if match else None


def read_capped(response: httpx.Response) -> bytes:
    """Up to ``_MAX_ERROR_BODY`` bytes of the body; a broken read keeps what came."""
    parts: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_raw():
            parts.append(chunk)
            size += len(chunk)
            if size >= _MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass
    return b"".join(parts)[:_MAX_ERROR_BODY]


def scrubbed(exc: ProviderError, secrets: Sequence[str]) -> ProviderError:
    """``exc`` itself when its message is clean, else a copy with a clean message.

    The copy has the same class and attributes (status_code, retry_after_ms, offset),
    the original's traceback and cause, and no context.
    """
    message = clip(redact(exc.message, secrets))
    if message == exc.message and exc.args == (message,):
        return exc
    clean = copy.copy(exc)
    clean.message = message
    clean.args = (message,)
    clean.__cause__ = exc.__cause__
    clean.__suppress_context__ = True
    return clean.with_traceback(exc.__traceback__)

"""Where httpx failures and error responses become navi_core errors, secrets redacted.

``map_transport_errors`` turns httpx request failures into ``TransportError``;
``parse_retry_after`` reads the server's retry hint, bounded by ``MAX_RETRY_AFTER_MS``;
``read_capped`` reads at most 64 KiB of an error body; ``scrubbed`` redacts secrets
from a ``ProviderError`` raised inside a stream. Messages name the failure only and
are clipped (``navi_core._secrets``).

Errors that teach: a refused connection or a timeout names the URL it went to
(``scheme://host:port/path``); a failed DNS lookup names the host; ``status_error`` turns an error
response into the mapped error and, where the cause is a common set-up mistake, says
so: a 404 from a base URL without ``/v1`` (or, for Anthropic, with one) shows the URL
tried and the base URL to use instead, any other 404 for a path the server does not
serve says to check the base URL, and a server that does not have the model
(OpenAI ``model_not_found``, vLLM "does not exist", Ollama "not found, try pulling it
first") names the model and the server, with ``ollama pull`` for Ollama. An error body
that says nothing (``{}``, an ``error`` object without a message) gives the status line
and the URL instead, with what else the body held. ``not_a_stream`` names a 2xx
response that is a web page or XML (a captive portal's or a proxy's login page) by its
content type, its URL and the start of its text: a ``NotAnEventStream`` (not retried).
"""

from __future__ import annotations

import codecs
import copy
import email.utils
import math
import re
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timezone
from html.parser import HTMLParser
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import httpx
import orjson

from .._secrets import (
    MAX_MESSAGE_CHARS,
    REDACTED,
    clip,
    environment_proxy,
    public_url,
    redact,
    secret_start,
)
from ..errors import NotAnEventStream, ProviderError, TransportError
from .errormap import error_for_status, provider_message, shorten

__all__ = [
    "MAX_RETRY_AFTER_MS",
    "RawBody",
    "map_transport_errors",
    "markup_type",
    "not_a_stream",
    "parse_retry_after",
    "read_capped",
    "scrubbed",
    "shown_url",
    "status_error",
]

_DNS_WORDS = re.compile(
    r"name or service not known|nodename nor servname|getaddrinfo failed"
    r"|temporary failure in name resolution|no address associated with hostname"
    r"|name does not resolve|no such host",
    re.IGNORECASE,
)
_MODEL_MISSING = re.compile(
    r"model_not_found|model .{0,80}(?:not found|does not exist|not exist)"
    r"|no such model|unknown model|model not found",
    re.IGNORECASE,
)
_MODEL_NAME = re.compile(r"""model[\s:]+[`'"\\]*([^`'"\\\s,]+)""", re.IGNORECASE)

_MAX_ERROR_BODY = 64 * 1024
_NUMBER = re.compile(r"\s*(\d+(?:\.\d*)?)\s*")

MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000
"""Longest server retry hint taken as given (one day); longer or endless ones are cut.

``RetryPolicy.max_delay_ms`` caps the actual wait; this bound keeps an absurd header
(hundreds of digits, a date in the year 9999) a number instead of an OverflowError.
"""


@contextmanager
def map_transport_errors(
    secrets: Sequence[str] = (),
    url: str | None = None,
    env_proxy: bool = False,
) -> Iterator[None]:
    """Re-raise httpx request failures as ``TransportError`` from the original.

    The message names the failure and, given the request ``url``, where it went as
    ``scheme://host:port/path`` (``shown_url``: no credentials, no query), so a
    refused connection says which server refused it; a failed DNS lookup names the
    host it could not resolve. With ``env_proxy`` (the request was sent by a client
    navi_core made, which honours the proxy variables) a request the environment
    sends through a proxy names the proxy: a refused connection or an unknown host
    is the proxy's (``environment_proxy``). No header or key is copied.
    """
    try:
        yield
    except httpx.TimeoutException as exc:
        where = _where(url, env_proxy)
        _scrub_chain(exc, secrets)
        what = f"timed out talking to {where}" if where else "timed out"
        raise TransportError(_describe(what, exc, secrets)) from exc
    except httpx.ConnectError as exc:
        proxy = environment_proxy(url) if url and env_proxy else None
        target = shown_url(url) if url else None
        host = urlsplit(proxy or url).hostname if url else None
        if proxy:  # the connection that failed was to the proxy
            where = f"the proxy {proxy} (for {target}; {_EXEMPT})"
            named = f"the proxy's host {host!r} (for {target}; {_EXEMPT})"
        else:
            where, named = target, f"host {host!r}"
        if host and _is_dns_failure(exc):
            detail = redact(str(exc), secrets)
            raise TransportError(
                clip(f"cannot resolve {named} (DNS lookup failed: {detail})")
            ) from exc
        _scrub_chain(exc, secrets)
        what = f"cannot connect to {where}" if where else "request failed"
        raise TransportError(_describe(what, exc, secrets)) from exc
    except httpx.RequestError as exc:
        where = _where(url, env_proxy)
        _scrub_chain(exc, secrets)
        what = f"request to {where} failed" if where else "request failed"
        raise TransportError(_describe(what, exc, secrets)) from exc


_EXEMPT = "NO_PROXY can exempt its host"


def _where(url: str | None, env_proxy: bool) -> str | None:
    """``url`` as an error names it, with the proxy the request went through."""
    if not url:
        return None
    proxy = environment_proxy(url) if env_proxy else None
    return f"{shown_url(url)} through the proxy {proxy}" if proxy else shown_url(url)


def shown_url(url: str) -> str:
    """``url`` as an error shows it: ``scheme://host:port/path``, the port always
    (the default one of the scheme when none is written), never user info, query or
    fragment, whatever they hold."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return public_url(url).partition("?")[0]
    if not host or "@" in parts.path:  # an "@" past the host: a password with "/"
        return public_url(url).partition("?")[0]
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme.lower())
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    path = "/".join(segment.partition(";")[0] for segment in parts.path.split("/"))
    return f"{parts.scheme}://{netloc}{path}"


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


def _is_dns_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # the chain: httpx -> httpcore -> socket
        if seen is None:
            break
        if isinstance(seen, socket.gaierror):
            return True
        seen = seen.__cause__ or seen.__context__
    return _DNS_WORDS.search(str(exc)) is not None


def status_error(
    status: int,
    reason: str,
    body: bytes,
    *,
    url: str,
    base_url: str,
    api_style: str,
    retry_after_ms: int | None = None,
    secrets: Sequence[str] = (),
    path: str = "",
) -> ProviderError:
    """The mapped error for a non-2xx response to a request sent to ``url``
    (``base_url``: the public API root the provider was given; ``path``: what the
    provider adds to it, ``/chat/completions``).

    The provider's own message is kept (redacted, clipped); a missing model or a base
    URL that misses (or doubles) ``/v1`` is said in words first. Any other 404 that
    says only "not found" (a server's answer for a path it does not serve: no body,
    not JSON, "Not Found", "File Not Found", "Invalid URL", "Cannot POST") says to
    check base_url; a 404 the API sends in its own words about something else (an
    item it does not have) does not. A body with no message of its own (none,
    ``{}``, an ``error`` that is empty or has no ``message``) gives the status line
    and the URL, after it what else the body held (``_besides_a_message``). A body
    that ends inside a secret (cut at ``read_capped``'s limit) loses that start of
    it (``secret_start``).
    """
    cut = secret_start(body, secrets)  # a body read up to the cap, inside a key
    if cut is not None:
        body = body[:cut] + REDACTED.encode()
    message, kind = provider_message(body, secrets)
    rest = _besides_a_message(body, secrets)
    bare = not message or rest is not None
    if bare:  # the reason phrase is the server's text too: it may echo a key
        message = redact(f"HTTP {status} {reason}".rstrip(), secrets)
        if rest:
            message = f"{message}: {rest}"
    shown = redact(public_url(url), secrets)  # a gateway may carry the key in its path
    missing = _MODEL_MISSING.search(message) or (kind == "model_not_found")
    if status in (400, 404) and missing:
        message = _model_missing(message, base_url)
    elif status == 404 or bare:
        hint = ""
        if status == 404:
            hint = _url_hint(base_url, api_style) or (
                _route_hint(path) if bare or _no_route(body, message) else ""
            )
        suffix = f" (POST {shown}){hint}"
        message = shorten(message, max(MAX_MESSAGE_CHARS - len(suffix), 80)) + suffix
    return error_for_status(
        status, shorten(message), retry_after_ms=retry_after_ms, kind=kind
    )


#: top-level fields that only say "this is an error" (Anthropic's ``type``, vLLM's
#: ``object``): no news next to the status line
_ERROR_MARKERS = {("type", "error"), ("object", "error")}


def _besides_a_message(body: bytes, secrets: Sequence[str] = ()) -> str | None:
    """What a JSON error body holds besides a message, when it has none: ``""`` for
    ``{}``, ``[]``, ``null`` or ``{"error": {}}``; ``"type: rate_limit_error"`` for
    ``{"error": {"type": "rate_limit_error"}}``. None when the body has a message (or
    is not such JSON): then that is the message.

    An ``error`` that is null, empty, or an object with no ``message`` (nor
    ``detail``) has none; the fields of that object come first, then the body's
    others, empty values left out, redacted, cut to size."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if _said(data) is None:
        return ""
    if not isinstance(data, dict) or "error" not in data:
        return None  # a flat message, FastAPI's detail, or fields read as the message
    err = data["error"]
    if isinstance(err, dict):
        if any(_said(err.get(name)) is not None for name in ("message", "detail")):
            return None
        fields = _said(err) or {}
    elif _said(err) is None:
        fields = {}
    else:
        return None  # an error string (Ollama's), or something else said there
    for key, value in data.items():
        kept = _said(value)
        if key == "error" or key in fields or kept is None:
            continue
        if (key, kept) not in _ERROR_MARKERS:
            fields[key] = kept
    if not fields:
        return ""
    return provider_message(orjson.dumps(fields), secrets)[0]


def _said(value: Any) -> Any:
    """``value`` without its empty parts (null, blank text, empty lists and objects),
    or None when nothing is left."""
    if isinstance(value, dict):
        pairs = ((k, _said(v)) for k, v in value.items())
        return {k: v for k, v in pairs if v is not None} or None
    if isinstance(value, list):
        items = [v for v in map(_said, value) if v is not None]
        return items or None
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _model_missing(message: str, root: str) -> str:
    match = _MODEL_NAME.search(message)
    model = match.group(1) if match else None
    named = f"model {model!r}" if model else "the model"
    text = f"{named} is not available at {root}: {message}"
    if "pull" in message.lower() and model:  # Ollama: the model is not downloaded
        text += f" (run: ollama pull {model})"
    return text


def _url_hint(base_url: str, api_style: str) -> str:
    """How the base URL should read, when a 404 is likely its fault."""
    path = urlsplit(base_url).path.rstrip("/")
    if api_style.startswith("openai") and "/v1" not in path:
        return (
            ": the base URL has no /v1, where OpenAI-compatible servers serve the API;"
            f" try base_url={base_url.rstrip('/') + '/v1'!r}"
        )
    if api_style.startswith("anthropic") and path.endswith("/v1"):
        fixed = base_url.rstrip("/")[: -len("/v1")]
        return (
            ": the base URL ends in /v1, but Anthropic's base has none (the client adds"
            f" /v1/messages); try base_url={fixed!r}"
        )
    return ""


#: what servers answer for a path they do not serve: Go's "404 page not found",
#: llama.cpp's "File Not Found", FastAPI's and Anthropic's "Not Found", OpenAI's
#: "Invalid URL (POST /v1/...)", Express's "Cannot POST /...", LM Studio's
#: "Unexpected endpoint or method", Apache's and Flask's "The requested URL was not
#: found on this server"
_NO_ROUTE = re.compile(
    r"^\W*(?:(?:http\s*)?404\W*)?(?:(?:file|page|resource|route|path|endpoint|url)"
    r"\s+)?not\s+found\W*$"
    r"|invalid url|cannot (?:post|get) /|unexpected endpoint|no route"
    r"|unknown (?:url|endpoint|route|path)|requested url was not found",
    re.IGNORECASE,
)


def _no_route(body: bytes, message: str) -> bool:
    """Whether a 404 reads as a server's answer for a path it does not serve: a
    body that is not JSON (a web page, Go's plain text), or a message that says
    only that (``_NO_ROUTE``). An API's 404 in its own words ("Item with id 'rs_1'
    not found") is about something else."""
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return True
    return _NO_ROUTE.search(message) is not None


def _route_hint(path: str) -> str:
    """What a 404 for a path the server does not serve says to change."""
    added = f" (base_url + {path})" if path else ""
    return f": check base_url: the server has no endpoint at this URL{added}"


def _describe(what: str, exc: Exception, secrets: Sequence[str]) -> str:
    what = redact(what, secrets)  # a gateway may carry the key in its path
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


class RawBody(Protocol):
    """A response whose body is read as raw bytes (``httpx.Response`` or
    ``_plain_http.PlainResponse``)."""

    def iter_raw(self) -> Iterator[bytes]: ...


def read_capped(response: RawBody) -> bytes:
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


#: media types that cannot be an event stream: web pages and XML (a captive portal's
#: or a proxy's login page, an XML error document). ``text/plain``, no content type
#: and any other one are still read as a stream: servers send streams as those.
_MARKUP = re.compile(
    r"text/html|application/xhtml\+xml|(?:text|application)/xml"
    r"|[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+\+xml"
)
_EXCERPT_CHARS = 160


def markup_type(content_type: str) -> str | None:
    """The media type of a ``content-type`` (lowercase, no parameters) when it is a
    web page or XML, which cannot be an event stream; None for any other."""
    media = content_type.partition(";")[0].strip().lower()
    return media if _MARKUP.fullmatch(media) else None


def not_a_stream(
    content_type: str,
    body: bytes,
    *,
    url: str,
    status: int,
    secrets: Sequence[str] = (),
) -> NotAnEventStream:
    """The error for a 2xx response to ``url`` that is a web page or XML
    (``markup_type``): its media type, where the request went and the start of the
    page's text, as a reader sees it, in quotes; secrets redacted before it is cut.

    A login page stays a login page however often it is asked for: it is not
    retried (``NotAnEventStream``).
    """
    media = markup_type(content_type) or content_type
    where = public_url(url)
    message = f"expected an event stream, got {media} from POST {where}"
    text = _excerpt(redact(_page_text(body, _charset(content_type, body)), secrets))
    if text:
        message += f': "{text}"'
    return NotAnEventStream(clip(redact(message, secrets)), status_code=status)


_BOMS: Final = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _charset(content_type: str, body: bytes = b"") -> str:
    """The charset of a page: its byte order mark's, else the one its
    ``content-type`` names (when Python knows it), else UTF-8."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip("\"'")).name
            except LookupError:
                break
    return "utf-8"


def _page_text(body: bytes, charset: str) -> str:
    """The text of a page or XML document: no tags, scripts, styles or comments,
    character references decoded, blanks collapsed."""
    try:
        markup = body.decode(charset, "replace")
    except LookupError:  # a codec that is not a text encoding ("base64")
        markup = body.decode("utf-8", "replace")
    reader = _PageText()
    reader.feed(markup)
    reader.close()
    return " ".join("".join(reader.parts).split())


def _excerpt(text: str) -> str:
    """The start of ``text``, cut after a whole word and marked when cut."""
    if len(text) <= _EXCERPT_CHARS:
        return text
    head = text[: _EXCERPT_CHARS + 1]
    head = head.rsplit(" ", 1)[0] if " " in head else head[:_EXCERPT_CHARS]
    return head.rstrip() + "…"


class _PageText(HTMLParser):
    """Collects the text a reader of a page sees: a tag that starts a block or a
    line ends a word, an inline one (``<b>``, ``<a>``) does not."""

    _HIDDEN = frozenset({"script", "style", "template"})
    _INLINE = frozenset(
        {"a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font",
         "i", "kbd", "mark", "q", "s", "samp", "small", "span", "strong", "sub", "sup",
         "time", "tt", "u", "var"}
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1
        elif tag not in self._INLINE:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag not in self._INLINE:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


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

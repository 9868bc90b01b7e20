"""Sync httpx plumbing shared by the HTTP providers.

One ``httpx.Client`` per provider (keep-alive across requests), ``Timeout`` turned into
``httpx.Timeout``, the request, and the streaming loop that feeds raw body bytes to a
core parser. Failures and error statuses become navi_core errors through
``_http_errors`` and ``errormap``. Secrets (the API key, credential headers and URL
credentials) are redacted from every error raised here, in-stream errors included, and
the base URL is shown only in its public form (both from ``navi_core._secrets``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, ClassVar, Final, TypeVar
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx
import orjson

from .._extras import install_command
from .._interrupt import Interrupter
from .._logs import get_logger, protect
from .._secrets import check_headers, clip, public_url, redact, request_secrets
from ..config import Timeout
from ..conversation import WireIdentity, decode_arguments
from ..errors import MalformedStream, ProviderError
from ._body import Parser, Tap, body_batches
from ._dialogue import well_formed
from ._http_errors import (
    MAX_RETRY_AFTER_MS,
    map_transport_errors,
    markup_type,
    not_a_stream,
    parse_retry_after,
    read_capped,
    scrubbed,
    status_error,
)
from ._plain_http import PlainHTTP, PlainResponse
from ._sockets import make_transport
from .base import ProviderRequest
from .delta_stream import DeltaStream
from .errormap import error_fields, error_for_stream

__all__ = [
    "HTTP_DEFAULTS",
    "MAX_RETRY_AFTER_MS",
    "HTTPProvider",
    "HTTPSettings",
    "Parser",
    "ResponseStream",
    "TAPPED_HEADERS",
    "Tap",
    "json_object",
    "make_client",
    "map_transport_errors",
    "parse_retry_after",
    "to_httpx_timeout",
]


#: the response headers a ``Tap`` is shown: what the error mapping reads, no cookie
TAPPED_HEADERS = ("content-type", "retry-after", "retry-after-ms")


def json_object(raw: str) -> dict[str, Any] | None:
    """Tool-call arguments as a dict, or None when they are not one JSON object.

    Broken arguments (e.g. cut off by ``max_tokens``) stay in the conversation as sent;
    on the wire they become ``{}``, since APIs and chat templates that parse them refuse
    the request. The dispatch's error result already told the model why.
    """
    value = decode_arguments(raw)
    return value if isinstance(value, dict) else None


def to_httpx_timeout(timeout: Timeout) -> httpx.Timeout:
    """The httpx form of a navi_core ``Timeout`` (None still means no limit)."""
    return httpx.Timeout(
        connect=timeout.connect,
        # idle: the longest an open response may stay silent, headers included
        read=timeout.idle if timeout.idle is not None else timeout.read,
        write=timeout.write,
        pool=timeout.pool,
    )


def make_client(
    timeout: Timeout, *, http2: bool = False, url: str = "http://"
) -> httpx.Client:
    """A client that keeps connections alive and honours proxy/CA environment variables.

    Its connections can be interrupted by ``Stream.cancel()`` (see ``_sockets``); a
    TLS context is loaded only when ``url`` is ``https``, and shared by the process.

    Raises:
        ImportError: ``http2=True`` without the ``h2`` package.
    """
    if http2:
        try:
            import h2  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                f"http2=True needs the 'h2' package: {install_command('http2')}"
            ) from exc
    try:
        return httpx.Client(
            timeout=to_httpx_timeout(timeout),
            http2=http2,
            trust_env=True,
            follow_redirects=False,
            transport=make_transport(url, http2=http2),
        )
    except ImportError as exc:
        raise ImportError(
            f"http2=True needs the 'h2' package: {install_command('http2')}"
        ) from exc


class ResponseStream(DeltaStream):
    """A ``DeltaStream`` over an HTTP body that hands a finished connection back.

    After the terminator the rest of the body (normally just the end of the chunked
    encoding) is read, as the vendors' SDKs do, so the connection returns to the pool
    instead of being dropped; a stream closed early closes its connection.

    Errors raised while producing carry redacted, clipped messages: an error object
    sent inside the stream is the server's text, and a server may echo the key.
    """

    __slots__ = ("_body", "_held", "_secrets", "_socket")

    def __init__(
        self,
        batches: Iterator[Sequence[tuple[Any, ...]]],
        wire: WireIdentity,
        *,
        on_close: Callable[[], None] | None = None,
        secrets: Sequence[str] = (),
        network_stream: Any = None,
        coalesce: bool = False,
        require_finish: bool = False,
    ) -> None:
        super().__init__(
            batches,
            wire,
            on_close=on_close,
            coalesce=coalesce,
            require_finish=require_finish,
        )
        self._body = batches
        self._secrets = tuple(secrets)
        get = getattr(network_stream, "get_extra_info", lambda _: None)
        self._socket: socket.socket | None = get("socket")
        self._held: Interrupter | None = None

    def hold_with(self, interrupter: Interrupter) -> None:
        """Let ``interrupter`` shut this response's socket down until it is closed."""
        if self._socket is not None and self._held is None:
            self._held = interrupter
            interrupter.hold(self._socket)

    def scrubbed(self, exc: ProviderError) -> ProviderError:
        """``exc`` redacted and cut to ``MAX_MESSAGE_CHARS`` (``produce`` raises it)."""
        return scrubbed(exc, self._secrets)

    def close(self) -> None:
        """Drain the end of a complete body (keeping the connection), then release it."""
        held, self._held = self._held, None
        if held is not None and self._socket is not None:
            held.release(self._socket)  # before the connection goes back to the pool
        if self.complete:
            try:
                for _ in islice(self._body, _DRAIN_BATCHES):
                    pass
            except ProviderError:
                pass
        close = getattr(self._body, "close", None)
        if close is not None:
            close()
        super().close()


_DRAIN_BATCHES = 16


def _target(url: str) -> str:
    """The request target of ``url``: its path and query (``/`` when it has none)."""
    parts = urlsplit(url)
    path = parts.path or "/"
    return f"{path}?{parts.query}" if parts.query else path


def _encodes_bytes(cls: type, _known: dict[type, bool] = {}) -> bool:  # noqa: B006
    """Whether ``cls`` overrides ``encode_body`` below its ``encode_parts`` (a subclass
    written when ``open`` sent ``encode_body``): then ``open`` sends those bytes."""
    known = _known.get(cls)
    if known is None:
        body = next(k for k in cls.__mro__ if "encode_body" in k.__dict__)
        parts = next(k for k in cls.__mro__ if "encode_parts" in k.__dict__)
        known = _known[cls] = body is not parts and issubclass(body, parts)
    return known


_log = get_logger("navi_core.http")
_P = TypeVar("_P", bound="HTTPProvider")


@dataclass(frozen=True)
class HTTPSettings:
    """The keywords every HTTP provider takes beside its own: their one home.

    ``OpenAIChat``, ``OpenAIResponses`` and ``Anthropic`` list them as keyword-only
    parameters of the same names, typed as here, with the defaults of
    ``HTTP_DEFAULTS``, and hand them to ``HTTPProvider`` as one of these
    (tests/providers/test_http_settings.py keeps the lists equal).

    - ``timeout``: the connect, read, write and pool limits of every request.
    - ``http2``: the provider's own client speaks HTTP/2 where the server offers it
      (``pip install 'navi-core[http2]'``).
    - ``headers``: more request headers (names case-insensitive); they win over the
      ones the provider builds, its auth headers included.
    - ``client``: an ``httpx.Client`` to send with instead of the provider's own; it
      is used but never closed (``timeout`` still bounds each request, ``http2`` is
      then the client's own choice).
    """

    timeout: Timeout = Timeout()  # noqa: RUF009 - frozen value
    http2: bool = False
    headers: Mapping[str, str] | None = None
    client: httpx.Client | None = None


#: the defaults of the keywords every HTTP provider takes (``HTTPSettings``)
HTTP_DEFAULTS: Final = HTTPSettings()


class HTTPProvider:
    """Base of the HTTP providers: the client, the secrets, ``wire`` and the request.

    Subclasses set ``api_style`` and ``path``, build the JSON body and name the
    parser; ``open`` is shared. ``settings`` holds the keywords every HTTP provider
    takes (``HTTPSettings``); a ``client`` passed in is used but never closed.
    """

    api_style: ClassVar[str]
    path: ClassVar[str]
    #: endings of a base URL's path that are an endpoint's, never a base (checked
    #: without case, longest first): the provider refuses such a base URL
    endpoint_paths: ClassVar[tuple[str, ...]] = ()
    #: a terminator without a finish reason is an ``IncompleteResponse``
    require_finish: bool = False

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        auth: Mapping[str, str],
        settings: HTTPSettings,
    ) -> None:
        timeout, http2 = settings.timeout, settings.http2
        headers, client = settings.headers, settings.client
        if not model:
            raise ValueError("model must be a non-empty string")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                "base_url must start with http:// or https://: "
                f"{public_url(base_url)!r}"
            )
        try:
            parts = urlsplit(base_url)
        except ValueError as exc:
            raise ValueError(
                f"base_url is not a URL: {public_url(base_url)!r}"
            ) from exc
        scheme, netloc, path, query, fragment = parts
        path = path.rstrip("/")
        self._refuse_endpoint(base_url, parts, path)
        root = urlunsplit((scheme, netloc, path, query, fragment))
        # Only the request URL keeps user info and query; everything shown or stored
        # (wire, repr, messages, sessions) gets the public form.
        self._wire = WireIdentity(self.api_style, public_url(root), model)
        self._url = urlunsplit((scheme, netloc, path + self.path, query, fragment))
        merged = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            # iter_raw() hands the parser undecoded bytes: ask for no compression.
            "accept-encoding": "identity",
            **auth,
        }
        merged.update({k.lower(): v for k, v in (headers or {}).items()})
        check_headers(merged)  # a bad key fails here, before any request or log
        self._headers = merged
        self._secrets = request_secrets(merged, root, self._wire.base_url, client)
        protect(self._secrets)
        self._timeout = to_httpx_timeout(timeout)
        self._owns_client = client is None
        self._client = (
            make_client(timeout, http2=http2, url=root) if client is None else client
        )
        # the provider's own requests to a plain-http server skip httpx (_plain_http)
        self._plain = (
            PlainHTTP(root)
            if client is None and PlainHTTP.serves(self._url, http2=http2)
            else None
        )
        self._target = _target(self._url)

    @classmethod
    def _refuse_endpoint(cls, base_url: str, parts: SplitResult, path: str) -> None:
        """Refuse a base URL that ends with an endpoint's path (``path``: its own,
        no trailing slash): the provider adds that path itself, so the request
        would go to ``.../chat/completions/chat/completions``.

        Raises:
            ValueError: naming the base URL to use (in its public form, saying so
                when the URL's credentials are left out of it).
        """
        lowered = path.lower()
        ending = next((e for e in cls.endpoint_paths if lowered.endswith(e)), None)
        if ending is None:
            return
        fixed = urlunsplit(parts._replace(path=path[: -len(ending)]))
        shown = public_url(fixed)
        name = cls.__name__
        if ending == cls.path:
            what = f"the path {name} adds itself"
        elif cls.path.endswith(ending):
            what = f"part of the path {name} adds itself ({cls.path})"
        else:
            what = f"another endpoint's path ({name} adds {cls.path} itself)"
        message = (
            f"base_url {public_url(base_url)!r} ends with {ending}, {what}: "
            f"use base_url={shown!r}"
        )
        if shown != fixed:
            message += " (with the credentials of the URL given, not shown here)"
        raise ValueError(message)

    @property
    def wire(self) -> WireIdentity:
        """The API style, base URL and model this provider talks to."""
        return self._wire

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._wire.model

    @property
    def base_url(self) -> str:
        """The public API root: no trailing slash, user info or secret parameters."""
        return self._wire.base_url

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every spelling of the credentials this provider sends (``request_secrets``):
        what a recording of its traffic must redact. Never show or store it."""
        return self._secrets

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"
        )

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON request body for ``request``."""
        raise NotImplementedError

    def encode_body(self, request: ProviderRequest) -> bytes:
        """The request body's bytes: ``orjson.dumps(build_body(request))``."""
        return b"".join(self.encode_parts(request))

    def encode_parts(self, request: ProviderRequest) -> list[bytes]:
        """The request body as the parts that are sent one after the other: the bytes
        kept for the conversation's older messages go to the socket as they are, so
        a request copies none of them."""
        return [orjson.dumps(self.build_body(request))]

    def _parser(self) -> Parser:
        raise NotImplementedError

    def open(self, request: ProviderRequest, *, tap: Tap | None = None) -> DeltaStream:
        """Send the request and return the open response as a ``DeltaStream``.

        ``tap`` (``navi_core.testing.Recorder``) sees the response's raw bytes.

        Raises:
            ProviderError: the mapped error of a non-2xx status, or ``TransportError``.
        """
        request = well_formed(request)  # no two user prompts in a row
        if _encodes_bytes(type(self)):
            parts = [self.encode_body(request)]
        else:
            parts = self.encode_parts(request)
        size = sum(map(len, parts))
        client = self._client
        plain = self._plain
        if plain is None and len(parts) > 1 and client.event_hooks["request"]:
            # a request hook may read ``request.content``, which httpx only has for
            # a body given as bytes
            parts = [b"".join(parts)]
        content: bytes | list[bytes] = parts[0] if len(parts) == 1 else parts
        shown = self._wire.base_url + self.path  # the public form: no credentials
        _log.debug(
            "POST %s: %d messages, %d tools, %d bytes of JSON",
            shown, len(request.messages), len(request.tools), size,
        )  # fmt: skip
        response: httpx.Response | PlainResponse
        with map_transport_errors(
            self._secrets, self._url, plain is None and self._owns_client
        ):
            if plain is not None:
                response = plain.post(self._target, self._headers, parts, self._timeout)
            else:
                req = client.build_request(
                    "POST",
                    self._url,
                    content=content,
                    headers=self._headers if len(parts) == 1 else self._sized(size),
                    timeout=self._timeout,
                )
                response = client.send(req, stream=True)
        _log.info("POST %s (%s): HTTP %d", shown, self.model, response.status_code)
        if tap is not None:
            headers = response.headers
            tap.status(
                response.status_code,
                {k: headers[k] for k in TAPPED_HEADERS if k in headers},
            )
        try:
            self._check(response, tap)
        except BaseException:
            response.close()
            raise
        return ResponseStream(
            body_batches(response, self._parser(), self._secrets, tap),
            self._wire,
            on_close=response.close,
            secrets=self._secrets,
            network_stream=response.extensions.get("network_stream"),
            # a RequestConfig from before coalesce_deltas existed has no such attribute
            coalesce=getattr(request.config, "coalesce_deltas", False),
            require_finish=self.require_finish,
        )

    def _sized(self, size: int) -> dict[str, str]:
        """The headers for a body sent in parts: its length given, so it is not sent
        chunked (httpx then leaves out Transfer-Encoding)."""
        return {**self._headers, "content-length": str(size)}

    def _check(
        self, response: httpx.Response | PlainResponse, tap: Tap | None = None
    ) -> None:
        status = response.status_code
        if not 200 <= status < 300:
            body = read_capped(response)
            if tap is not None:
                tap.chunk(body)
            raise status_error(
                status,
                response.reason_phrase,
                body,
                url=self._url,
                base_url=self._wire.base_url,
                api_style=self.api_style,
                retry_after_ms=parse_retry_after(response.headers),
                secrets=self._secrets,
                path=self.path,
            )
        ctype = response.headers.get("content-type", "")
        if ctype.startswith("application/json"):
            # A server that ignored ``stream: true``, or an error sent with a 200.
            body = read_capped(response)
            if tap is not None:
                tap.chunk(body)
            message, kind = error_fields(body)
            if message is not None:
                kind = clip(redact(kind or "", self._secrets))  # a key can be a "code"
                raise error_for_stream(kind, clip(redact(message, self._secrets)))
            raise MalformedStream(
                f"expected an event stream, got {ctype}", status_code=status
            )
        if markup_type(ctype):
            # A web page or XML with a 2xx: a captive portal's or a proxy's login page
            # (a final error, not a cut-off stream). text/plain and a missing content
            # type are read as a stream: servers send streams as those.
            body = read_capped(response)
            if tap is not None:
                tap.chunk(body)
            raise not_a_stream(
                ctype, body, url=self._url, status=status, secrets=self._secrets
            )

    def close(self) -> None:
        """Close the client if this provider created it (idempotent)."""
        if self._owns_client:
            self._client.close()
        if self._plain is not None:
            self._plain.close()

    def __enter__(self: _P) -> _P:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

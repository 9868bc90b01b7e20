"""What a web page may not make a browser do to ``navi-core serve``.

Served without tokens, the API has only the browser between it and any page the
user opens. A page can reach it through a DNS name it rebinds to 127.0.0.1 (the
browser then sends that name as ``Host``), or post to it from its own origin (a form,
or a ``fetch`` with ``text/plain``, needs no CORS preflight). So, without tokens:

- ``Host`` must name this server: loopback names, the bound address, or a name
  the operator allows; anything else is 421.
- An API request a browser marks as cross-site (``Sec-Fetch-Site`` other than
  ``same-origin`` or ``none``, or an ``Origin`` whose host is not ``Host``) is 403.
- A POST body must be JSON: a ``Content-Type`` other than ``application/json`` (or a
  body without one) is 415, so no form or ``text/plain`` post is read.

With tokens none of this is needed: a browser never adds a bearer token by itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from .http import HTTPError, Request

__all__ = ["LOOPBACK_NAMES", "HostGuard", "host_name", "require_json", "same_origin"]

#: the names of this host that need no flag
LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")


def host_name(value: str) -> str:
    """The host of a ``Host`` value (``name``, ``name:port``, ``[v6]:port``), in lower
    case without a trailing dot."""
    value = value.strip().lower()
    if value.startswith("["):
        name = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        name = value.partition(":")[0]
    else:
        name = value
    return name.rstrip(".")


class HostGuard:
    """The ``Host`` names a server answers to."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(host_name(n) for n in names if n.strip())

    def check(self, request: Request) -> None:
        """Raises:
        HTTPError: 421 when ``Host`` is missing or names another server."""
        value = request.header("Host") or ""
        if host_name(value) not in self.names:
            raise HTTPError(
                421,
                "misdirected_request",
                f"this server does not answer for host {value[:100]!r} "
                "(navi-core serve --allow-host NAME adds one)",
            )

    def __repr__(self) -> str:
        return f"<HostGuard {sorted(self.names)}>"


def same_origin(request: Request) -> None:
    """Refuse a request the browser says comes from another site.

    Raises:
        HTTPError: 403 for ``Sec-Fetch-Site`` other than ``same-origin``/``none``, or
            an ``Origin`` (``null`` included) whose host and port are not ``Host``'s.
    """
    site = (request.header("Sec-Fetch-Site") or "").strip().lower()
    if site and site not in ("same-origin", "none"):
        raise HTTPError(
            403, "cross_site_request", f"a {site[:20]} request is not served"
        )
    origin = request.header("Origin")
    if origin is None:
        return
    host = (request.header("Host") or "").strip().lower()
    parts = urlsplit(origin.strip().lower())
    default = {"http": "80", "https": "443"}.get(parts.scheme, "")
    netloc = parts.netloc.removesuffix(":" + default) if default else parts.netloc
    if not netloc or netloc != host.removesuffix(":" + default):
        raise HTTPError(
            403, "cross_site_request", "a request from another origin is not served"
        )


def require_json(request: Request) -> None:
    """Raises:
    HTTPError: 415 when the body is not declared ``application/json`` (an empty
        body may come without a ``Content-Type``)."""
    declared = request.header("Content-Type")
    if declared is None:
        length = request.environ.get("CONTENT_LENGTH") or "0"
        chunked = "chunked" in str(request.environ.get("HTTP_TRANSFER_ENCODING", ""))
        if length in ("", "0") and not chunked:
            return
        declared = ""
    media = declared.partition(";")[0].strip().lower()
    if media != "application/json":
        raise HTTPError(
            415,
            "unsupported_media_type",
            "the body must be JSON sent as Content-Type: application/json, "
            f"not {media[:60] or 'without a type'!r}",
            "body",
        )

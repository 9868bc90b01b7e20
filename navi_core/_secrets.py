"""Keeping secrets out of everything shown, logged or stored.

One list of secret-looking names (``SECRET_WORDS``) decides which query parameters,
``;params`` and headers are credentials. From it:

- ``public_url`` / ``public_wire``: a base URL safe to show and store (no user info,
  fragment, ``;params`` or secret-looking query parameters; a URL that does not parse
  cleanly is cut down rather than kept); ``environment_proxy``: the proxy the environment
  sends a URL through, as an error may name it;
- ``request_secrets``: the values a request carries that must never appear in an
  error message (credential headers, bearer tokens, credentials in the URL);
- ``secret_forms``: every spelling of a secret that text may carry (stripped,
  repr'd, JSON-escaped, percent-encoded), so ``redact`` finds it in any of them;
- ``check_headers``: header names and values refused when the provider is made (a
  key read from a file with its newline, a non-ASCII key), the value never shown;
- ``redact`` replaces those values in text, ``redact_json`` in every string of a JSON
  value, ``secret_pattern`` finds them in raw bytes; ``clip`` cuts long error text.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import (
    parse_qsl,
    quote,
    quote_plus,
    unquote,
    urlencode,
    urlsplit,
    urlunsplit,
)

from .conversation import WireIdentity

__all__ = [
    "MAX_MESSAGE_CHARS",
    "REDACTED",
    "SECRET_PARAMS",
    "SECRET_WORDS",
    "check_headers",
    "clip",
    "environment_proxy",
    "header_secrets",
    "looks_secret",
    "looks_secret_param",
    "public_url",
    "public_wire",
    "redact",
    "redact_json",
    "request_secrets",
    "secret_pattern",
    "secret_forms",
    "url_secrets",
]

SECRET_WORDS: Final = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "auth",
    "sig",
    "cookie",
)
"""A query parameter, ``;param`` or header whose name contains one of these (in any
case) holds a credential: ``api_key``, ``X-Auth-Token``, ``authorization``, ``sig``
(signed URLs), ``cookie``..."""

SECRET_PARAMS: Final = ("code",)
"""Query parameters that are credentials by name alone, not by a word they contain
(Azure Functions' ``?code=``); as header names they are not (``accept-encoding``)."""

REDACTED: Final = "[REDACTED]"
"""What a secret is replaced with in text."""

MAX_MESSAGE_CHARS: Final = 500
"""Error text longer than this is cut (an error page can be megabytes)."""

_MIN_SECRET_CHARS: Final = 4


def looks_secret(name: str) -> bool:
    """True when ``name`` (a parameter or header name) looks like it names a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def looks_secret_param(name: str) -> bool:
    """True when the query or ``;`` parameter ``name`` looks like it holds a secret."""
    return looks_secret(name) or name.lower() in SECRET_PARAMS


_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def check_headers(headers: Mapping[str, str]) -> None:
    """Refuse header names and values that cannot be sent as they are.

    A value must be printable ASCII without leading or trailing whitespace: a key
    read from a file keeps its newline, and httpx would fail every request with the
    key in its message. The message names the header and the fault, never the value.

    Raises:
        ValueError: a bad name or value.
    """
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP header name")
        what = (
            f"the {name!r} header (it carries the API key)"
            if header_secrets({name: value}) or looks_secret(name)
            else f"the {name!r} header"
        )
        if not isinstance(value, str):
            raise ValueError(f"{what} must be a str, not {type(value).__name__}")
        fault = _header_fault(value)
        if fault:
            raise ValueError(f"{what}: its value {fault}; the value is not shown")


def _header_fault(value: str) -> str | None:
    scheme, _, token = value.partition(" ")
    if scheme.lower() in ("bearer", "basic"):
        value = token  # the key itself: "Bearer  sk-..." has a key with a space
    if value != value.strip():
        return (
            "starts or ends with whitespace or a line break (a key read from a file "
            "keeps its newline: strip it)"
        )
    for i, ch in enumerate(value):
        if ch in "\r\n\x00":
            return f"holds a line break or NUL at character {i}"
        if not " " <= ch <= "~":
            return (
                f"holds a character that is not printable ASCII at character {i} "
                "(HTTP header values are ASCII; is it the right key?)"
            )
    return None


def secret_forms(secret: str) -> set[str]:
    """``secret`` and the spellings text may carry it in: stripped, ``repr`` of the
    str and of its UTF-8 bytes, JSON-escaped, percent-encoded (``%20`` and ``+``)."""
    forms = {secret, secret.strip()}
    for form in list(forms):
        forms.add(repr(form)[1:-1])
        forms.add(repr(form.encode("utf-8", "surrogatepass"))[2:-1])
        forms.add(json.dumps(form)[1:-1])
        forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
        forms.add(quote(form, safe=""))
        forms.add(quote_plus(form, safe=""))
    forms.discard("")
    return forms


def _cut_url(url: str) -> str:
    """What is left of a URL that does not parse cleanly once anything secret is gone.

    Everything up to the last ``@`` (user info, whatever its characters) and
    everything from the first ``?``, ``#`` or ``;`` after it is dropped.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    rest = rest.rpartition("@")[2]
    for mark in "?#;":
        rest = rest.partition(mark)[0]
    return f"{scheme}{sep}{rest}"


def _public_query(query: str) -> str:
    """``query`` without parameters whose names look like secrets (``&`` or ``;``)."""
    pairs = parse_qsl(query.replace(";", "&"), keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if not looks_secret_param(k)]
    if len(kept) == len(pairs) and ";" not in query:
        return query
    return urlencode(kept)


def public_url(url: str) -> str:
    """``url`` safe to show and store: no user info, fragment, ``;params`` or secret
    query parameters.

    Fails closed: a URL that does not parse (a bad IPv6 host, a port that is not a
    number) or that has an ``@`` past its host (a password holding ``/``, ``?`` or
    ``#``) keeps only what follows its last ``@``, up to any ``?``, ``#`` or ``;``.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return _cut_url(url)
    netloc = parts.netloc.rpartition("@")[2]
    path, query = parts.path, parts.query
    if "@" in path or "@" in query or "@" in parts.fragment:
        return _cut_url(url)
    if ";" in path:
        path = "/".join(segment.partition(";")[0] for segment in path.split("/"))
    if query:
        query = _public_query(query)
    unchanged = (netloc, path, query) == (parts.netloc, parts.path, parts.query)
    if unchanged and "#" not in url:
        return url
    return urlunsplit((parts.scheme, netloc, path, query, ""))


def environment_proxy(url: str) -> str | None:
    """The proxy an httpx client that trusts the environment sends ``url`` through
    (``HTTPS_PROXY`` or ``HTTP_PROXY`` for its scheme, else ``ALL_PROXY``, unless a
    ``NO_PROXY`` entry covers the host: httpx's rules) as ``scheme://host:port``
    without user info; None when it goes direct."""
    import urllib.request  # only a failed request pays for it

    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    found = urllib.request.getproxies()
    proxy = (found.get(scheme) if scheme in ("http", "https") else None) or found.get(
        "all"
    )
    if not proxy:
        return None
    for entry in (e.strip() for e in found.get("no", "").split(",")):
        # any entry that covers the host outranks the proxies: they name no host
        if entry == "*" or (entry and _exempts(entry, scheme, host, port)):
            return None
    return _shown_proxy(proxy)


def _exempts(entry: str, scheme: str, host: str, port: int | None) -> bool:
    """Whether ``NO_PROXY`` entry ``entry`` covers the URL, as httpx reads it: a bare
    domain covers it and its subdomains, ``.domain`` only the subdomains, an address or
    ``localhost`` only itself, ``scheme://host[:port]`` that scheme (and port)."""
    want_scheme, want_host, want_port = "", entry.lower(), None
    if "://" in entry:
        try:
            parts = urlsplit(entry)
            want_host, want_port = (parts.hostname or "").lower(), parts.port
        except ValueError:
            return False
        want_scheme = "" if parts.scheme.lower() == "all" else parts.scheme.lower()
        if want_scheme and want_scheme != scheme:
            return False
        if want_port is not None and want_port != port:
            return False
        return want_host in ("", "*", host)
    want_host = want_host.strip("[]")
    if want_host == "localhost" or _is_address(want_host):
        return want_host == host
    if want_host.startswith("."):
        return host.endswith(want_host)
    return host == want_host or host.endswith("." + want_host)


def _is_address(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _shown_proxy(proxy: str) -> str:
    """A proxy URL as ``scheme://host:port``, the scheme's port when none is written."""
    if "://" not in proxy:
        proxy = f"http://{proxy}"
    try:
        parts = urlsplit(proxy)
        scheme, host, port = parts.scheme.lower(), parts.hostname or "", parts.port
    except ValueError:
        return _cut_url(proxy).rstrip("/")
    port = port or _DEFAULT_PORTS.get(scheme)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + (f":{port}" if port else "")


_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080}


def public_wire(wire: WireIdentity) -> WireIdentity:
    """``wire`` with a base URL that is safe to store (see ``public_url``).

    Cached: a provider's identity is the same for every message it makes, so the
    URL is parsed once per identity, not once per stored message.
    """
    return _cached_public_wire(wire)


@functools.lru_cache(maxsize=256)
def _cached_public_wire(wire: WireIdentity) -> WireIdentity:
    url = public_url(wire.base_url)
    if url == wire.base_url:
        return wire
    return WireIdentity(wire.api_style, url, wire.model)


def url_secrets(url: str, public: str) -> set[str]:
    """What ``public_url`` dropped from ``url`` (``public``): the password (or a lone
    user name, as in ``https://KEY@host``) and the values of the query parameters it
    removed, each both percent-encoded and decoded."""
    if url == public:
        return set()
    parts = urlsplit(url)
    found = {parts.password or parts.username or ""}
    try:
        kept = set(parse_qsl(urlsplit(public).query, keep_blank_values=True))
    except ValueError:
        kept = set()
    pairs = parse_qsl(parts.query.replace(";", "&"), keep_blank_values=True)
    found.update(v for k, v in pairs if (k, v) not in kept)
    for segment in parts.path.split("/"):  # ``;token=...`` path parameters
        for param in segment.split(";")[1:]:
            found.add(param.partition("=")[2] or param)
    # Both spellings: a message may quote the URL (encoded) or the value (decoded).
    found |= {unquote(v) for v in found} | {quote(v, safe="") for v in found}
    if parts.password:  # httpx sends user info as Basic credentials
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        found.add(base64.b64encode(pair.encode()).decode())
    found.discard("")
    return found


def header_secrets(headers: Mapping[str, str]) -> set[str]:
    """The values of secret-looking headers, and the token of any ``Bearer`` or
    ``Basic`` credential whatever header carries it."""
    found = {v for k, v in headers.items() if v and looks_secret(k)}
    for value in headers.values():
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in ("bearer", "basic"):
            found.add(token)
    return found


def request_secrets(
    headers: Mapping[str, str], url: str, public: str
) -> tuple[str, ...]:
    """Every secret a request to ``url`` with ``headers`` carries, longest first (so
    a secret that holds another is redacted whole); ``public`` is ``public_url(url)``."""
    found = header_secrets(headers) | url_secrets(url, public)
    forms = {form for secret in found for form in secret_forms(secret)}
    return tuple(sorted(forms, key=lambda s: (-len(s), s)))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``REDACTED``.

    Values shorter than four characters are placeholders, not secrets ("x", "-").
    """
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_json(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (parsed JSON) with ``redact`` applied to every string, keys too: the
    result is still valid JSON, whatever a secret's characters."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {
            redact(k, secrets) if isinstance(k, str) else k: redact_json(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_json(v, secrets) for v in value]
    return value


def secret_pattern(secrets: Iterable[str]) -> re.Pattern[bytes] | None:
    """One pattern matching any of ``secrets`` (as ``redact`` counts them) in UTF-8
    bytes, the longest first at each place; None when there is nothing to find."""
    forms = {
        s.encode("utf-8", "surrogatepass")
        for s in secrets
        if len(s) >= _MIN_SECRET_CHARS
    }
    if not forms:
        return None
    ordered = sorted(forms, key=lambda f: (-len(f), f))
    return re.compile(b"|".join(re.escape(f) for f in ordered))


def clip(text: str) -> str:
    """``text`` cut to ``MAX_MESSAGE_CHARS``, marked with an ellipsis when cut."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return text[: MAX_MESSAGE_CHARS - 3] + "..."

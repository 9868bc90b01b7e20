"""Keeping secrets out of everything shown, logged or stored.

One list of secret-looking names (``SECRET_WORDS``) decides which query parameters,
``;params`` and headers are credentials. From it:

- ``public_url`` / ``public_wire``: a base URL safe to show and store (no user info,
  fragment, ``;params`` or secret-looking query parameters; a URL that does not parse
  cleanly is cut down rather than kept); ``environment_proxy``: the proxy the environment
  sends a URL through, as an error may name it;
- ``request_secrets``: the values a request carries that must never appear in an
  error message (credential headers, bearer tokens, credentials in the URL, the
  credentials of the proxies it may go through: ``proxy_secrets``,
  ``environment_proxy_secrets``, ``client_secrets``);
- ``process_secrets``: the credentials a child process is started with (secret-looking
  variables, URL passwords, secret-looking options' values in its arguments);
- ``check_url_credentials``: a base URL's user info refused beside an API key;
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
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
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
    "MIN_SECRET_START",
    "REDACTED",
    "SECRET_PARAMS",
    "SECRET_WORDS",
    "SECRET_NAME_WORDS",
    "check_headers",
    "check_url_credentials",
    "client_secrets",
    "clip",
    "environment_proxy",
    "environment_proxy_secrets",
    "header_secrets",
    "looks_secret",
    "looks_secret_option",
    "looks_secret_param",
    "process_secrets",
    "proxy_secrets",
    "public_url",
    "public_wire",
    "redact",
    "redact_json",
    "request_secrets",
    "secret_pattern",
    "secret_forms",
    "url_secrets",
    "secret_start",
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
    "credential",
    "passphrase",
)
"""A query parameter, ``;param``, header or variable whose name contains one of these
(in any case) holds a credential: ``api_key``, ``X-Auth-Token``, ``authorization``,
``sig`` (signed URLs), ``cookie``, ``GOOGLE_CREDENTIALS``, ``GPG_PASSPHRASE``..."""

SECRET_NAME_WORDS: Final = ("pat", "dsn", "pass", "pw", "pwd")
"""Words that name a credential only as a whole word of a name (``GITHUB_PAT``,
``githubPat``, ``SENTRY_DSN``, ``DB_PASS``, ``DB_PWD``), never inside one (``PATH``,
``pattern``, ``bypass``); the variable ``PWD`` alone is the working directory."""

SECRET_PARAMS: Final = ("code",)
"""Query parameters that are credentials by name alone, not by a word they contain
(Azure Functions' ``?code=``); as header names they are not (``accept-encoding``)."""

REDACTED: Final = "[REDACTED]"
"""What a secret is replaced with in text."""

MAX_MESSAGE_CHARS: Final = 500
"""Error text longer than this is cut (an error page can be megabytes)."""

_MIN_SECRET_CHARS: Final = 4


_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD: Final = re.compile(r"[^a-z0-9]+")


def _words(name: str) -> list[str]:
    """The words of a name: split at anything not a letter or digit, and camelCase."""
    return _NOT_WORD.split(_CAMEL.sub("_", name).lower())


def looks_secret(name: str) -> bool:
    """True when ``name`` (a parameter, header or variable name) looks like it names
    a secret: it contains one of ``SECRET_WORDS`` or has a word of
    ``SECRET_NAME_WORDS``."""
    lowered = name.lower()
    if any(word in lowered for word in SECRET_WORDS):
        return True
    return lowered != "pwd" and any(w in SECRET_NAME_WORDS for w in _words(name))


#: the last word of an option that names where a secret is, or what kind, not the
#: secret itself: ``--token-file PATH``, ``--api-key-env VAR``, ``--auth-type basic``
_NOT_SECRET_VALUES: Final = frozenset(
    {"file", "path", "dir", "url", "uri", "endpoint", "host", "port", "env", "var",
     "name", "id", "type", "mode", "kind", "format", "method", "scheme", "header",
     "timeout", "ttl", "expiry", "length", "size", "count", "limit", "prefix",
     "suffix", "stdin", "required", "enabled", "disabled"}
)  # fmt: skip


def looks_secret_option(name: str) -> bool:
    """True when a command-line option or ``NAME=value`` name (``--api-key``,
    ``--token``, ``-Dapi.key``, ``DB_PASSWORD``) says its value is a secret.

    Stricter than ``looks_secret``, as an option is often a word, not a label: a
    word of the name must end with one of ``SECRET_WORDS`` (``apikey``,
    ``accessTokens``, ``oauth``; not ``keyword``, ``author``) or be one of
    ``SECRET_NAME_WORDS`` or ``authorization``; and the name is no negation
    (``--no-auth``) and does not end with a word of where or what kind the secret is
    (``--token-file``, ``--api-key-env``, ``--auth-type``, ``--token-url``).
    """
    words = [w for w in _words(name) if w]
    if not words or words[0] == "no" or words[-1] in _NOT_SECRET_VALUES:
        return False
    return any(_secret_word(w) for w in words)


def _secret_word(word: str) -> bool:
    if word in SECRET_NAME_WORDS or word == "authorization":
        return True
    stem = word[:-1] if word.endswith("s") else word
    return any(stem.endswith(w) for w in SECRET_WORDS)


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
    ``Basic`` credential whatever header carries it (a ``Basic`` one also decoded:
    ``user:password`` and the password, as a server may echo them)."""
    found = {v for k, v in headers.items() if v and looks_secret(k)}
    for value in headers.values():
        scheme, _, token = value.partition(" ")
        token = token.strip()
        if token and scheme.lower() in ("bearer", "basic"):
            found.add(token)
            if scheme.lower() == "basic":
                found |= _basic_parts(token)
    return found


def _basic_parts(token: str) -> set[str]:
    """``user:password`` and the password a Basic token holds; empty when it is not
    base64 of UTF-8 text with a colon."""
    try:
        pair = base64.b64decode(token, validate=True).decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return set()
    user, colon, password = pair.partition(":")
    return {pair, password or user} if colon else set()


def _credentials(user: str, password: str) -> set[str]:
    """A user name and password as text may carry them: the password (the user name
    when there is none: it is then the credential), ``user:password``, and the token
    of the Basic credentials httpx makes of them."""
    pair = f"{user}:{password}"
    token = base64.b64encode(pair.encode("utf-8", "surrogatepass")).decode("ascii")
    return {password or user, pair, token}


def _userinfo(url: str) -> tuple[str, str | None] | None:
    """The user name and password (None without a ``:``) written before ``url``'s
    host, percent-encoded as written; None when it has no user info. When the host
    does not parse out of it cleanly (a password holding ``/``, ``?`` or ``#``)
    everything from ``://`` up to the last ``@`` counts: it fails closed."""
    rest = url.partition("://")[2]
    if "@" not in rest:
        return None
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        netloc = ""
    info = (netloc if "@" in netloc else rest).rpartition("@")[0]
    user, colon, password = info.partition(":")
    return user, password if colon else None


def proxy_secrets(proxy: str) -> set[str]:
    """The credentials in a proxy URL's user info (``http://user:pass@host:port``, the
    scheme optional, as in ``HTTP_PROXY``): the password (a lone user name when there
    is none), ``user:pass`` and the token of the ``Proxy-Authorization: Basic``
    header httpx makes of them, each as written and percent-decoded."""
    info = _userinfo(proxy if "://" in proxy else f"http://{proxy}")
    if info is None:
        return set()
    user, password = info[0], info[1] or ""
    if not (user or password):
        return set()
    found = _credentials(user, password)
    found |= _credentials(unquote(user), unquote(password))
    found.discard(":")
    return found


def environment_proxy_secrets() -> set[str]:
    """The credentials of every proxy the environment names (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY``..., in either case; ``NO_PROXY`` is not consulted:
    a credential is one whichever host it is used for). An httpx client that trusts
    the environment sends them as ``Proxy-Authorization`` to its proxy."""
    import urllib.request  # what httpx reads the environment with

    found: set[str] = set()
    for scheme, proxy in urllib.request.getproxies().items():
        if scheme != "no" and isinstance(proxy, str):
            found |= proxy_secrets(proxy)
    return found


def _decoded(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


def client_secrets(client: object) -> set[str]:
    """The credentials an ``httpx.Client`` adds to every request on its own: its
    secret-looking default headers, a ``BasicAuth``'s, and those of each proxy it
    mounted (``proxy=``, ``mounts=``, a ``transport=`` given a proxy, the
    environment's as the client read them when it was made): a ``Proxy-Authorization``
    header, or a SOCKS proxy's user and password.

    Read from httpx's and httpcore's internals, each looked up with a default: what a
    version does not have is skipped, never an error.
    """
    found: set[str] = set()
    headers = getattr(client, "headers", None)
    if isinstance(headers, Mapping):  # httpx.Headers
        found |= header_secrets({_decoded(k): _decoded(v) for k, v in headers.items()})
    basic = getattr(getattr(client, "auth", None), "_auth_header", None)
    if isinstance(basic, str):
        found |= header_secrets({"authorization": basic})
    transports = [getattr(client, "_transport", None)]
    mounts = getattr(client, "_mounts", None)
    if isinstance(mounts, Mapping):
        transports += mounts.values()
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        for pair in getattr(pool, "_proxy_headers", None) or ():
            if isinstance(pair, tuple) and len(pair) == 2:
                found |= header_secrets({_decoded(pair[0]): _decoded(pair[1])})
        auth = getattr(pool, "_proxy_auth", None)  # a SOCKS proxy's
        if isinstance(auth, tuple) and len(auth) == 2:
            found |= _credentials(_decoded(auth[0]), _decoded(auth[1]))
    found.discard("")
    return found


def _ordered_forms(found: Iterable[str]) -> tuple[str, ...]:
    """Every spelling of each secret (``secret_forms``), longest first."""
    forms = {form for secret in found if secret for form in secret_forms(secret)}
    return tuple(sorted(forms, key=lambda s: (-len(s), s)))


def request_secrets(
    headers: Mapping[str, str], url: str, public: str, client: object = None
) -> tuple[str, ...]:
    """Every secret a request to ``url`` with ``headers`` carries, longest first (so
    a secret that holds another is redacted whole); ``public`` is ``public_url(url)``.

    A request to an ``http(s)`` URL may go through a proxy, which gets credentials of
    its own (a proxy may echo them in an error): those of every proxy the environment
    names (``environment_proxy_secrets``) are among them, and with ``client`` (the
    ``httpx.Client`` it is sent with) those it adds itself (``client_secrets``).
    """
    found = header_secrets(headers) | url_secrets(url, public)
    if url[:8].lower().startswith(("http://", "https://")):
        found |= environment_proxy_secrets()
    if client is not None:
        found |= client_secrets(client)
    return _ordered_forms(found)


#: a URL inside text: an argument, a variable's value (``--dsn=postgres://...``)
_URL_IN_TEXT: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
#: a whole argument ``--name=value``, ``-Dname=value`` or ``NAME=value``
_ASSIGNED: Final = re.compile(
    r"-*(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)=(?P<value>.+)", re.S
)
#: ``name=value`` inside text: a connection string (``host=db password=x``,
#: ``password='x y'``, ``Server=x;Password=y``), a query, ``--set=api_key=x``
_PAIR: Final = re.compile(
    r"(?:^|(?<=[\s;&?=]))(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)="
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s;&]+)"
)
#: ``Name=value`` of a ``;``-separated connection string, whose values may hold spaces
_SEMI_PAIR: Final = re.compile(
    r"(?:^|(?<=;))\s*(?P<name>[A-Za-z_][A-Za-z0-9_. \-]*?)\s*=(?P<value>[^;]+)"
)
#: values an option or a variable says nothing secret with (``--auth none``)
_PLAIN_VALUES: Final = frozenset(
    {"true", "false", "none", "null", "yes", "no", "on", "off", "auto", "default"}
)


def _if_secret(value: str) -> set[str]:
    """``{value}`` when the value of a secret-looking option or pair can be a secret:
    at least 8 characters, not a number, a path or a word such as ``true``. An
    option's name is a guess (``--max-tokens 1024``, ``--tls-key /etc/key.pem``), and a
    short common value taken for a secret would be blanked out of every result."""
    plain = value.lower() in _PLAIN_VALUES or value.isdigit()
    path = value.startswith(("/", "./", "../", "~"))
    return set() if plain or path or len(value) < 8 else {value}


def _text_secrets(text: str) -> set[str]:
    """The credentials an argument or a variable's value holds (``process_secrets``)."""
    found = header_secrets({"": text})  # "Bearer X", "Basic X"
    for match in _URL_IN_TEXT.finditer(text):
        url = match.group()
        info = _userinfo(url)
        if info is not None and info[1]:
            user, password = info[0], info[1]
            found |= _credentials(user, password)
            found |= _credentials(unquote(user), unquote(password))
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        query = parse_qsl(parts.query.replace(";", "&"), keep_blank_values=True)
        found.update(v for k, v in query if v and looks_secret_param(k))
    assigned = _ASSIGNED.fullmatch(text)
    if assigned and looks_secret_option(assigned["name"]):
        found |= _if_secret(assigned["value"])
    for pair in _PAIR.finditer(text):
        if looks_secret_option(pair["name"]):
            found |= _if_secret(pair["value"].strip("'\""))
    if ";" in text:  # "Server=db;Password=my secret pw;": a value runs to the ";"
        for pair in _SEMI_PAIR.finditer(text):
            if looks_secret_option(pair["name"]):
                found |= _if_secret(pair["value"].strip())
    head, colon, rest = text.partition(":")  # a header: "Authorization: Bearer X"
    header = colon and rest.strip() and not rest.startswith("//")  # not a URL
    if header and _TOKEN.fullmatch(head) and looks_secret(head):
        found |= header_secrets({head: rest.strip()})
    return found


def process_secrets(
    command: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Every spelling of the credentials a child process is started with (``command``
    its argv, ``env`` the variables given it), longest first.

    - the value of each variable whose name looks secret (``looks_secret``:
      ``API_KEY``, ``GITHUB_PAT``, ``DB_PASS``...);
    - in each argument and each variable's value: the password of any URL's user info
      (``postgresql://bob:PASS@db/x``, also as ``bob:PASS`` and Basic credentials),
      secret-looking query values, a ``Bearer``/``Basic`` token, and the value of a
      secret-looking name (``looks_secret_option``) given as ``--name=value``,
      ``NAME=value``, ``name=value`` inside a connection string, or a header
      ``Name: value``;
    - the argument after an option whose name looks secret (``--api-key XYZ``),
      unless it is an option itself.

    An option's or a pair's value counts only when it can be a secret (``_if_secret``:
    8 characters or more, not a number, a path or ``true``): a path, a model name, a
    user name stay as they are, and so do the words of the protocol.
    """
    argv = [os.fsdecode(a) for a in command]  # a Path or bytes, as Popen takes them
    env = env or {}
    # a name with a word of SECRET_WORDS (API_KEY) is sure; one with a word of
    # SECRET_NAME_WORDS (DB_PASS=user) holds a secret only if its value can be one
    sure = {k: v for k, v in env.items() if any(w in k.lower() for w in SECRET_WORDS)}
    found = header_secrets(sure)
    for name, value in env.items():
        if name not in sure and looks_secret(name):
            found |= _if_secret(value)
    for text in (*argv, *env.values()):
        found |= _text_secrets(text)
    for option, value in pairwise(argv):
        if (
            option.startswith("-")
            and "=" not in option
            and not value.startswith("-")
            and looks_secret_option(option)
        ):
            found |= _if_secret(value)
    return _ordered_forms(found)


def check_url_credentials(base_url: str, api_key: str | None) -> None:
    """Refuse a base URL with user info given together with an API key.

    httpx sends a URL's user info as Basic credentials in the ``Authorization``
    header: in place of a bearer key, or beside an ``x-api-key``, so the key given is
    silently not the credential used. The message shows neither of them.

    Raises:
        ValueError: ``base_url`` has user info and ``api_key`` is given.
    """
    if not api_key or not isinstance(base_url, str):
        return
    try:
        parts = urlsplit(base_url)
        credentials = "@" in parts.netloc and bool(parts.username or parts.password)
    except ValueError:  # the provider refuses such a URL itself
        return
    if credentials:
        raise ValueError(
            f"base_url {public_url(base_url)!r} carries credentials (user info before "
            "'@') and an api_key is given too: httpx would send the URL's as Basic "
            "credentials in the Authorization header, in place of the key or beside "
            "it. Give one of them, not both; a gateway that needs credentials of its "
            "own besides the key takes them in a header: headers={...}. (Neither value "
            "is shown.)"
        )


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


#: the shortest start of a secret that ``secret_start`` finds by default (``redact``
#: takes no secret shorter than this either)
MIN_SECRET_START: Final = 4


def secret_start(
    data: bytes,
    secrets: Sequence[str],
    since: int = 0,
    *,
    shortest: int = MIN_SECRET_START,
) -> int | None:
    """Where ``data`` ends with the start of one of ``secrets`` (at least
    ``shortest`` bytes of it, beginning at ``since`` or later), or None.

    A body read up to a limit, or a stream that stopped, may end inside a secret:
    no pattern of the whole secret finds the part that arrived. Every spelling in
    ``secrets`` is looked for but those that hold another one (``Bearer sk-...``
    holds ``sk-...``), whose start would be their own words ("Bearer").
    """
    if len(data) <= since:
        return None
    forms = {s.encode("utf-8", "surrogatepass") for s in secrets if s}
    found: int | None = None
    last = data[-1]
    for form in forms:
        if any(other != form and other in form for other in forms):
            continue
        longest = min(len(form) - 1, len(data) - since)
        for n in range(longest, max(shortest, 1) - 1, -1):
            if form[n - 1] == last and data.endswith(form[:n]):
                at = len(data) - n
                found = at if found is None else min(found, at)
                break
    return found

"""OAuth 2.1 for MCP servers over HTTP, as the protocol specifies it: ``OAuth``, an
``httpx.Auth`` for ``MCPTools(url=..., auth=...)``.

On a 401 it finds the server's authorization server (protected resource metadata,
RFC 9728, from the ``WWW-Authenticate`` challenge or the well-known URL; then the
authorization server's metadata, RFC 8414 or OpenID Connect discovery), gets a token
(client credentials when a secret is given, else the authorization code flow with
PKCE through the browser and a one-shot listener on 127.0.0.1), and sends the
request again. Tokens are refreshed when they expire or a server refuses them, and
kept in a ``TokenStore``. Everything runs on the calling thread: no event loop.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import os
import re
import secrets
import tempfile
import threading
import time
import urllib.parse
import webbrowser
from collections.abc import Callable, Generator, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import httpx
import orjson

from .._logs import get_logger, protect
from .._secrets import clip, public_url, redact
from ._wire import MCPError

__all__ = ["FileTokenStore", "MemoryTokenStore", "OAuth", "OAuthError", "TokenStore"]

#: seconds before its expiry that a token is refreshed
_EARLY: Final = 30.0
_CHALLENGE_PARAM: Final = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s,]+))')


class OAuthError(MCPError):
    """No token could be had: discovery, the user's consent or a token request
    failed. The message never holds a token, a code or the client secret."""

    __module__ = "navi_core.mcp"


@runtime_checkable
class TokenStore(Protocol):
    """Where tokens are kept between runs, by the server URL they are for."""

    def load(self, key: str) -> dict[str, Any] | None:
        """The token record saved for ``key``, or None."""
        ...

    def save(self, key: str, record: dict[str, Any]) -> None:
        """Keep ``record`` (access and refresh token, expiry, token endpoint)."""
        ...


class MemoryTokenStore:
    """Tokens kept in this process only (the default)."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}

    def load(self, key: str) -> dict[str, Any] | None:
        record = self._records.get(key)
        return dict(record) if record is not None else None

    def save(self, key: str, record: dict[str, Any]) -> None:
        self._records[key] = dict(record)

    def __repr__(self) -> str:
        return "MemoryTokenStore()"


class FileTokenStore:
    """Tokens kept in a JSON file readable by its owner only, one record per server
    URL; each save replaces the file whole, so a reader never sees half of it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def load(self, key: str) -> dict[str, Any] | None:
        record = self._read().get(key)
        return record if isinstance(record, dict) else None

    def save(self, key: str, record: dict[str, Any]) -> None:
        with self._lock:
            data = self._read()
            data[key] = record
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tokens-")
            try:
                os.fchmod(fd, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(orjson.dumps(data))
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"


class OAuth(httpx.Auth):
    """OAuth 2.1 for an MCP server: pass it as ``MCPTools(url=..., auth=OAuth(...))``.

    Args:
        client_id: this client's id at the authorization server.
        client_secret: with it, tokens come from the client credentials grant (a
            machine-to-machine client); without it, from the authorization code
            grant with PKCE (S256): the user signs in in the browser.
        scopes: the scopes asked for; by default the ones the server's challenge or
            metadata names.
        token_store: where tokens are kept: a path (a JSON file, mode 0600) or an
            object with ``load(key)`` and ``save(key, record)``; in memory by default.
            Records are kept by server URL, so a second ``MCPTools`` (or run) of the
            same server reuses the token without signing in again.
        open_browser: called with the authorization URL (``webbrowser.open`` by
            default); a host without a browser shows the URL to its user instead.
        redirect_port: the port of the loopback redirect listener (0: any free one;
            the redirect URI is ``http://127.0.0.1:PORT/callback``).
        login_timeout: seconds to wait for the browser to come back.
        timeout: seconds each request to the authorization server may take.

    Made for synchronous clients: the sign-in and token requests block the thread
    that sends the MCP request (several threads wait for one sign-in).
    """

    def __init__(
        self,
        client_id: str,
        client_secret: str | None = None,
        scopes: Iterable[str] | None = None,
        token_store: str | os.PathLike[str] | TokenStore | None = None,
        *,
        open_browser: Callable[[str], object] | None = None,
        redirect_port: int = 0,
        login_timeout: float = 300.0,
        timeout: float = 30.0,
    ) -> None:
        self.client_id = client_id
        self._secret = client_secret
        self.scopes = tuple(scopes) if scopes is not None else None
        if token_store is None:
            self.token_store: TokenStore = MemoryTokenStore()
        elif isinstance(token_store, (str, os.PathLike)):
            self.token_store = FileTokenStore(token_store)
        else:
            self.token_store = token_store
        self._open = open_browser or webbrowser.open
        self.redirect_port = redirect_port
        self.login_timeout = login_timeout
        self.timeout = timeout
        self._records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        #: ``secrets``: set whole (under the lock) each time a record is taken in
        self._held: tuple[str, ...] = (client_secret,) if client_secret else ()
        if client_secret:
            protect([client_secret])

    def __repr__(self) -> str:
        grant = "client_credentials" if self._secret else "authorization_code"
        return (
            f"OAuth(client_id={self.client_id!r}, grant={grant!r}, "
            f"scopes={list(self.scopes) if self.scopes is not None else None!r}, "
            f"token_store={self.token_store!r})"
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        """The client secret and the tokens held now, so that what a server echoes
        of them can be redacted (``MCPTools`` does)."""
        return self._held

    # -- the httpx.Auth flow -----------------------------------------------------------

    def auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        key = _server_key(request.url)
        token = self._current(key)
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            return
        challenge = _challenge(response.headers.get("www-authenticate", ""))
        request.headers["Authorization"] = (
            f"Bearer {self._renew(key, request.url, challenge, token)}"
        )
        yield request

    def _current(self, key: str) -> str | None:
        """The access token for ``key``, refreshed first when it has expired."""
        with self._lock:
            record = self._records.get(key)
            if record is None:
                record = self.token_store.load(key)
                if record is None or record.get("client_id") != self.client_id:
                    return None
                self._take(key, record)
            expires = record.get("expires_at")
            if (
                isinstance(expires, (int, float))
                and expires - _EARLY < time.time()
                and record.get("refresh_token")
            ):
                with contextlib.suppress(OAuthError):  # the 401 starts over
                    record = self._refresh(key, record)
            token = record.get("access_token")
            return token if isinstance(token, str) else None

    def _renew(
        self,
        key: str,
        url: httpx.URL,
        challenge: Mapping[str, str],
        refused: str | None,
    ) -> str:
        """A new access token for ``key``: the one another thread got meanwhile, a
        refreshed one, or one from a new grant."""
        with self._lock:
            record = self._records.get(key)
            if record is not None and record.get("access_token") != refused:
                return str(record["access_token"])
            if record is not None and record.get("refresh_token"):
                with contextlib.suppress(OAuthError):
                    return str(self._refresh(key, record)["access_token"])
            with httpx.Client(timeout=self.timeout) as http:
                server = _discover(http, url, challenge)
                scopes = self.scopes
                if scopes is None:
                    named = challenge.get("scope") or " ".join(
                        server.get("scopes_supported") or ()
                    )
                    scopes = tuple(named.split())
                if self._secret:
                    fields = {"grant_type": "client_credentials"}
                else:
                    fields = self._authorize(server, scopes)
                if scopes:
                    fields.setdefault("scope", " ".join(scopes))
                fields["resource"] = server["resource"]
                record = self._grant(http, server["token_endpoint"], server, fields)
            record["resource"] = server["resource"]
            methods = server.get("token_endpoint_auth_methods_supported")
            if isinstance(methods, list):
                record["token_endpoint_auth_methods"] = methods
            return str(self._keep(key, record)["access_token"])

    # -- grants ------------------------------------------------------------------------

    def _refresh(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        fields = {
            "grant_type": "refresh_token",
            "refresh_token": str(record["refresh_token"]),
        }
        if record.get("resource"):
            fields["resource"] = str(record["resource"])
        endpoint = str(record.get("token_endpoint", ""))
        if not endpoint:
            raise OAuthError("the stored token names no token endpoint to refresh at")
        methods = record.get("token_endpoint_auth_methods")
        server = {"token_endpoint_auth_methods_supported": methods}
        with httpx.Client(timeout=self.timeout) as http:
            fresh = self._grant(http, endpoint, server, fields)
        fresh.setdefault("refresh_token", record["refresh_token"])  # not rotated
        for name in ("resource", "token_endpoint_auth_methods"):
            if record.get(name):
                fresh[name] = record[name]
        return self._keep(key, fresh)

    def _keep(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        record["client_id"] = self.client_id
        self._take(key, record)
        self.token_store.save(key, record)
        return record

    def _take(self, key: str, record: dict[str, Any]) -> None:
        """Hold ``record`` as the tokens for ``key`` (under the lock)."""
        self._records[key] = record
        protect(_tokens_of(record))
        held = {t for r in self._records.values() for t in _tokens_of(r)}
        if self._secret:
            held.add(self._secret)
        self._held = tuple(sorted(held, key=len, reverse=True))

    def _grant(
        self,
        http: httpx.Client,
        endpoint: str,
        server: Mapping[str, Any],
        fields: dict[str, str],
    ) -> dict[str, Any]:
        """POST a token request; the answer as a record to keep."""
        headers = {"accept": "application/json"}
        methods = server.get("token_endpoint_auth_methods_supported") or [
            "client_secret_basic"
        ]
        if self._secret and "client_secret_basic" in methods:
            pair = f"{_form(self.client_id)}:{_form(self._secret)}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(pair).decode()
        else:
            fields["client_id"] = self.client_id
            if self._secret:
                fields["client_secret"] = self._secret
        hidden = [
            v
            for k in ("code", "code_verifier", "refresh_token", "client_secret")
            if (v := fields.get(k))
        ]
        if self._secret:
            hidden.append(self._secret)
        try:
            response = http.post(endpoint, data=fields, headers=headers)
            body = response.json() if response.content else {}
        except (httpx.HTTPError, ValueError) as exc:
            raise OAuthError(
                f"the token request to {public_url(endpoint)} failed: "
                f"{type(exc).__name__}"
            ) from None
        if response.status_code != 200 or not isinstance(body, dict):
            raise OAuthError(
                self._refusal(endpoint, response.status_code, body, hidden)
            )
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuthError(
                f"the token answer of {public_url(endpoint)} holds no access_token"
            )
        record: dict[str, Any] = {
            "access_token": token,
            "token_type": body.get("token_type", "Bearer"),
            "token_endpoint": endpoint,
        }
        if isinstance(body.get("refresh_token"), str):
            record["refresh_token"] = body["refresh_token"]
        if isinstance(body.get("expires_in"), (int, float)):
            record["expires_at"] = time.time() + float(body["expires_in"])
        if isinstance(body.get("scope"), str):
            record["scope"] = body["scope"]
        return record

    @staticmethod
    def _refusal(endpoint: str, status: int, body: Any, hidden: list[str]) -> str:
        """Why a token request failed, from the standard error fields only."""
        text = f"the token request to {public_url(endpoint)} failed: HTTP {status}"
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            text += f" {body['error']}"
            if isinstance(body.get("error_description"), str):
                text += f": {body['error_description']}"
        return clip(redact(text, hidden))

    def _authorize(
        self, server: Mapping[str, Any], scopes: tuple[str, ...]
    ) -> dict[str, str]:
        """Run the browser step of the authorization code flow (PKCE, S256); the
        token request's fields."""
        methods = server.get("code_challenge_methods_supported") or ()
        if "S256" not in methods:
            raise OAuthError(
                f"the authorization server {server['issuer']} does not support PKCE "
                "with S256 (code_challenge_methods_supported), which MCP requires"
            )
        verifier = secrets.token_urlsafe(64)
        challenge = _b64url(hashlib.sha256(verifier.encode()).digest())
        state = secrets.token_urlsafe(24)
        with _Redirect(self.redirect_port) as listener:
            query = {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": listener.uri,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": state,
                "resource": server["resource"],
            }
            if scopes:
                query["scope"] = " ".join(scopes)
            endpoint = str(server["authorization_endpoint"])
            joiner = "&" if "?" in endpoint else "?"
            url = endpoint + joiner + urllib.parse.urlencode(query)
            get_logger("navi_core.mcp").info("sign in to the MCP server at %s", url)
            self._open(url)
            params = listener.wait(self.login_timeout)
        if params is None:
            raise OAuthError(
                f"no sign-in came back within {self.login_timeout:g} s "
                f"(the browser was sent to {public_url(endpoint)})"
            )
        if params.get("state") != state:
            raise OAuthError("the sign-in came back with a wrong state; refused")
        if "error" in params:
            why = params["error"]
            if params.get("error_description"):
                why += f": {params['error_description']}"
            raise OAuthError(clip(f"the sign-in was refused: {why}"))
        code = params.get("code")
        if not code:
            raise OAuthError("the sign-in came back without a code")
        return {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": listener.uri,
            "code_verifier": verifier,
        }


# -- discovery -------------------------------------------------------------------------


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _require_https(*urls: str) -> None:
    """Secrets and codes go only to https endpoints (or to this machine)."""
    for raw in urls:
        parsed = httpx.URL(raw)
        if parsed.scheme != "https" and parsed.host not in _LOOPBACK:
            raise OAuthError(
                f"refused to send credentials to {public_url(raw)}: not https"
            )


def _discover(
    http: httpx.Client, url: httpx.URL, challenge: Mapping[str, str]
) -> dict[str, Any]:
    """The protected resource's metadata merged with its authorization server's:
    ``resource``, ``issuer``, the endpoints, the supported methods and scopes."""
    origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
    path = url.path.rstrip("/")
    candidates = (
        [challenge["resource_metadata"]] if "resource_metadata" in challenge else []
    )
    candidates += [
        f"{origin}/.well-known/oauth-protected-resource{path}",
        f"{origin}/.well-known/oauth-protected-resource",
    ]
    resource = _first_json(http, candidates)
    servers = resource.get("authorization_servers") if resource else None
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise OAuthError(
            f"{public_url(str(url))} publishes no protected resource metadata naming "
            "an authorization server (RFC 9728)"
        )
    named = resource.get("resource") if resource else None
    here = f"{origin}{path}"
    if isinstance(named, str) and named.rstrip("/") != here:
        raise OAuthError(
            f"{public_url(str(url))} publishes metadata for another resource "
            f"({public_url(named)}); refused (RFC 9728)"
        )
    issuer = servers[0].rstrip("/")
    _require_https(issuer)
    parsed = httpx.URL(issuer)
    base = f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"
    tail = parsed.path.rstrip("/")
    found = _first_json(
        http,
        [
            f"{base}/.well-known/oauth-authorization-server{tail}",
            f"{base}/.well-known/openid-configuration{tail}",
            f"{issuer}/.well-known/openid-configuration",
        ],
    )
    if found is None or not all(
        isinstance(found.get(k), str)
        for k in ("authorization_endpoint", "token_endpoint")
    ):
        raise OAuthError(
            f"the authorization server {issuer} publishes no usable metadata "
            "(RFC 8414 or OpenID Connect discovery)"
        )
    if str(found.get("issuer", issuer)).rstrip("/") != issuer:
        raise OAuthError(
            f"the metadata of {issuer} names another issuer; refused (RFC 8414)"
        )
    _require_https(found["authorization_endpoint"], found["token_endpoint"])
    assert resource is not None
    return {
        **found,
        "issuer": issuer,
        "resource": str(resource.get("resource") or f"{origin}{url.path}"),
        "scopes_supported": resource.get("scopes_supported")
        or found.get("scopes_supported")
        or [],
    }


def _first_json(http: httpx.Client, urls: list[str]) -> dict[str, Any] | None:
    """The first of ``urls`` that answers 200 with a JSON object."""
    for candidate in dict.fromkeys(urls):
        try:
            response = http.get(candidate, headers={"accept": "application/json"})
            if response.status_code == 200:
                data = response.json()
                if isinstance(data, dict):
                    return data
        except (httpx.HTTPError, ValueError):
            continue
    return None


def _challenge(header: str) -> dict[str, str]:
    """The parameters of a ``Bearer`` challenge (``resource_metadata``, ``scope``...)."""
    return {m[1]: m[2] or m[3] for m in _CHALLENGE_PARAM.finditer(header)}


def _server_key(url: httpx.URL) -> str:
    """The URL tokens are kept by: the endpoint without query or fragment."""
    return f"{url.scheme}://{url.netloc.decode('ascii')}{url.path}"


def _tokens_of(record: Mapping[str, Any]) -> list[str]:
    return [
        v
        for k in ("access_token", "refresh_token")
        if isinstance(v := record.get(k), str) and v
    ]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _form(value: str) -> str:
    """Form-encoded, as HTTP Basic client authentication wants (RFC 6749, 2.3.1)."""
    return urllib.parse.quote_plus(value)


# -- the loopback redirect listener ----------------------------------------------------


class _Redirect:
    """A one-shot HTTP listener on 127.0.0.1 that takes the authorization server's
    redirect (``/callback?code=...&state=...``) and tells the browser it may close."""

    def __init__(self, port: int) -> None:
        got: list[dict[str, str]] = []
        done = threading.Event()
        self._got, self._done = got, done

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                if parsed.path != "/callback" or done.is_set():
                    self.send_error(404)
                    return
                params = dict(urllib.parse.parse_qsl(parsed.query))
                ok = "code" in params
                page = (
                    b"<!doctype html><title>Signed in</title><p>Signed in; you may "
                    b"close this tab."
                    if ok
                    else b"<!doctype html><title>Not signed in</title><p>Sign-in "
                    b"failed; see the program that asked."
                )
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                got.append(params)
                done.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the query holds the code: never log it

        self._server = http.server.HTTPServer(("127.0.0.1", port), Handler)
        self.uri = f"http://127.0.0.1:{self._server.server_address[1]}/callback"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="navi-oauth-redirect",
            daemon=True,
        )

    def __enter__(self) -> _Redirect:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def wait(self, timeout: float) -> dict[str, str] | None:
        """The redirect's query parameters, or None when none came in time."""
        return self._got[0] if self._done.wait(timeout) else None

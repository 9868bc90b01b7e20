"""``MCPTools(auth=OAuth(...))`` against a server written with the official SDK that
an authorization server on loopback protects: discovery, both grants, PKCE, refresh,
tokens kept in a store and reused, and no secret in a repr or an error."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from oauth_mcp_server import sign

from navi_core import Agent, MCPError, MCPTools, Scripted, Text, ToolUse
from navi_core.mcp import OAuth, OAuthError

HERE = Path(__file__).parent
KEY = secrets.token_hex(16)
SECRET = "machine-secret-4f9a2c"


class AuthServer:
    """An OAuth 2.1 authorization server on 127.0.0.1: metadata, ``/authorize``
    (redirects at once, as if the user consented), ``/token`` for the authorization
    code (checking the PKCE verifier), client credentials and refresh grants."""

    def __init__(self) -> None:
        self.grants: list[str] = []
        self.resources: list[str] = []
        self.challenge_methods: list[str] = []
        self.lifetime = 3600.0  # how long a token really works
        self.claimed: float | None = None  # the expires_in it says (default: real)
        self._codes: dict[str, dict[str, str]] = {}
        self._refresh: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, status: int, body: Any, **headers: str) -> None:
                data = orjson.dumps(body)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/.well-known/oauth-authorization-server":
                    self._json(200, outer.metadata())
                elif url.path == "/authorize":
                    q = dict(urllib.parse.parse_qsl(url.query))
                    outer.challenge_methods.append(q["code_challenge_method"])
                    outer.resources.append(q["resource"])
                    code = secrets.token_urlsafe(16)
                    outer._codes[code] = q
                    back = {"code": code, "state": q["state"]}
                    self.send_response(302)
                    where = q["redirect_uri"] + "?" + urllib.parse.urlencode(back)
                    self.send_header("location", where)
                    self.send_header("content-length", "0")
                    self.end_headers()
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", "0"))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(size).decode()))
                status, body = outer.token(form, self.headers.get("authorization", ""))
                self._json(status, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": [
                "authorization_code",
                "client_credentials",
                "refresh_token",
            ],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
        }

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, Any]:
        kind = form.get("grant_type", "")
        if kind == "authorization_code":
            asked = self._codes.pop(form.get("code", ""), None)
            if asked is None or asked["redirect_uri"] != form.get("redirect_uri"):
                return 400, {"error": "invalid_grant"}
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            made = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            if made != asked["code_challenge"] or form.get("client_id") != "navi-app":
                return 400, {"error": "invalid_grant", "error_description": "PKCE"}
        elif kind == "client_credentials":
            expected = base64.b64encode(f"machine:{SECRET}".encode()).decode()
            if authorization != f"Basic {expected}":
                sent = base64.b64decode(authorization.split()[-1]).decode()
                # a careless server that repeats the credentials it was sent
                return 401, {
                    "error": "invalid_client",
                    "error_description": f"bad credentials {sent}",
                }
            self.resources.append(form.get("resource", ""))
        elif kind == "refresh_token":
            if form.get("refresh_token") not in self._refresh:
                return 400, {"error": "invalid_grant"}
            self._refresh.discard(form["refresh_token"])
        else:
            return 400, {"error": "unsupported_grant_type"}
        self.grants.append(kind)
        refresh = secrets.token_urlsafe(16)
        self._refresh.add(refresh)
        scope = form.get("scope", "tools")
        return 200, {
            "access_token": sign(KEY, int(time.time() + self.lifetime), scope),
            "token_type": "Bearer",
            "expires_in": self.claimed if self.claimed is not None else self.lifetime,
            "refresh_token": refresh,
            "scope": scope,
        }

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def protected() -> Iterator[tuple[AuthServer, str]]:
    """The authorization server and the URL of the MCP server it protects."""
    auth = AuthServer()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "oauth_mcp_server.py"), str(port), auth.url],
        env={**os.environ, "NAVI_TEST_TOKEN_KEY": KEY},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the OAuth MCP server did not start") from None
                time.sleep(0.1)
        yield auth, f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()
        auth.close()


@pytest.fixture
def server(protected: tuple[AuthServer, str]) -> tuple[AuthServer, str]:
    auth, url = protected
    auth.grants.clear()
    auth.resources.clear()
    auth.challenge_methods.clear()
    auth.lifetime, auth.claimed = 3600.0, None
    return auth, url


class Browser:
    """Stands in for the user's browser: follows the authorization URL and its
    redirect to the loopback listener, as a browser would after consent."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def __call__(self, url: str) -> bool:
        self.opened.append(url)
        httpx.get(url, follow_redirects=True, timeout=10).raise_for_status()
        return True


def never(url: str) -> bool:
    raise AssertionError(f"no sign-in expected, got {url}")


def add(tools: MCPTools, a: int, b: int) -> Any:
    turn = Scripted([[ToolUse("c1", "add", f'{{"a": {a}, "b": {b}}}')], [Text("ok")]])
    agent = Agent(turn, tools=[tools])
    with agent.run("add") as stream:
        list(stream)
    result = agent.conversation.messages[-2].tool_results[0]
    assert not result.is_error, result
    return result.parts[0].text  # type: ignore[union-attr]


def test_the_unauthenticated_server_refuses(server: tuple[AuthServer, str]) -> None:
    _, url = server
    with pytest.raises(MCPError, match="401"):
        MCPTools(url=url)


def test_client_credentials_discovered_from_the_401(
    server: tuple[AuthServer, str], tmp_path: Path
) -> None:
    auth, url = server
    store = tmp_path / "tokens.json"
    oauth = OAuth("machine", SECRET, token_store=store)
    with MCPTools(url=url, auth=oauth) as tools:
        assert add(tools, 2, 3) == "5"
    assert auth.grants == ["client_credentials"]
    assert auth.resources == [url]  # the resource indicator (RFC 8707)
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    saved = orjson.loads(store.read_bytes())[url]
    assert saved["access_token"] and SECRET not in store.read_text()
    assert SECRET not in repr(oauth) and saved["access_token"] not in repr(oauth)


def test_authorization_code_with_pkce_then_the_stored_token_is_reused(
    server: tuple[AuthServer, str], tmp_path: Path
) -> None:
    auth, url = server
    store = tmp_path / "tokens.json"
    browser = Browser()
    with MCPTools(
        url=url, auth=OAuth("navi-app", open_browser=browser, token_store=store)
    ) as tools:
        assert add(tools, 20, 22) == "42"
    assert auth.grants == ["authorization_code"]  # the verifier matched the challenge
    assert auth.challenge_methods == ["S256"] and auth.resources == [url]
    (opened,) = browser.opened
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(opened).query))
    assert query["redirect_uri"].startswith("http://127.0.0.1:")
    assert query["scope"] == "tools"  # from the server's metadata
    # a second client (a new process, say) reads the store: no new sign-in
    with MCPTools(
        url=url, auth=OAuth("navi-app", open_browser=never, token_store=store)
    ) as tools:
        assert add(tools, 1, 1) == "2"
    assert auth.grants == ["authorization_code"]


def test_an_expired_token_is_refreshed_before_it_is_sent(
    server: tuple[AuthServer, str],
) -> None:
    auth, url = server
    auth.claimed = 30.3  # it still works, but it says it ends in 30.3 s
    with MCPTools(url=url, auth=OAuth("machine", SECRET)) as tools:
        assert auth.grants == ["client_credentials"]
        time.sleep(0.5)  # refreshed 30 s before its end: now
        assert add(tools, 1, 2) == "3"
    assert auth.grants[:2] == ["client_credentials", "refresh_token"]


def test_a_refused_token_is_refreshed_and_the_request_sent_again(
    server: tuple[AuthServer, str],
) -> None:
    auth, url = server
    auth.lifetime, auth.claimed = 1.0, 3600.0  # it says an hour; it works a second
    browser = Browser()
    with MCPTools(url=url, auth=OAuth("navi-app", open_browser=browser)) as tools:
        time.sleep(1.5)
        assert add(tools, 4, 5) == "9"
    assert auth.grants[:2] == ["authorization_code", "refresh_token"]
    assert len(browser.opened) == 1  # refreshed, not signed in again


def test_a_token_the_server_repeats_is_redacted(
    server: tuple[AuthServer, str],
) -> None:
    _, url = server
    oauth = OAuth("machine", SECRET)
    with MCPTools(url=url, auth=oauth) as tools:
        agent = Agent(
            Scripted([[ToolUse("c1", "whoami", "{}")], [Text("ok")]]), tools=[tools]
        )
        with agent.run("who am I?") as stream:
            list(stream)
    (token,) = [s for s in oauth.secrets if s.startswith("navi.")]
    said = agent.conversation.messages[-2].tool_results[0].parts[0].text  # type: ignore[union-attr]
    assert said.startswith("you called with ") and token not in said
    assert "REDACTED" in said


def test_a_refused_secret_is_an_error_without_the_secret(
    server: tuple[AuthServer, str],
) -> None:
    _, url = server
    wrong = "wrong-secret-77c1d0"
    with pytest.raises(OAuthError) as caught:
        MCPTools(url=url, auth=OAuth("machine", wrong))
    text = str(caught.value)
    assert "invalid_client" in text and "401" in text
    assert wrong not in text and "REDACTED" in text


def test_a_sign_in_that_never_comes_back_times_out(
    server: tuple[AuthServer, str],
) -> None:
    _, url = server
    oauth = OAuth("navi-app", open_browser=lambda u: True, login_timeout=0.5)
    with pytest.raises(OAuthError, match="no sign-in came back"):
        MCPTools(url=url, auth=oauth)


def test_discovery_falls_back_to_the_well_known_url(
    server: tuple[AuthServer, str],
) -> None:
    """A resource whose 401 names no metadata URL: the well-known one is read, and
    ``OAuth`` works on any synchronous httpx client."""
    auth, _ = server
    seen: list[str] = []

    class Resource(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path == "/.well-known/oauth-protected-resource/api":
                body = orjson.dumps(
                    {"resource": f"{base}/api", "authorization_servers": [auth.url]}
                )
                status = 200
            elif self.headers.get("authorization", "").startswith("Bearer navi."):
                body, status = b'{"ok": true}', 200
            else:
                body, status = b"{}", 401
            self.send_response(status)
            if status == 401:
                self.send_header("www-authenticate", "Bearer")
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Resource)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with httpx.Client(auth=OAuth("machine", SECRET, scopes=["tools"])) as client:
            assert client.get(f"{base}/api").json() == {"ok": True}
            assert client.get(f"{base}/api").json() == {"ok": True}
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert seen == [
        "/api",
        "/.well-known/oauth-protected-resource/api",
        "/api",
        "/api",  # the token is kept: no second grant
    ]
    assert auth.grants == ["client_credentials"] and auth.resources == [f"{base}/api"]


class Vault:
    """A token store of the host's own (say, the system keyring)."""

    def __init__(self) -> None:
        self.saved: dict[str, dict[str, Any]] = {}

    def load(self, key: str) -> dict[str, Any] | None:
        return self.saved.get(key)

    def save(self, key: str, record: dict[str, Any]) -> None:
        self.saved[key] = record


def test_a_store_object_of_the_hosts_keeps_the_tokens(
    server: tuple[AuthServer, str],
) -> None:
    auth, url = server
    vault = Vault()
    for _ in range(2):
        with MCPTools(url=url, auth=OAuth("machine", SECRET, token_store=vault)) as t:
            assert add(t, 3, 4) == "7"
    assert auth.grants == ["client_credentials"]  # the second one read the vault
    assert list(vault.saved) == [url] and vault.saved[url]["client_id"] == "machine"


def _metadata_client(documents: Mapping[str, Mapping[str, object]]) -> httpx.Client:
    """An httpx client whose server answers the metadata documents named by URL."""

    def handler(request: httpx.Request) -> httpx.Response:
        doc = documents.get(str(request.url))
        return httpx.Response(200, json=doc) if doc else httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_metadata_for_another_resource_or_a_plain_http_server_is_refused() -> None:
    from navi_core.mcp.oauth import _discover

    url = httpx.URL("https://mcp.example.com/mcp")
    known = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    issuer = "https://auth.example.com"
    server = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
    }
    good = {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": [issuer],
    }
    auth_doc = f"{issuer}/.well-known/oauth-authorization-server"
    with _metadata_client({known: good, auth_doc: server}) as http:
        assert _discover(http, url, {})["token_endpoint"] == f"{issuer}/token"
    other = {**good, "resource": "https://evil.example.com/mcp"}
    with (
        _metadata_client({known: other, auth_doc: server}) as http,
        pytest.raises(OAuthError, match="another resource"),
    ):
        _discover(http, url, {})
    plain = {**server, "token_endpoint": "http://auth.example.com/token"}
    with (
        _metadata_client({known: good, auth_doc: plain}) as http,
        pytest.raises(OAuthError, match="not https"),
    ):
        _discover(http, url, {})

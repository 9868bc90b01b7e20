"""An MCP server (official SDK, streamable HTTP) protected by OAuth, for
tests/mcp/test_oauth.py:

    python oauth_mcp_server.py PORT ISSUER_URL   # key in NAVI_TEST_TOKEN_KEY

It accepts the bearer tokens the test's authorization server signs with the shared
key (``navi.<expiry>.<scope>.<hmac>``) until they expire, and publishes its protected
resource metadata (RFC 9728) naming ``ISSUER_URL``, as the SDK does.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
import time

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl


def sign(key: str, expiry: int, scope: str) -> str:
    """The token for ``expiry`` (unix seconds) and ``scope``; the test's
    authorization server makes the same."""
    body = f"navi.{expiry}.{scope.replace(' ', '+')}"
    mac = hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


class Verifier:
    def __init__(self, key: str) -> None:
        self.key = key

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            _, expiry, scope, _sig = token.split(".")
        except ValueError:
            return None
        if not hmac.compare_digest(
            token, sign(self.key, int(expiry), scope.replace("+", " "))
        ):
            return None
        if int(expiry) < time.time():
            return None
        return AccessToken(
            token=token,
            client_id="navi",
            scopes=scope.split("+"),
            expires_at=int(expiry),
        )


def build(port: int, issuer: str) -> MCPServer:
    app = MCPServer(
        "oauth-test",
        log_level="ERROR",
        token_verifier=Verifier(os.environ["NAVI_TEST_TOKEN_KEY"]),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer),
            resource_server_url=AnyHttpUrl(f"http://127.0.0.1:{port}/mcp"),
            required_scopes=["tools"],
            validate_token_resource=False,  # the test checks the resource asked for
        ),
    )

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def whoami() -> str:
        """A careless tool: it repeats the bearer token it was called with."""
        token = get_access_token()
        return f"you called with {token.token if token else None}"

    return app


if __name__ == "__main__":
    port = int(sys.argv[1])
    build(port, sys.argv[2]).run("streamable-http", host="127.0.0.1", port=port)

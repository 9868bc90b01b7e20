"""A loopback HTTP proxy that refuses every request and echoes the credentials it
was sent: the ``echo_proxy`` fixture (``conftest.py``) of the proxy-credential tests."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROXY_PAIR = "user:pass"
PROXY_BASIC = base64.b64encode(PROXY_PAIR.encode()).decode()
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


class _ProxyServer(ThreadingHTTPServer):
    seen: list[str]


class _EchoProxy(BaseHTTPRequestHandler):
    """Refuses every request with a 400 JSON error quoting the ``Proxy-Authorization``
    it was sent, decoded too, and the request's ``Authorization``."""

    server: _ProxyServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        sent = self.headers.get("proxy-authorization") or ""
        self.server.seen.append(sent)
        try:
            decoded = base64.b64decode(sent.partition(" ")[2]).decode()
        except ValueError:
            decoded = ""
        auth = self.headers.get("authorization")
        message = f"proxy refused: {sent} decoded={decoded} for {auth}"
        body = json.dumps({"error": {"message": message}}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving() -> Iterator[str]:
    """The URL, with ``user:pass`` in it, of an echoing proxy on loopback, while the
    block runs; the proxy must have been sent exactly those credentials."""
    server = _ProxyServer(("127.0.0.1", 0), _EchoProxy)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{PROXY_PAIR}@127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
    # the credentials went where they belong
    assert server.seen and set(server.seen) == {f"Basic {PROXY_BASIC}"}


def proxy_leaks(text: str) -> list[str]:
    """The pieces of the proxy's credentials (and of a ``SENTINEL`` key) in ``text``."""
    return [s for s in ("pass", PROXY_PAIR, PROXY_BASIC, "SENTINEL") if s in text]

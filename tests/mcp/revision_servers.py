"""The servers of the revision tests: the official SDK's (both revisions), the same
refusing the initialize handshake (2026-07-28 only) and a hand-written one that knows
only the handshake; each over stdio (argv) or streamable HTTP (a URL)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp_servers import SERVER, free_port

LEGACY_SERVER = str(Path(__file__).parent / "legacy_server.py")
#: kind -> (stdio argv, extra argv of the HTTP form)
KINDS = {
    "sdk": ([sys.executable, SERVER], [sys.executable, SERVER, "http", "{port}"]),
    "modern-only": (
        [sys.executable, SERVER, "modern"],
        [sys.executable, SERVER, "http", "{port}", "modern"],
    ),
    "legacy-only": (
        [sys.executable, LEGACY_SERVER],
        [sys.executable, LEGACY_SERVER, "http", "{port}"],
    ),
}
#: the revision ``protocol="auto"`` should agree on with each kind
AGREED = {"sdk": "2026-07-28", "modern-only": "2026-07-28", "legacy-only": "2025-06-18"}


@contextlib.contextmanager
def http(kind: str) -> Iterator[str]:
    """Run a server of ``kind`` over HTTP on loopback; yields its URL."""
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in KINDS[kind][1]]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the {kind} HTTP server did not start"
                    ) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def where(kind: str, transport: str) -> Iterator[dict[str, Any]]:
    """``MCPTools`` keyword arguments reaching a server of ``kind`` over ``transport``."""
    if transport == "stdio":
        yield {"command": KINDS[kind][0]}
    else:
        with http(kind) as url:
            yield {"url": url}

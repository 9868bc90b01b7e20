"""Starting the test MCP servers of ``tests/mcp_server.py``: stdio argv, and HTTP
servers on a free loopback port (plain, JSON answers, or echoing what they got)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

SERVER = str(Path(__file__).parents[1] / "mcp_server.py")
STDIO = [sys.executable, SERVER]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_server(*mode: str) -> Iterator[str]:
    """Run the server over streamable HTTP; yields its URL, kills it afterwards."""
    yield from http_script(SERVER, "http", "{port}", *mode)


def http_script(script: str, *args: str) -> Iterator[str]:
    """Run ``script`` with ``args`` (``"{port}"`` replaced by a free loopback port)
    until it accepts connections; yields its ``/mcp`` URL, kills it afterwards."""
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in args]
    proc = subprocess.Popen(
        [sys.executable, script, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{Path(script).name} did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()

"""The JSON-RPC pieces both MCP transports share: ``Call``, ``MCPError``, ``Transport``.

A transport offers ``start(method, params, deadline) -> Call`` (send a request, do not
wait), ``wait(call, deadline) -> result``, ``notify(method, params)`` and ``close()``:
``mcp_stdio.StdioTransport`` (a child process) and ``mcp_http.HTTPTransport``
(streamable HTTP). A dead or silent server raises ``MCPError`` with a message saying
what happened (exit status, the last line of its stderr, the time waited): never a hang.
Server text that becomes a result or an error has the connection's secrets (headers,
URL credentials, secret-looking variables) redacted first: a server may echo them.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import orjson

from .._secrets import clip, redact, redact_json
from ..errors import NaviError

__all__ = [
    "CLOSE_WAIT",
    "INHERITED_ENV",
    "MAX_MESSAGE_BYTES",
    "Call",
    "MCPError",
    "Transport",
    "notification_bytes",
    "request_bytes",
    "safe_environment",
    "scrubbed",
]

#: Variables a stdio server inherits from this process, as the official SDK does;
#: everything else (API keys above all) reaches it only through ``env=``.
_WINDOWS_ENV: Final = (
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
)
_POSIX_ENV: Final = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "USER",
)
INHERITED_ENV: Final = _WINDOWS_ENV if sys.platform == "win32" else _POSIX_ENV
#: Seconds a closing server gets at each step (stdin closed, terminate, kill).
CLOSE_WAIT: Final = 2.0
#: The largest message (a stdio line, an HTTP answer or event) taken from a server:
#: past it the call fails, and a stdio server is restarted (the framing is lost).
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024


class MCPError(NaviError, RuntimeError):
    """An MCP server failed a request, died, did not answer in time, or broke protocol."""

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks


def safe_environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of a stdio server: ``INHERITED_ENV`` from here, then ``extra``."""
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(extra or {})
    return env


class Call:
    """One request in flight: its id, and its answer once it came.

    ``secrets`` (the connection's, in every spelling) are redacted from the answer.
    """

    __slots__ = ("done", "error", "id", "method", "result", "secrets")

    def __init__(
        self, request_id: int, method: str, secrets: Sequence[str] = ()
    ) -> None:
        self.id = request_id
        self.method = method
        self.secrets = secrets
        self.done = threading.Event()
        self.result: Any = None
        self.error: MCPError | None = None

    def settle(self, message: Mapping[str, Any]) -> None:
        """Record a JSON-RPC response (a result or an error object)."""
        if "error" in message:
            err = message["error"] if isinstance(message["error"], dict) else {}
            code = redact(str(err.get("code", "?")), self.secrets)
            text = clip(redact(str(err.get("message", "no message")), self.secrets))
            self.error = MCPError(f"{self.method}: server error {code}: {text}")
        else:
            self.result = scrubbed(message.get("result"), self.secrets)
        self.done.set()

    def fail(self, error: MCPError) -> None:
        """End the call with ``error`` unless its answer came already."""
        if not self.done.is_set():
            self.error = error
            self.done.set()


class Transport(Protocol):
    """What ``MCPTools`` needs of a connection."""

    @property
    def alive(self) -> bool:
        """False once the connection can no longer carry requests."""
        ...

    def start(
        self, method: str, params: Mapping[str, Any] | None, deadline: float
    ) -> Call:
        """Send a request; its answer (due by ``deadline``) arrives in the ``Call``."""
        ...

    def wait(self, call: Call, deadline: float) -> Any:
        """The result of ``call``, waiting until ``deadline`` (``time.monotonic``).

        Raises:
            MCPError: an error answer, a dead server, or no answer by the deadline.
        """
        ...

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (no answer)."""
        ...

    def close(self) -> None:
        """End the connection (and the server process, over stdio)."""
        ...


#: content types whose ``data`` is base64, left as it is (not text a secret is in)
_BINARY: Final = ("image", "audio")


def scrubbed(value: Any, secrets: Sequence[str]) -> Any:
    """A JSON-RPC result with ``secrets`` redacted from every string, except the
    base64 ``data`` of images and audio and the ``blob`` of resources."""
    if not secrets:
        return value
    if isinstance(value, dict):
        keep = ("data",) if value.get("type") in _BINARY else ("blob",)
        return {
            redact(k, secrets): v if k in keep else scrubbed(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [scrubbed(v, secrets) for v in value]
    return redact_json(value, secrets)


def request_bytes(
    request_id: int, method: str, params: Mapping[str, Any] | None
) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)


def notification_bytes(method: str, params: Mapping[str, Any] | None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)

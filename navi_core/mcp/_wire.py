"""The JSON-RPC pieces both MCP transports share: ``Call``, ``MCPError``, ``Transport``.

A transport offers ``start(method, params, deadline, progress=None) -> Call`` (send a
request, do not wait), ``wait(call, deadline) -> result``, ``cancel(call, reason)``,
``notify(method, params)`` and ``close()``:
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
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import orjson

from .._secrets import clip, redact, redact_json
from ..errors import NaviError

__all__ = [
    "CLOSE_WAIT",
    "INHERITED_ENV",
    "MAX_MESSAGE_BYTES",
    "Call",
    "Progress",
    "ServerRequests",
    "MCPError",
    "MCPToolError",
    "Transport",
    "answer_bytes",
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
    """An MCP server failed a request, died, did not answer in time, or broke protocol.

    ``code`` is the JSON-RPC error code when the server answered with one, ``data``
    that error's data (the revisions a server supports, for one).
    """

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks

    code: int | None = None
    data: Any = None


class MCPToolError(MCPError):
    """The server ran the tool and reported a failure (``isError``)."""

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks


#: ``(progress, total, message)`` of a ``notifications/progress`` for a call
Progress = Callable[[float, "float | None", "str | None"], None]
#: Answers a request the server sent (``method``, ``params``) with a result object;
#: raises ``MCPError`` (its ``code`` is sent) to refuse it.
ServerRequests = Callable[[str, Mapping[str, Any]], Any]


def safe_environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of a stdio server: ``INHERITED_ENV`` from here, then ``extra``."""
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(extra or {})
    return env


class Call:
    """One request in flight: its id, and its answer once it came.

    ``secrets`` (the connection's, in every spelling) are redacted from the answer.
    """

    __slots__ = (
        "done",
        "error",
        "id",
        "method",
        "on_progress",
        "result",
        "secrets",
        "stop",
        "touched",
    )

    def __init__(
        self,
        request_id: int,
        method: str,
        secrets: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> None:
        self.id = request_id
        self.method = method
        self.secrets = secrets
        self.on_progress = progress
        self.done = threading.Event()
        self.result: Any = None
        self.error: MCPError | None = None
        #: ``time.monotonic()`` of the request or of the latest sign of life
        self.touched = time.monotonic()
        #: ends the transport's work on the call at once (an HTTP answer still open)
        self.stop: Callable[[], None] | None = None

    def progress(self, params: Mapping[str, Any]) -> None:
        """A ``notifications/progress`` for this call: it is alive."""
        self.touched = time.monotonic()
        if self.on_progress is None:
            return
        try:
            done = float(params.get("progress", 0))
            total = params.get("total")
            total = float(total) if isinstance(total, (int, float)) else None
        except (TypeError, ValueError):
            return
        text = params.get("message")
        text = redact(str(text), self.secrets) if text is not None else None
        self.on_progress(done, total, text)

    def settle(self, message: Mapping[str, Any]) -> None:
        """Record a JSON-RPC response (a result or an error object), unless the call
        ended already (cancelled, or failed): the first end is the one that stays."""
        error: MCPError | None = None
        result: Any = None
        if "error" in message:
            err = message["error"] if isinstance(message["error"], dict) else {}
            code = redact(str(err.get("code", "?")), self.secrets)
            text = clip(redact(str(err.get("message", "no message")), self.secrets))
            error = MCPError(f"{self.method}: server error {code}: {text}")
            if isinstance(err.get("code"), int):
                error.code = err["code"]
            error.data = scrubbed(err.get("data"), self.secrets)
        else:
            result = scrubbed(message.get("result"), self.secrets)
        with _ENDING:
            if self.done.is_set():
                return
            self.error, self.result = error, result
            self.done.set()

    def fail(self, error: MCPError) -> None:
        """End the call with ``error`` unless it ended already."""
        with _ENDING:
            if not self.done.is_set():
                self.error = error
                self.done.set()


#: makes a call's first end (an answer, a failure, a cancel) the only one
_ENDING = threading.Lock()


class Transport(Protocol):
    """What ``MCPTools`` needs of a connection."""

    @property
    def alive(self) -> bool:
        """False once the connection can no longer carry requests."""
        ...

    def start(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        deadline: float,
        progress: Progress | None = None,
    ) -> Call:
        """Send a request; its answer (due by ``deadline``) arrives in the ``Call``.

        With ``progress`` the request carries a progress token, and the server's
        progress notifications for it are handed to ``progress``.
        """
        ...

    def cancel(self, call: Call, reason: str) -> None:
        """Give up on ``call``: the server is told (``notifications/cancelled``)."""
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
    request_id: int,
    method: str,
    params: Mapping[str, Any] | None,
    progress: bool = False,
) -> bytes:
    """A request; with ``progress`` its ``_meta.progressToken`` is its id."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if progress:
        params = dict(params or {})
        params["_meta"] = {**params.get("_meta", {}), "progressToken": request_id}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)


def answer_bytes(
    request_id: Any,
    handler: ServerRequests | None,
    message: Any,
    secrets: Sequence[str] = (),
) -> bytes:
    """The answer to a request the server sent: ``handler``'s result or its refusal.
    ``handler`` sees the request with ``secrets`` redacted (a question shown to the
    user, messages sent to a model)."""
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    method = message.get("method", "")
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    params = scrubbed(params, secrets)
    try:
        if method == "ping":
            answer["result"] = {}
        elif handler is None:
            raise MCPError(f"{method} is not supported")
        else:
            answer["result"] = handler(method, params)
    except MCPError as exc:
        code = exc.code if exc.code is not None else -32601
        answer["error"] = {"code": code, "message": str(exc)}
    except Exception as exc:  # a callback's failure is the server's error answer
        answer["error"] = {"code": -32603, "message": f"{type(exc).__name__}"}
    return orjson.dumps(answer)


def notification_bytes(method: str, params: Mapping[str, Any] | None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)

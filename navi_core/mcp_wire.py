"""Synchronous JSON-RPC transports for MCP: a child process over stdio, streamable HTTP.

Both offer ``start(method, params, deadline) -> Call`` (send a request, do not wait),
``wait(call, deadline) -> result``, ``notify(method, params)`` and ``close()``. Over stdio several
requests are in flight at once on the one pipe (a reader thread routes each answer to
its waiter by id); over HTTP each request is one POST on a thread of its own, answered
by a JSON body or an event stream. A dead or silent server raises ``MCPError`` with a message saying what
happened (exit status, the last lines of its stderr, the time waited): never a hang.
"""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import httpx
import orjson

from . import core
from .errors import NaviError

__all__ = [
    "Call",
    "HTTPTransport",
    "MCPError",
    "StdioTransport",
    "Transport",
    "safe_environment",
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
_STDERR_LINES: Final = 20
_CLOSE_WAIT: Final = 2.0


class MCPError(NaviError, RuntimeError):
    """An MCP server failed a request, died, did not answer in time, or broke protocol."""


def safe_environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of a stdio server: ``INHERITED_ENV`` from here, then ``extra``."""
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(extra or {})
    return env


class Call:
    """One request in flight: its id, and its answer once it came."""

    __slots__ = ("done", "error", "id", "method", "result")

    def __init__(self, request_id: int, method: str) -> None:
        self.id = request_id
        self.method = method
        self.done = threading.Event()
        self.result: Any = None
        self.error: MCPError | None = None

    def settle(self, message: Mapping[str, Any]) -> None:
        """Record a JSON-RPC response (a result or an error object)."""
        if "error" in message:
            err = message["error"] if isinstance(message["error"], dict) else {}
            code = err.get("code", "?")
            text = str(err.get("message", "no message"))[:500]
            self.error = MCPError(f"{self.method}: server error {code}: {text}")
        else:
            self.result = message.get("result")
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


def _request(request_id: int, method: str, params: Mapping[str, Any] | None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)


def _notification(method: str, params: Mapping[str, Any] | None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)


class StdioTransport:
    """A server process speaking newline-delimited JSON-RPC on its stdin and stdout.

    The process is started here, watched by a reader thread (its exit fails every call
    in flight at once) and ended by ``close()``: stdin closed, then terminate, then kill.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty list of argv strings")
        shown = [os.path.basename(a) for a in command[:2]]
        self.name = " ".join(shown)
        try:
            self._proc = subprocess.Popen(
                list(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=safe_environment(env),
                cwd=cwd,
            )
        except OSError as exc:
            raise MCPError(
                f"cannot start the MCP server {command[0]!r}: {exc}"
            ) from exc
        self._lock = threading.Lock()
        self._calls: dict[int, Call] = {}
        self._next_id = 0
        self._gone: MCPError | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._reader = threading.Thread(
            target=self._read, name="navi-mcp-stdout", daemon=True
        )
        self._errors = threading.Thread(
            target=self._read_stderr, name="navi-mcp-stderr", daemon=True
        )
        self._reader.start()
        self._errors.start()

    @property
    def alive(self) -> bool:
        return self._gone is None

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._proc.pid

    def start(
        self, method: str, params: Mapping[str, Any] | None, deadline: float
    ) -> Call:
        with self._lock:
            self._next_id += 1
            call = Call(self._next_id, method)
            if self._gone is not None:
                call.fail(self._gone)
                return call
            self._calls[call.id] = call
            self._write(_request(call.id, method, params))
        return call

    def wait(self, call: Call, deadline: float) -> Any:
        if not call.done.wait(max(0.0, deadline - time.monotonic())):
            with self._lock:
                self._calls.pop(call.id, None)
            with contextlib.suppress(MCPError):
                self.notify(
                    "notifications/cancelled",
                    {"requestId": call.id, "reason": "no answer in time"},
                )
            raise MCPError(
                f"{call.method}: the MCP server {self.name!r} did not answer in time"
            )
        if call.error is not None:
            raise call.error
        return call.result

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            if self._gone is None:
                self._write(_notification(method, params))

    def _write(self, data: bytes) -> None:
        """Send one line; the lock is held. A broken pipe means the server is gone."""
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            stdin.write(data + b"\n")
            stdin.flush()
        except (OSError, ValueError):
            self._gone = self._gone or MCPError(
                f"the MCP server {self.name!r} stopped reading its input"
            )
            for call in self._calls.values():
                call.fail(self._gone)
            self._calls.clear()

    def _read(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        for line in stdout:
            if not line.strip():
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a server printing to stdout: not protocol, not fatal
            for item in message if isinstance(message, list) else [message]:
                if isinstance(item, dict):
                    self._route(item)
        self._ended()

    def _route(self, message: dict[str, Any]) -> None:
        if "method" in message:
            if "id" in message:  # a request from the server: ping, roots, sampling
                answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
                if message["method"] == "ping":
                    answer["result"] = {}
                else:
                    answer["error"] = {"code": -32601, "message": "not supported"}
                with self._lock:
                    if self._gone is None:
                        self._write(orjson.dumps(answer))
            return
        with self._lock:
            call = self._calls.pop(message.get("id"), None)  # type: ignore[arg-type]
        if call is not None:
            call.settle(message)

    def _read_stderr(self) -> None:
        stderr = self._proc.stderr
        assert stderr is not None
        for raw in stderr:
            text = raw.decode("utf-8", "replace").rstrip()
            if text:
                self._stderr.append(text)

    def _ended(self) -> None:
        """The server closed its stdout: it exited or is exiting."""
        try:
            status: int | None = self._proc.wait(timeout=_CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            status = None
        self._errors.join(timeout=0.5)
        said = f"; its last output: {self._stderr[-1][:300]}" if self._stderr else ""
        how = (
            f"exited with status {status}"
            if status is not None
            else "closed its output"
        )
        with self._lock:
            if self._gone is None:
                self._gone = MCPError(f"the MCP server {self.name!r} {how}{said}")
            for call in self._calls.values():
                call.fail(self._gone)
            self._calls.clear()

    def close(self) -> None:
        proc = self._proc
        with self._lock:
            if self._gone is None:
                self._gone = MCPError(f"the MCP server {self.name!r} was closed")
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for stop in (None, proc.terminate, proc.kill):
            if stop is not None:
                with contextlib.suppress(OSError):
                    stop()
            try:
                proc.wait(timeout=_CLOSE_WAIT)
                break
            except subprocess.TimeoutExpired:
                continue
        self._reader.join(timeout=_CLOSE_WAIT)
        self._errors.join(timeout=_CLOSE_WAIT)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


class HTTPTransport:
    """A streamable HTTP endpoint: each request is a POST answered by JSON or SSE.

    The ``mcp-session-id`` the server hands out in the initialize answer is sent back
    on every later request, with ``mcp-protocol-version`` once it is known; ``close()``
    ends the session with a DELETE. Headers (an Authorization token) never appear in
    an error message.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=httpx.Timeout(30.0))
        self._headers = {
            **(headers or {}),
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    @property
    def alive(self) -> bool:
        return not self._closed

    def _session_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    def start(
        self, method: str, params: Mapping[str, Any] | None, deadline: float
    ) -> Call:
        """POST the request on a thread of its own, so a batch's calls overlap."""
        with self._lock:
            self._next_id += 1
            call = Call(self._next_id, method)
        body = _request(call.id, method, params)
        if method == "initialize":  # the session id it brings is needed by the rest
            self._post(call, body, deadline)
        else:
            threading.Thread(
                target=self._post, args=(call, body, deadline), daemon=True
            ).start()
        return call

    def wait(self, call: Call, deadline: float) -> Any:
        # the POST has the same deadline: a little grace lets it report its own error
        if not call.done.wait(max(0.0, deadline - time.monotonic()) + 0.5):
            raise MCPError(f"{call.method}: {self.url} did not answer in time")
        if call.error is not None:
            raise call.error
        return call.result

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        with contextlib.suppress(httpx.HTTPError):
            self._client.post(
                self.url,
                content=_notification(method, params),
                headers=self._session_headers(),
            ).close()

    def _post(self, call: Call, body: bytes, deadline: float) -> None:
        try:
            self._exchange(call, body, deadline)
        except MCPError as exc:
            call.fail(exc)
        if not call.done.is_set():
            call.fail(MCPError(f"{call.method}: {self.url} sent no answer"))

    def _exchange(self, call: Call, body: bytes, deadline: float) -> None:
        timeout = max(0.001, deadline - time.monotonic())
        try:
            with self._client.stream(
                "POST",
                self.url,
                content=body,
                headers=self._session_headers(),
                timeout=httpx.Timeout(timeout),
            ) as response:
                if response.status_code == 404 and self.session_id is not None:
                    self._closed = True  # the server forgot the session: reconnect
                    raise MCPError(
                        f"{call.method}: the MCP session expired at {self.url}"
                    )
                if response.status_code >= 400:
                    text = response.read()[:300].decode("utf-8", "replace")
                    raise MCPError(
                        f"{call.method}: HTTP {response.status_code} from {self.url}: {text}"
                    )
                if call.method == "initialize":
                    self.session_id = response.headers.get("mcp-session-id")
                kind = response.headers.get("content-type", "")
                if kind.startswith("text/event-stream"):
                    self._read_events(call, response, deadline)
                else:
                    self._settle(call, orjson.loads(response.read()))
        except httpx.TimeoutException as exc:
            raise MCPError(f"{call.method}: {self.url} did not answer in time") from exc
        except httpx.ConnectError as exc:
            raise MCPError(
                f"{call.method}: cannot connect to {self.url} (is the server running?)"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise MCPError(
                f"{call.method}: the connection to {self.url} broke before the answer "
                f"came (the server may have crashed): {type(exc).__name__}"
            ) from exc
        except httpx.HTTPError as exc:
            raise MCPError(
                f"{call.method}: cannot reach {self.url}: {type(exc).__name__}: {exc}"
            ) from exc
        except orjson.JSONDecodeError as exc:
            raise MCPError(f"{call.method}: {self.url} sent invalid JSON") from exc

    def _read_events(
        self, call: Call, response: httpx.Response, deadline: float
    ) -> None:
        decoder = core.SSEDecoder()
        for chunk in response.iter_raw():
            for event in decoder.feed(chunk):
                if event.data:
                    self._settle(call, orjson.loads(event.data))
            if call.done.is_set():
                return
            if time.monotonic() > deadline:
                raise MCPError(f"{call.method}: {self.url} did not answer in time")
        for event in decoder.close():
            if event.data:
                self._settle(call, orjson.loads(event.data))

    def _settle(self, call: Call, message: Any) -> None:
        for item in message if isinstance(message, list) else [message]:
            if (
                isinstance(item, dict)
                and item.get("id") == call.id
                and "method" not in item
            ):
                call.settle(item)

    def close(self) -> None:
        if self._closed and self.session_id is None:
            return
        self._closed = True
        if self.session_id is not None:
            with contextlib.suppress(httpx.HTTPError):
                self._client.delete(
                    self.url, headers=self._session_headers(), timeout=_CLOSE_WAIT
                ).close()
            self.session_id = None
        if self._own_client:
            self._client.close()

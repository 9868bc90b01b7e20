"""MCP over stdio: a child process speaking newline-delimited JSON-RPC.

Several requests are in flight at once on the one pipe: a reader thread routes each
answer to its waiter by id, answers the server's pings, and fails every waiting call
the moment the process exits.
"""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ._wire import (
    CLOSE_WAIT,
    Call,
    MCPError,
    notification_bytes,
    request_bytes,
    safe_environment,
)

__all__ = ["StdioTransport"]

_STDERR_LINES: Final = 20


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
            self._write(request_bytes(call.id, method, params))
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
                self._write(notification_bytes(method, params))

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
            status: int | None = self._proc.wait(timeout=CLOSE_WAIT)
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
                proc.wait(timeout=CLOSE_WAIT)
                break
            except subprocess.TimeoutExpired:
                continue
        self._reader.join(timeout=CLOSE_WAIT)
        self._errors.join(timeout=CLOSE_WAIT)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()

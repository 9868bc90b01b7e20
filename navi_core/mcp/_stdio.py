"""MCP over stdio: a child process speaking newline-delimited JSON-RPC.

Several requests are in flight at once on the one pipe: a reader thread routes each
answer to its waiter by id and each progress notification to its call, hands the
server's requests (sampling, elicitation, roots) to ``on_request`` on a thread of their
own, and fails every waiting call the moment the process exits. Nothing here blocks past a call's deadline: requests go
to the pipe without blocking (what the pipe cannot take yet is sent by a writer
thread), a server that has not taken a request by the deadline is abandoned, and
``close()`` ends the process in bounded time.

A server that breaks the framing (a line longer than ``max_message_bytes``, a JSON
value that is not a JSON-RPC message, an answer whose id is not a number or a string)
fails every call in flight with an ``MCPError`` saying so, and is ended; the next
batch starts a fresh one. Lines that are not JSON at all (a server printing to its
stdout) are skipped.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import select
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, Final

import orjson

from .._secrets import process_secrets, redact
from ._wire import (
    CLOSE_WAIT,
    MAX_MESSAGE_BYTES,
    Call,
    MCPError,
    Progress,
    ServerRequests,
    answer_bytes,
    notification_bytes,
    request_bytes,
    safe_environment,
)

__all__ = ["StdioTransport"]

_STDERR_LINES: Final = 20
#: characters of a stderr line kept (a server may print megabytes on one line)
_STDERR_CHARS: Final = 1000
_READ_BYTES: Final = 64 * 1024
#: seconds between the writer thread's looks at whether it must stop
_WRITER_POLL: Final = 0.1
#: non-blocking pipe writes and ``poll`` (POSIX); elsewhere the writer thread blocks
_NONBLOCKING: Final = hasattr(select, "poll")
#: the start of a line that was meant as a JSON-RPC message: an object, or a batch
#: (``[{``, ``[]``), not a log line such as ``[dotenv@17.2.1] injecting env``
_MESSAGE_START: Final = re.compile(rb"\{|\[\s*(?:[{\]]|$)")


class StdioTransport:
    """A server process speaking newline-delimited JSON-RPC on its stdin and stdout.

    The process is started here, watched by a reader thread (its exit fails every call
    in flight at once) and ended by ``close()``: stdin closed, then terminate, then
    kill, each given ``CLOSE_WAIT`` seconds. The credentials it is started with
    (``process_secrets``: secret-looking variables of ``env``, URL passwords and
    secret-looking options' values in ``command`` and in ``env``'s values), with
    ``secrets``, are redacted from what it says and from its name in messages.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        secrets: Sequence[str] = (),
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty list of argv strings")
        found = {*secrets, *process_secrets(command, env)}
        self.secrets = tuple(sorted(found, key=lambda s: (-len(s), s)))
        shown = [os.path.basename(a) for a in command[:2]]
        self.name = redact(" ".join(shown), self.secrets)  # "server --token=..."
        self._max = max_message_bytes
        try:
            self._proc = subprocess.Popen(
                list(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=safe_environment(env),
                cwd=cwd,
                bufsize=0,
            )
        except OSError as exc:
            text = f"cannot start the MCP server {command[0]!r}: {exc}"
            raise MCPError(redact(text, self.secrets)) from exc
        assert self._proc.stdin is not None
        self._stdin = self._proc.stdin.fileno()
        if _NONBLOCKING:
            os.set_blocking(self._stdin, False)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._outbox: collections.deque[memoryview] = collections.deque()
        self._stopping = False
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
        self._writer = threading.Thread(
            target=self._write_out, name="navi-mcp-stdin", daemon=True
        )
        #: answers the server's requests; None refuses them (pings are answered here)
        self.on_request: ServerRequests | None = None
        #: told of the server's notifications other than progress (list changes)
        self.on_notify: Callable[[str, Mapping[str, Any]], None] | None = None
        self._input_lost = False  # a write failed: the server closed its stdin
        # stderr first: the reader, when the server exits at once, waits for it
        self._errors.start()
        self._reader.start()
        self._writer.start()

    @property
    def alive(self) -> bool:
        return self._gone is None

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._proc.pid

    def start(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        deadline: float,
        progress: Progress | None = None,
    ) -> Call:
        with self._lock:
            self._next_id += 1
            call = Call(self._next_id, method, self.secrets, progress)
            if self._gone is not None:
                call.fail(self._gone)
                return call
            self._calls[call.id] = call
            self._send(request_bytes(call.id, method, params, progress is not None))
        return call

    def cancel(self, call: Call, reason: str) -> None:
        """Give up on ``call``; a server that has not taken all our input is ended
        (it stopped reading, and part of a line may be on the pipe)."""
        with self._lock:
            self._calls.pop(call.id, None)
            stuck = bool(self._outbox) and self._gone is None
        if stuck:
            error = MCPError(
                f"the MCP server {self.name!r} did not answer in time: it stopped "
                "reading its input (it is restarted for the next call)"
            )
            self._abandon(error)
            call.fail(error)
            return
        if not call.done.is_set():
            self.notify(
                "notifications/cancelled", {"requestId": call.id, "reason": reason}
            )
        call.fail(MCPError(f"{call.method}: {reason}"))

    def wait(self, call: Call, deadline: float) -> Any:
        if not call.done.wait(max(0.0, deadline - time.monotonic())):
            self._timed_out(call)
        if call.error is not None:
            raise call.error
        return call.result

    def _timed_out(self, call: Call) -> None:
        """``call`` had no answer by its deadline: raise, unless it came just now.

        A request still waiting to be written means the server stopped reading its
        input; with part of a line on the pipe the framing is lost, so it is ended.
        """
        with self._lock:
            self._calls.pop(call.id, None)
            stuck = bool(self._outbox) and self._gone is None
        if stuck:
            error = MCPError(
                f"the MCP server {self.name!r} did not answer in time: it stopped "
                "reading its input (it is restarted for the next call)"
            )
            self._abandon(error)
            if not call.done.is_set():
                raise error
        elif not call.done.is_set():
            self.notify(
                "notifications/cancelled",
                {"requestId": call.id, "reason": "no answer in time"},
            )
            raise MCPError(
                f"{call.method}: the MCP server {self.name!r} did not answer in time"
            )

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            if self._gone is None:
                self._send(notification_bytes(method, params))

    # -- writing: never blocks the caller ------------------------------------------------

    def _send(self, message: bytes) -> None:
        """Queue one line for the server; the lock is held. Written at once as far as
        the pipe takes it, the rest by the writer thread."""
        if self._input_lost:
            return
        data = memoryview(message + b"\n")
        if not self._outbox and _NONBLOCKING:
            data = data[self._write_some(data) :]
        if data and self._gone is None:
            self._outbox.append(data)
            self._wake.notify()

    def _write_some(self, data: memoryview) -> int:
        """Write what the pipe takes now (the lock is held); a closed pipe ends the
        connection."""
        try:
            return os.write(self._stdin, data)
        except BlockingIOError:
            return 0
        except OSError:
            self._input_closed_locked()
            return len(data)

    def _input_closed_locked(self) -> None:
        """A write failed: the server closed its stdin, as a rule because it exits.
        Nothing more is sent, and the reader says how the server ended (its exit
        status, its last output) when its stdout closes; one that runs on without its
        input is given up ``CLOSE_WAIT`` seconds later. The lock is held."""
        self._outbox.clear()
        if self._input_lost or self._gone is not None:
            return
        self._input_lost = True
        timer = threading.Timer(CLOSE_WAIT, self._input_gone)
        timer.daemon = True
        timer.start()

    def _input_gone(self) -> None:
        with self._lock:
            self._lost_locked(
                MCPError(f"the MCP server {self.name!r} stopped reading its input")
            )

    def _write_out(self) -> None:
        """The writer thread: sends what the pipe could not take at once."""
        poller = select.poll() if _NONBLOCKING else None
        if poller is not None:
            poller.register(self._stdin, select.POLLOUT)
        while True:
            with self._lock:
                while not self._outbox and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
                data = self._outbox[0]
            if poller is not None:
                poller.poll(_WRITER_POLL * 1000)
                with self._lock:
                    if self._stopping:
                        return
                    if self._outbox and self._outbox[0] is data:
                        self._advance(data, self._write_some(data))
                continue
            try:  # no non-blocking pipes here: block, close() kills the reader end
                sent = os.write(self._stdin, data)
            except OSError:
                sent = len(data)
                with self._lock:
                    self._input_closed_locked()
            with self._lock:
                self._advance(data, sent)

    def _advance(self, data: memoryview, sent: int) -> None:
        """``sent`` bytes of ``data``, the head of the outbox, went out (lock held)."""
        if self._outbox and self._outbox[0] is data:
            if sent < len(data):
                self._outbox[0] = data[sent:]
            else:
                self._outbox.popleft()

    # -- reading -------------------------------------------------------------------------

    def _read(self) -> None:
        """The reader thread: lines of stdout, each at most ``max_message_bytes``."""
        stdout = self._proc.stdout
        assert stdout is not None
        fd = stdout.fileno()
        buffer = bytearray()
        scanned = 0  # bytes of ``buffer`` known to hold no newline
        broken = False
        while True:
            try:
                chunk = os.read(fd, _READ_BYTES)
            except OSError:
                break
            if not chunk:
                break
            if broken:
                continue  # drained until the process is gone, so it cannot block
            buffer += chunk
            start = 0
            while (end := buffer.find(b"\n", max(start, scanned))) >= 0:
                if end - start > self._max:
                    broken = self._too_big()
                elif not self._line(buffer[start:end]):
                    broken = True
                if broken:
                    break
                start = end + 1
            if not broken and len(buffer) - start > self._max:
                broken = self._too_big()
            if broken:
                buffer.clear()
                continue
            del buffer[:start]
            scanned = len(buffer)
        self._ended()

    def _too_big(self) -> bool:
        """End a server whose line outgrew ``max_message_bytes``; True (it broke)."""
        self._abandon(
            MCPError(
                f"the MCP server {self.name!r} sent a message larger than "
                f"{self._max} bytes (max_message_bytes); it is restarted for the "
                "next call"
            )
        )
        return True

    def _line(self, line: bytearray) -> bool:
        """Route one line; False when it broke the protocol (the server was ended)."""
        stripped = line.strip()
        if not stripped:
            return True
        try:
            message = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            if _MESSAGE_START.match(stripped):  # a message, mangled
                return self._broken("a line of invalid JSON")
            return True  # a server printing to stdout: not protocol, not fatal
        items = message if isinstance(message, list) else [message]
        if not items:
            return self._broken("an empty batch")
        for item in items:
            fault = _fault(item)
            if fault is not None:
                return self._broken(fault)
        for item in items:
            try:
                self._route(item)
            except Exception as exc:  # a progress or notice handler failed on it
                return self._broken(
                    f"a message its handlers failed on ({type(exc).__name__})"
                )
        return True

    def _broken(self, fault: str) -> bool:
        self._abandon(
            MCPError(
                f"the MCP server {self.name!r} broke the protocol: it sent {fault}; "
                "it is restarted for the next call"
            )
        )
        return False

    def _route(self, message: dict[str, Any]) -> None:
        if "method" in message:
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if "id" in message:  # a request from the server: ping, roots, sampling
                if message["method"] == "ping" or self.on_request is None:
                    self._reply(message)
                else:  # the answer may wait on a person or a model: not here
                    threading.Thread(
                        target=self._reply, args=(message,), daemon=True
                    ).start()
            elif message["method"] == "notifications/progress":
                token = params.get("progressToken")
                if not isinstance(token, (str, int)):
                    return
                with self._lock:
                    target = self._calls.get(token)  # type: ignore[arg-type]
                if target is not None:
                    target.progress(params)
            elif self.on_notify is not None:
                self.on_notify(message["method"], params)
            return
        with self._lock:
            call = self._calls.pop(message["id"], None)
        if call is not None:
            call.settle(message)

    def _reply(self, message: dict[str, Any]) -> None:
        answer = answer_bytes(message["id"], self.on_request, message, self.secrets)
        with self._lock:
            if self._gone is None:
                self._send(answer)

    def _read_stderr(self) -> None:
        stderr = self._proc.stderr
        assert stderr is not None
        fd = stderr.fileno()
        partial = b""
        while True:
            try:
                chunk = os.read(fd, _READ_BYTES)
            except OSError:
                break
            if not chunk:
                break
            *lines, rest = (partial + chunk).split(b"\n")
            partial = rest[: _STDERR_CHARS * 4]
            for raw in lines:
                self._keep_stderr(raw)
        self._keep_stderr(partial)

    def _keep_stderr(self, raw: bytes) -> None:
        text = raw[: _STDERR_CHARS * 4].decode("utf-8", "replace").rstrip()
        if text:
            self._stderr.append(text[:_STDERR_CHARS])

    # -- the end -------------------------------------------------------------------------

    def _lost_locked(self, error: MCPError) -> None:
        """End the connection with ``error``: every call in flight fails with it and
        nothing more is sent. The lock is held."""
        if self._gone is None:
            self._gone = error
        for call in self._calls.values():
            call.fail(self._gone)
        self._calls.clear()
        self._outbox.clear()

    def _abandon(self, error: MCPError) -> None:
        """End the connection with ``error`` and the process with it (terminated, not
        waited for: ``close()`` waits)."""
        with self._lock:
            self._lost_locked(error)
        with contextlib.suppress(OSError):
            self._proc.terminate()

    def _ended(self) -> None:
        """The server closed its stdout: it exited or is exiting."""
        try:
            status: int | None = self._proc.wait(timeout=CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            status = None
        self._errors.join(timeout=0.5)
        said = ""
        if self._stderr:
            said = f"; its last output: {redact(self._stderr[-1], self.secrets)[:300]}"
        how = (
            f"exited with status {status}"
            if status is not None
            else "closed its output"
        )
        with self._lock:
            self._lost_locked(MCPError(f"the MCP server {self.name!r} {how}{said}"))

    def close(self) -> None:
        """Close stdin, then terminate, then kill: bounded, whatever the server does."""
        proc = self._proc
        with self._lock:
            if self._stopping:
                return
            self._lost_locked(MCPError(f"the MCP server {self.name!r} was closed"))
            self._stopping = True
            self._wake.notify_all()
        self._writer.join(timeout=_WRITER_POLL * 5)
        self._close_pipe(proc.stdin, self._writer)  # the server sees the end of input
        for stop in (None, proc.terminate, proc.kill):
            if stop is not None:
                with contextlib.suppress(OSError):
                    stop()
            try:
                proc.wait(timeout=CLOSE_WAIT)
                break
            except subprocess.TimeoutExpired:
                continue
        for thread in (self._writer, self._reader, self._errors):
            thread.join(timeout=CLOSE_WAIT)
        self._close_pipe(proc.stdin, self._writer)
        self._close_pipe(proc.stdout, self._reader)
        self._close_pipe(proc.stderr, self._errors)

    @staticmethod
    def _close_pipe(pipe: IO[bytes] | None, user: threading.Thread) -> None:
        """Close ``pipe`` unless ``user`` is still in a read or write on it (a
        grandchild holds its other end): closing it under the thread could hand its
        number to another file."""
        if pipe is not None and not user.is_alive():
            with contextlib.suppress(OSError):
                pipe.close()


def _fault(item: Any) -> str | None:
    """What makes ``item`` not a JSON-RPC message this client can route, or None."""
    if not isinstance(item, dict):
        return f"a JSON-RPC message that is {_kind(item)}, not an object"
    if "method" in item:
        if not isinstance(item["method"], str):
            return f"a request whose method is {_kind(item['method'])}"
        if "id" in item and not _valid_id(item["id"]):
            return f"a request whose id is {_kind(item['id'])}"
        return None
    if "id" not in item:
        return "an answer without an id"
    if not _valid_id(item["id"]):
        return f"an answer whose id is {_kind(item['id'])}"
    if ("result" in item) == ("error" in item):
        return "an answer with neither or both of result and error"
    return None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")

"""``MCPTools``: the tools of a Model Context Protocol server, as a ``ToolSource``.

A synchronous client of its own (``_stdio``, ``_http``), not the official SDK: it speaks
the 2026-07-28 revision (stateless requests, ``server/discover``) and the initialize
handshake of revisions 2024-11-05 to 2025-11-25, over stdio and streamable HTTP, with
no event loop and no dependency beyond httpx (README: "MCP"). A batch of calls is sent
at once and answered in the model's order; a server that died is started again for
the next batch.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import httpx

from .._ids import new_id
from .._secrets import public_url, request_secrets
from ..conversation import Message, Part
from ..events import Elicitation
from ..tools._answers import expect
from ..tools._context import ToolContext
from ..tools._tool import ToolCall, ToolSpec
from ..tools._validation import ArgumentError, errors, summary
from ._content import prompt_messages, resource_parts, result_value
from ._http import HTTPTransport, header_arguments
from ._requests import Elicit, Requests, SamplingPolicy
from ._stdio import StdioTransport
from ._wire import MAX_MESSAGE_BYTES, Call, MCPError, MCPToolError, Transport

__all__ = [
    "PROTOCOL_VERSIONS",
    "MCPError",
    "MCPToolError",
    "MCPTools",
    "SamplingPolicy",
]

#: The revisions this client speaks, newest first.
PROTOCOL_VERSIONS: Final = (
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
)
#: the stateless revision, probed with ``server/discover``
MODERN: Final = PROTOCOL_VERSIONS[0]
#: the revisions of the initialize handshake
HANDSHAKE: Final = PROTOCOL_VERSIONS[1:]
_CLIENT_INFO: Final = {"name": "navi-core", "version": "0.1.0"}
_BAD_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
#: the longest tool name providers take
_MAX_NAME: Final = 64
#: the envelope keys of a 2026-07-28 request's ``_meta``
_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
_CAPS_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
_SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
#: JSON-RPC code of "unsupported protocol version" (its data names the supported ones)
_UNSUPPORTED: Final = -32022
#: rounds of ``input_required`` answers one request may take
_MAX_ROUNDS: Final = 10
#: seconds the ``server/discover`` probe may take at most
_PROBE_WAIT: Final = 10.0
#: seconds between looks at a waiting call's cancel signal
_POLL: Final = 0.05
#: seconds between the first looks at the other calls of a batch (then doubling)
_NOTICE: Final = 0.01
#: ``_outcome``'s word for a call sent again with the input it asked for
_AGAIN: Final = object()
#: seconds after a batch within which a change notice is taken for one of its calls'
#: (it came on a stream of its own, after their answers): ``tools()`` lists it then
_LATE: Final = 1.0


class _Waiting:
    """A tool call of a batch not answered yet: its request now, what it was sent
    with, and how many ``input_required`` rounds it took."""

    __slots__ = ("call", "context", "params", "rounds")

    def __init__(
        self, call: Call, params: dict[str, Any], context: ToolContext | None
    ) -> None:
        self.call = call
        self.params = params
        self.context = context
        self.rounds = 0


class MCPTools:
    """A ``ToolSource`` serving the tools (and resources and prompts) of one MCP server.

    Args:
        command: argv of a stdio server, started now and ended by ``close()``.
        url: the endpoint of a streamable HTTP server (instead of ``command``).
        env: variables for a stdio server, on top of a few safe ones inherited
            (``PATH``, ``HOME`` ...); the rest of this process's environment is not passed.
        headers: HTTP headers for every request (an Authorization token).
        auth: an ``httpx.Auth`` for every HTTP request: ``navi_core.mcp.OAuth``
            (OAuth 2.1 as MCP specifies it) or any other.
        prefix: put before each tool name as ``prefix_name``, so two servers'
            tools cannot clash. A name providers cannot take is cleaned (other
            characters than ``A-Z a-z 0-9 _ -`` become ``_``, cut at 64); names that
            clash once cleaned get a suffix hashed from the server's name, the same
            whatever order the server lists its tools in (``_tool_names``).
        timeout: seconds a call may go without an answer or a progress notification
            before it is cancelled and becomes an error result (an idle limit).
        startup_timeout: seconds the handshake and the tool listing may take.
        max_message_bytes: the largest message taken from the server (a stdio line,
            an HTTP answer or event); past it the call fails, and a stdio server is
            restarted for the next batch.
        protocol: ``"auto"`` probes the 2026-07-28 revision and falls back to the
            initialize handshake (2025-11-25 and earlier); ``"2026-07-28"`` or
            ``"2025-11-25"`` speaks only that one.
        sampling: lets the server ask a model for completions (``SamplingPolicy``);
            without it every sampling request is refused.
        elicit: ``(message, schema) -> content | None`` answers the server's
            questions for the user; without it a call running in an agent turn asks
            through the stream (an ``Elicitation`` event), and elsewhere they are
            declined.
        roots: directories the server may work in, answered to ``roots/list``.

    Credentials (``headers``, URL user info and secret query values, a proxy's
    credentials, ``env`` values whose names look secret, and in ``command``'s arguments
    and ``env``'s values URL passwords and the values of secret-looking options such
    as ``--token=...``) are redacted from everything the server says before it becomes
    a result or an error, and the URL is shown only in its public form.

    Raises:
        MCPError: the server could not be started, reached or understood.
        ValueError: neither or both of ``command`` and ``url``, or an unknown
            ``protocol``.
    """

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks

    def __init__(
        self,
        command: Sequence[str] | None = None,
        url: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        timeout: float = 60.0,
        startup_timeout: float = 30.0,
        cwd: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        protocol: str = "auto",
        sampling: SamplingPolicy | None = None,
        elicit: Elicit | None = None,
        roots: Sequence[str | Path] = (),
        auth: httpx.Auth | None = None,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("MCPTools needs exactly one of command= (stdio) and url=")
        if protocol not in ("auto", MODERN, *HANDSHAKE):
            raise ValueError(
                f"protocol must be 'auto' or one of {', '.join(PROTOCOL_VERSIONS)}"
            )
        self._command = list(command) if command is not None else None
        self._url = url
        self._env = dict(env or {})
        self._headers = dict(headers or {})
        self._auth = auth
        self._cwd = cwd
        self._prefix = prefix
        self._protocol = protocol
        self._requests = Requests(sampling, elicit, roots)
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._closed = False
        self._names: dict[str, str] = {}  # our name -> the server's name
        self._schemas: dict[str, dict[str, Any]] = {}  # our name -> input schema
        self._specs: tuple[ToolSpec, ...] = ()
        self._stale = False  # the server said its tools changed
        self._relisting = False  # a background listing runs (``tools()``)
        self._fresh_until = float("inf")  # a cache hint's expiry of the tool list
        self._batch_ended = -math.inf  # ``time.monotonic()`` when the last batch ended
        self._contexts: list[ToolContext] = []  # of the calls in flight
        self._asking = 0  # questions waiting for the user: no call is idle meanwhile
        self._asked_at = 0.0  # when the last of them was answered
        self.protocol_version = ""
        self.server_info: dict[str, Any] = {}
        self.server_capabilities: dict[str, Any] = {}
        self._transport: Transport = self._connect()
        try:
            self._specs = self._list_tools(self._transport)
        except BaseException:
            self._transport.close()
            raise

    # -- the ToolSource protocol ------------------------------------------------------

    def tools(self) -> Sequence[ToolSpec]:
        """The server's tools: listed at the start, and again once the server said
        they changed (``notifications/tools/list_changed``) or its cache hint ran out.

        It does not wait on the server (a turn asks before each request, on the thread
        that drives it), but for a change its calls made: a change said before a
        batch's last answer is listed before the batch ends, and one said on a stream
        of its own (HTTP) that came just after (within ``_LATE`` seconds) is listed
        here; any other is listed on a thread of its own, and the list so far is
        returned meanwhile. A notice on its own stream can come after the request that
        follows the batch has gone out: the request after that declares the change."""
        if (
            self._stale
            and not self._relisting
            and time.monotonic() - self._batch_ended < _LATE
        ):
            with self._lock:
                if self._stale:
                    self._refresh()
            return self._specs
        if (
            self._stale or time.monotonic() > self._fresh_until
        ) and not self._relisting:
            self._relisting = True
            threading.Thread(
                target=self._relist, name="navi-mcp-list", daemon=True
            ).start()
        return self._specs

    def _relist(self) -> None:
        """``tools()``'s listing in the background (its own thread)."""
        try:
            with self._lock:
                if self._stale or time.monotonic() > self._fresh_until:
                    self._refresh()
        finally:
            self._relisting = False

    def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
        """Send every call, then collect the answers in order.

        Each item is what the tool gave (text, images as ``Media``, or a list of
        them) or an exception for that call: ``ArgumentError`` when the arguments
        do not match the tool's input schema (nothing is sent), else ``MCPError``
        for the server's error, its exit, or no answer within ``timeout``.
        """
        return self.call_batch_with(calls, [None] * len(calls))

    def call_batch_with(
        self, calls: Sequence[ToolCall], contexts: Sequence[ToolContext | None]
    ) -> Sequence[Any]:
        """``call_batch`` with each call's ``ToolContext`` (see
        ``call_batch_as_completed``), the answers in the calls' order."""
        out: list[Any] = [None] * len(calls)
        for k, value in self.call_batch_as_completed(calls, contexts):
            out[k] = value
        return out

    def call_batch_as_completed(
        self, calls: Sequence[ToolCall], contexts: Sequence[ToolContext | None]
    ) -> Iterator[tuple[int, Any]]:
        """Send every call, then yield ``(index, answer)`` as each answer comes, so a
        quick call is reported (and kept) while a slow one still runs.

        With a call's ``ToolContext``, its progress notifications are reported through
        ``emit`` (and reset the idle limit), its elicitations are published to the
        stream, and once ``cancelled`` is set the server is told
        (``notifications/cancelled``) and the call ends at once."""
        with self._lock:
            if self._closed:
                closed = MCPError("this MCPTools was closed")
                yield from ((k, closed) for k in range(len(calls)))
                return
            try:
                transport = self._live_transport()
                if self._stale:
                    self._refresh()
            except MCPError as exc:
                yield from ((k, exc) for k in range(len(calls)))
                return
            live = [c for c in contexts if c is not None]
            self._contexts.extend(live)
            waiting: dict[int, _Waiting] = {}
            refused: list[tuple[int, Exception]] = []
            for k, (c, context) in enumerate(zip(calls, contexts, strict=True)):
                name = self._names.get(c.name)
                if name is None:
                    refused.append((k, MCPError(f"the server has no tool {c.name!r}")))
                    continue
                problems = errors(self._schemas.get(c.name, {}), c.arguments)
                if problems:
                    text = f"invalid arguments: {summary(problems)}"
                    refused.append((k, ArgumentError(text)))
                    continue
                params = {"name": name, "arguments": dict(c.arguments)}
                call = self._start(transport, "tools/call", params, context)
                waiting[k] = _Waiting(call, params, context)
        # waiting needs no lock: another agent's batch may share the connection
        try:
            yield from refused
            look = _NOTICE
            while waiting:
                first = next(iter(waiting.values()))
                # the first call's answer ends the wait; the others are looked at
                # every ``look`` seconds (from _NOTICE, doubling up to _POLL while
                # none answers), so one that answers first is not held up by it
                first.call.done.wait(_POLL if len(waiting) == 1 else look)
                look = min(look * 2, _POLL)
                for k, w in list(waiting.items()):
                    if not w.call.done.is_set():
                        self._watch(transport, w.call, w.context)
                        continue
                    look = _NOTICE
                    try:
                        result = self._outcome(transport, w)
                        if result is _AGAIN:
                            continue
                        value = result_value(result, self.read_resource)
                    except MCPError as exc:
                        value = exc
                    del waiting[k]
                    if not waiting and self._stale:
                        # a call changed the tools (the server says so before it
                        # answers): listed here, before the batch ends, so the next
                        # request declares them
                        with self._lock:
                            if self._stale:
                                self._refresh()
                    yield k, value
        finally:
            self._batch_ended = time.monotonic()
            with self._lock:
                for context in live:
                    self._contexts.remove(context)

    # -- resources and prompts ----------------------------------------------------------

    def resources(self) -> list[dict[str, Any]]:
        """The server's resources as listed (``uri``, ``name``, ``mimeType`` ...)."""
        return self._list("resources/list", "resources")

    def read_resource(self, uri: str) -> list[Part]:
        """The contents of a resource: text as text parts, images as image parts,
        other binaries as a note of their type and size."""
        result = self._ask("resources/read", {"uri": uri})
        return resource_parts(result.get("contents"))

    def prompts(self) -> list[dict[str, Any]]:
        """The server's prompts as listed (``name``, ``description``, ``arguments``)."""
        return self._list("prompts/list", "prompts")

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[Message]:
        """The messages of a prompt, filled in with ``arguments``."""
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = {k: str(v) for k, v in arguments.items()}
        return prompt_messages(self._ask("prompts/get", params))

    @property
    def transport(self) -> Transport:
        """The current connection (``StdioTransport`` or ``HTTPTransport``)."""
        return self._transport

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """End the session and the server process (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._transport.close()

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._command:
            where = f"command={self._command[0]!r}"
        else:
            where = f"url={public_url(self._url or '')!r}"
        return f"<MCPTools {where} tools={len(self._specs)}>"

    # -- requests ---------------------------------------------------------------------

    @property
    def stateless(self) -> bool:
        """Whether the server speaks the 2026-07-28 revision (no session)."""
        return self.protocol_version == MODERN

    def _params(self, params: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """``params`` with the 2026-07-28 envelope in ``_meta`` when it is spoken."""
        if not self.stateless:
            return dict(params) if params is not None else None
        return {**(params or {}), "_meta": self._envelope()}

    def _envelope(self) -> dict[str, Any]:
        return {
            _VERSION_KEY: MODERN,
            _INFO_KEY: _CLIENT_INFO,
            _CAPS_KEY: self._requests.capabilities(),
        }

    def _start(
        self,
        transport: Transport,
        method: str,
        params: Mapping[str, Any],
        context: ToolContext | None,
    ) -> Call:
        progress = None
        if context is not None:
            emit = context.emit

            def progress(done: float, total: float | None, text: str | None) -> None:
                amount = f"{done:g}/{total:g}" if total is not None else f"{done:g}"
                emit(f"{text} ({amount})" if text else amount)

        deadline = time.monotonic() + self.timeout
        return transport.start(method, self._params(params), deadline, progress)

    def _watch(
        self, transport: Transport, call: Call, context: ToolContext | None
    ) -> None:
        """Give up on ``call`` (and tell the server) once the turn is cancelled or
        after ``timeout`` idle seconds; it then ends with that error."""
        if context is not None and context.cancelled.is_set():
            transport.cancel(call, "the turn was cancelled")
        elif self._asking:
            return
        elif time.monotonic() > max(call.touched, self._asked_at) + self.timeout:
            transport.cancel(
                call,
                f"the MCP server did not answer in time (no answer or progress "
                f"within {self.timeout:g} seconds)",
            )

    def _finish(
        self,
        transport: Transport,
        call: Call,
        params: dict[str, Any],
        context: ToolContext | None,
    ) -> Any:
        """The final result of ``call``: waited for under the idle limit and the
        cancel signal, its ``input_required`` rounds answered and sent again."""
        w = _Waiting(call, params, context)
        while True:
            while not w.call.done.wait(_POLL):
                self._watch(transport, w.call, context)
            result = self._outcome(transport, w)
            if result is not _AGAIN:
                return result

    def _outcome(self, transport: Transport, w: _Waiting) -> Any:
        """The answer of ``w``'s call, which came; ``_AGAIN`` when it asked for input
        (``input_required``): the input is given and the call sent again."""
        call = w.call
        if call.error is not None:
            raise call.error
        result = call.result
        if not (
            isinstance(result, dict) and result.get("resultType") == "input_required"
        ):
            return result
        if w.rounds >= _MAX_ROUNDS - 1:
            raise MCPError(
                f"{call.method}: the server asked for input {_MAX_ROUNDS} times"
            )
        if not result.get("inputRequests"):  # the server is not ready: wait a bit
            time.sleep(min(0.05 * 2**w.rounds, 0.25))
        again = dict(w.params)
        again["inputResponses"] = self._input(result.get("inputRequests"), w.context)
        if result.get("requestState") is not None:
            again["requestState"] = result["requestState"]
        w.call = self._start(transport, call.method, again, w.context)
        w.rounds += 1
        return _AGAIN

    def _input(self, requests: Any, context: ToolContext | None) -> dict[str, Any]:
        """Answers to the requests an ``input_required`` result carries."""
        ask = self._asker(context)
        out: dict[str, Any] = {}
        for key, request in (
            (requests or {}).items() if isinstance(requests, dict) else ()
        ):
            if not isinstance(request, dict):
                continue
            params = request.get("params")
            params = params if isinstance(params, dict) else {}
            method = str(request.get("method", ""))
            out[key] = self._requests.answer(method, params, ask)
        return out

    def _asker(self, context: ToolContext | None) -> Elicit | None:
        """Asks the user through ``context``'s stream: an ``Elicitation`` event,
        answered with ``Stream.answer`` (None when the turn is cancelled first)."""
        if context is None:
            return None
        call = context

        def ask(message: str, schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
            request_id = f"elicit-{new_id()}"
            question = expect(request_id)
            with self._lock:
                self._asking += 1
            try:
                call.publish(
                    Elicitation(call.call_id, request_id, message, dict(schema))
                )
                return question.wait(call.cancelled)
            finally:
                with self._lock:
                    self._asking -= 1
                    self._asked_at = time.monotonic()

        return ask

    def _ask(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """One request outside a tool call (listing, reading), its input answered."""
        with self._lock:
            if self._closed:
                raise MCPError("this MCPTools was closed")
            transport = self._live_transport()
            call = self._start(transport, method, params or {}, None)
        result = self._finish(transport, call, dict(params or {}), None)
        if not isinstance(result, dict):
            raise MCPError(
                f"{method}: the MCP server sent a result that is not an object"
            )
        return result

    def _list(self, method: str, key: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            result = self._ask(method, {"cursor": cursor} if cursor else None)
            out.extend(e for e in result.get(key) or () if isinstance(e, dict))
            cursor = result.get("nextCursor")
            if not cursor:
                return out
            _check_cursor(method, cursor, seen)

    # -- connection -------------------------------------------------------------------

    def _transport_now(self) -> Transport:
        """A new connection, its server requests and notifications routed here."""
        transport: StdioTransport | HTTPTransport
        limit = self.max_message_bytes
        if self._command is not None:
            secrets = request_secrets(self._env, "", "")  # credential-like variables
            transport = StdioTransport(
                self._command,
                self._env,
                self._cwd,
                max_message_bytes=limit,
                secrets=secrets,
            )
        else:
            assert self._url is not None
            transport = HTTPTransport(
                self._url, self._headers, max_message_bytes=limit, auth=self._auth
            )
        transport.on_request = self._answer
        transport.on_notify = self._notified
        return transport

    def _answer(self, method: str, params: Mapping[str, Any]) -> Any:
        """A request the server sent mid-call; a question goes to the stream of the
        latest call in flight."""
        with self._lock:
            context = self._contexts[-1] if self._contexts else None
        return self._requests.answer(method, params, self._asker(context))

    def _notified(self, method: str, params: Mapping[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            self._stale = True

    def _reopened(self) -> None:
        """The long-lived stream opened again: a change said meanwhile went unheard."""
        self._stale = True

    def _connect(self) -> Transport:
        """Start (or reach) the server, agree on a revision, and listen for its tool
        list changes where the revision needs the client to ask (``_listen``)."""
        transport = self._agree()
        try:
            self._listen(transport)
        except BaseException:
            transport.close()
            raise
        return transport

    def _listen(self, transport: Transport) -> None:
        """Ask for ``notifications/tools/list_changed`` where it does not come by
        itself: under the handshake over HTTP, on the standalone GET stream (a server
        without one answers 405); under 2026-07-28, on the stream of a
        ``subscriptions/listen`` request, sent to a server that declares
        ``tools.listChanged`` (over stdio its notifications come on the pipe). Under
        the handshake over stdio they come on the pipe unasked."""
        tools = self.server_capabilities.get("tools")
        declared = isinstance(tools, dict) and tools.get("listChanged") is True
        if self.stateless:
            if not declared:
                return
            params = {
                "notifications": {"toolsListChanged": True},
                "_meta": self._envelope(),
            }
            if isinstance(transport, HTTPTransport):
                transport.listen(params, self._reopened)
            else:  # answered only when it ends; its notifications come meanwhile
                transport.start("subscriptions/listen", params, math.inf)
        elif isinstance(transport, HTTPTransport):
            transport.listen(None, self._reopened)

    def _agree(self) -> Transport:
        """Start (or reach) the server and agree on a revision: ``server/discover``
        first (unless a handshake revision was asked for), else ``initialize``."""
        transport = self._transport_now()
        deadline = time.monotonic() + self.startup_timeout
        try:
            if self._protocol in ("auto", MODERN):
                try:
                    self._discover(transport, deadline)
                    return transport
                except MCPError as exc:
                    if self._protocol == MODERN or not _falls_back(exc):
                        raise
                if not transport.alive:  # a server that ended on the unknown method
                    transport.close()
                    transport = self._transport_now()
            try:
                self._initialize(transport, deadline)
            except MCPError as exc:
                # a probe answered after its wait made the server choose 2026-07-28
                if self._protocol != "auto" or exc.code != _UNSUPPORTED:
                    raise
                self._discover(transport, deadline, patient=True)
        except BaseException:
            transport.close()
            raise
        return transport

    def _discover(
        self, transport: Transport, deadline: float, patient: bool = False
    ) -> None:
        """Probe the 2026-07-28 revision; a server that does not answer within
        ``_PROBE_WAIT`` (unless ``patient``) is taken for one that does not know it."""
        if isinstance(transport, HTTPTransport):
            transport.stateless = True
            transport.protocol_version = MODERN
        probe = min(deadline, time.monotonic() + _PROBE_WAIT)
        if patient or self._protocol == MODERN:
            probe = deadline
        call = transport.start("server/discover", {"_meta": self._envelope()}, probe)
        try:
            result = transport.wait(call, probe)
            versions = (
                result.get("supportedVersions") if isinstance(result, dict) else None
            )
            if not isinstance(versions, list) or MODERN not in versions:
                error = MCPError(f"the MCP server supports {versions!r}, not {MODERN}")
                error.data = {"supported": versions}
                raise error
        except MCPError:
            if isinstance(transport, HTTPTransport):
                transport.stateless = False
                transport.protocol_version = None
            raise
        self.protocol_version = MODERN
        meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
        self.server_info = dict(meta.get(_SERVER_INFO_KEY) or {})
        self.server_capabilities = dict(result.get("capabilities") or {})

    def _initialize(self, transport: Transport, deadline: float) -> None:
        params = {
            "protocolVersion": HANDSHAKE[0],
            "capabilities": self._requests.capabilities(),
            "clientInfo": _CLIENT_INFO,
        }
        call = transport.start("initialize", params, deadline)
        result = transport.wait(call, deadline)
        version = str(result.get("protocolVersion", ""))
        if version not in HANDSHAKE:
            raise MCPError(
                f"the MCP server speaks protocol {version!r}; this client speaks "
                + ", ".join(PROTOCOL_VERSIONS)
            )
        self.protocol_version = version
        self.server_info = dict(result.get("serverInfo") or {})
        self.server_capabilities = dict(result.get("capabilities") or {})
        if isinstance(transport, HTTPTransport):
            transport.protocol_version = version
        transport.notify("notifications/initialized")

    def _live_transport(self) -> Transport:
        """The connection, started again when the server died since the last batch."""
        if not self._transport.alive:
            self._transport.close()
            self._transport = self._connect()
        return self._transport

    def _refresh(self) -> None:
        """List the tools again (the lock is held); on failure the old list stands."""
        self._stale = False
        if self._closed:
            return
        try:
            self._specs = self._list_tools(self._live_transport())
        except MCPError:
            self._fresh_until = float("inf")

    def _list_tools(self, transport: Transport) -> tuple[ToolSpec, ...]:
        deadline = time.monotonic() + self.startup_timeout
        entries: dict[str, Mapping[str, Any]] = {}  # the server's name -> its entry
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            params = {"cursor": cursor} if cursor else None
            if self.stateless:
                params = self._params(params)
            call = transport.start("tools/list", params, deadline)
            result = transport.wait(call, deadline)
            for entry in result.get("tools") or ():
                # a name listed twice: its first entry (both would be called alike)
                entries.setdefault(str(entry.get("name", "")), entry)
            ttl = result.get("ttlMs")
            cursor = result.get("nextCursor")
            if cursor:
                _check_cursor("tools/list", cursor, seen)
                continue
            ours = _tool_names(entries, self._prefix)
            specs = tuple(_spec(ours[k], entry) for k, entry in entries.items())
            self._names = {ours[k]: k for k in entries}
            self._schemas = {s.name: s.parameters for s in specs}
            if isinstance(transport, HTTPTransport):
                marked = {
                    theirs: header_arguments(self._schemas[our])
                    for our, theirs in self._names.items()
                }
                transport.param_headers = {k: v for k, v in marked.items() if v}
            fresh = isinstance(ttl, int) and ttl > 0
            self._fresh_until = time.monotonic() + ttl / 1000 if fresh else float("inf")
            return specs


def _tool_names(server_names: Iterable[str], prefix: str | None) -> dict[str, str]:
    """The name each of a server's tools is declared under (the server's name -> ours),
    in what providers take (``_BAD_NAME_CHARS`` made ``_``, at most ``_MAX_NAME``
    characters, after ``prefix_``).

    It depends on the set of names, never on the order the server lists them in: a
    name that needs no cleaning keeps it; a cleaned one keeps its cleaned form unless
    another name cleans to the same (``read.file`` beside ``read_file``, or two long
    names cut alike), and then each of those that needed cleaning ends in ``_`` and
    eight hex digits of the SHA-256 of its own server name."""
    full = {k: f"{prefix}_{k}" if prefix else k for k in server_names}
    cleaned = {
        k: _BAD_NAME_CHARS.sub("_", v)[:_MAX_NAME] or "tool" for k, v in full.items()
    }
    counts = Counter(cleaned.values())
    out = {k: v for k, v in cleaned.items() if v == full[k] or counts[v] == 1}
    taken = set(out.values())
    # sorted: should a suffixed name be taken already (a hash collision, or a server
    # naming a tool so), the next try goes to the same name whatever the listing order
    for k in sorted(cleaned.keys() - out.keys()):
        salt = 0
        while True:
            key = k if not salt else f"{k}\0{salt}"
            digest = hashlib.sha256(key.encode(errors="surrogatepass")).hexdigest()[:8]
            name = f"{cleaned[k][: _MAX_NAME - 9]}_{digest}"
            if name not in taken:
                break
            salt += 1
        out[k] = name
        taken.add(name)
    return out


def _spec(name: str, entry: Mapping[str, Any]) -> ToolSpec:
    """The declaration of a listed tool, under ``name``."""
    schema = entry.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        schema = {"type": "object", "properties": {}}
    description = entry.get("description") or entry.get("title") or ""
    return ToolSpec(name, str(description), schema)


def _check_cursor(method: str, cursor: Any, seen: set[str]) -> None:
    """Refuse a ``nextCursor`` the listing gave already: the server would be asked
    for the same pages again and again, and the listing would never end."""
    key = str(cursor)
    if key in seen:
        raise MCPError(
            f"{method}: the MCP server sent the cursor {key[:100]!r} again "
            "(its listing never ends)"
        )
    seen.add(key)


def _falls_back(error: MCPError) -> bool:
    """Whether a failed ``server/discover`` means "try the initialize handshake":
    any error but a server naming only revisions newer than the handshake's."""
    if error.code != _UNSUPPORTED:
        return True
    supported = error.data.get("supported") if isinstance(error.data, dict) else None
    if not isinstance(supported, list):
        return True
    return any(v in HANDSHAKE for v in supported)

"""``MCPTools``: the tools of a Model Context Protocol server, as a ``ToolSource``.

A synchronous client of its own (``mcp_stdio``, ``mcp_http``), not the official SDK: it speaks the
initialize handshake of protocol revisions 2024-11-05 to 2025-11-25 over stdio and
streamable HTTP, with no event loop and no dependency beyond httpx (README: "MCP").
A batch of calls is sent at once (stdio) and answered in the model's order; a server
that died is started again for the next batch.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final

from .._secrets import public_url, request_secrets
from ..media._parts import Media
from ..tools._tool import ToolCall, ToolSpec
from ..tools._validation import ArgumentError, errors, summary
from ._http import HTTPTransport
from ._stdio import StdioTransport
from ._wire import MAX_MESSAGE_BYTES, Call, MCPError, Transport

__all__ = ["PROTOCOL_VERSIONS", "MCPError", "MCPToolError", "MCPTools"]

#: The revisions this client speaks, newest (the one offered) first.
PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
_CLIENT_INFO: Final = {"name": "navi-core", "version": "0.1.0"}
_BAD_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")


class MCPToolError(MCPError):
    """The server ran the tool and reported a failure (``isError``)."""

    __module__ = "navi_core"  # its public path, in reprs, docs and tracebacks


class MCPTools:
    """A ``ToolSource`` serving the tools of one MCP server.

    Args:
        command: argv of a stdio server, started now and ended by ``close()``.
        url: the endpoint of a streamable HTTP server (instead of ``command``).
        env: variables for a stdio server, on top of a few safe ones inherited
            (``PATH``, ``HOME`` ...); the rest of this process's environment is not passed.
        headers: HTTP headers for every request (an Authorization token).
        prefix: put before each tool name as ``prefix_name``, so two servers'
            tools cannot clash.
        timeout: seconds a batch of calls may take before its calls become errors.
        startup_timeout: seconds the handshake and the tool listing may take.
        max_message_bytes: the largest message taken from the server (a stdio line,
            an HTTP answer or event); past it the call fails, and a stdio server is
            restarted for the next batch.

    Credentials (``headers``, URL user info and secret query values, ``env`` values
    whose names look secret) are redacted from everything the server says before it
    becomes a result or an error, and the URL is shown only in its public form.

    Raises:
        MCPError: the server could not be started, reached or understood.
        ValueError: neither or both of ``command`` and ``url``.
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
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("MCPTools needs exactly one of command= (stdio) and url=")
        self._command = list(command) if command is not None else None
        self._url = url
        self._env = dict(env or {})
        self._headers = dict(headers or {})
        self._cwd = cwd
        self._prefix = prefix
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._closed = False
        self._names: dict[str, str] = {}  # our name -> the server's name
        self._schemas: dict[str, dict[str, Any]] = {}  # our name -> input schema
        self._specs: tuple[ToolSpec, ...] = ()
        self.protocol_version = ""
        self.server_info: dict[str, Any] = {}
        self._transport: Transport = self._connect()
        try:
            self._specs = self._list_tools(self._transport)
        except BaseException:
            self._transport.close()
            raise

    # -- the ToolSource protocol ------------------------------------------------------

    def tools(self) -> Sequence[ToolSpec]:
        """The server's tools, as listed when it started."""
        return self._specs

    def call_batch(self, calls: Sequence[ToolCall]) -> Sequence[Any]:
        """Send every call, then collect the answers in order.

        Each item is what the tool gave (text, images as ``Media``, or a list of
        them) or an exception for that call: ``ArgumentError`` when the arguments
        do not match the tool's input schema (nothing is sent), else ``MCPError``
        for the server's error, its exit, or no answer within ``timeout``.
        """
        with self._lock:
            if self._closed:
                return [MCPError("this MCPTools was closed") for _ in calls]
            try:
                transport = self._live_transport()
            except MCPError as exc:
                return [exc for _ in calls]
            deadline = time.monotonic() + self.timeout
            pending: list[Call | Exception] = []
            for c in calls:
                name = self._names.get(c.name)
                if name is None:
                    pending.append(MCPError(f"the server has no tool {c.name!r}"))
                    continue
                problems = errors(self._schemas.get(c.name, {}), c.arguments)
                if problems:
                    text = f"invalid arguments: {summary(problems)}"
                    pending.append(ArgumentError(text))
                    continue
                params = {"name": name, "arguments": dict(c.arguments)}
                pending.append(transport.start("tools/call", params, deadline))
        # waiting needs no lock: another agent's batch may share the connection
        out: list[Any] = []
        for item in pending:
            if isinstance(item, Exception):
                out.append(item)
                continue
            try:
                out.append(_result_value(transport.wait(item, deadline)))
            except MCPError as exc:
                out.append(exc)
        return out

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

    # -- connection -------------------------------------------------------------------

    def _connect(self) -> Transport:
        """Start (or reach) the server and run the initialize handshake."""
        transport: Transport
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
            transport = HTTPTransport(self._url, self._headers, max_message_bytes=limit)
        deadline = time.monotonic() + self.startup_timeout
        try:
            params = {
                "protocolVersion": PROTOCOL_VERSIONS[0],
                "capabilities": {},
                "clientInfo": _CLIENT_INFO,
            }
            call = transport.start("initialize", params, deadline)
            result = transport.wait(call, deadline)
            version = str(result.get("protocolVersion", ""))
            if version not in PROTOCOL_VERSIONS:
                raise MCPError(
                    f"the MCP server speaks protocol {version!r}; this client speaks "
                    + ", ".join(PROTOCOL_VERSIONS)
                )
            self.protocol_version = version
            self.server_info = dict(result.get("serverInfo") or {})
            if isinstance(transport, HTTPTransport):
                transport.protocol_version = version
            transport.notify("notifications/initialized")
        except BaseException:
            transport.close()
            raise
        return transport

    def _live_transport(self) -> Transport:
        """The connection, started again when the server died since the last batch."""
        if not self._transport.alive:
            self._transport.close()
            self._transport = self._connect()
        return self._transport

    def _list_tools(self, transport: Transport) -> tuple[ToolSpec, ...]:
        deadline = time.monotonic() + self.startup_timeout
        specs: list[ToolSpec] = []
        cursor: str | None = None
        while True:
            params = {"cursor": cursor} if cursor else None
            call = transport.start("tools/list", params, deadline)
            result = transport.wait(call, deadline)
            for entry in result.get("tools") or ():
                specs.append(self._spec(entry))
            cursor = result.get("nextCursor")
            if not cursor:
                return tuple(specs)

    def _spec(self, entry: Mapping[str, Any]) -> ToolSpec:
        server_name = str(entry.get("name", ""))
        name = f"{self._prefix}_{server_name}" if self._prefix else server_name
        name = _BAD_NAME_CHARS.sub("_", name)[:64] or "tool"
        self._names[name] = server_name
        schema = entry.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        description = entry.get("description") or entry.get("title") or ""
        self._schemas[name] = schema
        return ToolSpec(name, str(description), schema)


def _result_value(result: Any) -> Any:
    """A ``tools/call`` result as a tool's return value (or an ``MCPToolError``)."""
    if not isinstance(result, dict):
        return MCPError("the MCP server sent a result that is not an object")
    items = [
        _content_item(c) for c in result.get("content") or () if isinstance(c, dict)
    ]
    if not items and result.get("structuredContent") is not None:
        items = [result["structuredContent"]]
    if result.get("isError"):
        text = " ".join(i for i in items if isinstance(i, str)) or "the tool failed"
        return MCPToolError(text)
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _content_item(item: Mapping[str, Any]) -> Any:
    """One content block: text, image (as ``Media``), audio, resource or link."""
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind == "image":
        try:
            data = base64.b64decode(str(item.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            return "[image dropped: the server sent invalid base64]"
        return Media(data, item.get("mimeType"))
    if kind == "audio":
        return f"[audio result not shown: {item.get('mimeType', 'audio')}]"
    if kind == "resource":
        resource = item.get("resource") or {}
        if "text" in resource:
            return str(resource["text"])
        return f"[resource {resource.get('uri', '')} ({resource.get('mimeType', 'binary')})]"
    if kind == "resource_link":
        return f"[resource link: {item.get('uri', '')} {item.get('name', '')}]".strip()
    return f"[unsupported content type {kind!r}]"

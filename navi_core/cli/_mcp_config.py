"""``--mcp-config FILE``: the MCP servers of the common ``mcpServers`` JSON file.

The file is the one Claude Desktop and other clients read::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                  "env": {"DEBUG": "1"}},
        "search": {"url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "Bearer ..."}}
    }}

A server with ``command`` is started over stdio (``args`` after it, ``env`` on top of a
few safe variables, optional ``cwd``); one with ``url`` is reached over streamable
HTTP (``headers`` on every request). ``prefix`` (optional) is put before each of its
tool names. ``type`` may say ``stdio`` or ``http``; ``disabled: true`` skips a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NaviError
from ..mcp import MCPTools
from .options import UsageError

__all__ = ["MCPServer", "open_mcp_servers", "read_mcp_config"]

_STDIO_KEYS = {"command", "args", "env", "cwd"}
_HTTP_KEYS = {"url", "headers"}
_COMMON_KEYS = {"type", "prefix", "disabled", "description"}
_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http"}


@dataclass(frozen=True)
class MCPServer:
    """One entry of ``mcpServers``, checked; ``env`` and ``headers`` are not shown."""

    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    prefix: str | None = None

    def open(self) -> MCPTools:
        """Start (stdio) or reach (HTTP) the server and list its tools.

        Raises:
            MCPError: it cannot be started, reached or understood.
        """
        if self.command is not None:
            return MCPTools(
                list(self.command),
                env=self.env,
                cwd=self.cwd,
                prefix=self.prefix,
                elicit=_decline,
            )
        return MCPTools(
            url=self.url, headers=self.headers, prefix=self.prefix, elicit=_decline
        )


def _decline(message: str, schema: Mapping[str, Any]) -> None:
    """The commands have no form to ask the user with: a server's question is declined
    at once (the call goes on without an answer) instead of waiting for one."""
    return None


def _strings(where: str, key: str, raw: object) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise UsageError(f"{where}: {key} must be an object of strings")
    return dict(raw)


def _server(path: Path, name: str, raw: object) -> MCPServer | None:
    where = f"{path}: server {name!r}"
    if not isinstance(raw, dict):
        raise UsageError(f"{where} must be an object")
    unknown = raw.keys() - _STDIO_KEYS - _HTTP_KEYS - _COMMON_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)}")
    if raw.get("disabled") is True:
        return None
    kind = raw.get("type")
    if kind is not None and kind not in _TYPES:
        raise UsageError(
            f"{where}: type {kind!r} is not supported (stdio or http; an SSE-only "
            "server is not)"
        )
    has_command, has_url = "command" in raw, "url" in raw
    if has_command == has_url:
        raise UsageError(f"{where} needs either command (stdio) or url (HTTP)")
    if kind is not None and _TYPES[kind] != ("stdio" if has_command else "http"):
        raise UsageError(f"{where}: type {kind!r} does not match its keys")
    prefix = raw.get("prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise UsageError(f"{where}: prefix must be a string")
    if has_command:
        if raw.keys() & _HTTP_KEYS:
            raise UsageError(f"{where}: headers belong to a url server")
        command, args = raw["command"], raw.get("args", [])
        if not isinstance(command, str) or not command:
            raise UsageError(f"{where}: command must be a program name or path")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise UsageError(f"{where}: args must be a list of strings")
        cwd = raw.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise UsageError(f"{where}: cwd must be a string")
        return MCPServer(
            name,
            command=(command, *args),
            env=_strings(where, "env", raw.get("env", {})),
            cwd=cwd,
            prefix=prefix,
        )
    if raw.keys() & (_STDIO_KEYS - {"command"}):
        raise UsageError(f"{where}: args, env and cwd belong to a command server")
    url = raw["url"]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UsageError(f"{where}: url must be an http:// or https:// URL")
    headers = _strings(where, "headers", raw.get("headers", {}))
    return MCPServer(name, url=url, headers=headers, prefix=prefix)


def read_mcp_config(path: Path) -> list[MCPServer]:
    """The servers ``path`` lists, checked but not started.

    Raises:
        UsageError: the file is missing, not JSON, or an entry is malformed; the
            message names the file and the server (never a header or env value).
    """
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise UsageError(f"{path}: not valid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise UsageError(f'{path}: expected {{"mcpServers": {{"name": {{...}}}}}}')
    out = [_server(path, str(name), raw) for name, raw in servers.items()]
    return [s for s in out if s is not None]


def open_mcp_servers(path: Path) -> list[MCPTools]:
    """Start every server ``path`` lists; the caller closes them.

    Raises:
        UsageError: the file cannot be used (``read_mcp_config``), or a server
            cannot be started or reached (named; the others are closed again).
    """
    opened: list[MCPTools] = []
    try:
        for server in read_mcp_config(path):
            try:
                opened.append(server.open())
            except (NaviError, ValueError) as exc:
                raise UsageError(f"{path}: MCP server {server.name!r}: {exc}") from None
    except BaseException:
        for source in opened:
            source.close()
        raise
    return opened

"""MCP content as navi_core values: tool results, resource contents and prompt
messages. Text stays text, images become ``Media``/``MediaPart``, other binaries a
short note with their type and size."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any

from ..conversation import MediaPart, Message, Part, Role, Text, TextPart
from ..media._parts import Media, to_part
from ._wire import MCPError, MCPToolError

__all__ = ["prompt_messages", "resource_parts", "result_value"]

#: reads a resource a tool result links to (``MCPTools.read_resource``)
Reader = Callable[[str], "list[Part]"]


def result_value(result: Any, read: Reader | None = None) -> Any:
    """A ``tools/call`` result as a tool's return value, or the error to report.

    Resource links are read through ``read`` (their contents take their place).
    """
    if not isinstance(result, dict):
        return MCPError("the MCP server sent a result that is not an object")
    items: list[Any] = []
    for c in result.get("content") or ():
        if isinstance(c, dict):
            items.extend(_content_items(c, read))
    if not items and result.get("structuredContent") is not None:
        items = [result["structuredContent"]]
    if result.get("isError"):
        text = " ".join(i for i in items if isinstance(i, str)) or "the tool failed"
        return MCPToolError(text)
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _content_items(item: Mapping[str, Any], read: Reader | None) -> list[Any]:
    """One content block as result items: text, images (``Media``), resources."""
    kind = item.get("type")
    if kind == "text":
        return [str(item.get("text", ""))]
    if kind == "image":
        data = _decoded(item.get("data"))
        if data is None:
            return ["[image dropped: the server sent invalid base64]"]
        return [Media(data, item.get("mimeType"))]
    if kind == "audio":
        return [f"[audio result not shown: {item.get('mimeType', 'audio')}]"]
    if kind == "resource":
        resource = item.get("resource") or {}
        return [_as_item(p) for p in resource_parts([resource])]
    if kind == "resource_link":
        uri = str(item.get("uri", ""))
        head = f"[resource {uri}]"
        if read is None or not uri:
            return [head]
        try:
            parts = read(uri)
        except Exception as exc:  # the link stays a name when it cannot be read
            return [f"{head} (not read: {exc})"]
        return [head, *(_as_item(p) for p in parts)]
    return [f"[unsupported content type {kind!r}]"]


def _as_item(part: Part) -> Any:
    return part.text if isinstance(part, TextPart) else part


def _decoded(data: Any) -> bytes | None:
    try:
        return base64.b64decode(str(data or ""), validate=True)
    except (binascii.Error, ValueError):
        return None


def resource_parts(contents: Any) -> list[Part]:
    """``resources/read`` contents as parts: text as text, images as images, other
    binaries as a note of their type and size."""
    parts: list[Part] = []
    for entry in contents if isinstance(contents, list) else ():
        if not isinstance(entry, dict):
            continue
        uri = str(entry.get("uri", ""))
        kind = str(entry.get("mimeType") or "")
        if "text" in entry:
            parts.append(TextPart(str(entry["text"])))
            continue
        data = _decoded(entry.get("blob"))
        if data is None:
            parts.append(TextPart(f"[resource {uri}: invalid base64]"))
        elif kind.startswith("image/"):
            parts.append(to_part(Media(data, kind)))
        else:
            parts.append(
                TextPart(
                    f"[binary resource {uri}: {kind or 'unknown type'}, {len(data)} bytes]"
                )
            )
    return parts


def prompt_messages(result: Any) -> list[Message]:
    """``prompts/get`` messages as conversation messages."""
    out: list[Message] = []
    raw = result.get("messages") if isinstance(result, dict) else None
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, dict):
            continue
        role: Role = "assistant" if item.get("role") == "assistant" else "user"
        content = item.get("content")
        blocks: list[Text | MediaPart] = []
        for part in resource_or_block(content):
            blocks.append(Text(part.text) if isinstance(part, TextPart) else part)
        out.append(Message(role, tuple(blocks)))
    return out


def resource_or_block(content: Any) -> list[Part]:
    """One prompt message's content block as parts."""
    if not isinstance(content, dict):
        return []
    kind = content.get("type")
    if kind == "text":
        return [TextPart(str(content.get("text", "")))]
    if kind == "image":
        data = _decoded(content.get("data"))
        if data is None:
            return [TextPart("[image dropped: invalid base64]")]
        return [to_part(Media(data, content.get("mimeType")))]
    if kind == "resource":
        return resource_parts([content.get("resource") or {}])
    if kind == "resource_link":
        return [TextPart(f"[resource {content.get('uri', '')}]")]
    return [TextPart(f"[{kind} content not shown]")]

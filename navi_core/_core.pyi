"""Stub of the compiled core ``navi_core._core`` (csrc/_core.pyx).

It mirrors the pure twin ``navi_core._core_py`` name for name and signature for
signature; tests/core/test_selection.py keeps the two equal.
"""

import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

__all__ = [
    "AnthropicParser",
    "Assembler",
    "OpenAIChatParser",
    "OpenAIResponsesParser",
    "Reader",
    "SSEDecoder",
    "SSEEvent",
    "b64encode",
    "estimate_tokens",
    "next_event",
    "next_or_stop",
    "produce",
    "readable",
    "recv_ready",
    "send_ready",
]

_Buffer: TypeAlias = bytes | bytearray | memoryview
_Delta: TypeAlias = tuple[Any, ...]

class SSEEvent:
    """One dispatched server-sent event; ``retry`` only when its own block set one."""

    @property
    def event(self) -> str: ...
    @property
    def data(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def retry(self) -> int | None: ...
    def __init__(self, event: str, data: str, id: str, retry: int | None) -> None: ...

class SSEDecoder:
    """Incremental ``text/event-stream`` decoder: bytes in, ``SSEEvent`` values out."""

    def __init__(self, max_event_bytes: int = 16777216) -> None: ...
    def feed(self, data: _Buffer) -> list[SSEEvent]: ...
    def close(self) -> list[SSEEvent]: ...

class OpenAIChatParser:
    """Chat-completions stream (``data: {chunk}`` ... ``data: [DONE]``) to deltas."""

    def __init__(self, max_event_bytes: int = 16777216) -> None: ...
    def feed(self, data: _Buffer) -> list[_Delta]: ...
    def close(self) -> list[_Delta]: ...

class OpenAIResponsesParser:
    """Responses API stream (typed ``response.*`` events) to deltas."""

    def __init__(self, max_event_bytes: int = 16777216) -> None: ...
    def feed(self, data: _Buffer) -> list[_Delta]: ...
    def close(self) -> list[_Delta]: ...

class AnthropicParser:
    """Anthropic Messages stream to deltas, dispatching on each payload's ``type``."""

    def __init__(self, max_event_bytes: int = 16777216) -> None: ...
    def feed(self, data: _Buffer) -> list[_Delta]: ...
    def close(self) -> list[_Delta]: ...

def estimate_tokens(text: str) -> int: ...
def b64encode(data: bytes | bytearray | memoryview) -> str: ...

class Assembler:
    done: bool
    finish_reason: Any
    model: Any
    usage: Any
    def __init__(
        self,
        events: Sequence[type],
        on_error: Callable[[Any, Any], BaseException],
        coalesce: bool = False,
    ) -> None: ...
    def feed(self, deltas: Sequence[_Delta], push: Callable[[Any], Any]) -> None: ...
    def shown(self) -> tuple[int, int, int]: ...
    def blocks(self) -> list[tuple[int, str, Any]]: ...

def next_event(self: Any, timeout: float | None = None) -> Any: ...
def next_or_stop(self: Any) -> Any: ...
def produce(self: Any, queue: Any) -> bool: ...
def recv_ready(sock: socket.socket, size: int) -> bytes | None: ...
def send_ready(sock: socket.socket, data: _Buffer) -> int: ...
def readable(sock: socket.socket) -> bool: ...

class Reader:
    closing: bool
    close_pending: bool
    @property
    def driver(self) -> int: ...
    def __init__(
        self,
        queue: deque[Any],
        ctl: Any,
        observers: Any,
        response: Any,
        on_ended: Callable[[Any, BaseException | None], None],
    ) -> None: ...
    def pump(self) -> bool: ...

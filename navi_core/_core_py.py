"""Pure-Python twin of ``csrc/_core.pyx``: the same names, signatures and results.

It is the reference implementation and the typing source of truth. The code lives in
seven modules, each mirrored file for file and name for name by an include of the
compiled core: ``_framing_py`` (SSE framing) ↔ ``csrc/_framing.pxi``, ``_sse_py`` (the
chat and Messages delta parsers) ↔ ``csrc/_sse.pxi``, ``_responses_py`` (the Responses
parser) ↔ ``csrc/_responses.pxi``, ``_text_py`` (token estimate, base64, tool calls written as text) ↔
``csrc/_text.pxi``, ``_assemble_py`` (delta tuples to events) ↔
``csrc/_assemble.pxi``, ``_pump_py`` (the hot path of ``Stream.next``) ↔
``csrc/_pump.pxi``, ``_gil_py`` (socket calls that never wait, thread hand-offs) ↔
``csrc/_gil.pxi``. The compiled core's C-only fast paths are ``csrc/_fast_*.pxi``.

``__all__`` below is the one list of the core's names: ``navi_core.core`` takes them
from whichever core loads by it, and tests/core/test_selection.py checks that the
compiled core and its stub ``_core.pyi`` have exactly these.
"""

from __future__ import annotations

from ._assemble_py import Assembler
from ._framing_py import Dechunker, SSEDecoder, SSEEvent
from ._gil_py import Signal, hand_off, readable, recv_ready, send_ready
from ._pump_py import Reader, next_event, next_or_stop, produce
from ._responses_py import OpenAIResponsesParser
from ._sse_py import AnthropicParser, OpenAIChatParser
from ._text_py import TextCalls, b64encode, estimate_tokens

__all__ = [
    "AnthropicParser",
    "Assembler",
    "Dechunker",
    "OpenAIChatParser",
    "OpenAIResponsesParser",
    "Reader",
    "SSEDecoder",
    "SSEEvent",
    "Signal",
    "TextCalls",
    "b64encode",
    "estimate_tokens",
    "hand_off",
    "next_event",
    "next_or_stop",
    "produce",
    "readable",
    "recv_ready",
    "send_ready",
]

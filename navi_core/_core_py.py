"""Pure-Python twin of ``csrc/_core.pyx``: the same names, signatures and results.

It is the reference implementation and the typing source of truth. The code lives in
``_sse_py`` (SSE framing and the provider delta parsers) and ``_text_py`` (token
estimate and base64), mirrored by ``csrc/_sse.pxi`` and ``csrc/_text.pxi``.
"""

from __future__ import annotations

from ._sse_py import AnthropicParser, OpenAIChatParser, SSEDecoder, SSEEvent
from ._text_py import b64encode, estimate_tokens

__all__ = [
    "AnthropicParser",
    "OpenAIChatParser",
    "SSEDecoder",
    "SSEEvent",
    "b64encode",
    "estimate_tokens",
]

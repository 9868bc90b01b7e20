"""Chooses the core implementation: the compiled ``_core`` or its pure twin ``_core_py``.

``NAVI_CORE_PURE`` (1/true/yes/on) forces the twin; so does any interpreter other than
CPython. ``IMPLEMENTATION`` is "cython" or "python". Everything else in navi_core imports
the core through this module only.
"""

from __future__ import annotations

import os
import platform
from typing import TYPE_CHECKING, Final

__all__ = [
    "IMPLEMENTATION",
    "AnthropicParser",
    "OpenAIChatParser",
    "OpenAIResponsesParser",
    "SSEDecoder",
    "SSEEvent",
    "b64encode",
    "estimate_tokens",
]

_TRUTHY: Final = frozenset({"1", "true", "yes", "on"})
FORCE_PURE: Final[bool] = (
    os.environ.get("NAVI_CORE_PURE", "").strip().lower() in _TRUTHY
    or platform.python_implementation() != "CPython"
)

if TYPE_CHECKING or FORCE_PURE:
    from ._core_py import (
        AnthropicParser,
        OpenAIChatParser,
        OpenAIResponsesParser,
        SSEDecoder,
        SSEEvent,
        b64encode,
        estimate_tokens,
    )

    IMPLEMENTATION: str = "python"
else:
    try:
        from ._core import (
            AnthropicParser,
            OpenAIChatParser,
            OpenAIResponsesParser,
            SSEDecoder,
            SSEEvent,
            b64encode,
            estimate_tokens,
        )

        IMPLEMENTATION = "cython"
    except ImportError:  # pragma: no cover - depends on the build
        from ._core_py import (
            AnthropicParser,
            OpenAIChatParser,
            OpenAIResponsesParser,
            SSEDecoder,
            SSEEvent,
            b64encode,
            estimate_tokens,
        )

        IMPLEMENTATION = "python"

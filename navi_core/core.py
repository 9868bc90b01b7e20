"""Chooses the core implementation: the compiled ``_core`` or its pure twin ``_core_py``.

``NAVI_CORE_PURE`` (1/true/yes/on) forces the twin; so does any interpreter other than
CPython. ``IMPLEMENTATION`` is "cython" or "python". Everything else in navi_core imports
the core through this module only.

An extension that is not built falls back to the twin quietly (an install without a
compiler); one that is present but fails to load (corrupt, built for another Python)
falls back with an ``ExtensionFallbackWarning`` naming the failure, and
``EXTENSION_ERROR`` keeps it. ``NAVI_CORE_REQUIRE_EXTENSION`` (1/true/yes/on) turns
either fallback into an ``ImportError``.
"""

from __future__ import annotations

import os
import platform
import warnings
from typing import TYPE_CHECKING, Final

__all__ = [
    "EXTENSION_ERROR",
    "IMPLEMENTATION",
    "REQUIRE_EXTENSION",
    "ExtensionFallbackWarning",
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

_TRUTHY: Final = frozenset({"1", "true", "yes", "on"})
FORCE_PURE: Final[bool] = (
    os.environ.get("NAVI_CORE_PURE", "").strip().lower() in _TRUTHY
    or platform.python_implementation() != "CPython"
)
REQUIRE_EXTENSION: Final[bool] = (
    os.environ.get("NAVI_CORE_REQUIRE_EXTENSION", "").strip().lower() in _TRUTHY
)


class ExtensionFallbackWarning(RuntimeWarning):
    """The compiled core is present but did not load; the pure twin runs instead."""


EXTENSION_ERROR: str | None = None
"""Why the compiled core did not load, when it is present but broken; else None."""

if TYPE_CHECKING or FORCE_PURE:
    from ._core_py import (
        AnthropicParser,
        Assembler,
        OpenAIChatParser,
        OpenAIResponsesParser,
        Reader,
        SSEDecoder,
        SSEEvent,
        b64encode,
        estimate_tokens,
        next_event,
        next_or_stop,
        produce,
        readable,
        recv_ready,
        send_ready,
    )

    IMPLEMENTATION: str = "python"
else:
    try:
        from ._core import (
            AnthropicParser,
            Assembler,
            OpenAIChatParser,
            OpenAIResponsesParser,
            Reader,
            SSEDecoder,
            SSEEvent,
            b64encode,
            estimate_tokens,
            next_event,
            next_or_stop,
            produce,
            readable,
            recv_ready,
            send_ready,
        )

        IMPLEMENTATION = "cython"
    except ImportError as exc:
        if REQUIRE_EXTENSION:
            raise ImportError(
                "NAVI_CORE_REQUIRE_EXTENSION is set but the compiled core "
                f"navi_core._core did not load: {exc}"
            ) from exc
        if (
            not isinstance(exc, ModuleNotFoundError)
            or exc.name != f"{__package__}._core"
        ):
            EXTENSION_ERROR = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"navi_core: the compiled core is present but did not load "
                f"({EXTENSION_ERROR}); using the pure-Python twin, which is slower",
                ExtensionFallbackWarning,
                stacklevel=2,
            )
        from ._core_py import (
            AnthropicParser,
            Assembler,
            OpenAIChatParser,
            OpenAIResponsesParser,
            Reader,
            SSEDecoder,
            SSEEvent,
            b64encode,
            estimate_tokens,
            next_event,
            next_or_stop,
            produce,
            readable,
            recv_ready,
            send_ready,
        )

        IMPLEMENTATION = "python"

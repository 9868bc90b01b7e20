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

import importlib
import os
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Final

from . import _core_py

# The core's names have one list, the twin's ``__all__``; both cores are taken by it.
__all__ = [
    "EXTENSION_ERROR",
    "IMPLEMENTATION",
    "REQUIRE_EXTENSION",
    "ExtensionFallbackWarning",
]
__all__ += _core_py.__all__

_TRUTHY: Final = frozenset({"1", "true", "yes", "on"})
FORCE_PURE: Final[bool] = (
    os.environ.get("NAVI_CORE_PURE", "").strip().lower() in _TRUTHY
    or sys.implementation.name != "cpython"  # as platform says, without importing it
)
REQUIRE_EXTENSION: Final[bool] = (
    os.environ.get("NAVI_CORE_REQUIRE_EXTENSION", "").strip().lower() in _TRUTHY
)


class ExtensionFallbackWarning(RuntimeWarning):
    """The compiled core is present but did not load; the pure twin runs instead."""


EXTENSION_ERROR: str | None = None
"""Why the compiled core did not load, when it is present but broken; else None."""


def _names(module: ModuleType) -> dict[str, object]:
    """The core's names as ``module`` defines them; ImportError when one is missing
    (as ``from module import name`` raises it)."""
    for name in _core_py.__all__:
        if not hasattr(module, name):
            raise ImportError(
                f"cannot import name {name!r} from {module.__name__!r} "
                f"({module.__file__})",
                name=module.__name__,
                path=module.__file__,
            )
    return {name: getattr(module, name) for name in _core_py.__all__}


if TYPE_CHECKING or FORCE_PURE:
    from ._core_py import *  # noqa: F403

    IMPLEMENTATION: str = "python"
else:
    try:
        globals().update(_names(importlib.import_module(f"{__package__}._core")))
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
        globals().update(_names(_core_py))
        IMPLEMENTATION = "python"

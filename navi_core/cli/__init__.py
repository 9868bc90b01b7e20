"""The ``navi-core`` command, also run as ``python -m navi_core``.

``main`` parses the arguments and runs one sub-command: ``demo`` (an offline turn),
``run`` (a turn against a real endpoint), ``sessions list|show`` and ``compact``. Each
lives in its own module; ``options`` holds the flags they share, ``console`` the
terminal rendering and ``_terminal_text`` the rule that shows text of models, tools and
servers without its control characters.
"""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["build_parser", "main"]

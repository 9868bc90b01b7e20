"""``python -m navi_core``: the ``navi-core`` command."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())

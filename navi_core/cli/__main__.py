"""``python -m navi_core.cli``: the same as ``navi-core``."""

from __future__ import annotations

from .main import main

raise SystemExit(main())

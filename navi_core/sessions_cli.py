"""Old name of ``navi_core.cli.options`` (the store flags), kept as an alias.

``import navi_core.sessions_cli`` gives the very module ``navi_core.cli.options``:
``add_store_arguments`` and ``store_from_args`` keep working under the old name, and
replacing ``store_from_args`` there (as a test does) changes what ``run`` and
``compact`` open. New code imports ``navi_core.cli.options``.
"""

from __future__ import annotations

import sys

from .cli import options

sys.modules[__name__] = options

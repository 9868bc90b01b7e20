"""Old name of ``navi_core.cli.options`` (the store flags), kept as an alias.

``import navi_core.sessions_cli`` gives the very module ``navi_core.cli.options``, so
code written against the old name, a test that replaces ``store_from_args`` included,
still reaches what every command uses. New code imports ``navi_core.cli.options``.
"""

from __future__ import annotations

import sys

from .cli import options

sys.modules[__name__] = options

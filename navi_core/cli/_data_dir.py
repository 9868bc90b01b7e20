"""Where the commands keep sessions when no flag or variable names a store."""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_data_path

__all__ = ["default_db"]

APP_NAME = "navi-core"


def default_db() -> Path:
    """``navi.db`` in the user's data directory (platformdirs; on Linux
    ``$XDG_DATA_HOME/navi-core``), the directory created on first use, so sessions
    do not depend on the directory a command was started in."""
    folder = user_data_path(APP_NAME, appauthor=False)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "navi.db"

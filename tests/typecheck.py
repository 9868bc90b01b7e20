"""``mypy --strict`` on user files, run in a scratch directory so it finds
``navi_core`` the way a user's checker does: through the installed package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def mypy(tmp_path: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            *map(str, files),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )

"""The public surface type-checks in user code under ``mypy --strict``.

mypy runs in a scratch directory, so it finds ``navi_core`` the way a user's checker
does: through the installed package (an editable install included).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typecheck import mypy

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mypy", reason="the typing tests need mypy (the test extra)")


def quickstart() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README's Quickstart has no python block"
    return match.group(1)


def test_the_readme_quickstart_and_the_surface_pass_mypy_strict(
    tmp_path: Path,
) -> None:
    user = tmp_path / "quickstart.py"
    user.write_text(quickstart(), encoding="utf-8")
    surface = tmp_path / "surface.py"
    surface.write_text((ROOT / "tests" / "typing" / "surface.py").read_text())
    result = mypy(tmp_path, user, surface)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_use_is_reported(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from navi_core import Agent, Scripted, TextDelta\n"
        "stream = Agent(Scripted([])).run('x')\n"
        "ev = stream.next()\n"
        "if isinstance(ev, TextDelta):\n"
        "    n: int = ev.text\n",
        encoding="utf-8",
    )
    result = mypy(tmp_path, wrong)
    assert result.returncode == 1
    assert 'Incompatible types in assignment (expression has type "str"' in (
        result.stdout
    )

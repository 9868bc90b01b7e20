"""A corrupt compiled core is said out loud, never silently replaced by the twin.

Before the fix a broken ``_core`` extension fell back to the pure twin without a word.
Now the fallback warns (``ExtensionFallbackWarning``), ``EXTENSION_ERROR`` says why,
``IMPLEMENTATION`` is "python", and ``NAVI_CORE_REQUIRE_EXTENSION=1`` makes it fatal.
Each case imports a copy of the package whose extension is garbage, in a subprocess.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import navi_core

PACKAGE = Path(navi_core.__file__).resolve().parent
PROBE = (
    "import navi_core.core as c; "
    "print(c.IMPLEMENTATION); print(c.EXTENSION_ERROR is not None)"
)


def _copy(tmp_path: Path, *, corrupt: bool) -> Path:
    """A copy of navi_core without its extension, or with a corrupt one."""
    target = tmp_path / "navi_core"
    shutil.copytree(
        PACKAGE,
        target,
        ignore=shutil.ignore_patterns("_core.*.so", "_core.*.pyd", "__pycache__"),
    )
    if corrupt:
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        (target / f"_core{suffix}").write_bytes(b"\x7fELF this is not a library" * 40)
    return tmp_path


def _import(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NAVI_CORE_")}
    return subprocess.run(
        [sys.executable, "-W", "default", "-c", PROBE],
        env={**clean, "PYTHONPATH": str(root), **env},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_corrupt_extension_warns_and_says_python(tmp_path: Path) -> None:
    result = _import(_copy(tmp_path, corrupt=True))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["python", "True"]
    assert "ExtensionFallbackWarning" in result.stderr
    assert "compiled core is present but did not load" in result.stderr


def test_corrupt_extension_is_fatal_when_required(tmp_path: Path) -> None:
    result = _import(_copy(tmp_path, corrupt=True), NAVI_CORE_REQUIRE_EXTENSION="1")
    assert result.returncode != 0
    assert "NAVI_CORE_REQUIRE_EXTENSION is set" in result.stderr
    assert "did not load" in result.stderr


def test_missing_extension_falls_back_quietly(tmp_path: Path) -> None:
    result = _import(_copy(tmp_path, corrupt=False))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["python", "False"]
    assert "Warning" not in result.stderr


def test_missing_extension_is_fatal_when_required(tmp_path: Path) -> None:
    result = _import(_copy(tmp_path, corrupt=False), NAVI_CORE_REQUIRE_EXTENSION="1")
    assert result.returncode != 0
    assert "NAVI_CORE_REQUIRE_EXTENSION is set" in result.stderr


def test_pure_flag_still_wins(tmp_path: Path) -> None:
    if sys.implementation.name != "cpython":
        pytest.skip("the twin is forced on other interpreters")
    result = _import(_copy(tmp_path, corrupt=True), NAVI_CORE_PURE="1")
    assert result.stdout.split() == ["python", "False"]
    assert "Warning" not in result.stderr

"""Packaging: the Cython core is optional unless required, and the twin always ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _copy_source(dest: Path) -> Path:
    src = dest / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git",
            "build",
            "*.so",
            "*.c",
            "__pycache__",
            ".*cache",
            "*.egg-info",
            "tests",
            "bench",
            "*.db*",
        ),
    )
    return src


def _wheel(src: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NAVI_CORE_")}
    full_env.update(env)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_without_a_compiler_the_install_falls_back_to_the_twin(tmp_path):
    src = _copy_source(tmp_path)
    result = _wheel(src, tmp_path / "dist", CC="false", LDSHARED="false")
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "navi_core/_core_py.py" in names and "navi_core/py.typed" in names
    assert not [
        n
        for n in names
        if n.startswith("navi_core/_core.") and n.endswith((".so", ".pyd"))
    ]


def test_a_required_extension_that_cannot_build_fails_the_install(tmp_path):
    src = _copy_source(tmp_path)
    result = _wheel(
        src,
        tmp_path / "dist",
        CC="false",
        LDSHARED="false",
        NAVI_CORE_REQUIRE_EXTENSION="1",
    )
    assert result.returncode != 0
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_pure_build_flag_skips_the_extension(tmp_path):
    src = _copy_source(tmp_path)
    result = _wheel(src, tmp_path / "dist", NAVI_CORE_PURE="yes")
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert not [
        n for n in zipfile.ZipFile(wheel).namelist() if n.endswith((".so", ".pyd"))
    ]

"""Packaging: the Cython core is optional unless required, and the twin always ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

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


def _env(**env: str) -> dict[str, str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NAVI_CORE_")}
    full_env.update(env)
    return full_env


def _pip(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _wheel(src: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return _pip(
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(out),
        str(src),
        **env,
    )


def _extension_files(names: list[str]) -> list[str]:
    return [
        n
        for n in names
        if n.startswith("navi_core/_core.") and n.endswith((".so", ".pyd"))
    ]


def test_without_a_compiler_the_install_falls_back_to_the_twin(tmp_path: Path) -> None:
    src = _copy_source(tmp_path)
    result = _wheel(src, tmp_path / "dist", CC="false", LDSHARED="false")
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "navi_core/_core_py.py" in names and "navi_core/py.typed" in names
    assert "navi_core/serve/chat.html" in names  # the page navi-core serve shows
    assert not _extension_files(names)


def test_a_required_extension_that_cannot_build_fails_the_install(
    tmp_path: Path,
) -> None:
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


def test_pure_build_flag_skips_the_extension(tmp_path: Path) -> None:
    src = _copy_source(tmp_path)
    result = _wheel(src, tmp_path / "dist", NAVI_CORE_PURE="yes")
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert not [
        n for n in zipfile.ZipFile(wheel).namelist() if n.endswith((".so", ".pyd"))
    ]


def _break_cython_source(src: Path) -> None:
    (src / "csrc" / "_core.pyx").write_text("def broken(:\n")


def test_a_cythonize_failure_falls_back_to_the_twin(tmp_path: Path) -> None:
    src = _copy_source(tmp_path)
    _break_cython_source(src)
    result = _wheel(src, tmp_path / "dist")
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "navi_core/_core_py.py" in names and not _extension_files(names)


def test_a_required_extension_that_cannot_cythonize_fails_the_install(
    tmp_path: Path,
) -> None:
    src = _copy_source(tmp_path)
    _break_cython_source(src)
    result = _wheel(src, tmp_path / "dist", NAVI_CORE_REQUIRE_EXTENSION="1")
    assert result.returncode != 0
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_an_editable_install_is_a_path_that_type_checkers_can_follow(
    tmp_path: Path,
) -> None:
    # setuptools' default for a flat layout is an import hook, which mypy and pyright
    # cannot run; pyproject.toml's package-dir makes it a plain path instead
    src = _copy_source(tmp_path)
    out = tmp_path / "dist"
    out.mkdir()
    hook = (
        "import sys; from setuptools import build_meta;"
        "print('WHEEL=' + build_meta.build_editable(sys.argv[1]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", hook, str(out)],
        cwd=src,
        env=_env(NAVI_CORE_PURE="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (name,) = [
        line[6:] for line in result.stdout.splitlines() if line.startswith("WHEEL=")
    ]
    names = zipfile.ZipFile(out / name).namelist()
    (pth,) = [n for n in names if n.endswith(".pth")]
    lines = zipfile.ZipFile(out / name).read(pth).decode().splitlines()
    assert [Path(line).resolve() for line in lines] == [src.resolve()]
    assert not [n for n in names if n.endswith(".py")]  # no finder module


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sdist built from a copy of the tree, as a release would be."""
    tmp = tmp_path_factory.mktemp("sdist")
    src = _copy_source(tmp)
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp / "dist")],
        cwd=src,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (archive,) = (tmp / "dist").glob("*.tar.gz")
    return archive


def test_the_sdist_carries_the_cython_sources_not_the_generated_c(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    pxi = {p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").glob("*.pxi")}
    assert pxi and pxi <= names
    assert {
        "csrc/_core.pyx",
        "README.md",
        "navi_core/py.typed",
        "navi_core/_core.pyi",
        "navi_core/_core_py.py",
        "navi_core/serve/chat.html",
    } <= names
    assert not [n for n in names if n.endswith(".c")]


def _install(sdist: Path, target: Path, **env: str) -> str:
    """Install ``sdist`` into ``target``; return the IMPLEMENTATION it then loads."""
    result = _pip(
        "install", "--no-build-isolation", "--no-deps", "--no-cache-dir", "-q",
        "--target", str(target),
        str(sdist), **env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert (target / "navi_core" / "_core_py.py").is_file()
    # -S: no .pth files, so no editable install of the checkout can answer imports;
    # the runtime dependencies are found where this interpreter finds them (a venv
    # with system site-packages keeps them outside its own purelib).
    import httpx
    import orjson
    import PIL

    files = [m.__file__ for m in (httpx, orjson, PIL)]
    assert None not in files, "a runtime dependency is a namespace package"
    deps = {str(Path(f).resolve().parents[1]) for f in files if f is not None}
    paths = [
        str(target),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        *sorted(deps),
    ]
    probe = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import navi_core.core as c, sys;"
            "print(c.IMPLEMENTATION, sys.modules[c.SSEDecoder.__module__].__file__)",
        ],
        cwd=target.parent,
        env=_env(PYTHONPATH=os.pathsep.join(paths)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    implementation, where = probe.stdout.split()
    assert Path(where).is_relative_to(target)
    return implementation


def test_the_sdist_installs_with_the_extension(sdist: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    assert _install(sdist, target) == "cython"
    assert _extension_files(
        [p.relative_to(target).as_posix() for p in target.rglob("*")]
    )


def test_the_sdist_installs_on_the_twin_without_a_compiler(
    sdist: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    assert _install(sdist, target, CC="false", LDSHARED="false") == "python"
    assert not _extension_files(
        [p.relative_to(target).as_posix() for p in target.rglob("*")]
    )

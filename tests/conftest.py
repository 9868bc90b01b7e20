"""Shared fixtures: the two core implementations and a loopback HTTP server."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from loopback import LoopbackServer
from sqlite_watch import SQLiteWatch

_TESTS = Path(__file__).resolve().parent
#: where a test fails when it leaves a SQLite connection open ("": tests/ itself)
_CLOSE_SQLITE = frozenset({"", "compaction", "core", "media", "providers", "tools"})


def _load(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # the extension is not built here
        pytest.skip(f"compiled core not built: {exc}")


@pytest.fixture(
    params=[
        pytest.param("navi_core._core_py", id="py"),
        pytest.param("navi_core._core", id="cy", marks=pytest.mark.cython),
    ]
)
def core(request: pytest.FixtureRequest) -> ModuleType:
    """Each core test runs once against the pure twin and once against Cython."""
    return _load(request.param)


@pytest.fixture(scope="session")
def both_cores() -> tuple[ModuleType, ModuleType]:
    """(python, cython) for differential tests; skipped visibly without the extension."""
    return _load("navi_core._core_py"), _load("navi_core._core")


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    """A real HTTP/1.1 server on 127.0.0.1 replying from a script (see loopback.py)."""
    with LoopbackServer() as server:
        yield server


@pytest.fixture(autouse=True)
def sqlite_closed(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a SQLite connection open, on every Python, naming
    where it was opened (3.13 warns only once the connection is collected, maybe in
    a later test; earlier versions close it silently)."""
    where = request.path.resolve().parent.relative_to(_TESTS).parts
    if (where[0] if where else "") not in _CLOSE_SQLITE:
        yield
        return
    with SQLiteWatch() as watch:
        yield
    left = watch.left_open()
    if left:
        watch.close_all()
        pytest.fail(f"SQLite connections left open, opened at: {', '.join(left)}")

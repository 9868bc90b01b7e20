"""Shared fixtures: the two core implementations and a loopback HTTP server."""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from echo_proxy import PROXY_VARIABLES, serving
from loopback import LoopbackServer
from sqlite_watch import SQLiteWatch

from navi_core import SQLiteStore

# The commands keep sessions in the user's data directory by default: the tests, and the
# commands they start, get a throwaway one instead of the real one.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="navi-test-data-")
os.environ.pop("NAVI_DB", None)


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


@pytest.fixture
def sqlite_stores(tmp_path: Path) -> Iterator[Callable[..., SQLiteStore]]:
    """``make(path=tmp_path / "s.db")``: a ``SQLiteStore``, closed after the test (an
    ``Agent`` never closes a store it was given)."""
    made: list[SQLiteStore] = []

    def make(path: Path | str | None = None) -> SQLiteStore:
        store = SQLiteStore(tmp_path / "s.db" if path is None else path)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture(autouse=True)
def sqlite_closed(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a SQLite connection open, on every Python, naming
    where it was opened (3.13 warns only once the connection is collected, maybe in
    a later test; earlier versions close it silently)."""
    with SQLiteWatch() as watch:
        yield
    left = watch.left_open()
    if left:
        watch.close_all()
        pytest.fail(f"SQLite connections left open, opened at: {', '.join(left)}")


@pytest.fixture
def echo_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL, with ``user:pass`` in it, of a loopback proxy that refuses every
    request and echoes the credentials it was sent (``echo_proxy.py``); no proxy
    variable of the environment is left set."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with serving() as url:
        yield url

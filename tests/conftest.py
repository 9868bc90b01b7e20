"""Shared fixtures: the two core implementations and a loopback HTTP server."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import pytest
from loopback import LoopbackServer


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

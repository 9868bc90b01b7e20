"""Shared fixtures: the two core implementations."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


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

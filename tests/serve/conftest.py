"""Fixtures of the serve tests: the fake model, a workspace, served SQLite instances."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import servekit
from fake_model import FakeModel
from servekit import Client, Served


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[None]:
    """A failed test's report ends with the last lines of every running server's log:
    a worker that died or a request it refused says so there."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed:
        for log in servekit.LOGS:
            text = log.read_text(errors="replace") if log.exists() else ""
            tail = "\n".join(text.splitlines()[-60:]) or "(empty)"
            report.sections.append((f"serve log {log.name}", tail))


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeModel]:
    with FakeModel() as model:
        yield model


@pytest.fixture(scope="module")
def served_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve")
    ws = root / "workspace"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello there\n")
    return root


def model_args(model: FakeModel, root: Path) -> list[str]:
    return [
        "--model",
        "fake-model",
        "--base-url",
        model.url,
        "--workspace",
        str(root / "workspace"),
    ]


@pytest.fixture(scope="module")
def served(fake_model: FakeModel, served_dir: Path) -> Iterator[Served]:
    """Two gthread workers of four threads on one SQLite file."""
    args = [*model_args(fake_model, served_dir), "--db", str(served_dir / "s.db")]
    args += ["--workers", "2", "--threads", "4", "--max-body", "4096", "--grace", "1"]
    with Served.start(served_dir, args) as s:
        yield s


@pytest.fixture
def client(served: Served) -> Iterator[Client]:
    c = served.client()
    yield c
    c.close()

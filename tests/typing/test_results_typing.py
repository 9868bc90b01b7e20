"""Typed one-call results in user code under ``mypy --strict``: ``results.py`` beside
this file, and the structured-output examples of the docs, type-check; reading a
``City`` output as something else is reported."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typecheck import mypy

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mypy", reason="the typing tests need mypy (the test extra)")


def doc_blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_typed_results_and_the_docs_examples_pass_mypy_strict(tmp_path: Path) -> None:
    files = [tmp_path / "results.py"]
    files[0].write_text((Path(__file__).parent / "results.py").read_text())
    pages = ["docs/concepts/structured-output.md", "docs/concepts/stream.md"]
    for n, block in enumerate(b for page in pages for b in doc_blocks(page)):
        files.append(tmp_path / f"doc_{n}.py")
        files[-1].write_text(block, encoding="utf-8")
    # a wrong reading of the typed output, the reason a typed result exists
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from dataclasses import dataclass\n"
        "from navi_core import Agent, Scripted\n"
        "@dataclass\n"
        "class City:\n"
        "    name: str\n"
        "city = Agent(Scripted([])).ask('x', output=City).output\n"
        "n: int = city.name if city is not None else 0  # str | int\n",
        encoding="utf-8",
    )
    result = mypy(tmp_path, *files, wrong)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert all(line.startswith("wrong.py:") for line in lines), result.stdout
    assert any('expression has type "str | int"' in line for line in lines), (
        result.stdout
    )

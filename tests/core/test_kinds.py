"""The delta and block kind numbers have one home, ``navi_core._deltas``: the pure core
imports them, and the compiled core, which holds them as C constants, refuses to load
when its own differ."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from navi_core import _deltas as D
from navi_core.events import (
    ModelInfo,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)

ROOT = Path(__file__).resolve().parents[2]
EVENTS = (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ModelInfo)


def _error(kind: Any, message: Any) -> BaseException:
    return RuntimeError(kind, message)


def test_the_kinds_are_distinct() -> None:
    deltas = [D.TEXT, D.THINKING, D.SIGNATURE, D.REDACTED_THINKING, D.TOOL_START]
    deltas += [D.TOOL_ARGS, D.FINISH, D.USAGE, D.MODEL, D.ERROR, D.DONE]
    deltas += [D.REASONING_ITEM]
    blocks = [D.BLOCK_TEXT, D.BLOCK_THINKING, D.BLOCK_SEALED_THINKING]
    blocks += [D.BLOCK_REDACTED, D.BLOCK_TOOL]
    assert len(set(deltas)) == len(deltas)
    assert len(set(blocks)) == len(blocks)


def test_the_assembler_speaks_the_kinds(core: ModuleType) -> None:
    asm = core.Assembler(EVENTS, _error)
    asm.feed(
        [
            (D.MODEL, "m"),
            (D.THINKING, "hm"),
            (D.TEXT, "hi"),
            (D.THINKING, "so"),
            (D.SIGNATURE, "sig"),
            (D.REDACTED_THINKING, "data"),
            (D.TOOL_START, 0, "c1", "f"),
            (D.TOOL_ARGS, 0, "{}"),
            (D.FINISH, "stop"),
            (D.USAGE, 1, 2, 3, 4, 5),
            (D.DONE,),
        ],
        lambda event: None,
    )
    assert asm.blocks() == [
        (D.BLOCK_THINKING, "hm", None),
        (D.BLOCK_TEXT, "hi", None),
        (D.BLOCK_SEALED_THINKING, "so", "sig"),
        (D.BLOCK_REDACTED, "", "data"),
        (D.BLOCK_TOOL, "{}", ("c1", "f")),
    ]
    assert asm.done and asm.finish_reason == "stop" and asm.model == "m"
    assert asm.usage == (1, 2, 3, 4, 5)


@pytest.mark.cython
def test_the_compiled_core_refuses_other_kinds() -> None:
    try:
        import navi_core._core  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"compiled core not built: {exc}")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NAVI_CORE_")}
    code = (
        "import navi_core._deltas as d\n"
        "d.BLOCK_TOOL = 7\n"
        "try:\n"
        "    import navi_core._core\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "NAVI_CORE_PURE": "1"},  # navi_core's import leaves _core alone
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert (
        result.stdout.strip() == "navi_core._deltas kinds differ from the compiled core"
    )

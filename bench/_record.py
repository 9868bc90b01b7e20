"""What a bench script measured, kept as JSON (``--json FILE``) for the docs' tables.

A script calls ``add_option(parser)``, then ``start(args)`` after parsing, and
``table(...)``/``goal(...)`` beside what it prints; the file is written when the
script ends. ``docs/_hooks.py`` renders a ``<!-- bench-results: FILE.json -->``
marker from it, so the numbers on the site are the ones a run printed, together with
the command that printed them.
"""

from __future__ import annotations

import argparse
import atexit
import os
import platform
import shlex
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

__all__ = ["add_option", "goal", "start", "table"]

_record: dict[str, Any] | None = None


def add_option(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the ``--json FILE`` option."""
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="also write what this run measured as JSON (the docs' tables)",
    )


def start(args: argparse.Namespace) -> None:
    """Begin recording when ``--json`` was given; the file is written at exit."""
    global _record
    path = getattr(args, "json", None)
    if not path:
        return
    from navi_core.core import IMPLEMENTATION

    script = Path(sys.argv[0]).name
    argv = _without_json(sys.argv[1:])
    _record = {
        "script": script,
        "command": shlex.join(["python", f"bench/{script}", *argv]),
        "core": IMPLEMENTATION,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "tables": [],
        "goals": [],
    }
    atexit.register(_write, Path(path))


def table(
    title: str, columns: Sequence[str], rows: Iterable[Sequence[object]], note: str = ""
) -> None:
    """Keep one table: ``columns`` heads, ``rows`` of cells (formatted as printed)."""
    if _record is None:
        return
    cells = [[_cell(value) for value in row] for row in rows]
    _record["tables"].append(
        {"title": title, "columns": list(columns), "rows": cells, "note": note}
    )


def goal(text: str, met: bool) -> None:
    """Keep one goal line and whether this run met it."""
    if _record is not None:
        _record["goals"].append({"goal": text, "met": bool(met)})


def _cell(value: object) -> str:
    return value if isinstance(value, str) else format(value, ",.3g")


def _without_json(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--json":
            skip = True
        elif not arg.startswith("--json="):
            out.append(arg)
    return out


def _write(path: Path) -> None:
    if _record is not None and _record["tables"]:
        path.write_bytes(orjson.dumps(_record, option=orjson.OPT_INDENT_2) + b"\n")

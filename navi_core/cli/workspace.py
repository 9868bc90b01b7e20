"""File tools confined to one folder: what ``run --workspace`` and ``demo`` give the model."""

from __future__ import annotations

from pathlib import Path

from ..tools._tool import Tool, tool

__all__ = ["workspace_tools"]


def workspace_tools(root: Path) -> list[Tool]:
    """Three real tools confined to ``root``: list a directory, read a file, count words.

    A path that resolves outside ``root`` (``..``, an absolute path, a symlink out) is
    refused with ``PermissionError``, which the model reads as the call's error result.
    """

    def resolve(path: str) -> Path:
        target = (root / path).resolve()
        if root.resolve() not in (target, *target.parents):
            raise PermissionError(f"{path!r} is outside the workspace")
        return target

    @tool
    def list_dir(path: str = ".") -> list[str]:
        """List the entries of a directory in the workspace.

        Args:
            path: directory relative to the workspace root.
        """
        return sorted(
            p.name + ("/" if p.is_dir() else "") for p in resolve(path).iterdir()
        )

    @tool
    def read_file(path: str, max_chars: int = 4000) -> str:
        """Read a text file from the workspace.

        Args:
            path: file relative to the workspace root.
            max_chars: read at most this many characters.
        """
        with resolve(path).open(encoding="utf-8", errors="replace") as f:
            return f.read(max_chars)

    @tool
    def word_count(path: str) -> dict[str, int]:
        """Count lines, words and characters of a text file in the workspace.

        Args:
            path: file relative to the workspace root.
        """
        text = resolve(path).read_text(encoding="utf-8")
        return {
            "lines": text.count("\n"),
            "words": len(text.split()),
            "chars": len(text),
        }

    return [list_dir, read_file, word_count]

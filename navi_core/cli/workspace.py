"""File tools confined to one folder: what ``run --workspace`` and ``demo`` give the model.

Only regular files are read. A FIFO blocks a reader until something writes to it and a
device such as ``/dev/zero`` never ends, so each is refused before it is opened, and
again after: the file is opened without blocking and checked once more, so one swapped
in between cannot block either. Reads stream under caps, whatever the model asks:
``read_file`` returns at most ``MAX_READ_CHARS`` characters, ``word_count`` reads
``CHUNK_BYTES`` at a time and at most ``MAX_COUNT_BYTES``.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final

from ..tools._tool import Tool, tool

__all__ = [
    "CHUNK_BYTES",
    "MAX_COUNT_BYTES",
    "MAX_READ_CHARS",
    "workspace_tools",
]

#: the most characters one ``read_file`` call returns
MAX_READ_CHARS: Final = 100_000
#: the largest file ``word_count`` counts
MAX_COUNT_BYTES: Final = 64 * 1024 * 1024
#: how much ``word_count`` reads at a time
CHUNK_BYTES: Final = 64 * 1024

_OPEN_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # opening a FIFO waits for a writer without it
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_NOFOLLOW", 0)  # the path was resolved: a symlink now is a swap
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_SPECIAL: Final = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_special(mode: int, shown: str) -> None:
    """Raise unless ``mode`` is a regular file's, saying what the path is instead."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{shown!r} is a directory: list it with list_dir")
    kind = next((words for test, words in _SPECIAL if test(mode)), "a special file")
    raise ValueError(
        f"{shown!r} is {kind}, not a regular file: only regular files can be read"
    )


def _open_regular(target: Path, shown: str) -> tuple[BinaryIO, int]:
    """``target`` opened for reading and its size in bytes, if it is a regular file."""
    try:
        _refuse_special(os.stat(target).st_mode, shown)  # a device is never opened
        fd = os.open(target, _OPEN_FLAGS)
    except FileNotFoundError:
        raise FileNotFoundError(f"{shown!r} does not exist in the workspace") from None
    try:
        info = os.fstat(fd)
        _refuse_special(info.st_mode, shown)  # what was opened, if swapped since
        return open(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise


def _too_big(shown: str, size: int) -> ValueError:
    return ValueError(
        f"{shown!r} is {size} bytes; word_count counts files of at most "
        f"{MAX_COUNT_BYTES} bytes (read_file reads the start of any file)"
    )


def workspace_tools(root: Path) -> list[Tool]:
    """Three real tools confined to ``root``: list a directory, read a file, count words.

    A path that resolves outside ``root`` (``..``, an absolute path, a symlink out) is
    refused with ``PermissionError``, a FIFO, device or socket with ``ValueError``,
    which the model reads as the call's error result.
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
        """Read the start of a text file from the workspace.

        Args:
            path: file relative to the workspace root.
            max_chars: read at most this many characters (100000 at most).
        """
        limit = MAX_READ_CHARS if max_chars < 0 else min(max_chars, MAX_READ_CHARS)
        raw, _ = _open_regular(resolve(path), path)
        with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as f:
            return f.read(limit)

    @tool
    def word_count(path: str) -> dict[str, int]:
        """Count lines, words and characters of a text file in the workspace.

        Args:
            path: file relative to the workspace root.
        """
        raw, size = _open_regular(resolve(path), path)
        with raw:
            if size > MAX_COUNT_BYTES:
                raise _too_big(path, size)
            return _count(raw, path)

    return [list_dir, read_file, word_count]


def _count(raw: BinaryIO, shown: str) -> dict[str, int]:
    """Lines, words and characters of UTF-8 text, as ``str.count("\\n")``,
    ``len(str.split())`` and ``len`` give them for the whole text read with universal
    newlines, in chunks: memory stays ``CHUNK_BYTES``-sized whatever the file holds."""
    decoder = io.IncrementalNewlineDecoder(
        codecs.getincrementaldecoder("utf-8")(), translate=True
    )
    lines = words = chars = done = 0
    in_word = False  # the text so far ends inside a word
    while True:
        data = raw.read(CHUNK_BYTES)
        done += len(data)
        if done > MAX_COUNT_BYTES:  # the file grew since it was measured
            raise _too_big(shown, done)
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise ValueError(
                f"{shown!r} is not UTF-8 text: word_count counts words of text files"
            ) from None
        if text:
            lines += text.count("\n")
            chars += len(text)
            n = len(text.split())
            if in_word and n and not text[0].isspace():
                n -= 1  # the first word goes on from the previous chunk
            words += n
            in_word = not text[-1].isspace()
        if not data:
            return {"lines": lines, "words": words, "chars": chars}

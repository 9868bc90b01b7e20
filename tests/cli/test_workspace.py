"""The workspace file tools (``run/chat --workspace``): only regular files are read,
never a FIFO, device or socket; reads and counts stay within their caps."""

from __future__ import annotations

import functools
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import openai_body

from navi_core.cli.workspace import (
    CHUNK_BYTES,
    MAX_COUNT_BYTES,
    MAX_READ_CHARS,
    workspace_tools,
)
from navi_core.tools import Tool

posix_only = pytest.mark.skipif(
    not hasattr(os, "mkfifo"), reason="FIFOs are POSIX-only"
)


def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(root)}


def outcome(call: Callable[[], Any], seconds: float = 5.0) -> Any:
    """What ``call`` returned or raised, failing the test if it has not ended in
    ``seconds`` (the thread is left behind: it is what a blocked tool call does)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(call())
        except Exception as exc:
            box.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"the call still blocks after {seconds} s"
    return box[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A named pipe in the workspace with no writer; released after the test so a
    reader that blocked on it (before the fix) ends."""
    path = tmp_path / "pipe"
    os.mkfifo(path)
    yield path
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no reader waits on it: nothing to release
        return
    os.close(fd)


@posix_only
@pytest.mark.parametrize("name", ["read_file", "word_count"])
def test_a_fifo_is_refused_at_once_and_never_blocks(
    fifo: Path, tmp_path: Path, name: str
) -> None:
    t = tools(tmp_path)[name]
    started = time.monotonic()
    got = outcome(lambda: t.invoke({"path": "pipe"}))
    assert time.monotonic() - started < 2.0
    assert isinstance(got, ValueError)
    assert "'pipe' is a named pipe (FIFO), not a regular file" in str(got)


@posix_only
def test_a_fifo_swapped_in_after_the_check_does_not_block_either(
    fifo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the check before opening sees the regular file that stood there a moment ago
    regular = tmp_path / "regular.txt"
    regular.write_text("hello\n")
    real_stat = os.stat

    def stat_before_the_swap(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if Path(path) == fifo:
            return real_stat(regular)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat_before_the_swap)
    t = tools(tmp_path)["read_file"]
    got = outcome(lambda: t.invoke({"path": "pipe"}))
    assert isinstance(got, ValueError) and "named pipe (FIFO)" in str(got)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_a_device_is_refused_before_it_is_read() -> None:
    dev = tools(Path("/dev"))
    got = outcome(lambda: dev["read_file"].invoke({"path": "zero"}))
    assert isinstance(got, ValueError)
    assert "'zero' is a character device, not a regular file" in str(got)
    got = outcome(lambda: dev["word_count"].invoke({"path": "null"}))
    assert isinstance(got, ValueError) and "character device" in str(got)


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")
def test_a_socket_file_is_refused_with_a_clear_reason(tmp_path: Path) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(tmp_path / "sock"))
        server.listen()
        for t in (tools(tmp_path)["read_file"], tools(tmp_path)["word_count"]):
            got = outcome(functools.partial(t.invoke, {"path": "sock"}))
            assert isinstance(got, ValueError)
            assert "'sock' is a socket, not a regular file" in str(got)
    finally:
        server.close()


def test_a_directory_or_a_missing_file_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    t = tools(tmp_path)
    got = outcome(lambda: t["read_file"].invoke({"path": "sub"}))
    assert isinstance(got, IsADirectoryError)
    assert str(got) == "'sub' is a directory: list it with list_dir"
    got = outcome(lambda: t["word_count"].invoke({"path": "nope.txt"}))
    assert isinstance(got, FileNotFoundError)
    assert str(got) == "'nope.txt' does not exist in the workspace"
    assert str(tmp_path) not in str(got)


def peak_bytes(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()`` and the most memory Python held meanwhile beyond what it held
    before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        value = call()
        return value, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("max_chars", [-1, 10**12])
def test_read_file_of_a_huge_file_stays_within_the_cap(
    tmp_path: Path, max_chars: int
) -> None:
    big = tmp_path / "big.bin"
    with big.open("wb") as f:
        f.truncate(300 * 1024 * 1024)  # sparse: 300 MB that take no disk
    t = tools(tmp_path)["read_file"]
    text, peak = peak_bytes(
        lambda: t.invoke({"path": "big.bin", "max_chars": max_chars})
    )
    assert text == "\0" * MAX_READ_CHARS
    assert peak < 8 * MAX_READ_CHARS + 2 * 1024 * 1024, peak
    assert t.invoke({"path": "big.bin", "max_chars": 5}) == "\0" * 5
    assert t.invoke({"path": "big.bin", "max_chars": 0}) == ""


def test_word_count_refuses_a_file_above_its_byte_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with big.open("wb") as f:
        f.truncate(300 * 1024 * 1024)
    t = tools(tmp_path)["word_count"]
    got, peak = peak_bytes(lambda: outcome(lambda: t.invoke({"path": "big.bin"})))
    assert isinstance(got, ValueError)
    assert str(got) == (
        f"'big.bin' is {300 * 1024 * 1024} bytes; word_count counts files of at "
        f"most {MAX_COUNT_BYTES} bytes (read_file reads the start of any file)"
    )
    assert peak < 2 * 1024 * 1024, peak


def test_word_count_streams_in_constant_memory_and_counts_as_one_read(
    tmp_path: Path,
) -> None:
    # chunk boundaries fall inside a word, a two-byte character and a CRLF pair
    raw = bytearray(b"x" * (CHUNK_BYTES - 2) + b"wo" + b"rd caf")
    raw += b" " * (2 * CHUNK_BYTES - 1 - len(raw)) + "\u00e9".encode()
    raw += b"b" * (3 * CHUNK_BYTES - 1 - len(raw)) + b"\r\n"
    line = "alpha beta  gamma\tdelta\u00a0epsilon\r\n".encode()
    raw += b"c\rd\n" + line * ((6 * 1024 * 1024) // len(line))
    (tmp_path / "words.txt").write_bytes(raw)
    whole = raw.decode().replace("\r\n", "\n").replace("\r", "\n")
    expected = {
        "lines": whole.count("\n"),
        "words": len(whole.split()),
        "chars": len(whole),
    }
    t = tools(tmp_path)["word_count"]
    counted, peak = peak_bytes(lambda: t.invoke({"path": "words.txt"}))
    assert counted == expected
    assert peak < 2 * 1024 * 1024, peak  # the file is over 6 MB


def test_word_count_of_text_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes(b"ok " * 30000 + b"caf\xe9\n")
    got = outcome(lambda: tools(tmp_path)["word_count"].invoke({"path": "latin1.txt"}))
    assert isinstance(got, ValueError)
    assert str(got).startswith("'latin1.txt' is not UTF-8 text")


def test_regular_files_still_read_and_count(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha beta gamma\nsecond line\n")
    t = tools(tmp_path)
    assert t["read_file"].invoke({"path": "notes.txt"}) == (
        "alpha beta gamma\nsecond line\n"
    )
    assert t["read_file"].invoke({"path": "notes.txt", "max_chars": 5}) == "alpha"
    assert t["word_count"].invoke({"path": "notes.txt"}) == {
        "lines": 2,
        "words": 5,
        "chars": 29,
    }
    assert stat.S_ISREG(os.stat(tmp_path / "notes.txt").st_mode)


@posix_only
def test_run_with_a_fifo_in_the_workspace_ends_with_the_refusal(
    loopback: LoopbackServer, tmp_path: Path, fifo: Path
) -> None:
    loopback.add(
        Reply.sse(openai_body(tool_calls=[("c1", "read_file", ['{"path": "pipe"}'])])),
        Reply.sse(openai_body(["It is a pipe."])),
    )
    env = {**os.environ, "OPENAI_API_KEY": "sk-workspace-test-0123456789"}
    env.pop("OPENAI_BASE_URL", None)
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "navi_core",
            "run",
            "What is in pipe?",
            "--model",
            "local-model",
            "--base-url",
            f"{loopback.url}/v1",
            "--db",
            str(tmp_path / "navi.db"),
            "--workspace",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 25
    assert "It is a pipe." in result.stdout
    _, second = loopback.requests
    tool_msg = second.json["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert "'pipe' is a named pipe (FIFO), not a regular file" in tool_msg["content"]

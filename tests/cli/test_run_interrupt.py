"""Ctrl-C during ``navi-core run``: a real process in a pseudo-terminal against a real
OpenAI-compatible server on loopback and a real SQLite file."""

from __future__ import annotations

import io
import itertools
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest
from loopback import LoopbackServer
from terminal_check import OWN_SGR
from test_chat import ROOT, chat_env, text_reply

from navi_core.cli.console import EventPrinter
from navi_core.conversation import Usage
from navi_core.events import (
    ResponseDiscarded,
    StopReason,
    TextDelta,
    ToolFinished,
    TurnComplete,
)
from navi_core.store.sqlite import SQLiteStore

SESSION = re.compile(r"session [0-9a-f]{12}\b")


def documented_sample() -> str:
    """What docs/commands/run.md shows under "Ctrl-C", without its command line and
    the ``^C`` the terminal echoes."""
    page = (ROOT / "docs" / "commands" / "run.md").read_text(encoding="utf-8")
    block = page.split("## Ctrl-C", 1)[1].split("```text\n", 1)[1].split("```")[0]
    command, _, shown = block.partition("\n")
    assert command.startswith('$ navi-core run "List the parts" '), command
    return shown.replace("^C", "")


def default_sigint() -> None:
    """In the child before it runs Python: Ctrl-C does what it does in a terminal.

    A process started with SIGINT ignored keeps ignoring it (Python installs no
    KeyboardInterrupt handler then, and navi-core keeps the ignore), and a child
    inherits the ignore: a test runner started as a background job of a script
    (``python -m pytest &`` in ``sh``) would give the command a Ctrl-C that does
    nothing, and the turn would end on its own with status 0.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ignored_sigint() -> None:
    """In the child: started as a background job of a script is, Ctrl-C ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run(
    server: LoopbackServer,
    cwd: Path,
    *args: str,
    sigint: Callable[[], None] = default_sigint,
) -> pexpect.spawn[str]:
    argv = ["-m", "navi_core", "run", *args, "--model", "loop-model"]
    argv += ["--base-url", f"{server.url}/v1", "--db", str(cwd / "run.db")]
    return pexpect.spawn(
        sys.executable,
        argv,
        cwd=str(cwd),
        env=chat_env(cwd),
        dimensions=(24, 80),
        encoding="utf-8",
        codec_errors="replace",
        timeout=15,
        preexec_fn=sigint,
    )


@pytest.fixture(params=["default", "ignored"])
def runner_sigint(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test runner's own Ctrl-C disposition, which its children inherit when it
    is ignored: as for ``python -m pytest &`` in a script (where this test once
    failed with status 0: the Ctrl-C did nothing and the stalled answer ended)."""
    handler = (
        signal.SIG_IGN if request.param == "ignored" else signal.default_int_handler
    )
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_ends_the_answer_with_a_newline_and_a_marker_and_exits_130(
    loopback: LoopbackServer, tmp_path: Path, runner_sigint: None
) -> None:
    # The answer stalls for longer than the test may take: the turn cannot end by
    # itself, so only the Ctrl-C can end it (a lost one is a timeout, not a pass).
    loopback.add(
        text_reply("1. Wheels\n", "2. Brakes\n", "4. **Sensor", stall=120.0, after=3),
        text_reply("5. Lights"),
    )
    child = run(loopback, tmp_path, "List the parts")
    seen = io.StringIO()
    child.logfile_read = seen
    child.expect_exact("4. **Sensor")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    # as the screen shows it: no styling, and without the ^C the terminal echoes
    out = OWN_SGR.sub("", seen.getvalue()).replace("\r\n", "\n").replace("^C", "")
    assert "4. **Sensor\n[interrupted]\n" in out, out
    assert "[cancelled]" in out
    # docs/commands/run.md shows this run: the same lines, but for the session id
    assert SESSION.sub("session ID", documented_sample()) in SESSION.sub(
        "session ID", out
    ), out

    # the partial answer was kept: the next turn alternates user and assistant
    child = run(loopback, tmp_path, "Go on", "--session", "latest")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    roles = [m["role"] for m in loopback.requests[1].json["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert not any(a == b == "user" for a, b in itertools.pairwise(roles))
    store = SQLiteStore(tmp_path / "run.db")
    try:
        (info,) = store.list()
        texts = [m.text for m in store.load(info.id).messages]
    finally:
        store.close()
    assert texts[1] == "1. Wheels\n2. Brakes\n4. **Sensor"


def test_a_run_started_with_ctrl_c_ignored_keeps_ignoring_it(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """As any program does (and Python, which then raises no KeyboardInterrupt): the
    turn runs to its end, and the run says nothing of an interruption."""
    loopback.add(text_reply("1. Wheels\n", "2. Brakes", stall=1.0, after=1))
    child = run(loopback, tmp_path, "List the parts", sigint=ignored_sigint)
    seen = io.StringIO()
    child.logfile_read = seen
    child.expect_exact("1. Wheels")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    out = seen.getvalue()
    assert child.exitstatus == 0, out
    assert "2. Brakes" in out and "[end_turn]" in out, out
    assert "[interrupted]" not in out and "Traceback" not in out, out


def test_the_printer_ends_a_cancelled_answer_with_a_newline_and_a_marker() -> None:
    out = io.StringIO()
    printer = EventPrinter(out, color=False)
    printer.handle(TextDelta("4. **Sensor"))
    printer.handle(TurnComplete(StopReason.CANCELLED, "", 1, 0, Usage()))
    assert out.getvalue() == "assistant: 4. **Sensor\n[interrupted]\n"
    out = io.StringIO()
    printer = EventPrinter(out, color=False)
    printer.handle(TextDelta("done"))
    printer.handle(TurnComplete(StopReason.END_TURN, "done", 1, 0, Usage()))
    assert out.getvalue() == "assistant: done\n"


def test_the_printer_marks_a_discarded_attempt_in_a_pipe_without_promising_a_retry() -> (
    None
):
    """The last attempt is discarded too, before the turn fails: the mark says only
    that it was discarded; a retry prints its own line."""
    out = io.StringIO()
    printer = EventPrinter(out, color=False)
    printer.handle(TextDelta("half an ans"))
    printer.handle(ResponseDiscarded(4, 11, 0, 0))
    assert out.getvalue() == (
        "assistant: half an ans\n[the response above was discarded]\n"
    )


def test_the_printer_says_why_a_call_failed() -> None:
    out = io.StringIO()
    printer = EventPrinter(out, color=False)
    printer.handle(
        ToolFinished("call_b", "read_file", True, 0.0, "Tool 'read_file' was not run")
    )
    printer.handle(ToolFinished("call_a", "list_dir", False, 0.0012, None))
    assert out.getvalue() == (
        "  <- read_file (call_b) error in 0.0 ms: Tool 'read_file' was not run\n"
        "  <- list_dir (call_a) ok in 1.2 ms\n"
    )

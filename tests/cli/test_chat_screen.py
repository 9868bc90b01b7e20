"""What a person sees of ``navi-core chat`` while a long answer streams and after
Ctrl-C: a real process in a pseudo-terminal, its output fed to a terminal emulator
(pyte), a real OpenAI-compatible server on loopback streaming word by word."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pexpect
import pyte
import pytest
from loopback import LoopbackServer, Reply
from test_chat import chat_env

COLS, ROWS = 60, 24
#: the words of the streamed answer: any fragment of one on screen is a cut word
WORDS = [
    *("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"),
    *("india", "juliett", "kilo", "lima", "mike", "november", "oscar", "papa"),
    *("quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray"),
    *("yankee", "zulu"),
]
#: wide characters (two cells each) and an emoji, so widths are counted in cells
WIDE = ["日本語", "テキスト", "😀"]
VOCABULARY = {*WORDS, *WIDE}


def chunk(delta: dict[str, Any] | None, **extra: Any) -> bytes:
    """One chat-completions stream event."""
    obj: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "choices": []}
    obj["model"] = "loop-model"
    if delta is not None:
        finish = extra.pop("finish_reason", None)
        obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    obj.update(extra)
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def end_chunks(finish: str) -> list[bytes]:
    usage = {"prompt_tokens": 20, "completion_tokens": 7}
    return [
        chunk({}, finish_reason=finish),
        chunk(None, usage=usage),
        b"data: [DONE]\n\n",
    ]


def slow_words(count: int, pause: float, stall: float = 0.0) -> Reply:
    """``count`` words in one paragraph, each its own delta with ``pause`` after it;
    with ``stall`` the stream then goes silent that long before it ends."""
    body: list[bytes | float] = [chunk({"role": "assistant", "content": ""})]
    cycle = [*WORDS[:8], *WIDE, *WORDS[8:]]
    for i in range(count):
        body += [chunk({"content": cycle[i % len(cycle)] + " "}), pause]
    if stall:
        body.append(stall)
    return Reply(body=[*body, *end_chunks("stop")])


class Screen:
    """``navi-core chat`` in a pseudo-terminal, its output drawn by an emulator."""

    def __init__(self, args: list[str], cwd: Path, **env: str) -> None:
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "navi_core", "chat", *args],
            cwd=str(cwd),
            env=chat_env(cwd, **env),
            dimensions=(ROWS, COLS),
            encoding="utf-8",
            codec_errors="replace",
        )
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.Stream(self.screen)

    def pump(self, seconds: float) -> None:
        """Feed the emulator what the program writes for ``seconds``."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.stream.feed(self.child.read_nonblocking(65536, min(left, 0.05)))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:  # the program ended: the screen stays as it was
                return

    @property
    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def wait_for(self, text: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if time.monotonic() > deadline:
                shown = "\n".join(self.lines)
                raise AssertionError(f"{text!r} not on screen:\n{shown}")
            self.pump(0.05)

    def type(self, line: str) -> None:
        self.child.send(line + "\r")


@pytest.fixture
def screens() -> Iterator[list[Screen]]:
    started: list[Screen] = []
    yield started
    for s in started:
        if s.child.isalive():
            s.child.terminate(force=True)


def answer_rows(lines: list[str]) -> list[str]:
    """The rows of the screen that show the streamed answer's words."""
    return [
        line
        for line in lines
        if line.split() and sum(w in VOCABULARY for w in line.split()) >= 2
    ]


def cut_words(rows: list[str]) -> list[str]:
    return [w for row in rows for w in row.split() if w not in VOCABULARY]


def open_chat(
    screens: list[Screen], server: LoopbackServer, tmp: Path, **env: str
) -> Screen:
    url = f"{server.url}/v1"
    args = ["--model", "loop-model", "--base-url", url, "--db", str(tmp / "c.db")]
    s = Screen(args, tmp, **env)
    screens.append(s)
    s.wait_for("navi-core chat")
    s.wait_for(">")
    return s


#: markdown rendered by rich, or plain text (``NO_COLOR``)
RENDERINGS = pytest.mark.parametrize(
    "env", [{}, {"NO_COLOR": "1"}], ids=["rich", "plain"]
)


@RENDERINGS
def test_live_text_wraps_at_word_boundaries_while_it_streams(
    env: dict[str, str], loopback: LoopbackServer, tmp_path: Path, screens: list[Screen]
) -> None:
    loopback.add(slow_words(200, 0.015))  # more rows than the live area holds
    s = open_chat(screens, loopback, tmp_path, **env)
    s.type("Spell the alphabet")
    s.wait_for("bravo charlie")
    samples = 0
    deadline = time.monotonic() + 30
    while not any("[end_turn]" in line for line in s.lines):  # while it streams
        assert time.monotonic() < deadline, "\n".join(s.lines)
        s.pump(0.1)
        rows = answer_rows(s.lines)
        if rows:
            samples += 1
            assert cut_words(rows) == [], "\n".join(s.lines)
    assert samples >= 5
    assert cut_words(answer_rows(s.lines)) == []  # the committed answer too


@RENDERINGS
def test_ctrl_c_keeps_the_partial_answer_on_screen_marked_and_the_next_request_is_well_formed(
    env: dict[str, str], loopback: LoopbackServer, tmp_path: Path, screens: list[Screen]
) -> None:
    loopback.add(slow_words(12, 0.02, stall=10.0), slow_words(3, 0.0))
    s = open_chat(screens, loopback, tmp_path, **env)
    s.type("Spell the alphabet")
    s.wait_for("india")  # the last word before the stream goes silent
    s.pump(0.3)
    s.child.sendintr()
    s.wait_for("⏹ interrupted", timeout=5)
    s.wait_for("[cancelled]", timeout=5)
    shown = "\n".join(s.lines)
    # the answer that was streaming is still on screen, whole words, before the mark
    for word in ("alpha", "bravo", "golf", "hotel", "日本語", "テキスト", "😀"):
        assert word in shown, shown
    assert cut_words(answer_rows(s.lines)) == []
    assert shown.index("hotel") < shown.index("⏹ interrupted")

    s.type("Go on")
    s.wait_for("[end_turn]")
    assert s.child.isalive()
    roles = [m["role"] for m in loopback.requests[1].json["messages"]]
    assert all(not (a == b == "user") for a, b in itertools.pairwise(roles)), roles
    kept = loopback.requests[1].json["messages"][-2]
    assert kept["role"] == "assistant" and "hotel" in kept["content"]
    s.type("/exit")
    s.pump(0.5)

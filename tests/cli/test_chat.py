"""``navi-core chat`` driven as a user drives it: a real process in a pseudo-terminal,
typing, Ctrl-C, a real OpenAI-compatible server on loopback and a real SQLite file."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pexpect
import pytest
from loopback import LoopbackServer, Reply
from terminal_check import HOSTILE

from navi_core.conversation import CompactionSummary, Message
from navi_core.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-chat-test-0123456789abcdef"
#: CSI and OSC sequences, charset and keypad switches: what a terminal does not show
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
    r"|\x1b[=>78]"
)


# -- wire format of the server ------------------------------------------------------


def _chunk(delta: dict[str, Any] | None, **extra: Any) -> bytes:
    obj: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "choices": []}
    obj["model"] = "loop-model"
    if delta is not None:
        finish = extra.pop("finish_reason", None)
        obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    obj.update(extra)
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _end(finish: str, prompt: int = 20, completion: int = 7) -> list[bytes]:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return [
        _chunk({}, finish_reason=finish),
        _chunk(None, usage=usage),
        b"data: [DONE]\n\n",
    ]


def text_reply(*texts: str, stall: float = 0.0, after: int = 0) -> Reply:
    """A streamed answer; with ``stall``, it goes silent after ``after`` pieces."""
    body: list[bytes | float] = [_chunk({"role": "assistant", "content": ""})]
    body += [_chunk({"content": t}) for t in texts]
    if stall:
        body.insert(after + 1, stall)
    body += _end("stop")
    return Reply(body=body)


def tool_reply(call_id: str, name: str, arguments: str, text: str = "") -> Reply:
    """A streamed response that calls one tool."""
    body: list[bytes | float] = [_chunk({"role": "assistant", "content": text})]
    start = {"index": 0, "id": call_id, "type": "function"}
    start["function"] = {"name": name, "arguments": ""}
    body.append(_chunk({"tool_calls": [start]}))
    args = {"index": 0, "function": {"arguments": arguments}}
    body.append(_chunk({"tool_calls": [args]}))
    return Reply(body=[*body, *_end("tool_calls", 30, 12)])


# -- the program in a pseudo-terminal -----------------------------------------------


def chat_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NAVI_", "OPENAI_"))
    }
    env.pop("ANTHROPIC_API_KEY", None)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
        PYTHONPATH=str(ROOT),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
        OPENAI_API_KEY=SECRET,
    )
    env.update(extra)
    return env


class Pty:
    """``navi-core chat ARGS`` in a pseudo-terminal, read as the screen shows text."""

    def __init__(self, args: Sequence[str], cwd: Path, **env: str) -> None:
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "navi_core", "chat", *args],
            cwd=str(cwd),
            env=chat_env(cwd, **env),
            dimensions=(40, 140),
            encoding="utf-8",
            codec_errors="replace",
        )
        self.raw = ""
        self.pos = 0

    @property
    def text(self) -> str:
        """Everything written so far, without escape sequences."""
        return _ESCAPES.sub("", self.raw).replace("\r", "")

    def read(self, timeout: float = 0.05) -> None:
        with contextlib.suppress(pexpect.TIMEOUT):
            self.raw += self.child.read_nonblocking(65536, timeout=timeout)

    def wait_for(self, pattern: str, timeout: float = 15.0) -> re.Match[str]:
        """The first match of ``pattern`` after the previous one."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.text, self.pos)
            if m is not None:
                self.pos = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                tail = self.text[self.pos :][-3000:]
                raise AssertionError(
                    f"{pattern!r} not shown; after the last match:\n{tail}"
                )
            try:
                self.read(min(left, 0.05))
            except pexpect.EOF as exc:
                raise AssertionError(
                    f"exited before {pattern!r}:\n{self.text[-3000:]}"
                ) from exc

    def type(self, line: str) -> None:
        """Type ``line`` and press Enter."""
        self.child.send(line + "\r")

    def exit(self) -> int:
        """Leave with /exit; the exit status."""
        self.type("/exit")
        return self.finish()

    def finish(self) -> int:
        deadline = time.monotonic() + 15
        while self.child.isalive() and time.monotonic() < deadline:
            try:
                self.read(0.1)
            except pexpect.EOF:
                break
        self.child.close()
        assert self.child.exitstatus is not None, "the chat did not exit"
        return int(self.child.exitstatus)


@pytest.fixture
def chats(tmp_path: Path) -> Iterator[list[Pty]]:
    started: list[Pty] = []
    yield started
    for p in started:
        if p.child.isalive():
            p.child.terminate(force=True)


def start(chats: list[Pty], cwd: Path, *args: str, **env: str) -> Pty:
    p = Pty(args, cwd, **env)
    chats.append(p)
    p.wait_for(r"navi-core chat")
    p.wait_for(r"(?m)^>")
    return p


def endpoint(server: LoopbackServer, db: Path) -> list[str]:
    return ["--model", "loop-model", "--base-url", f"{server.url}/v1", "--db", str(db)]


def stored(db: Path) -> list[Message]:
    store = SQLiteStore(db)
    try:
        (info,) = store.list()
        return store.load(info.id).messages
    finally:
        store.close()


# -- the tests ------------------------------------------------------------------------


def test_a_turn_with_a_tool_call_against_a_loopback_server(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha beta gamma\n", encoding="utf-8")
    loopback.add(
        tool_reply("call_1", "word_count", '{"path": "notes.txt"}', "Counting."),
        text_reply("notes.txt has ", "**3 words**."),
    )
    db = tmp_path / "chat.db"
    p = start(chats, tmp_path, *endpoint(loopback, db), "--workspace", str(ws))
    p.type("How many words are in notes.txt?")
    p.wait_for(r"⚙ word_count \{\"path\": \"notes.txt\"\}")
    p.wait_for(r"✓ word_count \d+ ms")
    p.wait_for(r"notes.txt has 3 words\.")
    status = p.wait_for(
        r"\[end_turn\] · 2 responses · 1 tool call · ([\d,]+) in / ([\d,]+) out"
    )
    assert (status[1], status[2]) == ("50", "19")
    assert p.exit() == 0

    first = loopback.requests[0].json
    assert [t["function"]["name"] for t in first["tools"]] == [
        "list_dir",
        "read_file",
        "word_count",
    ]
    assert loopback.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    messages = stored(db)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert orjson.loads(messages[2].tool_results[0].text)["words"] == 3
    assert messages[3].text == "notes.txt has **3 words**."
    assert SECRET not in db.read_bytes().decode("latin-1")


def test_ctrl_c_cancels_a_stalled_answer_and_the_session_goes_on(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    loopback.add(
        text_reply("Let me think ", "about that", stall=5.0, after=2),
        text_reply("Still here."),
    )
    db = tmp_path / "chat.db"
    p = start(chats, tmp_path, *endpoint(loopback, db))
    p.type("Tell me a long story")
    p.wait_for(r"Let me think about that")  # the live area shows the partial answer
    time.sleep(0.3)  # the stream is silent now
    t0 = time.monotonic()
    p.child.sendintr()
    p.wait_for(r"Let me think about that\s+⏹ interrupted", timeout=5)
    p.wait_for(r"\[cancelled\]", timeout=5)
    p.wait_for(r"(?m)^>")
    elapsed = time.monotonic() - t0
    # well inside the 5 s stall: the cancel did not wait for the model
    assert elapsed < 2.5, f"Ctrl-C took {elapsed:.3f} s to return to the prompt"
    assert p.child.isalive()

    mid = stored(db)  # the session is intact while the chat goes on
    assert [m.role for m in mid] == ["user", "assistant"]
    assert mid[0].text == "Tell me a long story"
    assert mid[1].text == "Let me think about that"  # the partial answer stays
    p.type("Are you there?")
    p.wait_for(r"Still here\.")
    p.wait_for(r"\[end_turn\]")
    assert p.exit() == 0
    messages = stored(db)
    assert [m.text for m in messages if m.role == "user"][-1] == "Are you there?"
    assert messages[-1].role == "assistant" and messages[-1].text == "Still here."
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]


def test_a_steer_a_cancel_cut_off_is_said_to_wait_for_the_next_message(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    loopback.add(
        text_reply("Let me think ", "about that", stall=5.0, after=2),
        text_reply("Both answered."),
    )
    db = tmp_path / "chat.db"
    p = start(chats, tmp_path, *endpoint(loopback, db))
    p.type("Tell me a long story")
    p.wait_for(r"Let me think about that")
    p.type("and keep it short")
    p.wait_for(r"↳ steer: and keep it short \(before the next response\)")
    p.child.sendintr()
    p.wait_for(r"⏹ interrupted", timeout=5)
    p.wait_for(r"was not answered: it goes\s+with your next message", timeout=5)
    p.type("go on")
    p.wait_for(r"Both answered\.")
    p.wait_for(r"\[end_turn\]")
    assert p.exit() == 0
    sent = loopback.requests[-1].json["messages"]
    assert "and keep it short" in sent[-1]["content"]
    assert "go on" in sent[-1]["content"]


def test_continue_with_nothing_to_answer_runs_no_turn(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    loopback.add(
        text_reply("Once upon ", "a time", stall=5.0, after=2), text_reply("Done.")
    )
    db = tmp_path / "chat.db"
    p = start(chats, tmp_path, *endpoint(loopback, db))
    p.type("Tell me a story")
    p.wait_for(r"Once upon a time")
    p.child.sendintr()  # the partial answer is kept: nothing waits for an answer
    p.wait_for(r"\[cancelled\]", timeout=5)
    p.type("/continue")
    p.wait_for(r"nothing to continue: the last turn was answered or cancelled")
    p.type("Finish it")
    p.wait_for(r"Done\.")
    p.wait_for(r"\[end_turn\]")
    p.type("/continue")
    p.wait_for(r"nothing to continue")
    p.type("/usage")
    p.wait_for(r"this chat: 2 turns,")
    assert p.exit() == 0
    assert len(loopback.requests) == 2


def test_ctrl_c_twice_at_an_empty_prompt_exits(
    tmp_path: Path, chats: list[Pty]
) -> None:
    p = start(chats, tmp_path, "--demo", "--db", str(tmp_path / "d.db"))
    p.child.sendintr()
    p.wait_for(r"Ctrl-C again to exit")
    # the prompt is back, as a person sees it before pressing again
    p.wait_for(r"(?m)^>")
    time.sleep(0.2)
    assert p.child.isalive()
    p.child.sendintr()
    assert p.finish() == 0


def test_compact_summarises_the_old_turns(tmp_path: Path, chats: list[Pty]) -> None:
    db = tmp_path / "demo.db"
    p = start(chats, tmp_path, "--demo", "--db", str(db), "--keep-verbatim", "60")
    p.type("What is in the workspace?")
    p.wait_for(r"✓ scan")
    p.wait_for(r"weather-station")
    p.wait_for(r"\[end_turn\] · 3 responses · 3 tool calls")
    p.type("Thanks, that helps")
    p.wait_for(r"You said: Thanks, that helps")
    p.wait_for(r"\[end_turn\]")
    p.type("/compact keep the file names")
    m = p.wait_for(
        r"compacted: (\d+) messages summarised, (\d+) turns? kept verbatim; 8 → (\d+)"
    )
    assert int(m[1]) >= 6
    p.type("/usage")
    p.wait_for(r"this chat: 2 turns, [\d,]+ in / [\d,]+ out tokens, \$\d+\.\d{4}")
    assert p.exit() == 0

    store = SQLiteStore(db)
    try:
        (info,) = store.list()
        windows = store.history(info.id)
    finally:
        store.close()
    assert len(windows) == 2
    assert len(windows[0]) == 8
    (summary,) = windows[1][0].content  # the summary opens the new window
    assert isinstance(summary, CompactionSummary)
    assert "weather-station" in summary.text


def test_resume_after_restarting_the_program(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    loopback.add(text_reply("Nice to meet ", "you, Ada."), text_reply("You are Ada."))
    db = tmp_path / "chat.db"
    first = start(chats, tmp_path, *endpoint(loopback, db))
    first.type("My name is Ada.")
    first.wait_for(r"Nice to meet you, Ada\.")
    first.wait_for(r"\[end_turn\]")
    assert first.exit() == 0
    sid = stored_session_id(db)

    second = start(chats, tmp_path, *endpoint(loopback, db))
    second.type(f"/resume {sid[:8]}")
    second.wait_for(rf"resumed session {sid} \(2 messages\)")
    second.wait_for(r"assistant: Nice to meet you, Ada\.")
    second.type("What is my name?")
    second.wait_for(r"You are Ada\.")
    second.wait_for(r"\[end_turn\]")
    assert second.exit() == 0

    sent = [m["content"] for m in loopback.requests[-1].json["messages"]]
    assert sent == ["My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]
    store = SQLiteStore(db)
    try:
        assert sid in [i.id for i in store.list()]
        texts = [m.text for m in store.load(sid).messages]
    finally:
        store.close()
    assert texts[-2:] == ["What is my name?", "You are Ada."]


def stored_session_id(db: Path) -> str:
    store = SQLiteStore(db)
    try:
        (info,) = store.list()
        return info.id
    finally:
        store.close()


def test_typing_while_an_answer_streams_steers_the_turn(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one two\nthree\n", encoding="utf-8")
    calling = tool_reply("call_1", "word_count", '{"path": "a.txt"}', "Counting. ")
    body = list(calling.body)
    body.insert(2, 1.5)  # silent for a while before the tool call arrives
    loopback.add(Reply(body=body), text_reply("3 words on 2 lines."))
    db = tmp_path / "chat.db"
    p = start(chats, tmp_path, *endpoint(loopback, db), "--workspace", str(ws))
    p.type("Count the words in a.txt")
    p.wait_for(r"Counting\.")
    p.type("also give the line count")
    p.wait_for(r"↳ steer: also give the line count \(before the next response\)")
    p.wait_for(r"↳ steered: also give the line count")
    p.wait_for(r"3 words on 2 lines\.")
    p.wait_for(r"\[end_turn\] · 2 responses · 1 tool call")
    assert p.exit() == 0

    second = loopback.requests[1].json["messages"]
    assert second[-1] == {"role": "user", "content": "also give the line count"}
    assert second[-2]["role"] == "tool"
    roles = [m.role for m in stored(db)]
    assert roles == ["user", "assistant", "user", "user", "assistant"]


def test_queue_runs_a_message_as_its_own_turn_after_the_running_one(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    loopback.add(
        text_reply("First ", "answer.", stall=1.5, after=1),
        text_reply("Second answer."),
    )
    db = tmp_path / "chat.db"
    p = start(chats, tmp_path, *endpoint(loopback, db))
    p.type("one")
    p.wait_for(r"First")
    p.type("/queue two")
    p.wait_for(r"⏸ queued: two")
    p.wait_for(r"First answer\.")
    p.wait_for(r"\[end_turn\]")
    p.wait_for(r"Second answer\.")
    p.wait_for(r"\[end_turn\]")
    assert p.exit() == 0
    assert [m.text for m in stored(db)] == [
        "one",
        "First answer.",
        "two",
        "Second answer.",
    ]


def test_multi_line_input_and_the_history(tmp_path: Path, chats: list[Pty]) -> None:
    db = tmp_path / "d.db"
    p = start(chats, tmp_path, "--demo", "--db", str(db))
    p.child.send("first line\\\r")  # a line ending in a backslash continues
    p.child.send("second line\x1b\r")  # so does Esc Enter
    p.child.send("third line\r")
    p.wait_for(r"You said: first line second line third line")
    p.wait_for(r"\[end_turn\]")
    p.child.send("\x1b[A\r")  # Up recalls the message, Enter sends it again
    p.wait_for(r"You said: first line second line third line")
    p.wait_for(r"\[end_turn\]")
    assert p.exit() == 0
    sent = [m.text for m in stored(db) if m.role == "user"]
    assert sent == ["first line\nsecond line\nthird line"] * 2
    history = (tmp_path / ".state" / "navi-core" / "chat_history").read_text()
    assert "+first line\n+second line\n+third line\n" in history
    assert "+/exit\n" in history


def test_escape_sequences_of_the_model_reach_the_screen_inert(
    loopback: LoopbackServer, tmp_path: Path, chats: list[Pty]
) -> None:
    """Text, thinking, a tool call's name and arguments and an error quoting the
    server: the screen shows them with their controls as marks, and no sequence of
    the model's reaches the terminal (rich and prompt_toolkit pass ESC through)."""
    name = "evil\x1b]0;pwned\x07"
    calling = tool_reply("c1", name, '{"x": "\x1b[2J"}', "A\x1b")
    body = list(calling.body)
    body.insert(1, _chunk({"reasoning_content": HOSTILE}))
    body.insert(2, _chunk({"content": "]52;c;SGVsbG8=\x07B "}))
    loopback.add(
        Reply(body=body),
        text_reply(HOSTILE[:40], HOSTILE[40:]),
        Reply.json(400, {"error": {"message": HOSTILE}}),
    )
    p = start(chats, tmp_path, *endpoint(loopback, tmp_path / "chat.db"))
    p.type("hi")
    p.wait_for(r"✗ evil␛\]0;pwned␇")
    p.wait_for(r"A␛\]52;c;SGVsbG8=␇B")
    p.wait_for(r"\[end_turn\]")
    p.type("again")
    p.wait_for(r"error: BadRequest: A␛\]52;c;SGVsbG8=␇B")
    assert p.exit() == 0
    for sequence in (
        "\x1b]52",
        "\x1b]0;pwned",
        "\x1b]8;;https://evil",
        "\x1b[2J",
        "\x1bP",
        "\x1bc",
        "\x9b",
        "\x9d",
        "\u202e",
    ):
        assert sequence not in p.raw, f"{sequence!r} reached the terminal"

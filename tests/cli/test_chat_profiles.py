"""Chat profiles (TOML) and the chat over piped input: the endpoint a profile names,
flags over the profile, keys only from the environment, and the retry rule end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import orjson
import pytest
from loopback import LoopbackServer, Reply
from terminal_check import HOSTILE, leaks
from test_chat import ROOT, chat_env, text_reply

from navi_core.cli.chat.profiles import Price, load_profile
from navi_core.cli.options import UsageError
from navi_core.conversation import Message, System, Usage, UserMessage
from navi_core.store.sqlite import SQLiteStore

PROFILES = """
default_profile = "local"

[profiles.local]
provider = "openai"
model = "profile-model"
base_url = "{url}/v1"
api_key_env = "CHAT_TEST_KEY"
system = "You answer in one line."
price = {{ input = 2.0, output = 8.0 }}

[profiles.claude]
provider = "anthropic"
model = "claude-test"
"""


def write_profiles(tmp_path: Path, url: str = "http://127.0.0.1:9") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(PROFILES.format(url=url), encoding="utf-8")
    return path


def piped(
    lines: str, *args: str, cwd: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "navi_core", "chat", *args],
        input=lines,
        cwd=cwd,
        env=chat_env(cwd, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_default_profile_and_a_named_one(tmp_path: Path) -> None:
    path = write_profiles(tmp_path)
    local = load_profile(path, None)
    assert (local.profile, local.provider, local.model) == (
        "local",
        "openai",
        "profile-model",
    )
    assert local.api_key_env == "CHAT_TEST_KEY"
    assert local.price == Price(input=2.0, output=8.0)
    claude = load_profile(path, "claude")
    assert (claude.provider, claude.model, claude.base_url) == (
        "anthropic",
        "claude-test",
        None,
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[profiles.a]\nmodel = "m"\napi_key = "sk-secret-1"\n', "api_key_env"),
        ('[profiles.a]\nprovider = "gemini"\n', "provider must be one of"),
        ('[profiles.a]\nmodl = "m"\n', "unknown keys ['modl']"),
        ("[profiles.a]\nprice = { input = 1 }\n", "price needs input and output"),
        ("[profiles.a\n", "not valid TOML"),
    ],
)
def test_a_bad_profile_is_refused_with_its_reason(
    tmp_path: Path, body: str, message: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_profile(path, "a")
    assert message in str(info.value)
    assert "sk-secret-1" not in str(info.value)


def test_an_unknown_profile_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"no profile 'nope' \(profiles: claude, local\)"
    ):
        load_profile(write_profiles(tmp_path), "nope")


def test_price_counts_cache_buckets_at_the_input_price_unless_priced() -> None:
    u = Usage(input=1_000_000, output=1_000_000, cache_read=1_000_000)
    assert Price(input=1.0, output=4.0).cost(u) == pytest.approx(6.0)
    assert Price(input=1.0, output=4.0, cache_read=0.1).cost(u) == pytest.approx(5.1)


def test_a_profile_drives_a_real_chat_and_the_key_stays_in_the_environment(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    key = "sk-profile-key-77777777"
    loopback.add(text_reply("Hello from ", "the profile."))
    config = write_profiles(tmp_path, loopback.url)
    db = tmp_path / "chat.db"
    result = piped(
        "hi there\n",
        "--config",
        str(config),
        "--db",
        str(db),
        cwd=tmp_path,
        CHAT_TEST_KEY=key,
    )
    assert result.returncode == 0, result.stderr
    assert "profile-model" in result.stdout and "profile local" in result.stdout
    assert "Hello from the profile." in result.stdout
    # 20 prompt tokens at $2/M + 7 output tokens at $8/M
    assert "20 in / 7 out tokens · $0.0001" in result.stdout
    (request,) = loopback.requests
    assert request.json["model"] == "profile-model"
    assert request.headers["authorization"] == f"Bearer {key}"
    assert request.json["messages"][0] == {
        "role": "system",
        "content": "You answer in one line.",
    }
    assert key not in result.stdout + result.stderr
    assert key not in db.read_bytes().decode("latin-1")


def test_flags_win_over_the_profile(loopback: LoopbackServer, tmp_path: Path) -> None:
    loopback.add(text_reply("ok"))
    config = write_profiles(tmp_path, "http://127.0.0.1:9")
    result = piped(
        "hi\n",
        "--config",
        str(config),
        "--model",
        "flag-model",
        "--base-url",
        f"{loopback.url}/v1",
        "--db",
        str(tmp_path / "c.db"),
        cwd=tmp_path,
        CHAT_TEST_KEY="k",
    )
    assert result.returncode == 0, result.stderr
    assert loopback.requests[0].json["model"] == "flag-model"


def test_a_missing_key_variable_is_one_usage_error_line(tmp_path: Path) -> None:
    """A usage error (exit 2), as ``run`` and ``serve`` say it, whether a profile or
    the flag named the variable."""
    want = (
        "error: $CHAT_TEST_KEY is not set (the variable --api-key-env or the "
        "profile's api_key_env names for the API key)\n"
    )
    result = piped("hi\n", "--config", str(write_profiles(tmp_path)), cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, want)
    result = piped(
        "hi\n", "--model", "m", "--api-key-env", "CHAT_TEST_KEY", cwd=tmp_path
    )
    assert (result.returncode, result.stderr) == (2, want)


def test_no_model_says_how_to_name_one(tmp_path: Path) -> None:
    result = piped("", cwd=tmp_path)
    assert result.returncode == 2
    assert "no model: give --model M" in result.stderr and "--demo" in result.stderr


def test_the_chat_speaks_the_responses_api(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    from providers.wire_streams import responses_body

    loopback.add(Reply.sse(responses_body(["Hello from ", "Responses."])))
    result = piped(
        "hi\n",
        "--responses",
        "--model",
        "gpt-test",
        "--base-url",
        loopback.url + "/v1",
        "--db",
        str(tmp_path / "r.db"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Hello from Responses." in result.stdout
    (request,) = loopback.requests
    assert request.path == "/v1/responses"
    assert request.json["store"] is False and request.json["stream"] is True


def test_a_retried_answer_is_printed_once(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    partial = text_reply("Draft answer ", "that breaks", "off")
    loopback.add(
        Reply(body=list(partial.body)[:3], reset=True),
        text_reply("Final ", "answer."),
    )
    result = piped(
        "question\n",
        "--model",
        "m",
        "--base-url",
        f"{loopback.url}/v1",
        "--db",
        str(tmp_path / "c.db"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("Final answer.") == 1
    assert "Draft answer" not in out
    assert "attempt 1 broke off after 24 chars" in out  # 13 + 11
    assert "attempt 1/4 failed (TransportError): retrying in" in out
    assert len(loopback.requests) == 2


def test_demo_over_piped_input(tmp_path: Path) -> None:
    result = piped(
        "what is in the workspace?\n/tools\n/new\n/sessions\n",
        "--demo",
        "--db",
        str(tmp_path / "d.db"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for line in ("✓ list_dir", "✓ read_file", "✓ scan", "3 responses · 3 tool calls"):
        assert line in out
    assert "scan        Find the lines" in out
    store = SQLiteStore(tmp_path / "d.db")
    try:
        infos = store.list()
    finally:
        store.close()
    assert len(infos) == 2  # /new started a second session
    assert out.count("\n* ") == 1  # /sessions marks the current one
    assert str(ROOT) not in out


def test_model_switch_keeps_the_session_and_resume_finds_it(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    result = piped(
        "hello\n/model other-model\nhello again\n/resume latest\n/system Be brief.\n"
        "/new\n/resume nope\n",
        "--demo",
        "--db",
        str(db),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "model: other-model (session" in out
    assert "already in session" in out
    assert "error: SessionNotFound" in out
    store = SQLiteStore(db)
    try:
        infos = {i.id: i for i in store.list()}
        (first,) = [i for i in infos.values() if i.message_count > 1]
        messages = store.load(first.id).messages
    finally:
        store.close()
    assert len(infos) == 2
    answers = [m for m in messages if m.role == "assistant"]
    assert [m.wire.model for m in answers if m.wire] == ["scripted-demo", "other-model"]
    (system,) = messages[-1].content
    assert isinstance(system, System) and system.text == "Be brief."


def test_an_interrupted_turn_is_continued_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    store = SQLiteStore(db)
    try:
        sid = store.create().id
        store.append(sid, [UserMessage("Are you still there?")])  # then the crash
    finally:
        store.close()
    result = piped(
        "/continue\n", "--demo", "--session", "latest", "--db", str(db), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"resumed session {sid} (1 message)" in out
    assert "you: Are you still there?" in out
    assert "its last turn did not finish: /continue answers it" in out
    assert "[end_turn] · 1 response" in out
    store = SQLiteStore(db)
    try:
        assert [m.role for m in store.load(sid).messages] == ["user", "assistant"]
    finally:
        store.close()


def _event(name: str, obj: Mapping[str, object]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def anthropic_reply(thinking: str, text: str) -> Reply:
    """A Messages API stream: a thinking block with its signature, then a text block."""
    message: dict[str, object] = {"id": "msg_1", "type": "message", "role": "assistant"}
    message.update(content=[], model="claude-test")
    message["usage"] = {"input_tokens": 30, "output_tokens": 1}
    body = [_event("message_start", {"type": "message_start", "message": message})]
    for i, (kind, value) in enumerate((("thinking", thinking), ("text", text))):
        start = {"type": kind, kind: ""}
        body.append(
            _event(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": start},
            )
        )
        delta = {"type": f"{kind}_delta", kind: value}
        body.append(
            _event(
                "content_block_delta",
                {"type": "content_block_delta", "index": i, "delta": delta},
            )
        )
        if kind == "thinking":
            signature = {"type": "signature_delta", "signature": "sig-1"}
            body.append(
                _event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": signature},
                )
            )
        body.append(
            _event("content_block_stop", {"type": "content_block_stop", "index": i})
        )
    end: dict[str, object] = {"type": "message_delta"}
    end["delta"] = {"stop_reason": "end_turn"}
    end["usage"] = {"output_tokens": 9}
    body.append(_event("message_delta", end))
    body.append(_event("message_stop", {"type": "message_stop"}))
    return Reply(body=body)


def test_the_chat_speaks_anthropic(loopback: LoopbackServer, tmp_path: Path) -> None:
    loopback.add(anthropic_reply("The user greets me.", "Hello from Claude."))
    db = tmp_path / "a.db"
    result = piped(
        "hi\n",
        "--anthropic",
        "--model",
        "claude-test",
        "--base-url",
        loopback.url,
        "--api-key-env",
        "CHAT_ANTHROPIC_KEY",
        "--db",
        str(db),
        cwd=tmp_path,
        CHAT_ANTHROPIC_KEY="sk-ant-test-key",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("The user greets me.") < out.index("Hello from Claude.")
    assert "30 in / 9 out tokens" in out
    (request,) = loopback.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test-key"
    (sent,) = request.json["messages"]
    # the newest user message carries a prompt-cache breakpoint (Anthropic(cache=True))
    assert sent["content"] == [
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    ]


def test_an_unknown_session_is_one_error_line(tmp_path: Path) -> None:
    result = piped("", "--demo", "--session", "feedbeef", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "error: SessionNotFound: no session matches 'feedbeef'\n"


HOSTILE_TOOLS = '''
from navi_core import tool


@tool
def shout(text: str) -> str:
    """Shout it.\\x1b]0;pwned\\x07\\x1b[2J

    Args:
        text: what to shout
    """
    return text.upper()


TOOLS = [shout]
'''


def _delta(delta: dict[str, object]) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": None}
    obj = {"id": "c", "object": "chat.completion.chunk", "choices": [choice]}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def test_piped_chat_prints_what_others_wrote_inert(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """Model text split between its ESC and the rest, thinking, a tool call with a
    hostile name, a tool's description, a stored session's recap and listing, and a
    server's error body: no control reaches the piped output."""
    (tmp_path / "hostile_tools.py").write_text(HOSTILE_TOOLS, encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[profiles.p]\nmodel = "m"\nbase_url = "{loopback.url}/v1"\n'
        'tools = ["hostile_tools:TOOLS"]\n',
        encoding="utf-8",
    )
    db = tmp_path / "c.db"
    with SQLiteStore(db) as store:
        sid = store.create().id
        store.append(sid, [UserMessage(HOSTILE), Message("system", (System(HOSTILE),))])
    body = list(text_reply("A\x1b", "]52;c;SGVsbG8=\x07B ", HOSTILE).body)
    body.insert(1, _delta({"reasoning_content": HOSTILE}))
    tool = {"index": 0, "id": "c\x1b[2J", "type": "function"}
    tool["function"] = {"name": "evil\x1b]0;pwned\x07", "arguments": "{}"}
    loopback.add(
        Reply(body=[*body[:-3], _delta({"tool_calls": [tool]}), *body[-3:]]),
        text_reply(HOSTILE),
        Reply.json(400, {"error": {"message": HOSTILE}}),
    )
    result = piped(
        "hi\nagain\n/tools\n/sessions\n/system\n",
        "--config",
        str(config),
        "--session",
        "latest",
        "--db",
        str(db),
        cwd=tmp_path,
        PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}",
    )
    assert result.returncode == 1, result.stderr  # the 400 failed a turn
    out = result.stdout
    assert leaks(out) == [], out
    assert "you: A␛]52;c;SGVsbG8=␇B" in out  # the recap of the stored session
    assert "A␛]52;c;SGVsbG8=␇B A␛]52;c;SGVsbG8=␇B" in out  # the streamed answer
    assert "✗ evil␛]0;pwned␇" in out
    assert "error: BadRequest: A␛]52;c;SGVsbG8=␇B" in out
    assert "Shout it.␛]0;pwned␇␛[2J" in out
    assert "system: A␛]52;c;SGVsbG8=␇B" in out


def test_piped_chat_exits_1_when_a_turn_failed(tmp_path: Path) -> None:
    result = piped(
        "hi\n",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--db",
        str(tmp_path / "d.db"),
        cwd=tmp_path,
        OPENAI_API_KEY="sk-test",
    )
    assert result.returncode == 1
    assert "http://127.0.0.1:9/v1" in result.stdout + result.stderr


def docs_profile() -> str:
    """The TOML block of docs/commands/chat.md's "Profiles" section, as written."""
    page = (ROOT / "docs" / "commands" / "chat.md").read_text(encoding="utf-8")
    section = page.split("## Profiles", 1)[1]
    return section.split("```toml\n", 1)[1].split("```", 1)[0]


def test_the_documented_profile_works_as_copied(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """Pasted into a config file unchanged, on a machine with no key variable and
    none of the folders it might name: only the server is moved (a flag wins over
    the profile's base_url), since no Ollama listens here."""
    loopback.add(text_reply("Hello from ", "the documented profile."))
    config = tmp_path / "config.toml"
    config.write_text(docs_profile(), encoding="utf-8")
    project = tmp_path / "project"  # the chat is started in a folder of its own
    project.mkdir()
    env = chat_env(project)
    for name in ("OLLAMA_API_KEY", "OPENAI_API_KEY"):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-m", "navi_core", "chat", "--config", str(config),
         "--base-url", f"{loopback.url}/v1", "--db", str(tmp_path / "c.db")],
        input="hi\n", cwd=project, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Hello from the documented profile." in result.stdout
    assert "profile local" in result.stdout
    (request,) = loopback.requests
    body = request.json
    assert body["model"] == "qwen2.5"
    assert "authorization" not in request.headers  # Ollama needs no key
    assert body["messages"][0] == {"role": "system", "content": "You answer briefly."}
    assert (body["temperature"], body["top_p"]) == (0.2, 0.9)
    assert 2048 in (body.get("max_tokens"), body.get("max_completion_tokens"))

"""``--max-tokens``, ``--temperature``, ``--extra-body`` and ``--mcp-config`` in
``navi-core run`` and ``navi-core chat`` (and the same keys in a chat profile): what
reaches the request body a real loopback server receives, and the MCP servers of a
Claude-Desktop-style file, started for real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from loopback import LoopbackServer
from test_chat import chat_env, text_reply

from navi_core.cli._mcp_config import MCPServer, read_mcp_config
from navi_core.cli.options import UsageError

MCP_SERVER = str(Path(__file__).resolve().parents[1] / "mcp_server.py")
HEADER_SECRET = "Bearer mcp-secret-0123456789"


def navi(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        input=stdin,
        cwd=cwd,
        env=chat_env(cwd),
        capture_output=True,
        text=True,
        timeout=60,
    )


def endpoint(server: LoopbackServer, tmp: Path) -> list[str]:
    url = f"{server.url}/v1"
    return ["--model", "m", "--base-url", url, "--db", str(tmp / "r.db")]


def mcp_file(tmp: Path, servers: dict[str, Any]) -> Path:
    path = tmp / "mcp.json"
    path.write_bytes(orjson.dumps({"mcpServers": servers}))
    return path


REQUEST_FLAGS = [
    *("--max-tokens", "55", "--temperature", "0.3"),
    *("--extra-body", '{"top_p": 0.5, "seed": 7, "chat_template_kwargs": {"x": 1}}'),
]


def check_body(body: dict[str, Any]) -> None:
    assert body["max_tokens"] == 55
    assert body["temperature"] == 0.3
    assert body["top_p"] == 0.5 and body["seed"] == 7
    assert body["chat_template_kwargs"] == {"x": 1}
    assert body["messages"][-1] == {"role": "user", "content": "hi"}


@pytest.mark.parametrize("command", ["run", "chat"])
def test_the_request_flags_reach_the_body_and_mcp_servers_their_tools(
    command: str, loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.add(text_reply("hello"))
    config = mcp_file(
        tmp_path,
        {
            "calc": {"command": sys.executable, "args": [MCP_SERVER], "env": {}},
            "off": {"command": "/nonexistent", "disabled": True},
        },
    )
    args = [*endpoint(loopback, tmp_path), *REQUEST_FLAGS, "--mcp-config", str(config)]
    if command == "run":
        done = navi("run", "hi", *args, cwd=tmp_path)
    else:
        done = navi("chat", *args, cwd=tmp_path, stdin="hi\n")
    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout
    body = loopback.requests[0].json
    check_body(body)
    names = {t["function"]["name"] for t in body["tools"]}
    assert {"add", "echo"} <= names


def test_a_profile_carries_the_same_keys_and_flags_win(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    mcp_file(tmp_path, {"calc": {"command": sys.executable, "args": [MCP_SERVER]}})
    profiles = tmp_path / "config.toml"
    profiles.write_text(
        f"""
[profiles.p]
model = "m"
base_url = "{loopback.url}/v1"
max_tokens = 12
temperature = 1.5
extra_body = {{ top_p = 0.5, seed = 1 }}
mcp_config = "mcp.json"
""",
        encoding="utf-8",
    )
    loopback.add(text_reply("one"), text_reply("two"))
    base = ["--config", str(profiles), "--db", str(tmp_path / "c.db")]
    done = navi("chat", *base, cwd=tmp_path, stdin="hi\n")
    assert done.returncode == 0, done.stderr
    body = loopback.requests[0].json
    assert (body["max_tokens"], body["temperature"]) == (12, 1.5)
    assert (body["top_p"], body["seed"]) == (0.5, 1)
    assert "add" in {t["function"]["name"] for t in body["tools"]}

    flags = ["--max-tokens", "99", "--temperature", "0", "--extra-body", '{"seed": 2}']
    done = navi("chat", *base, *flags, cwd=tmp_path, stdin="hi\n")
    assert done.returncode == 0, done.stderr
    body = loopback.requests[1].json
    assert (body["max_tokens"], body["temperature"]) == (99, 0.0)
    assert (body["top_p"], body["seed"]) == (0.5, 2)  # merged key by key


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("{top_p: 1}", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"timeout": 3}', "'timeout' is a setting of OpenAIChat"),
        ('{"messages": []}', "'messages' is written by the chat itself"),
    ],
)
@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_bad_extra_body_is_a_usage_error(
    command: str, extra: str, message: str, loopback: LoopbackServer, tmp_path: Path
) -> None:
    prompt = ["hi"] if command == "run" else []
    argv = [command, *prompt, *endpoint(loopback, tmp_path), "--extra-body", extra]
    done = navi(*argv, cwd=tmp_path, stdin="hi\n")
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert loopback.requests == []


@pytest.mark.parametrize(
    ("flag", "value"), [("--max-tokens", "0"), ("--temperature", "hot")]
)
def test_bad_numbers_are_usage_errors(flag: str, value: str, tmp_path: Path) -> None:
    done = navi("run", "hi", "--model", "m", flag, value, cwd=tmp_path)
    assert done.returncode == 2
    assert flag in done.stderr


def write(tmp: Path, text: str) -> Path:
    path = tmp / "mcp.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"servers": {}}', 'expected {"mcpServers"'),
        ('{"mcpServers": {"a": 1}}', "server 'a' must be an object"),
        ('{"mcpServers": {"a": {}}}', "server 'a' needs either command"),
        (
            '{"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}}',
            "server 'a' needs either command",
        ),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "args must be a list"),
        ('{"mcpServers": {"a": {"url": "ftp://h"}}}', "url must be an http"),
        ('{"mcpServers": {"a": {"url": "http://h", "type": "sse"}}}', "'sse' is not"),
        ('{"mcpServers": {"a": {"command": "x", "colour": 1}}}', "unknown keys"),
        (
            '{"mcpServers": {"a": {"url": "http://h", "headers": {"A": 1}}}}',
            "headers must be an object of strings",
        ),
    ],
)
def test_a_bad_mcp_config_names_the_file_and_the_server(
    text: str, message: str, tmp_path: Path
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsageError, match=r"mcp\.json") as info:
        read_mcp_config(path)
    assert message in str(info.value)


def test_an_mcp_config_error_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    done = navi(
        "run", "hi", "--model", "m", "--mcp-config", str(tmp_path / "no.json"),
        "--db", str(tmp_path / "r.db"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "no.json" in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_server_that_cannot_start_is_named_and_no_secret_is_shown(
    tmp_path: Path,
) -> None:
    path = mcp_file(
        tmp_path,
        {
            "web": {
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": HEADER_SECRET},
            },
        },
    )
    done = navi(
        "run", "hi", "--model", "m", "--mcp-config", str(path),
        "--db", str(tmp_path / "r.db"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "MCP server 'web'" in done.stderr
    assert HEADER_SECRET not in done.stderr + done.stdout
    assert "mcp-secret" not in repr(read_mcp_config(path))


def test_the_common_file_shapes_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "server-fs", "."],
                   "env": {"DEBUG": "1"}},
            "web": {"type": "http", "url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": "Bearer t"}, "prefix": "web"},
            "old": {"command": "x", "disabled": true}
        }}""",
    )
    fs, web = read_mcp_config(path)
    assert fs == MCPServer(
        "fs", command=("npx", "-y", "server-fs", "."), env={"DEBUG": "1"}
    )
    assert web.url == "https://mcp.example.com/mcp" and web.prefix == "web"
    assert web.headers == {"Authorization": "Bearer t"} and web.command is None

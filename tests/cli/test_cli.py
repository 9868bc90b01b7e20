"""The ``navi-core`` command as a user runs it (``python -m navi_core``): the demo,
the version, the help, and the flags that every command shares."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pexpect
import pytest

import navi_core
from navi_core._extras import install_command
from navi_core.cli import build_parser, main
from navi_core.cli.options import ProviderChoice, UsageError, provider_choice
from navi_core.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("demo", "run", "sessions", "compact")


def navi(
    *args: str, cwd: Path, module: str = "navi_core", **env: str
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_demo_runs_a_turn_with_real_tools_and_stores_it(tmp_path: Path) -> None:
    # an unreachable PostgreSQL in the environment must not beat an explicit --db
    result = navi(
        "demo",
        "--db",
        "demo.db",
        cwd=tmp_path,
        NAVI_POSTGRES_DSN="host=127.0.0.1 port=1",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in ("list_dir", "read_file", "word_count"):
        assert f"<- {name}" in out and "ok in" in out
    assert "[end_turn] 3 responses, 3 tool calls" in out
    store = SQLiteStore(tmp_path / "demo.db")
    try:
        (info,) = store.list()
        messages = store.load(info.id).messages
    finally:
        store.close()
    assert [m.role for m in messages] == ["user", "assistant"] * 3
    counted = messages[4].tool_results[1].text
    assert counted == '{"lines":2,"words":10,"chars":63}'


def test_demo_with_an_unusable_database_says_so_in_one_line(tmp_path: Path) -> None:
    result = navi("demo", "--db", str(tmp_path / "missing" / "x.db"), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


# -- the command itself ------------------------------------------------------------


@pytest.mark.parametrize("module", ["navi_core", "navi_core.cli"])
def test_version_prints_the_package_version(tmp_path: Path, module: str) -> None:
    result = navi("--version", cwd=tmp_path, module=module)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"navi-core {navi_core.__version__}\n"


def test_bare_invocation_prints_the_help_on_stderr_and_exits_2(tmp_path: Path) -> None:
    result = navi(cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: navi-core ")
    assert "--version" in result.stderr
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\s+\w", result.stderr, re.M), command
    assert "Traceback" not in result.stderr


def test_help_goes_to_stdout_with_status_0(tmp_path: Path) -> None:
    result = navi("--help", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    bare = navi(cwd=tmp_path)
    assert result.stdout == bare.stderr


def test_a_command_group_alone_prints_its_help(tmp_path: Path) -> None:
    result = navi("sessions", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("usage: navi-core sessions ")
    assert "list" in result.stderr and "show" in result.stderr


def test_an_unknown_command_is_a_usage_error(tmp_path: Path) -> None:
    result = navi("frobnicate", cwd=tmp_path)
    assert result.returncode == 2
    assert "invalid choice: 'frobnicate'" in result.stderr


def test_the_console_script_is_the_same_main() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (target,) = re.findall(r'^navi-core = "([\w.]+):(\w+)"$', pyproject, re.M)
    assert target == ("navi_core.cli", "main")
    module = __import__(target[0], fromlist=[target[1]])
    assert getattr(module, target[1]) is main


# -- one provider flag scheme ------------------------------------------------------

PROVIDER_FLAGS = [
    "--model",
    "m1",
    "--base-url",
    "http://127.0.0.1:9",
    "--anthropic",
    "--api-key-env",
    "NAVI_TEST_KEY",
]


def _parse(*argv: str, **environ: str) -> ProviderChoice:
    env = {"NAVI_TEST_KEY": "k-1", "OPENAI_API_KEY": "k-2", **environ}
    return provider_choice(build_parser().parse_args(argv), env)


def test_every_provider_command_reads_the_same_flags() -> None:
    run = _parse("run", "hi", *PROVIDER_FLAGS)
    compact = _parse("compact", "abc", *PROVIDER_FLAGS)
    assert run == compact == ProviderChoice("m1", True, "http://127.0.0.1:9", "k-1")
    assert "k-1" not in repr(run)
    assert _parse("run", "--model", "m2") == ProviderChoice("m2")


@pytest.mark.parametrize("command", ["run", "compact"])
def test_the_provider_flags_are_documented_once_for_every_command(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--model M", "--base-url URL", "--anthropic", "--api-key-env VAR"):
        assert flag in out, flag
    # the older compact spellings still parse but are not shown
    assert "--openai-base-url" not in out and "--anthropic-base-url" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--openai-base-url", "u", "--anthropic"], "not both"),
        (["--openai-base-url", "u", "--anthropic-base-url", "v"], "not both"),
        (["--base-url", "u", "--openai-base-url", "v"], "one base URL"),
        (["--api-key-env", "NAVI_TEST_UNSET"], "$NAVI_TEST_UNSET is not set"),
        (["--base-url", "localhost:1/v1"], "http:// or https://: 'localhost:1/v1'"),
        (["--base-url", "ftp://host/v1"], "http:// or https://: 'ftp://host/v1'"),
        # user info in a URL without a scheme is not echoed
        (["--base-url", "u:pw-1234567@h/v1"], "http:// or https://: 'h/v1'"),
    ],
)
def test_contradictory_or_missing_provider_flags(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        _parse("run", "hi", "--model", "m", *argv)


@pytest.mark.parametrize(
    ("argv", "environ", "refused"),
    [
        ([], {}, "OPENAI"),
        (["--anthropic"], {}, "ANTHROPIC"),
        (["--base-url", "https://API.openai.com./v1"], {}, "OPENAI"),
        ([], {"OPENAI_BASE_URL": "https://api.openai.com/v1"}, "OPENAI"),
        (["--anthropic"], {"OPENAI_API_KEY": "k"}, "ANTHROPIC"),
        # a local server (by flag or by variable) may need no key; a key is enough
        (["--base-url", "http://127.0.0.1:11434/v1"], {}, None),
        ([], {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, None),
        (["--anthropic"], {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, None),
        ([], {"OPENAI_API_KEY": "k"}, None),
        (["--anthropic"], {"ANTHROPIC_API_KEY": "k"}, None),
        # a variable named by --api-key-env is checked by itself
        (["--api-key-env", "NAVI_TEST_KEY"], {"NAVI_TEST_KEY": "k"}, None),
    ],
)
def test_the_public_api_needs_its_key_and_a_local_server_does_not(
    argv: list[str], environ: dict[str, str], refused: str | None
) -> None:
    args = build_parser().parse_args(["run", "hi", "--model", "m", *argv])
    if refused is None:
        provider_choice(args, environ)
        return
    with pytest.raises(UsageError) as info:
        provider_choice(args, environ)
    assert str(info.value) == (
        f"${refused}_API_KEY is not set (export it, or give --base-url for a local "
        "server that needs none)"
    )


def test_a_base_url_without_a_scheme_is_a_usage_error(tmp_path: Path) -> None:
    result = navi(
        "run", "hi", "--model", "m", "--base-url", "localhost:1/v1", "--db", "n.db",
        cwd=tmp_path,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: the base URL must start with http://")
    assert not (tmp_path / "n.db").exists()


def test_the_old_compact_spellings_still_choose_the_endpoint() -> None:
    assert _parse(
        "compact", "s", "--model", "m", "--anthropic-base-url", "http://a"
    ) == ProviderChoice("m", anthropic=True, base_url="http://a")
    assert _parse(
        "compact", "s", "--model", "m", "--openai-base-url", "http://o/v1"
    ) == ProviderChoice("m", base_url="http://o/v1")


@pytest.mark.parametrize("command", [["run", "hi"], ["compact", "abc"]])
def test_a_missing_key_variable_fails_before_any_store_is_opened(
    tmp_path: Path, command: list[str]
) -> None:
    assert "NAVI_TEST_UNSET" not in os.environ
    result = navi(
        *command,
        "--model",
        "m",
        "--api-key-env",
        "NAVI_TEST_UNSET",
        "--db",
        "navi.db",
        cwd=tmp_path,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "error: --api-key-env: $NAVI_TEST_UNSET is not set\n"
    assert not (tmp_path / "navi.db").exists()


# -- install hints: a command that works from where navi-core was installed ---------


def _dist(tmp_path: Path, direct_url: str | None) -> metadata.Distribution:
    """A navi-core distribution on disk, installed from ``direct_url`` (None: an index)."""
    info = tmp_path / "navi_core-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: navi-core\nVersion: 0.1.0\n"
        "Requires-Dist: httpx>=0.27\n"
        "Provides-Extra: chat\n"
        'Requires-Dist: prompt_toolkit>=3.0.36; extra == "chat"\n'
        'Requires-Dist: rich>=13; extra == "chat"\n'
        'Requires-Dist: tomli>=2; python_version < "3.11" and extra == "chat"\n'
        "Provides-Extra: bench\n"
        'Requires-Dist: matplotlib>=3.7; extra == "bench"\n',
        encoding="utf-8",
    )
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url, encoding="utf-8")
    return metadata.PathDistribution(info)


def test_the_hint_names_the_index_package_when_installed_from_an_index(
    tmp_path: Path,
) -> None:
    assert install_command("chat", _dist(tmp_path, None)) == (
        "pip install 'navi-core[chat]'"
    )


@pytest.mark.parametrize("editable", [True, False])
def test_the_hint_names_the_checkout_when_installed_from_a_folder(
    tmp_path: Path, editable: bool
) -> None:
    checkout = tmp_path / "my checkout"
    url = checkout.as_uri()
    info = '{"editable": true}' if editable else "{}"
    dist = _dist(tmp_path, f'{{"url": "{url}", "dir_info": {info}}}')
    command = install_command("chat", dist)
    flag = "-e " if editable else ""
    assert command == f"pip install {flag}'{checkout}[chat]'"
    # the shell gives pip one argument: the folder with the extra
    assert shlex.split(command)[-1] == f"{checkout}[chat]"


def test_the_hint_names_the_wheel_while_it_exists_then_the_extras_packages(
    tmp_path: Path,
) -> None:
    wheel = tmp_path / "navi_core-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    dist = _dist(
        tmp_path, f'{{"url": "{wheel.as_uri()}", "archive_info": {{"hashes": {{}}}}}}'
    )
    assert install_command("bench", dist) == f"pip install '{wheel}[bench]'"
    wheel.unlink()
    assert install_command("bench", dist) == "pip install 'matplotlib>=3.7'"
    assert shlex.split(install_command("chat", dist)) == [
        "pip",
        "install",
        "prompt_toolkit>=3.0.36",
        "rich>=13",
        'tomli>=2; python_version < "3.11"',
    ]


def test_the_hint_names_the_vcs_url_and_commit(tmp_path: Path) -> None:
    dist = _dist(
        tmp_path,
        '{"url": "https://example.org/navi-core.git", '
        '"vcs_info": {"vcs": "git", "commit_id": "abc123"}}',
    )
    assert install_command("chat", dist) == (
        "pip install 'navi-core[chat] @ git+https://example.org/navi-core.git@abc123'"
    )


def test_a_missing_extra_is_named_with_the_installed_copys_source(
    tmp_path: Path,
) -> None:
    # this checkout is installed editable (README set-up): the hint names it, and
    # pip can act on it from any folder
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from navi_core.cli import main\n"
        "sys.exit(main(['bench', '--model', 'm', '--base-url',"
        " 'http://127.0.0.1:9/v1', '--png', 'out.png']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: --png needs matplotlib: " + install_command("bench")
    )
    origin = metadata.distribution("navi-core").read_text("direct_url.json") or ""
    if ROOT.as_uri() in origin:
        assert f"'{ROOT}[bench]'" in result.stderr
    assert "'navi-core[bench]'" not in result.stderr or not origin


def test_chat_on_a_terminal_without_prompt_toolkit_names_the_install_command(
    tmp_path: Path,
) -> None:
    code = (
        "import sys; sys.modules['prompt_toolkit'] = None\n"
        "from navi_core.cli import main\n"
        "sys.exit(main(['chat', '--demo', '--db', 'chat.db']))"
    )
    child = pexpect.spawn(
        sys.executable, ["-c", code], cwd=str(tmp_path), encoding="utf-8", timeout=30
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    screen = " ".join(str(child.before).split())
    assert f"needs prompt_toolkit on a terminal: {install_command('chat')}" in screen

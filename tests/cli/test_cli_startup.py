"""What ``navi-core`` does before a command runs, as a user starts it
(``python -m navi_core`` in a real process):

* it loads no TOML reader unless a profile file is read: on Python 3.10 without
  ``tomli`` (``pip install .`` before it was a dependency there) ``--version``,
  ``demo`` and ``run`` work;
* a Ctrl-C while Python is still loading the commands exits with status 130 and no
  traceback, as one while a command runs does.

Both hide or hold a module from a ``sitecustomize.py`` put first on ``PYTHONPATH``,
which Python imports at start-up, before ``navi_core``.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from loopback import LoopbackServer
from test_chat import ROOT, chat_env, text_reply

import navi_core

#: a module that cannot be imported, as when it is not installed
_MISSING = """raise ModuleNotFoundError(
    "No module named {name!r} (hidden by the test)", name={name!r}
)
"""

#: holds the import of $NAVI_TEST_HOLD_IMPORT, once, until a signal ends the wait
_HOLD = """import os, sys, time


class _Hold:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("NAVI_TEST_HOLD_IMPORT"):
            sys.meta_path.remove(self)
            print(f"[holding the import of {name}]", file=sys.stderr, flush=True)
            time.sleep(60)
        return None


sys.meta_path.insert(0, _Hold())
"""


def hooks(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """A folder of modules first on ``PYTHONPATH``; the environment that uses it."""
    folder = tmp_path / "hooks"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return chat_env(tmp_path, PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]))


def navi(
    env: dict[str, str], *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "navi_core", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- no TOML reader unless a profile is read -----------------------------------------


def without_toml(tmp_path: Path) -> dict[str, str]:
    """Neither ``tomllib`` nor ``tomli``: Python 3.10 with the core dependencies of
    an older navi-core (tomllib is hidden too, so that 3.11+ checks the same)."""
    return hooks(
        tmp_path,
        {
            "tomllib.py": _MISSING.format(name="tomllib"),
            "tomli.py": _MISSING.format(name="tomli"),
        },
    )


def test_the_hidden_toml_readers_cannot_be_imported(tmp_path: Path) -> None:
    env = without_toml(tmp_path)
    for name in ("tomllib", "tomli"):
        result = subprocess.run(
            [sys.executable, "-c", f"import {name}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1
        assert "(hidden by the test)" in result.stderr


def test_version_and_demo_need_no_toml_reader(tmp_path: Path) -> None:
    env = without_toml(tmp_path)
    version = navi(env, "--version", cwd=tmp_path)
    assert (version.returncode, version.stderr) == (0, "")
    assert version.stdout == f"navi-core {navi_core.__version__}\n"
    demo = navi(env, "demo", "--db", "demo.db", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "[end_turn] 3 responses, 3 tool calls" in demo.stdout
    assert demo.stderr == ""


def test_run_needs_no_toml_reader(loopback: LoopbackServer, tmp_path: Path) -> None:
    loopback.add(text_reply("Hello ", "there."))
    env = without_toml(tmp_path)
    result = navi(
        env, "run", "hi", "--model", "m", "--base-url", f"{loopback.url}/v1",
        "--db", "run.db", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "assistant: Hello there." in result.stdout
    assert result.stderr == ""


def test_a_profile_is_still_read(loopback: LoopbackServer, tmp_path: Path) -> None:
    """The reader is loaded where the file is read."""
    loopback.add(text_reply("from the profile"))
    config = tmp_path / "config.toml"
    config.write_text(
        f'[profiles.p]\nmodel = "pm"\nbase_url = "{loopback.url}/v1"\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "navi_core", "chat", "--config", str(config),
         "--db", "c.db"],
        input="hi\n", cwd=tmp_path, env=chat_env(tmp_path), capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "from the profile" in result.stdout
    assert loopback.requests[0].json["model"] == "pm"


# -- Ctrl-C while the commands load ---------------------------------------------------


def default_sigint() -> None:
    """In the child: Ctrl-C as in a terminal, even under a runner that ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("args", "held"),
    [
        # the first module the entry point loads: the parser of every command
        (["--version"], "navi_core.cli.parser"),
        # deep inside the commands' imports, and a third-party one
        (["demo", "--db", "demo.db"], "navi_core.agent"),
        (["run", "hi", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], "httpx"),
    ],
)
def test_ctrl_c_while_the_commands_load_exits_130_without_a_traceback(
    tmp_path: Path, args: list[str], held: str
) -> None:
    env = hooks(tmp_path, {"sitecustomize.py": _HOLD})
    env["NAVI_TEST_HOLD_IMPORT"] = held
    child = pexpect.spawn(
        sys.executable,
        ["-m", "navi_core", *args],
        cwd=str(tmp_path),
        env=env,
        dimensions=(24, 80),
        encoding="utf-8",
        codec_errors="replace",
        timeout=30,
        preexec_fn=default_sigint,
    )
    seen = io.StringIO()
    child.logfile_read = seen
    child.expect_exact(f"[holding the import of {held}]")
    child.sendintr()  # the terminal's Ctrl-C, to the whole foreground process group
    child.expect(pexpect.EOF)
    child.close()
    out = seen.getvalue()
    assert child.exitstatus == 130, out
    after = out.split(f"[holding the import of {held}]", 1)[1]
    assert "Traceback" not in after and "KeyboardInterrupt" not in after, after
    assert after.replace("^C", "").strip() == "", after
    assert not (tmp_path / "demo.db").exists()

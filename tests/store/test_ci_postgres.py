""".ci/postgres.sh: where it finds the server, how it fails under CI, how it cleans up.

The script runs in a real bash against stand-in server programs that log their calls,
so no server starts and nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "postgres.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@dataclass
class FakeServer:
    """A directory of stand-in server programs, and the log they append to."""

    bindir: Path
    log: Path

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def _program(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """Stand-ins for initdb, pg_ctl, pg_isready and createdb that succeed.

    Outside pytest's private temporary directory: as root the script runs initdb and
    pg_ctl as the ``postgres`` user, who must be able to run them and write the log.
    """
    root = Path(tempfile.mkdtemp(prefix="navi-fake-pg-"))
    try:
        root.chmod(0o755)
        bindir, log = root / "bin", root / "calls.log"
        bindir.mkdir(mode=0o755)
        log.touch()
        log.chmod(0o666)
        _program(
            bindir / "initdb",
            f'echo initdb >> "{log}"\n'
            'while [ "$1" != -D ]; do shift; done; mkdir -p "$2"\n',
        )
        _program(
            bindir / "pg_ctl",
            'while [ "$1" != -D ]; do shift; done; data="$2"\n'
            'for a; do last="$a"; done\n'
            f'echo "pg_ctl $last" >> "{log}"\n'
            'if [ "$last" = start ]; then touch "$data/postmaster.pid"; '
            'else rm -f "$data/postmaster.pid"; fi\n',
        )
        _program(bindir / "pg_isready", "exit 0\n")
        _program(bindir / "createdb", f'echo "createdb $*" >> "{log}"\n')
        yield FakeServer(bindir, log)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` in bash at the repository root, without any server's variables."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("NAVI_PG") and k not in ("NAVI_TEST_POSTGRES_DSN", "CI")
    }
    return subprocess.run(
        ["bash", "-c", script],
        cwd=SCRIPT.parent.parent,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


_SOURCE_THEN_REPORT = """
set -euo pipefail
source .ci/postgres.sh
echo "sourced: ${NAVI_TEST_POSTGRES_DSN:-no server}"
"""


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_server_that_cannot_start_stops_the_caller(
    fake_server: FakeServer, ci: str
) -> None:
    _program(fake_server.bindir / "initdb", "echo 'initdb: disk full' >&2; exit 1\n")
    result = _bash(_SOURCE_THEN_REPORT, CI=ci, NAVI_PG_BINDIR=str(fake_server.bindir))
    assert result.returncode == 1
    assert "sourced" not in result.stdout
    assert "CI=true needs its tests" in result.stderr


def test_outside_ci_a_server_that_cannot_start_is_skipped_not_fatal(
    fake_server: FakeServer,
) -> None:
    _program(fake_server.bindir / "initdb", "exit 1\n")
    result = _bash(_SOURCE_THEN_REPORT, NAVI_PG_BINDIR=str(fake_server.bindir))
    assert result.returncode == 0, result.stderr
    assert "sourced: no server" in result.stdout
    assert "tests will be skipped" in result.stderr


def test_a_bindir_without_the_server_is_an_error_not_a_fallback(
    tmp_path: Path,
) -> None:
    result = _bash(_SOURCE_THEN_REPORT, CI="true", NAVI_PG_BINDIR=str(tmp_path))
    assert result.returncode == 1
    assert f"NAVI_PG_BINDIR={tmp_path} lacks initdb" in result.stderr
    assert "installing" not in result.stderr


@pytest.mark.parametrize("how", ["NAVI_PG_BINDIR", "pg_config"])
def test_server_binaries_are_found_where_they_are_named(
    fake_server: FakeServer, how: str, tmp_path: Path
) -> None:
    if how == "NAVI_PG_BINDIR":
        env = {"NAVI_PG_BINDIR": str(fake_server.bindir)}
    else:  # pg_config names them even where /usr/lib/postgresql has a server too
        _program(tmp_path / "pg_config", f'echo "{fake_server.bindir}"\n')
        env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    result = _bash(_SOURCE_THEN_REPORT, CI="true", **env)
    assert result.returncode == 0, result.stderr
    assert "sourced: postgresql://postgres@127.0.0.1:" in result.stdout
    initdb, start, createdb, stop = fake_server.calls()
    assert (initdb, start, stop) == ("initdb", "pg_ctl start", "pg_ctl stop")
    assert createdb.startswith("createdb -h 127.0.0.1 -p ")
    assert createdb.endswith(" -U postgres navi_test")


def test_exit_stops_the_server_then_runs_the_callers_trap_quotes_and_all(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    said = tmp_path / "said"
    script = f"""
    set -euo pipefail
    trap 'echo "it'\\''s the \\"old\\" trap; status $?" >> "{said}"' EXIT
    source .ci/postgres.sh
    echo "$NAVI_PG_ROOT"
    exit 3
    """
    result = _bash(script, NAVI_PG_BINDIR=str(fake_server.bindir))
    assert result.returncode == 3, result.stderr
    assert said.read_text() == 'it\'s the "old" trap; status 3\n'
    assert fake_server.calls()[-1] == "pg_ctl stop"
    root = Path(result.stdout.strip())
    assert root.name.startswith("navi-pg.")
    assert not root.exists()


def test_sourcing_again_replaces_the_server_and_chains_the_trap_once(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    said = tmp_path / "said"
    script = f"""
    set -euo pipefail
    trap 'echo old trap >> "{said}"' EXIT
    source .ci/postgres.sh
    first="$NAVI_PG_ROOT"
    source .ci/postgres.sh
    [ ! -e "$first" ] && [ -d "$NAVI_PG_ROOT" ] && echo replaced
    """
    result = _bash(script, NAVI_PG_BINDIR=str(fake_server.bindir))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "replaced\n"
    assert said.read_text() == "old trap\n"
    starts_and_stops = [c for c in fake_server.calls() if c.startswith("pg_ctl")]
    assert starts_and_stops == ["pg_ctl start", "pg_ctl stop"] * 2

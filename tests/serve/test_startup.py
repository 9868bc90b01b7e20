"""``navi-core serve`` that cannot start: one ``error:`` line and status 1, at once,
before anything says it listens (a store that cannot open, an address in use)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from servekit import child_env, free_port


def _serve(*args: str) -> tuple[int, str, float]:
    """Run ``navi-core serve`` to its end: status, stderr and seconds taken."""
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "navi_core", "serve", "--no-auth", *args],
        env=child_env(),
        capture_output=True,
        timeout=60,
    )
    return r.returncode, r.stderr.decode(), time.monotonic() - t0


def _model(port: int) -> list[str]:
    """The flags of a model nobody asks (the server never starts)."""
    bind = f"127.0.0.1:{port}"
    return ["--bind", bind, "--model", "m", "--base-url", "http://127.0.0.1:1/v1"]


def test_a_database_that_cannot_open_is_one_error_line(tmp_path: Path) -> None:
    db = tmp_path / "no" / "such" / "dir" / "x.db"
    status, err, _ = _serve("--db", str(db), *_model(free_port()))
    assert (status, err) == (
        1,
        f"error: SQLite database {str(db)!r}: unable to open database file\n",
    )


def test_a_postgres_server_that_cannot_be_reached_is_one_error_line() -> None:
    dsn = f"postgresql://navi:secret-pw@127.0.0.1:{free_port()}/navi"
    status, err, _ = _serve("--postgres", dsn, *_model(free_port()))
    assert status == 1
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "secret-pw" not in err and "listening" not in err


def test_an_address_in_use_is_one_error_line_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, err, took = _serve("--db", str(tmp_path / "s.db"), *_model(port))
    assert (status, err) == (
        1,
        f"error: cannot listen on 127.0.0.1:{port}: address already in use\n",
    )
    assert took < 3.0  # gunicorn alone retries for 5 s

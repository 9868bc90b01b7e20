"""``navi-core serve`` under real gunicorn for the tests, and a small SSE client.

``Served`` starts ``python -m navi_core serve`` in its own process group on a free
loopback port, waits until it answers, and stops it with SIGTERM (then SIGKILL).
``Client`` speaks the API with httpx and reads turns with the core's own SSE
decoder and ``navi_core.serve.wire.decode_event``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import navi_core
from navi_core.core import SSEDecoder
from navi_core.events import Event
from navi_core.serve.wire import decode_event

__all__ = [
    "LOGS",
    "TOKEN",
    "Client",
    "Served",
    "TurnResult",
    "child_env",
    "free_port",
    "postgres_dsn",
]

TOKEN = "test-token-7f3a"

#: the logs of the servers running now, shown in the report of a test that fails
LOGS: list[Path] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child that imports this checkout's navi_core."""
    root = str(Path(navi_core.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env.pop("NAVI_POSTGRES_DSN", None)
    env.pop("NAVI_DB", None)
    env["NAVI_SERVE_TOKENS"] = TOKEN
    env.update(extra)
    return env


def postgres_dsn() -> str:
    """The test server's DSN; skips (or fails under CI) when none is configured."""
    dsn = os.environ.get("NAVI_TEST_POSTGRES_DSN")
    if not dsn:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(
                "CI is set but NAVI_TEST_POSTGRES_DSN is not: source .ci/postgres.sh"
            )
        pytest.skip("PostgreSQL tests need NAVI_TEST_POSTGRES_DSN (. .ci/postgres.sh)")
    return dsn


class Served:
    """One running ``navi-core serve``."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.log = log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = TOKEN) -> Client:
        return Client(self.url, token)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (a graceful stop), then wait; SIGKILL when it does not stop."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    @classmethod
    @contextmanager
    def start(
        cls, tmp: Path, args: Sequence[str], env: dict[str, str] | None = None
    ) -> Iterator[Served]:
        port = free_port()
        log = tmp / f"serve-{port}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "navi_core",
                    "serve",
                    "--bind",
                    f"127.0.0.1:{port}",
                    *args,
                ],
                env=env or child_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        served = cls(proc, port, log)
        LOGS.append(log)
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"serve exited: {log.read_text()}")
                try:
                    httpx.get(
                        served.url + "/openapi.json", timeout=1
                    ).raise_for_status()
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            yield served
        finally:
            served.terminate()
            LOGS.remove(log)


class TurnResult:
    """The events of one streamed turn, and the error frame if it failed."""

    def __init__(self, events: list[Event], error: dict[str, Any] | None) -> None:
        self.events = events
        self.error = error

    def names(self) -> list[str]:
        return [type(e).__name__ for e in self.events]

    def text(self) -> str:
        return "".join(
            getattr(e, "text", "")
            for e in self.events
            if type(e).__name__ == "TextDelta"
        )

    @property
    def last(self) -> Event:
        return self.events[-1]


class Client:
    """The API over httpx, with the bearer token."""

    def __init__(self, url: str, token: str | None = TOKEN) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=30)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def new_session(self, **body: Any) -> str:
        r = self.http.post("/v1/sessions", json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def messages(self, sid: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 256}
            if cursor:
                params["cursor"] = cursor
            r = self.http.get(f"/v1/sessions/{sid}/messages", params=params)
            assert r.status_code == 200, r.text
            page = r.json()
            out += page["messages"]
            cursor = page["next_cursor"]
            if cursor is None:
                return out

    def turn(self, sid: str, prompt: str | None = None) -> TurnResult:
        body = {} if prompt is None else {"prompt": prompt}
        with self.http.stream("POST", f"/v1/sessions/{sid}/turns", json=body) as r:
            if r.status_code != 200:
                r.read()
                raise AssertionError(f"{r.status_code}: {r.text}")
            return read_turn(r.iter_raw())


def read_turn(chunks: Iterator[bytes]) -> TurnResult:
    """Decode an SSE body into events (and the ``error`` frame, if any)."""
    import orjson

    decoder = SSEDecoder()
    events: list[Event] = []
    error = None
    for chunk in chunks:
        for sse in decoder.feed(chunk):
            if sse.event == "error":
                error = orjson.loads(sse.data)
                continue
            ev = decode_event(sse.data)
            assert type(ev).__name__ == sse.event
            events.append(ev)
    for sse in decoder.close():
        events.append(decode_event(sse.data))
    return TurnResult(events, error)

"""``navi-core serve`` under real gunicorn for the tests, and a small SSE client.

``Served`` starts ``python -m navi_core serve`` in its own process group on a free
loopback port, waits until it answers, and stops it with SIGTERM (then SIGKILL).
``Client`` speaks the API with httpx and reads turns with the core's own SSE
decoder and ``navi_core.serve.wire.decode_event``. ``Attackers`` hold connections
open without finishing a request; ``nginx_binary`` finds Debian's nginx.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
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
    "Attackers",
    "Client",
    "Served",
    "TurnResult",
    "child_env",
    "free_port",
    "nginx_binary",
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


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def nginx_binary() -> str:
    """Debian's nginx; skips (or fails under CI) when it is not installed."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if found is None:
        if _in_ci():
            pytest.fail("CI is set but nginx is not installed: .ci/run installs it")
        pytest.skip("the nginx tests need Debian's nginx (apt-get install nginx)")
    return found


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
    """The API over httpx, with the bearer token (from ``local_address``, if given:
    another loopback address is another client to a server)."""

    def __init__(
        self,
        url: str,
        token: str | None = TOKEN,
        *,
        local_address: str | None = None,
        timeout: float = 30,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = httpx.HTTPTransport(local_address=local_address)
        self.http = httpx.Client(
            base_url=url, headers=headers, timeout=timeout, transport=transport
        )

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


class Attackers:
    """Sockets that hold connections open without finishing a request: ``idle`` ones
    send nothing, ``drip`` ones a header line every 0.2 s, ``short_body`` ones a
    ``Content-Length`` of 1000 and one byte of body."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.socks: list[tuple[str, socket.socket]] = []
        self.opened = time.monotonic()
        self._stop = threading.Event()
        self._dripper = threading.Thread(target=self._drip, daemon=True)

    def open(self, idle: int = 0, drip: int = 0, short_body: int = 0) -> None:
        for _ in range(idle):
            self._connect("idle", b"")
        for _ in range(drip):
            self._connect("drip", b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\n")
        for _ in range(short_body):
            head = (
                b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\n"
                b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n{" % TOKEN.encode()
            )
            self._connect("short_body", head)
        self.opened = time.monotonic()
        self._dripper.start()

    def _connect(self, kind: str, first: bytes) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port))
        if first:
            sock.sendall(first)
        self.socks.append((kind, sock))

    def _drip(self) -> None:
        """A header line every 0.2 s on each drip-fed socket: always some progress."""
        n = 0
        while not self._stop.wait(0.2):
            n += 1
            for kind, sock in self.socks:
                if kind == "drip":
                    with suppress(OSError):
                        sock.send(b"X-Drip-%d: y\r\n" % n)

    def alive(self) -> int:
        """How many of the sockets the server has not closed yet."""
        count = 0
        for _, sock in self.socks:
            try:
                data = sock.recv(65536, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                count += 1
                continue
            except OSError:
                continue
            count += bool(data) and not data.startswith(b"HTTP/1.1 408")
        return count

    def cut_within(self, limit: float) -> dict[str, list[bytes]]:
        """What each socket got before the server closed it (all within ``limit``
        seconds of opening), by kind."""
        got: dict[str, list[bytes]] = {}
        for kind, sock in self.socks:
            sock.settimeout(max(0.1, self.opened + limit - time.monotonic()))
            data = b""
            try:
                while chunk := sock.recv(4096):
                    data += chunk
            except ConnectionResetError:
                pass
            except TimeoutError:
                raise AssertionError(f"a {kind} socket was not cut: {data!r}") from None
            got.setdefault(kind, []).append(data)
        return got

    def close(self) -> None:
        self._stop.set()
        for _, sock in self.socks:
            sock.close()

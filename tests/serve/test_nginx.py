"""``navi-core serve`` behind Debian's nginx, with the shipped configuration.

``deploy/nginx/navi-core.conf.template`` is rendered with the test's ports and run by
the real nginx in front of a real server of one worker and two turn threads, on
loopback. Attackers connect from 127.0.0.1; the client under test from 127.0.0.2
(another loopback address: another client to nginx's per-address limits).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from string import Template

import httpx
import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import (
    LOGS,
    Attackers,
    Client,
    Served,
    free_port,
    nginx_binary,
    read_turn,
)

from navi_core.events import StopReason, TurnComplete

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy/nginx/navi-core.conf.template"
CLIENT = "127.0.0.2"


def render(listen: int, upstream: int) -> str:
    """The shipped template with the test's ports filled in."""
    return Template(TEMPLATE.read_text()).safe_substitute(
        NAVI_LISTEN=f"127.0.0.1:{listen}",
        NAVI_SERVER_NAME="localhost",
        NAVI_UPSTREAM=f"127.0.0.1:{upstream}",
    )


class Nginx:
    """nginx in the foreground, its files in one folder."""

    def __init__(self, root: Path, upstream: int) -> None:
        self.root = root
        self.port = free_port()
        (root / "navi-core.conf").write_text(render(self.port, upstream))
        user = (
            "user root;\n" if os.geteuid() == 0 else ""
        )  # its workers read root's tmp
        temp = "\n".join(
            f"    {name}_temp_path {root}/{name};"
            for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (root / "nginx.conf").write_text(
            f"{user}daemon off;\nworker_processes 1;\npid {root}/nginx.pid;\n"
            f"error_log {root}/error.log warn;\n"
            "events { worker_connections 1024; }\n"
            f"http {{\n    access_log off;\n{temp}\n"
            f"    include {root}/navi-core.conf;\n}}\n"
        )
        self.log = root / "error.log"
        with open(root / "nginx.stderr", "wb") as err:
            self.proc = subprocess.Popen(
                [nginx_binary(), "-p", str(root), "-c", str(root / "nginx.conf")],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nginx exited: {(self.root / 'nginx.stderr').read_text()}"
                    f"{self.log.read_text() if self.log.exists() else ''}"
                )
            try:
                httpx.get(self.url + "/openapi.json", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "nginx did not answer"
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def behind_nginx(
    fake_model: FakeModel, tmp_path: Path
) -> Iterator[tuple[Nginx, Served]]:
    nginx_binary()  # skip (or fail under CI) before starting anything
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "s.db")]
    args += ["--workers", "1", "--threads", "2", "--trusted-proxy", "127.0.0.1"]
    with Served.start(tmp_path, args) as served:
        root = tmp_path / "nginx"
        root.mkdir()
        nginx = Nginx(root, served.port)
        LOGS.append(nginx.log)
        try:
            nginx.wait_ready()
            yield nginx, served
        finally:
            nginx.stop()
            LOGS.remove(nginx.log)


def test_the_shipped_config_streams_turns_past_idle_and_drip_fed_clients(
    behind_nginx: tuple[Nginx, Served],
) -> None:
    nginx, _ = behind_nginx
    attackers = Attackers(nginx.port)
    try:
        attackers.open(idle=64, drip=16)
        time.sleep(0.5)
        with Client(nginx.url, local_address=CLIENT, timeout=10) as c:
            sid = c.new_session()
            for i in range(3):
                done = c.turn(sid, f"turn {i}").last
                assert isinstance(done, TurnComplete)
                assert done.response == f"echo: turn {i}"
            # the answer streams through nginx: the first words come long before
            # the end of a 2 s turn
            t0 = time.monotonic()
            with c.http.stream(
                "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow 40"}
            ) as r:
                assert r.status_code == 200
                assert r.headers["content-type"].startswith("text/event-stream")
                chunks = r.iter_raw()
                first = b""
                while b"event: TextDelta" not in first:
                    first += next(chunks)
                assert time.monotonic() - t0 < 1.5
                rest = read_turn(chunks)
            assert isinstance(rest.last, TurnComplete)
            assert rest.last.stop_reason is StopReason.END_TURN
            # a cancel lands within a second while a long turn streams
            with c.http.stream(
                "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow 200"}
            ) as r:
                chunks = r.iter_raw()
                next(chunks)
                with Client(nginx.url, local_address=CLIENT, timeout=5) as other:
                    t0 = time.monotonic()
                    cancel = other.http.post(f"/v1/sessions/{sid}/cancel")
                    assert cancel.status_code == 202
                    result = read_turn(chunks)
                    assert time.monotonic() - t0 < 1.0
            assert isinstance(result.last, TurnComplete)
            assert result.last.stop_reason is StopReason.CANCELLED
        # every attacker was still connected (nginx holds them, not the server)
        assert attackers.alive() == 80
    finally:
        attackers.close()


def test_wrong_tokens_are_throttled_per_client_behind_nginx(
    behind_nginx: tuple[Nginx, Served],
) -> None:
    nginx, _ = behind_nginx
    with (
        Client(nginx.url, token="wrong", local_address="127.0.0.3") as guesser,
        Client(nginx.url, local_address=CLIENT) as user,
    ):
        statuses = [guesser.http.get("/v1/sessions").status_code for _ in range(7)]
        assert statuses[:5] == [401] * 5 and statuses[5:] == [429, 429]
        r = guesser.http.get("/v1/sessions")
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        # nginx's address is not the guesser's: the user goes on
        assert user.http.get("/v1/sessions").status_code == 200

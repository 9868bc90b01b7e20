"""``navi-core serve --no-auth``: what a web page can no longer make a browser do.

A page reaches a token-less server through a DNS name it rebinds to 127.0.0.1 (the
browser sends that name as ``Host``), or by posting to it cross-site (a form, or a
``fetch`` with ``text/plain``, needs no preflight). These requests are sent here as
a browser would send them, over real sockets to a real server.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import Served, child_env


@pytest.fixture(scope="module")
def open_server(fake_model: FakeModel, served_dir: Path) -> Iterator[Served]:
    args = [*model_args(fake_model, served_dir), "--db", str(served_dir / "n.db")]
    args += ["--no-auth", "--allow-host", "chat.lan"]
    env = child_env()
    env.pop("NAVI_SERVE_TOKENS")
    with Served.start(served_dir, args, env) as s:
        yield s


def _post(
    served: Served, path: str, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    return httpx.post(served.url + path, content=body, headers=headers, timeout=10)


def test_a_rebound_host_name_is_421_and_known_names_are_served(
    open_server: Served,
) -> None:
    port = open_server.port
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.2", ""):
        r = httpx.get(open_server.url + "/v1/sessions", headers={"Host": host})
        assert r.status_code == 421, (host, r.text)
        assert r.json()["error"] == "misdirected_request"
        r = httpx.post(
            open_server.url + "/v1/sessions", json={}, headers={"Host": host}
        )
        assert r.status_code == 421, host
    page = httpx.get(open_server.url + "/", headers={"Host": "attacker.example"})
    assert page.status_code == 421  # not even the page: its scripts would follow
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST.", "chat.lan"):
        r = httpx.get(open_server.url + "/v1/sessions", headers={"Host": host})
        assert r.status_code == 200, (host, r.text)


def test_cross_site_posts_are_refused_before_anything_is_stored(
    open_server: Served,
) -> None:
    before = httpx.get(open_server.url + "/v1/sessions?limit=256").json()["sessions"]
    own = f"http://127.0.0.1:{open_server.port}"
    cases = [
        # a form post, and a fetch with text/plain: no preflight needed for either
        (b"system=x", {"Content-Type": "application/x-www-form-urlencoded"}, 415),
        (b'{"system": "x"}', {"Content-Type": "text/plain"}, 415),
        (b'{"system": "x"}', {"Content-Type": "multipart/form-data; b=x"}, 415),
        (b'{"system": "x"}', {}, 415),  # a body must say it is JSON
        # JSON from another origin, as the browser marks it
        (
            b"{}",
            {"Content-Type": "application/json", "Origin": "http://evil.example"},
            403,
        ),
        (b"{}", {"Content-Type": "application/json", "Origin": "null"}, 403),
        (
            b"{}",
            {"Content-Type": "application/json", "Origin": f"{own}0"},  # other port
            403,
        ),
        (
            b"{}",
            {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
            403,
        ),
        (
            b"{}",
            {"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
            403,
        ),
    ]
    for body, headers, status in cases:
        r = _post(open_server, "/v1/sessions", body, headers)
        assert r.status_code == status, (headers, r.text)
        assert r.json()["error"] in ("unsupported_media_type", "cross_site_request")
    after = httpx.get(open_server.url + "/v1/sessions?limit=256").json()["sessions"]
    assert after == before  # no session was made


def test_a_cross_site_turn_is_not_driven(open_server: Served) -> None:
    sid = httpx.post(open_server.url + "/v1/sessions", json={}).json()["id"]
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/json", "Origin": "http://evil.example"},
        {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
    ):
        r = _post(
            open_server, f"/v1/sessions/{sid}/turns", b'{"prompt": "hi"}', headers
        )
        assert r.status_code in (403, 415), r.text
        for action in ("cancel", "steer"):
            r = _post(open_server, f"/v1/sessions/{sid}/{action}", b"{}", headers)
            assert r.status_code in (403, 415), r.text
    messages = httpx.get(open_server.url + f"/v1/sessions/{sid}/messages").json()
    assert messages["messages"] == []


def test_the_same_origin_page_and_plain_clients_are_served(open_server: Served) -> None:
    own = f"http://127.0.0.1:{open_server.port}"
    browser = {
        "Content-Type": "application/json",
        "Origin": own,
        "Sec-Fetch-Site": "same-origin",
    }
    r = _post(open_server, "/v1/sessions", b"{}", browser)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = _post(open_server, f"/v1/sessions/{sid}/turns", b'{"prompt": "hi"}', browser)
    assert r.status_code == 200 and "echo: hi" in r.text
    # a client without a body needs no Content-Type; charset parameters are fine
    assert _post(open_server, f"/v1/sessions/{sid}/cancel", b"", {}).status_code == 200
    typed = {"Content-Type": "application/json; charset=utf-8"}
    assert _post(open_server, "/v1/sessions", b"{}", typed).status_code == 201
    # a link from another site may open the page itself
    page = httpx.get(open_server.url + "/", headers={"Sec-Fetch-Site": "cross-site"})
    assert page.status_code == 200


def _serve(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "navi_core", "serve"]
    return subprocess.run(
        [*command, "--db", str(tmp_path / "x.db"), *args],
        env=child_env(),
        capture_output=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "bind", ["0.0.0.0:0", "[::]:0", "192.0.2.1:0", "example.org:0"]
)
def test_no_auth_binds_only_loopback_unless_told(bind: str, tmp_path: Path) -> None:
    r = _serve(["--demo", "--no-auth", "--bind", bind], tmp_path)
    assert r.returncode == 2
    assert b"--no-auth-beyond-loopback" in r.stderr
    # past that check, this one stops at the unset key instead
    told = ["--no-auth", "--no-auth-beyond-loopback", "--bind", bind]
    r = _serve(
        ["--model", "m", "--api-key-env", "NAVI_SERVE_NO_SUCH_KEY", *told], tmp_path
    )
    assert r.returncode == 2 and b"is not set" in r.stderr, r.stderr


@pytest.mark.parametrize("bind", ["127.0.0.5:0", "[::1]:0", "localhost:0"])
def test_no_auth_on_a_loopback_address_needs_no_flag(bind: str, tmp_path: Path) -> None:
    args = ["--model", "m", "--api-key-env", "NAVI_SERVE_NO_SUCH_KEY"]
    r = _serve([*args, "--no-auth", "--bind", bind], tmp_path)
    assert r.returncode == 2 and b"is not set" in r.stderr, r.stderr  # past the check

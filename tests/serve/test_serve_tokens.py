"""Bearer tokens of ``navi-core serve``: weak ones are named at start, and a client
that keeps sending wrong ones is made to wait."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import TOKEN, Client, Served, child_env

from navi_core.serve.auth import weak_token
from navi_core.serve.throttle import AuthThrottle, client_address

STRONG = secrets.token_urlsafe(32)


@pytest.fixture(scope="module")
def one_worker(fake_model: FakeModel, served_dir: Path) -> Iterator[Served]:
    """One worker (each worker counts wrong tokens on its own)."""
    args = [*model_args(fake_model, served_dir), "--db", str(served_dir / "t.db")]
    env = child_env(NAVI_SERVE_TOKENS=STRONG)
    with Served.start(served_dir, [*args, "--workers", "1"], env) as s:
        yield s


def test_weak_tokens_are_named_at_start_never_shown(
    fake_model: FakeModel, tmp_path: Path
) -> None:
    (tmp_path / "workspace").mkdir()
    args = [*model_args(fake_model, tmp_path), "--db", str(tmp_path / "w.db")]
    with Served.start(
        tmp_path, args, child_env(NAVI_SERVE_TOKENS=f"Zq9,{STRONG}")
    ) as s:
        log = s.log.read_text()
        assert "warning: 1 of 2 bearer tokens are weak" in log
        assert "Zq9" not in log and STRONG not in log
        with s.client("Zq9") as c:
            assert c.http.get("/v1/sessions").status_code == 200  # served
    with Served.start(tmp_path, args, child_env(NAVI_SERVE_TOKENS=STRONG)) as s:
        assert "weak" not in s.log.read_text()


def test_weak_token_rules() -> None:
    assert weak_token("x") and weak_token("change-me") and weak_token(TOKEN)
    assert weak_token("a" * 40) and weak_token("abababababababababab")
    # the shortest token taken: 16 characters, 8 of them distinct (a random 16-hex
    # token has fewer 1% of the time; the docs' token_urlsafe(32) never does)
    assert not weak_token(STRONG) and not weak_token("3f9a1c7e3f9a1c7e")
    assert weak_token("3f9a1c3f9a1c3f9a")  # 6 distinct


def test_repeated_wrong_tokens_from_one_address_wait_with_retry_after(
    one_worker: Served,
) -> None:
    with (
        Client(one_worker.url, token="guess") as guesser,
        Client(one_worker.url, token=STRONG) as same_address,
        Client(one_worker.url, token=STRONG, local_address="127.0.0.2") as other,
    ):
        statuses = [guesser.http.get("/v1/sessions").status_code for _ in range(5)]
        assert statuses == [401] * 5
        r = guesser.http.get("/v1/sessions")
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert r.json()["error"] == "too_many_wrong_tokens"
        t0 = time.monotonic()
        # while it waits, even the right token is not looked at from that address
        assert same_address.http.get("/v1/sessions").status_code == 429
        assert other.http.get("/v1/sessions").status_code == 200
        time.sleep(max(0.0, 1.05 - (time.monotonic() - t0)))
        r = guesser.http.get("/v1/sessions")  # the next wrong one waits twice as long
        assert r.status_code == 429 and r.headers["retry-after"] == "2"
        time.sleep(2.05)
        assert same_address.http.get("/v1/sessions").status_code == 200  # clears it
        assert guesser.http.get("/v1/sessions").status_code == 401


def test_a_missing_token_is_not_a_guess(one_worker: Served) -> None:
    statuses = [
        httpx.get(one_worker.url + "/v1/sessions", headers={"X": "y"}).status_code
        for _ in range(12)
    ]
    assert statuses == [401] * 12


def test_the_throttle_doubles_caps_forgets_and_stays_bounded() -> None:
    now = [1000.0]
    t = AuthThrottle(free=2, base=1.0, cap=8.0, max_clients=3, clock=lambda: now[0])
    assert [t.failed("10.0.0.1") for _ in range(7)] == [0, 0, 1, 2, 4, 8, 8]
    assert t.wait("10.0.0.1") == 8.0
    now[0] += 8.0
    assert t.wait("10.0.0.1") == 0.0 and len(t) == 1  # waited; still counted
    now[0] += 8.0
    assert t.wait("10.0.0.1") == 0.0 and len(t) == 0  # quiet for `cap`: forgotten
    for i in range(10):
        t.failed(f"10.0.1.{i}")
    assert len(t) == 3  # the least recently failing went first
    # one IPv6 host holds a /64: its addresses count together
    for i in range(3):
        t.failed(f"2001:db8::{i}")
    assert t.wait("2001:db8::ffff") == 1.0
    assert t.wait("2001:db8:0:1::1") == 0.0
    t.succeeded("2001:db8::7")
    assert t.wait("2001:db8::0") == 0.0


def test_a_trusted_proxy_names_the_client() -> None:
    environ = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_REAL_IP": "203.0.113.9"}
    assert client_address(environ, {"127.0.0.1"}) == "203.0.113.9"
    assert client_address(environ, set()) == "127.0.0.1"  # anyone can send the header
    assert client_address({"REMOTE_ADDR": "127.0.0.1"}, {"127.0.0.1"}) == "127.0.0.1"

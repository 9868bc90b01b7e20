"""Authentication, body limits and field-naming 400s of ``navi-core serve``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
from fake_model import FakeModel
from servekit import TOKEN, Client, Served, child_env

from navi_core.serve.auth import BearerAuth, tokens_from


def test_no_token_or_a_wrong_one_is_401(served: Served) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}):
        r = httpx.get(served.url + "/v1/sessions", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in r.text
    r = httpx.get(
        served.url + "/v1/sessions", headers={"Authorization": f"bearer {TOKEN}"}
    )
    assert r.status_code == 200


def test_tokens_come_from_the_environment_and_a_file(tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text("# serve tokens\nfile-token\n\n  other  \n")
    tokens = tokens_from(f, {"NAVI_SERVE_TOKENS": "a, b c"})
    assert tokens == ["a", "b", "c", "file-token", "other"]
    auth = BearerAuth(tokens)
    assert auth.allows("Bearer file-token") and auth.allows("Bearer  other ")
    assert not auth.allows("Bearer file-toke") and not auth.allows("Basic a")
    assert not auth.allows(None) and not auth.allows("Bearer ")
    assert "file-token" not in repr(auth)


def test_a_token_file_serves_and_no_token_refuses_to_start(
    tmp_path: Path, fake_model: FakeModel
) -> None:
    args = [
        "--model",
        "m",
        "--base-url",
        fake_model.url,
        "--db",
        str(tmp_path / "t.db"),
    ]
    env = child_env()
    env.pop("NAVI_SERVE_TOKENS")
    refused = subprocess.run(
        [sys.executable, "-m", "navi_core", "serve", *args],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert b"no bearer token" in refused.stderr
    (tmp_path / "tokens").write_text("from-a-file\n")
    with Served.start(
        tmp_path, [*args, "--token-file", str(tmp_path / "tokens")], env
    ) as s:
        for token, status in (("from-a-file", 200), (TOKEN, 401)):
            c = s.client(token)
            assert c.http.get("/v1/sessions").status_code == status
            c.close()


def test_a_body_over_the_limit_is_413(client: Client) -> None:
    sid = client.new_session()
    big = {"prompt": "x" * 5000}  # the served limit is 4096 bytes
    r = client.http.post(f"/v1/sessions/{sid}/turns", json=big)
    assert r.status_code == 413 and r.json()["field"] == "body"

    def chunked() -> Iterator[bytes]:
        yield b'{"prompt": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}'

    r = client.http.post(
        f"/v1/sessions/{sid}/turns",
        content=chunked(),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413
    assert client.messages(sid) == []  # nothing was stored


def test_bad_json_and_bad_fields_are_400_naming_the_field(client: Client) -> None:
    sid = client.new_session()
    cases = [
        (f"/v1/sessions/{sid}/turns", b'{"prompt": ', "body"),
        (f"/v1/sessions/{sid}/turns", b"[1, 2]", "body"),
        (f"/v1/sessions/{sid}/turns", b'{"prompt": 5}', "prompt"),
        (f"/v1/sessions/{sid}/turns", b'{"promt": "hi"}', "promt"),
        (f"/v1/sessions/{sid}/steer", b'{"text": ""}', "text"),
        (f"/v1/sessions/{sid}/steer", b"{}", "text"),
        ("/v1/sessions", b'{"system": ["a"]}', "system"),
        (f"/v1/sessions/{sid}/compact", b'{"instructions": 1}', "instructions"),
    ]
    for path, body, field in cases:
        r = client.http.post(
            path, content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == 400, (path, body, r.text)
        assert r.json()["field"] == field, (path, body, r.json())
    assert client.messages(sid) == []


def test_unknown_query_parameters_are_400_naming_them(client: Client) -> None:
    """A misspelt parameter is refused, not silently ignored; the known ones work."""
    sid = client.new_session()
    cases = [
        ("GET", "/v1/sessions?limt=5", "limt"),
        ("GET", f"/v1/sessions/{sid}/messages?limit=5&curser=0", "curser"),
        ("POST", f"/v1/sessions/{sid}/compact?keep=1", "keep"),
    ]
    for method, path, field in cases:
        r = client.http.request(method, path)
        assert r.status_code == 400, (path, r.text)
        assert r.json()["field"] == field, r.json()
        assert "unknown query parameter" in r.json()["message"], r.json()
    assert client.http.get("/v1/sessions?limit=1").status_code == 200
    assert client.http.get(f"/v1/sessions/{sid}/messages?cursor=0").status_code == 200
    # the token is checked first: an unauthenticated caller learns nothing more
    r = client.http.get("/v1/sessions?limt=5", headers={"Authorization": "Bearer no"})
    assert r.status_code == 401

"""``make_app`` embedded without gunicorn, and ``navi-core serve --demo``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import orjson
import pytest
from servekit import Client, Served, child_env

from navi_core import MemoryStore, Scripted, SQLiteStore, Text, ToolUse
from navi_core.events import StopReason, ToolFinished, TurnComplete
from navi_core.serve import BearerAuth, ServeApp, make_app


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadedServer(WSGIServer):
    """wsgiref, one thread per request, as a host application might run it."""

    def process_request(self, request: Any, client_address: Any) -> None:
        def run() -> None:
            try:
                self.finish_request(request, client_address)
            finally:
                self.shutdown_request(request)

        threading.Thread(target=run, daemon=True).start()


def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: what to shout.
    """
    return text.upper()


@contextmanager
def _served(app: ServeApp) -> Iterator[str]:
    """``app`` in a threaded wsgiref server on loopback: its URL, then all closed."""
    server = make_server(
        "127.0.0.1", 0, app, server_class=_ThreadedServer, handler_class=_Quiet
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        app.close()


@pytest.fixture
def embedded() -> Iterator[str]:
    def provider() -> Scripted:
        return Scripted(
            [[Text("Shouting."), ToolUse("c1", "shout", '{"text": "hi"}')], "HI it is."]
        )

    app = make_app(
        MemoryStore(), provider_factory=provider, tools=[shout], auth=BearerAuth(["k"])
    )
    with _served(app) as url:
        yield url


def test_the_app_runs_inside_another_wsgi_server(embedded: str) -> None:
    with Client(embedded, token="k") as c:
        sid = c.new_session(system="be loud")
        result = c.turn(sid, "shout hi")
        finished = [e for e in result.events if isinstance(e, ToolFinished)]
        assert len(finished) == 1 and not finished[0].is_error
        done = result.last
        assert (
            isinstance(done, TurnComplete) and done.stop_reason is StopReason.END_TURN
        )
        assert done.response == "HI it is."
        roles = [m["role"] for m in c.messages(sid)]
        assert roles == ["system", "user", "assistant", "user", "assistant"]
        assert httpx.get(embedded + "/v1/sessions").status_code == 401


def test_demo_serves_without_a_model_endpoint(tmp_path: Path) -> None:
    args = [
        "--demo",
        "--no-auth",
        "--db",
        str(tmp_path / "d.db"),
        "--workspace",
        str(tmp_path),
    ]
    (tmp_path / "a.txt").write_text("x")
    with Served.start(tmp_path, args) as served, served.client(token=None) as c:
        sid = c.new_session()
        result = c.turn(sid, "what is here?")
        assert "ToolFinished" in result.names()
        assert isinstance(result.last, TurnComplete)
        assert "navi-core serve --demo" in result.last.response
        # the answer says what the listing returned
        listed = _listed(c, sid)
        assert "a.txt" in listed
        assert result.last.response.startswith(
            f"The workspace holds **{len(listed)} entries**: "
            + ", ".join(f"`{name}`" for name in listed)
        )


def _listed(c: Client, sid: str) -> list[str]:
    """What the demo's ``list_dir`` call returned in the session."""
    for m in c.messages(sid):
        for block in m["content"]:
            if block["type"] == "tool_result":
                text = block["parts"][0]["text"]
                assert not block["is_error"], text
                return list(orjson.loads(text))
    raise AssertionError("no tool result")


def test_demo_without_a_workspace_reads_its_own_files_until_the_server_stops(
    tmp_path: Path,
) -> None:
    args = ["--demo", "--no-auth", "--db", str(tmp_path / "d.db"), "--workers", "2"]
    with Served.start(tmp_path, args) as served, served.client(token=None) as c:
        assert _listed(c, _turned(c)) == ["README.md", "notes.txt", "station.py"]
        log = served.log.read_text()
        assert (
            f"listening on http://127.0.0.1:{served.port} (2 workers x 8 threads)"
            in log
        )
        scratch = Path(log.split("its tools read ", 1)[1].split()[0])
        assert sorted(p.name for p in scratch.iterdir()) == _listed(c, _turned(c))
        # a worker that exits (not the arbiter) leaves the folder to the others
        workers = Path(f"/proc/{served.proc.pid}/task/{served.proc.pid}/children")
        gone = int(workers.read_text().split()[0])
        os.kill(gone, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while True:
            pids = [int(p) for p in workers.read_text().split()]
            if len(pids) == 2 and gone not in pids:
                break
            assert time.monotonic() < deadline, pids
            time.sleep(0.05)
        for _ in range(4):
            assert _listed(c, _turned(c)) == ["README.md", "notes.txt", "station.py"]
    assert not scratch.exists()


def _turned(c: Client) -> str:
    sid = c.new_session()
    assert isinstance(c.turn(sid, "what is here?").last, TurnComplete)
    return sid


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--demo", "--model", "m"], "two models"),
        ([], "give --model"),
        (["--demo", "--bind", "8000"], "HOST:PORT"),
        (["--demo", "--bind", "127.0.0.1:65536"], "HOST:PORT"),
        (["--demo", "--workers", "0"], "at least 1"),
        (["--model", "m", "--api-key-env", "NAVI_SERVE_NO_SUCH_KEY"], "is not set"),
    ],
)
def test_bad_flags_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "navi_core",
            "serve",
            "--db",
            str(tmp_path / "x.db"),
            *args,
        ],
        env=child_env(),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert message in r.stderr.decode()


def test_approvals_hold_a_call_until_it_is_approved() -> None:
    from navi_core import Agent, tool

    if not hasattr(Agent, "approve"):
        pytest.skip("Agent.approve/deny are not in this build")
    ran: list[str] = []

    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: the file.
        """
        ran.append(path)
        return f"deleted {path}"

    held = tool(needs_approval=True)(delete)  # type: ignore[call-overload, unused-ignore]

    def provider() -> Scripted:
        return Scripted(
            [[ToolUse("c1", "delete", '{"path": "a.txt"}')], "Done: a.txt is gone."]
        )

    app = make_app(MemoryStore(), provider_factory=provider, tools=[held])
    with _served(app) as url, Client(url, token=None) as c:
        sid = c.new_session()
        first = c.turn(sid, "delete a.txt")
        done = first.last
        assert isinstance(done, TurnComplete)
        assert done.stop_reason is StopReason.APPROVAL_REQUIRED
        assert [u.id for u in done.pending_approvals] == ["c1"] and ran == []
        r = c.http.post(f"/v1/sessions/{sid}/approvals/c1", json={"approved": True})
        assert r.status_code == 200 and r.json() == {
            "call_id": "c1",
            "approved": True,
        }
        again = c.http.post(
            f"/v1/sessions/{sid}/approvals/nope", json={"approved": True}
        )
        assert (
            again.status_code == 409 and again.json()["error"] == "approval_not_pending"
        )
        resumed = c.turn(sid)  # no prompt: resume runs the approved call once
        assert ran == ["a.txt"]
        assert isinstance(resumed.last, TurnComplete)


def test_an_http_decision_names_the_held_call_by_its_content() -> None:
    """``call: {tool, input}`` binds a decision to the call that is held: a decision
    meant for another call sharing its id is refused and nothing runs."""
    from navi_core import Agent, tool

    ran: list[str] = []

    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: the file.
        """
        ran.append(path)
        return f"deleted {path}"

    held = tool(needs_approval=True)(delete)  # type: ignore[call-overload, unused-ignore]

    def provider() -> Scripted:
        return Scripted([[ToolUse("c1", "delete", '{"path": "a.txt"}')], "Done."])

    assert hasattr(Agent, "approve")
    app = make_app(MemoryStore(), provider_factory=provider, tools=[held])
    with _served(app) as url, Client(url, token=None) as c:
        sid = c.new_session()
        done = c.turn(sid, "delete a.txt").last
        assert isinstance(done, TurnComplete)
        (pending,) = done.pending_approvals
        url = f"/v1/sessions/{sid}/approvals/{pending.id}"
        other = {"tool": "delete", "input": '{"path": "b.txt"}'}
        stale = {"approved": True, "call": other}
        r = c.http.post(url, json=stale)
        assert r.status_code == 409, r.text
        half = c.http.post(url, json={"approved": True, "call": {"tool": "delete"}})
        assert half.status_code == 400 and half.json()["field"] == "call"
        assert ran == []
        this_call = {"tool": pending.name, "input": pending.input}
        exact = {"approved": True, "call": this_call}
        assert c.http.post(url, json=exact).status_code == 200
        resumed = c.turn(sid)
        assert ran == ["a.txt"]
        assert isinstance(resumed.last, TurnComplete)


def test_without_a_db_flag_sessions_live_in_the_user_data_directory(
    tmp_path: Path,
) -> None:
    env = child_env(XDG_DATA_HOME=str(tmp_path / "data"), HOME=str(tmp_path))
    with (
        Served.start(tmp_path, ["--demo", "--no-auth"], env) as served,
        served.client(token=None) as c,
    ):
        sid = _turned(c)
    with SQLiteStore(tmp_path / "data" / "navi-core" / "navi.db") as store:
        assert store.get(sid).message_count == 4


def _raw_post(url: str, path: str, head: bytes = b"") -> tuple[int, bytes]:
    """POST ``path`` with no body and no ``Content-Length`` (as ``curl -X POST``
    sends it): the status and the body, which must come within 5 s."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(
            b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s\r\n"
            % (path.encode(), host.encode(), head)
        )
        answer = b""
        while chunk := sock.recv(65536):  # wsgiref closes after each answer
            answer += chunk
    head_part, _, body = answer.partition(b"\r\n\r\n")
    return int(head_part.split()[1]), body


def test_a_post_without_a_body_or_a_length_is_answered_at_once() -> None:
    """PEP 3333: no ``CONTENT_LENGTH`` is an empty body, not one to read until the
    client closes (wsgiref's input never ends while the connection is open)."""
    app = make_app(MemoryStore(), provider_factory=lambda: Scripted(["hi"]))
    with _served(app) as url:
        status, body = _raw_post(url, "/v1/sessions")
        assert status == 201, body
        sid = orjson.loads(body)["id"]
        status, body = _raw_post(url, f"/v1/sessions/{sid}/cancel")
        assert (status, orjson.loads(body)) == (200, {"running": False})
        status, body = _raw_post(url, f"/v1/sessions/{sid}/compact")
        assert status == 200, body
        assert orjson.loads(body)["compacted"] is False
        # a chunked body the server does not end for the app cannot be read: 411
        chunked = b"Transfer-Encoding: chunked\r\n"
        status, body = _raw_post(url, f"/v1/sessions/{sid}/cancel", chunked)
        assert status == 411 and orjson.loads(body)["error"] == "length_required"

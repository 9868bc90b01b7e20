"""A served session: ``navi-core serve`` on loopback, driven over HTTP with httpx.

    pip install '.[serve]'            # gunicorn
    python examples/served_session.py

Starts the server on a free port of 127.0.0.1 with a fresh bearer token, creates a
session, streams one turn as server-sent events, reads the stored messages back and
stops the server with SIGTERM (a graceful stop). The model: NAVI_BASE_URL and
NAVI_MODEL name a real endpoint; unset, the server runs ``--demo``, a scripted model
whose tools read a scratch folder of three files.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: Path, port: int, token: str) -> subprocess.Popen[bytes]:
    base_url = os.environ.get("NAVI_BASE_URL")
    model = (
        ["--model", os.environ.get("NAVI_MODEL", "qwen2.5"), "--base-url", base_url]
        if base_url
        else ["--demo"]
    )
    command = [sys.executable, "-m", "navi_core", "serve", "--db", str(db)]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2"]
    # the token is read from the environment, never from the command line
    env = {**os.environ, "NAVI_SERVE_TOKENS": token}
    return subprocess.Popen([*command, *model], env=env)


def wait_until_up(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        if server.poll() is not None:
            raise SystemExit(f"navi-core serve exited with status {server.returncode}")
        try:
            httpx.get(f"{url}/openapi.json", timeout=1).raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def stream_turn(client: httpx.Client, session_id: str, prompt: str) -> None:
    """POST a turn and print its events as they arrive (``event:`` / ``data:`` lines)."""
    body = {"prompt": prompt}
    with client.stream("POST", f"/v1/sessions/{session_id}/turns", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            match event["type"]:
                case "TextDelta":
                    print(event["text"], end="", flush=True)
                case "ToolStarted":
                    print(f"\n[tool {event['name']}]", end="")
                case "TurnComplete":
                    print(f"\n[turn over: {event['stop_reason']}]")
                case "error":
                    print(f"\n[failed: {event['error']}: {event['message']}]")


def main() -> None:
    token = secrets.token_urlsafe(24)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(Path(folder) / "navi.db", port, token)
        try:
            wait_until_up(url, server)
            headers = {"authorization": f"Bearer {token}"}
            with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
                session = client.post("/v1/sessions", json={}).json()
                print("session", session["id"])
                stream_turn(client, session["id"], "What is in the workspace?")
                page = client.get(f"/v1/sessions/{session['id']}/messages").json()
                print("stored messages:", len(page["messages"]))
        finally:
            server.send_signal(signal.SIGTERM)  # running turns finish, then it exits
            server.wait(timeout=60)
    print("server stopped with status", server.returncode)


if __name__ == "__main__":
    main()

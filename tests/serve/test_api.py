"""Every endpoint of ``navi-core serve`` over real gunicorn workers on loopback."""

from __future__ import annotations

import itertools
import time

import orjson
import pytest
from servekit import Client, Served, read_turn

from navi_core import codec
from navi_core.events import (
    MessageComplete,
    StopReason,
    ToolDispatchComplete,
    ToolFinished,
    ToolStarted,
    TurnComplete,
)


def test_create_get_and_list_sessions_with_paging(client: Client) -> None:
    made = [client.new_session() for _ in range(5)]
    r = client.http.get(f"/v1/sessions/{made[0]}")
    assert r.status_code == 200
    assert r.json()["id"] == made[0] and r.json()["message_count"] == 0
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.http.get("/v1/sessions", params=params).json()
        assert len(page["sessions"]) <= 2
        seen += [s["id"] for s in page["sessions"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert set(made) <= set(seen) and len(seen) == len(set(seen))
    assert pages >= 3


def test_a_session_with_a_system_prompt_stores_it(client: Client) -> None:
    sid = client.new_session(system="answer in French")
    messages = client.messages(sid)
    assert messages[0]["role"] == "system"
    assert messages[0]["content"][0] == {
        "type": "system",
        "text": "answer in French",
        "mode": "append",
    }


def test_a_turn_streams_one_sse_event_per_navi_event(client: Client) -> None:
    sid = client.new_session()
    result = client.turn(sid, "hello world")
    assert result.error is None
    assert result.names()[0] == "ModelInfo"
    assert result.text() == "echo: hello world"
    done = result.last
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.END_TURN
    assert done.response == "echo: hello world"
    complete = [e for e in result.events if isinstance(e, MessageComplete)]
    assert len(complete) == 1 and complete[0].usage.output == 5
    stored = [codec.from_obj(m) for m in client.messages(sid)]
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].content == complete[0].message.content


def test_a_tool_turn_runs_the_workspace_tool(client: Client) -> None:
    sid = client.new_session()
    result = client.turn(sid, "please use tool")
    names = result.names()
    assert names.count("ToolStarted") == 1 and names.count("ToolFinished") == 1
    started = next(e for e in result.events if isinstance(e, ToolStarted))
    finished = next(e for e in result.events if isinstance(e, ToolFinished))
    assert started.name == "list_dir" and not finished.is_error
    results = next(e for e in result.events if isinstance(e, ToolDispatchComplete))
    assert "notes.txt" in results.message.tool_results[0].text
    assert result.text().startswith('tool said: ["notes.txt"]')
    assert len(client.messages(sid)) == 4


def test_messages_page_by_cursor_with_a_limit_up_to_256(client: Client) -> None:
    sid = client.new_session()
    for i in range(3):
        client.turn(sid, f"n{i}")
    first = client.http.get(f"/v1/sessions/{sid}/messages", params={"limit": 4}).json()
    assert len(first["messages"]) == 4 and first["next_cursor"]
    rest = client.http.get(
        f"/v1/sessions/{sid}/messages",
        params={"limit": 4, "cursor": first["next_cursor"]},
    ).json()
    assert len(rest["messages"]) == 2 and rest["next_cursor"] is None
    texts = [m["content"][0]["text"] for m in first["messages"] + rest["messages"]]
    assert texts == ["n0", "echo: n0", "n1", "echo: n1", "n2", "echo: n2"]
    default = client.http.get(f"/v1/sessions/{sid}/messages").json()
    assert len(default["messages"]) == 6
    for bad in ("0", "257", "x"):
        r = client.http.get(f"/v1/sessions/{sid}/messages", params={"limit": bad})
        assert r.status_code == 400 and r.json()["field"] == "limit"
    r = client.http.get(f"/v1/sessions/{sid}/messages", params={"cursor": "-1"})
    assert r.status_code == 400 and r.json()["field"] == "cursor"


def test_resume_without_a_prompt_answers_a_stored_prompt(client: Client) -> None:
    sid = client.new_session()
    client.turn(sid, "first")
    again = client.turn(sid)  # nothing to answer: the turn just completes
    assert isinstance(again.last, TurnComplete)
    assert again.names() == ["TurnComplete"]
    assert len(client.messages(sid)) == 2


def test_steer_while_idle_joins_the_next_turn(client: Client) -> None:
    sid = client.new_session()
    r = client.http.post(f"/v1/sessions/{sid}/steer", json={"text": "and be quick"})
    assert r.status_code == 202 and r.json() == {"disposition": "next_turn"}
    client.turn(sid, "go")
    users = [
        m["content"][0]["text"] for m in client.messages(sid) if m["role"] == "user"
    ]
    assert users == ["and be quick", "go"]  # the next turn applies it first


def test_steer_reaches_a_running_turn_from_any_worker(
    client: Client, served: Served
) -> None:
    sid = client.new_session()
    other = served.client()
    with client.http.stream(
        "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow 10"}
    ) as r:
        chunks = r.iter_raw()
        seen = [next(chunks)]
        while b"event: TextDelta" not in b"".join(seen):  # the answer is streaming
            seen.append(next(chunks))
        s = other.http.post(f"/v1/sessions/{sid}/steer", json={"text": "steered in"})
        assert s.status_code == 202 and s.json() == {"disposition": "queued"}
        result = read_turn(itertools.chain(seen, chunks))
    other.close()
    assert "Steered" in result.names()
    assert result.text() == "tick " * 10 + "echo: steered in"
    texts = [(m["role"], m["content"][0]["text"]) for m in client.messages(sid)]
    assert texts == [
        ("user", "slow 10"),
        ("assistant", "tick " * 10),
        ("user", "steered in"),
        ("assistant", "echo: steered in"),
    ]


def test_cancel_from_another_connection_ends_the_turn(
    client: Client, served: Served
) -> None:
    sid = client.new_session()
    other = served.client()
    with client.http.stream(
        "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}
    ) as r:
        chunks = r.iter_raw()
        next(chunks)
        t0 = time.monotonic()
        c = other.http.post(f"/v1/sessions/{sid}/cancel", json={})
        assert c.status_code == 202 and c.json() == {"running": True}
        result = read_turn(chunks)
        elapsed = time.monotonic() - t0
    other.close()
    done = result.last
    assert isinstance(done, TurnComplete) and done.stop_reason is StopReason.CANCELLED
    assert elapsed < 1.0  # the whole response would take 5 s
    assert client.http.post(f"/v1/sessions/{sid}/cancel").json() == {"running": False}


def test_cancel_when_idle_says_so(client: Client) -> None:
    sid = client.new_session()
    r = client.http.post(f"/v1/sessions/{sid}/cancel")
    assert r.status_code == 200 and r.json() == {"running": False}


def test_compact_summarises_the_old_turns(client: Client) -> None:
    sid = client.new_session()
    for i in range(4):
        client.turn(sid, f"message number {i}")
    r = client.http.post(
        f"/v1/sessions/{sid}/compact", json={"instructions": "keep numbers"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {
        "compacted",
        "summarized_messages",
        "kept_turns",
        "usage",
        "cost",
    }
    assert set(body["usage"]) >= {"input", "output"}


@pytest.mark.parametrize(
    ("keep", "status"), [(1, 200), (1.0, 200), (1.5, 400), (-1, 400), (True, 400)]
)
def test_keep_turns_is_a_json_integer(
    client: Client, keep: object, status: int
) -> None:
    """``1.0`` is an integer in JSON Schema, as the OpenAPI document says."""
    sid = client.new_session()
    for i in range(3):
        client.turn(sid, f"message number {i}")
    r = client.http.post(f"/v1/sessions/{sid}/compact", json={"keep_turns": keep})
    assert r.status_code == status, r.text
    if status == 400:
        assert r.json()["field"] == "keep_turns"


def test_an_approval_for_no_held_call_is_refused(client: Client) -> None:
    from navi_core import Agent

    sid = client.new_session()
    r = client.http.post(
        f"/v1/sessions/{sid}/approvals/call_1", json={"approved": True}
    )
    if hasattr(Agent, "approve"):
        assert r.status_code == 409 and r.json()["error"] == "approval_not_pending"
    else:
        assert r.status_code == 501, r.text
    r = client.http.post(
        f"/v1/sessions/{sid}/approvals/call_1", json={"approved": "yes"}
    )
    assert r.status_code == 400 and r.json()["field"] == "approved"


def test_unknown_sessions_paths_and_methods(client: Client) -> None:
    r = client.http.get("/v1/sessions/nope")
    assert r.status_code == 404 and r.json()["error"] == "session_not_found"
    r = client.http.post("/v1/sessions/nope/turns", json={"prompt": "x"})
    assert r.status_code == 404
    r = client.http.get("/v1/nowhere")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = client.http.delete("/v1/sessions")
    assert r.status_code == 405 and "POST" in r.headers["allow"]


def test_openapi_and_page_are_served_without_a_token(served: Served) -> None:
    anon = served.client(token=None)
    doc = anon.http.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert "/v1/sessions/{session_id}/turns" in doc["paths"]
    page = anon.http.get("/")
    assert page.status_code == 200 and b"<title>navi-core</title>" in page.content
    anon.close()


def test_event_data_is_one_json_line_with_a_type_tag(client: Client) -> None:
    sid = client.new_session()
    with client.http.stream(
        "POST", f"/v1/sessions/{sid}/turns", json={"prompt": "tag"}
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read()
    frames = [f for f in raw.split(b"\n\n") if f and not f.startswith(b":")]
    for frame in frames:
        name_line, data_line = frame.split(b"\n")
        name = name_line.removeprefix(b"event: ").decode()
        assert orjson.loads(data_line.removeprefix(b"data: "))["type"] == name

"""Approvals across real processes on SQLite and PostgreSQL, SIGKILL included.

One process runs a turn until a call waits for approval; another approves it and is
killed with SIGKILL before anything resumes; a third resumes: the tool runs exactly
once. A resumer killed while the approved tool runs leaves the call claimed: the
next resume answers it as interrupted and never runs it again. A decision made in
another process names the held call by its key: a key of an earlier call whose id
a later one reuses is refused there and decides nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "store"))
from storekit import child_env, fresh_schema

_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from navi_core import Agent, Scripted, SessionBusy, Text, ToolUse, tool
    from navi_core.approvals import ApprovalMismatch

    mode, spec, count = sys.argv[1:4]
    sid = sys.argv[4] if len(sys.argv) > 4 else None
    key = sys.argv[5] if len(sys.argv) > 5 else None

    def open_store():
        kind, _, where = spec.partition(":")
        if kind == "sqlite":
            from navi_core.store import SQLiteStore
            return SQLiteStore(where)
        from navi_core.store.postgres import PostgresStore
        return PostgresStore(where, max_size=2)

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        \"\"\"Pay an amount.\"\"\"
        with open(count, "a") as f:
            f.write(f"paid {amount} in {os.getpid()}\\n")
        if mode == "resume-crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"paid {amount}"

    def agent(script):
        store = open_store()
        deadline = time.monotonic() + 10
        while True:  # a killed holder's lock may take a moment to be freed
            try:
                return Agent(Scripted(script), tools=[pay], store=store, session=sid)
            except SessionBusy:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def finish(stream):
        with stream:
            events = list(stream)
        done = events[-1]
        sent = [type(e).__name__ for e in events]
        return {"stop": str(done.stop_reason), "response": done.response, "events": sent,
                "pending": [u.id for u in done.pending_approvals]}

    def keys(a):
        return [h.key for h in a.store.approvals(a.session_id) if h.state == "pending"]

    if mode in ("hold", "hold-again"):
        amount, prompt = ("30", "pay 30") if mode == "hold" else ("9999", "pay more")
        a = agent([[Text("paying"), ToolUse("p1", "pay", f'{{"amount": {amount}}}')]])
        out = finish(a.run(prompt))
        out["sid"] = a.session_id
        out["keys"] = keys(a)
        print(json.dumps(out), flush=True)
        a.close()
    elif mode == "approve-key":
        a = agent([])
        try:
            a.approve(key)
            out = {"approved": True}
        except ApprovalMismatch as exc:
            out = {"refused": str(exc)}
        out["keys"] = keys(a)
        print(json.dumps(out), flush=True)
        a.close()
    elif mode == "approve":
        a = agent([])
        a.approve("p1")
        print(json.dumps({"approved": True}), flush=True)
        time.sleep(60)  # killed here, before any resume
    else:
        a = agent([[Text("done paying")]])
        out = finish(a.resume())
        last = a.conversation.messages
        results = [m for m in last if m.role == "user" and m.tool_results]
        out["results"] = [r.text for m in results for r in m.tool_results]
        print(json.dumps(out), flush=True)
        a.close()
    """
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'navi.db'}"
        return
    with fresh_schema() as dsn:
        from navi_core.store.postgres import PostgresStore

        PostgresStore(dsn).close()  # create the schema once, before the children
        yield f"postgres:{dsn}"


def child(tmp: Path, *args: str) -> subprocess.Popen[str]:
    script = tmp / "child.py"
    if not script.exists():
        script.write_text(_CHILD)
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


def run(tmp: Path, *args: str) -> tuple[int, dict[str, object]]:
    proc = child(tmp, *args)
    out, err = proc.communicate(timeout=60)
    lines = out.strip().splitlines()
    return proc.returncode, (json.loads(lines[-1]) if lines else {"stderr": err})


def paid(count: Path) -> list[str]:
    return count.read_text().splitlines() if count.exists() else []


def hold(tmp: Path, spec: str, count: Path) -> str:
    code, out = run(tmp, "hold", spec, str(count))
    assert code == 0, out
    assert out["stop"] == "approval_required" and out["pending"] == ["p1"]
    assert paid(count) == []
    return str(out["sid"])


def approve_then_sigkill(tmp: Path, spec: str, count: Path, sid: str) -> None:
    proc = child(tmp, "approve", spec, str(count), sid)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert json.loads(line) == {"approved": True}
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)  # also closes the pipes
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_between_approve_and_resume_runs_the_tool_once(
    tmp_path: Path, spec: str
) -> None:
    count = tmp_path / "paid.txt"
    sid = hold(tmp_path, spec, count)
    approve_then_sigkill(tmp_path, spec, count, sid)
    assert paid(count) == []  # approving runs nothing
    code, out = run(tmp_path, "resume", spec, str(count), sid)
    assert code == 0, out
    assert out["stop"] == "end_turn" and out["response"] == "done paying"
    assert out["results"] == ["paid 30"]
    assert len(paid(count)) == 1
    # resuming again, in yet another process, runs nothing more
    code, out = run(tmp_path, "resume", spec, str(count), sid)
    assert code == 0, out
    assert out["events"] == ["TurnComplete"]
    assert len(paid(count)) == 1


def test_a_resumer_killed_inside_the_tool_never_runs_it_twice(
    tmp_path: Path, spec: str
) -> None:
    count = tmp_path / "paid.txt"
    sid = hold(tmp_path, spec, count)
    approve_then_sigkill(tmp_path, spec, count, sid)
    code, _ = run(tmp_path, "resume-crash", spec, str(count), sid)
    assert code == -signal.SIGKILL
    assert len(paid(count)) == 1
    code, out = run(tmp_path, "resume", spec, str(count), sid)
    assert code == 0, out
    assert len(paid(count)) == 1, "the claimed call must not run again"
    results = out["results"]
    assert isinstance(results, list) and len(results) == 1
    assert "interrupted" in results[0]
    assert out["stop"] == "end_turn"


def test_two_resumers_at_once_run_the_call_once(tmp_path: Path, spec: str) -> None:
    count = tmp_path / "paid.txt"
    sid = hold(tmp_path, spec, count)
    approve_then_sigkill(tmp_path, spec, count, sid)
    procs = [child(tmp_path, "resume", spec, str(count), sid) for _ in range(2)]
    t0 = time.monotonic()
    for p in procs:
        p.communicate(timeout=60)
    assert time.monotonic() - t0 < 60
    assert len(paid(count)) == 1


def test_a_key_of_an_earlier_call_decides_nothing_in_another_process(
    tmp_path: Path, spec: str
) -> None:
    count = tmp_path / "paid.txt"
    code, first = run(tmp_path, "hold", spec, str(count))
    assert code == 0, first
    sid = str(first["sid"])
    stale = first["keys"][0]  # type: ignore[index]
    assert first["keys"] == [stale]
    # a new prompt leaves the held call behind; the model reuses its id "p1"
    code, second = run(tmp_path, "hold-again", spec, str(count), sid)
    assert code == 0, second
    assert second["stop"] == "approval_required" and second["pending"] == ["p1"]
    current = second["keys"][0]  # type: ignore[index]
    assert [current] == second["keys"] and current != stale
    code, out = run(tmp_path, "approve-key", spec, str(count), sid, str(stale))
    assert code == 0, out
    assert "p1" in str(out["refused"]) and out["keys"] == [current]  # still pending
    code, out = run(tmp_path, "resume", spec, str(count), sid)
    assert code == 0, out
    assert out["stop"] == "approval_required" and paid(count) == []
    code, out = run(tmp_path, "approve-key", spec, str(count), sid, str(current))
    assert code == 0 and out == {"approved": True, "keys": []}, out
    code, out = run(tmp_path, "resume", spec, str(count), sid)
    assert code == 0, out
    assert [line.split(" in ")[0] for line in paid(count)] == ["paid 9999"]

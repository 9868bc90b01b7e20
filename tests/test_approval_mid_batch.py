"""A call held for approval while the rest of its batch still runs.

A process runs a batch of a slow tool and a call that needs approval. While the slow
tool runs, the held call must already be stored as pending, so another process can
decide it then; after the first process is SIGKILLed, a resume runs the approved call
exactly once and reads only the slow call as interrupted (the held one never ran).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from navi_core import Agent, ApprovalState, Scripted, Text, tool
from navi_core.approvals import decide
from navi_core.store import SQLiteStore

_CHILD = textwrap.dedent(
    """
    import os, sys, time
    from navi_core import Agent, Scripted, Text, ToolUse, tool
    from navi_core.store import SQLiteStore

    db, log = sys.argv[1:3]

    @tool
    def slow() -> str:
        \"\"\"Take a long time.\"\"\"
        with open(log, "a") as f:
            f.write("slow started\\n")
        time.sleep(60)
        return "slow done"

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        \"\"\"Pay an amount.\"\"\"
        with open(log, "a") as f:
            f.write("paid in the first process\\n")
        return "paid"

    calls = [ToolUse("s1", "slow", "{}"), ToolUse("p1", "pay", '{"amount": 9}')]
    agent = Agent(Scripted([calls]), tools=[slow, pay], store=SQLiteStore(db))
    print(agent.session_id, flush=True)
    agent.run("go").result()
    """
)


def _wait_for(path: Path, text: str) -> None:
    deadline = time.monotonic() + 30
    while not (path.exists() and text in path.read_text()):
        assert time.monotonic() < deadline, f"{text!r} never came"
        time.sleep(0.02)


def test_a_held_call_is_pending_while_its_batch_runs_and_survives_a_sigkill(
    tmp_path: Path,
) -> None:
    db, log = tmp_path / "navi.db", tmp_path / "log"
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        sid = proc.stdout.readline().strip()
        _wait_for(log, "slow started")
        with SQLiteStore(db) as store:
            deadline = time.monotonic() + 10
            while not [a for a in store.approvals(sid) if a.call_id == "p1"]:
                assert time.monotonic() < deadline, "the held call was never stored"
                time.sleep(0.02)
            (held,) = [a for a in store.approvals(sid) if a.call_id == "p1"]
            assert held.state is ApprovalState.PENDING
            decide(store, sid, "p1", ApprovalState.APPROVED)  # while slow still runs
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)

    ran: list[int] = []

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return "paid"

    @tool
    def slow() -> str:
        """Take a long time."""
        return "slow done"

    with (
        SQLiteStore(db) as store,
        Agent(
            Scripted([[Text("All done.")]]),
            tools=[slow, pay],
            store=store,
            session=sid,
        ) as agent,
    ):
        done = agent.resume().result()
        results = {
            r.tool_use_id: r.text
            for m in agent.conversation.messages
            for r in m.tool_results
        }
    assert done.response == "All done."
    assert ran == [9]  # the approved call ran once, in the resuming process
    assert "paid in the first process" not in log.read_text()
    assert results["p1"] == "paid"
    assert "interrupted" in results["s1"]

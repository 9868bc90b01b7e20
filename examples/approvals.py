"""Hooks and approvals across two processes: one holds a payment, another approves it.

    python examples/approvals.py                      # runs both steps, each in a process
    python examples/approvals.py hold DB              # step 1 alone: prints the session and key
    python examples/approvals.py approve DB SID KEY   # step 2 alone: approve, then resume

A hook asks for approval of any payment over 100; the turn stops with
``approval_required`` and the held call is stored with the session, so step 1's
process can exit. Step 2, in another process (or on another host sharing a
PostgreSQL store), names the call by its ``Approval.key``, approves it and resumes:
the call runs exactly once and the model goes on. The model: NAVI_BASE_URL and
NAVI_MODEL name a real endpoint; unset, each step runs offline on ``Scripted``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from navi_core import (
    Agent,
    ApprovalState,
    Hook,
    NeedsApproval,
    OpenAIChat,
    Provider,
    Scripted,
    SQLiteStore,
    Text,
    ToolCall,
    ToolResult,
    ToolUse,
    TurnComplete,
    Veto,
    tool,
)


def provider(*answers: str | list[Text | ToolUse]) -> Provider:
    """NAVI_BASE_URL's endpoint, or ``answers`` replayed offline."""
    base_url = os.environ.get("NAVI_BASE_URL")
    if base_url:
        return OpenAIChat(os.environ.get("NAVI_MODEL", "qwen2.5"), base_url=base_url)
    return Scripted(answers)


@tool
def pay(amount: int, to: str) -> str:
    """Pay an amount of euros.

    Args:
        amount: euros to pay.
        to: who is paid.
    """
    print(f"  (paying {amount} EUR to {to}, in process {os.getpid()})")
    return f"paid {amount} EUR to {to}"


class Policy(Hook):
    """Small payments go through, large ones wait for a person, unknown payees never."""

    def on_tool_start(self, call: ToolCall) -> Veto | NeedsApproval | None:
        if call.arguments.get("to") == "unknown":
            return Veto("unknown payee")
        if call.arguments.get("amount", 0) > 100:
            return NeedsApproval("payments over 100 EUR need a person's approval")
        return None

    def on_tool_end(self, call: ToolCall, result: ToolResult) -> None:
        print(f"  audit: {call.name}({call.arguments}) -> error={result.is_error}")


def hold(db: str) -> None:
    """Step 1: the model asks for two payments; the large one is held, and we exit."""
    model = provider(
        [
            Text("Paying both invoices."),
            ToolUse("call_1", "pay", '{"amount": 20, "to": "Coffee Ltd"}'),
            ToolUse("call_2", "pay", '{"amount": 250, "to": "ACME"}'),
        ]
    )
    agent = Agent(model, tools=[pay], hooks=[Policy()], store=SQLiteStore(db))
    with agent.run("Pay the two open invoices.") as stream:
        done = [ev for ev in stream][-1]
    assert isinstance(done, TurnComplete)
    print("step 1 stopped:", done.stop_reason)
    for held in agent.store.approvals(agent.session_id):
        if held.state is ApprovalState.PENDING:
            print(f"held: {held.name} ({held.reason})")
            print(f"session={agent.session_id} key={held.key}")
    agent.close()


def approve(db: str, session_id: str, key: str) -> None:
    """Step 2, in another process: approve the held call by its key and resume."""
    model = provider(
        "Both invoices are paid: 20 EUR to Coffee Ltd and 250 EUR to ACME."
    )
    agent = Agent(
        model, tools=[pay], hooks=[Policy()], store=SQLiteStore(db), session=session_id
    )
    agent.approve(key)  # or agent.deny(key, "over budget")
    with agent.resume() as stream:  # runs the approved call once, then asks the model
        done = [ev for ev in stream][-1]
    assert isinstance(done, TurnComplete)
    print("step 2:", done.stop_reason, "-", done.response)
    agent.close()


def both() -> None:
    """Run step 1 and step 2 as two processes, passing the session and key between them."""
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "payments.db")
        me = [sys.executable, __file__]
        first = subprocess.run([*me, "hold", db], stdout=subprocess.PIPE, text=True)
        print(first.stdout, end="")
        first.check_returncode()
        line = next(s for s in first.stdout.splitlines() if s.startswith("session="))
        fields = dict(part.split("=", 1) for part in line.split())
        second = subprocess.run(
            [*me, "approve", db, fields["session"], fields["key"]],
            stdout=subprocess.PIPE,
            text=True,
        )
        print(second.stdout, end="")
        second.check_returncode()


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["hold", db]:
            hold(db)
        case ["approve", db, session_id, key]:
            approve(db, session_id, key)
        case _:
            both()

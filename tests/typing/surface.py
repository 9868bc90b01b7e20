"""Checked by mypy --strict in tests/test_typing.py (never run): the public surface is
typed for user code."""

from __future__ import annotations

from typing_extensions import assert_type

from navi_core import (
    Agent,
    Anthropic,
    AnyEvent,
    CompactionResult,
    Config,
    Cost,
    HistoryPage,
    Hook,
    HookFailure,
    Media,
    MessageComplete,
    NeedsApproval,
    OpenAIChat,
    Phase,
    PostgresStore,
    ProviderRequest,
    Scripted,
    Session,
    SQLiteStore,
    StopReason,
    Stream,
    SubAgent,
    Subscription,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallStart,
    ToolUse,
    TurnComplete,
    Usage,
    Veto,
    is_casual_message,
)

agent = Agent(
    OpenAIChat(model="m", base_url="http://127.0.0.1:1/v1"),
    store=SQLiteStore("navi.db"),
    session="latest",
)
assert_type(Anthropic(model="m"), Anthropic)
assert_type(PostgresStore("postgresql://localhost/db"), PostgresStore)
assert_type(Media(b"\x89PNG"), Media)
assert_type(agent.session, Session)
assert_type(agent.session_id, str)
assert_type(agent.config, Config)
assert_type(agent.compact(), CompactionResult)
compacted = agent.compact()
assert_type(compacted.usage, Usage)
assert_type(compacted.cost, Cost | None)

stream = agent.run("hello")
assert_type(stream, Stream)
assert_type(stream.phase, Phase)
assert_type(stream.usage, Usage)
assert_type(stream.cost, Cost | None)
ev = stream.next()
assert_type(ev, AnyEvent | None)
match ev:
    case TextDelta(text=text):
        assert_type(text, str)
    case ToolCallStart(index=index, name=name):
        assert_type(index, int)
        assert_type(name, str)
    case MessageComplete(usage=usage):
        assert_type(usage, Usage)
    case TurnComplete(stop_reason=reason, response=response):
        assert_type(reason, StopReason)
        assert_type(response, str)
for event in agent.run("again"):
    assert_type(event, AnyEvent)

offline = Agent(Scripted(["hi"]))
assert_type(offline.resume(), Stream)


class Policy(Hook):
    def on_tool_start(self, call: ToolCall) -> Veto | NeedsApproval | None:
        return Veto("no") if call.name == "rm" else None


hooked = Agent(Scripted(["hi"]), hooks=[Policy()])
hooked.add_hook(Policy())
hooked.approve("call_1")
hooked.deny("call_1", "not now")
assert_type(hooked.subscribe(), Subscription)
for turn_id, _item in hooked.subscribe(maxsize=8):
    assert_type(turn_id, str)
assert_type(hooked.inspect(), ProviderRequest)
assert_type(hooked.compact(keep_turns=2), CompactionResult)
for _step in hooked.compact_stream(keep_turns=1):
    pass
done = TurnComplete(StopReason.APPROVAL_REQUIRED, "", 1, 0, Usage())
assert_type(done.pending_approvals, tuple[ToolUse, ...])
assert_type(done.hook_failures, tuple[HookFailure, ...])
assert_type(done.turn_id, str)
assert_type(stream.turn_id, str)
helper = SubAgent("helper", "Helps.", lambda: Agent(Scripted(["ok"])), timeout=30.0)
helper_tool: Tool = helper
assert_type(is_casual_message("hi"), bool)
assert_type(offline.store.history_page(offline.session_id, limit=10), HistoryPage)

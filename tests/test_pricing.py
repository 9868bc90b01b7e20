"""What a turn costs: ``Pricing``, ``Cost`` and ``TurnComplete.cost`` over real HTTP
for both APIs, the price table (``genai-prices``, read offline), the chat's status line
and the serve wire."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import anthropic_body, openai_body

import navi_core.config
from navi_core import (
    Agent,
    Anthropic,
    Cost,
    Hook,
    Message,
    OpenAIChat,
    Pricing,
    ProviderRequest,
    Scripted,
    StopReason,
    Text,
    ToolStarted,
    ToolUse,
    TurnComplete,
    Usage,
    WireIdentity,
    tool,
)
from navi_core.cli.chat.profiles import Price
from navi_core.cli.chat.render import Painter, status_line
from navi_core.providers.base import ProviderStream
from navi_core.serve.wire import decode_event, encode_event


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    providers: list[Any] = []
    yield providers
    for p in providers:
        p.close()


def test_pricing_prices_each_bucket_per_million_tokens() -> None:
    p = Pricing(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5)
    cost = p.cost_of(Usage(input=1_000_000, output=500_000, cache_read=2_000_000))
    assert cost.input_usd == pytest.approx(2.0)
    assert cost.output_usd == pytest.approx(4.0)
    assert cost.cache_usd == pytest.approx(1.0)
    assert cost.usd == pytest.approx(7.0)
    written = p.cost_of(Usage(cache_write=1_000_000))
    assert written.cache_usd == pytest.approx(2.5)


def test_unpriced_cache_buckets_cost_input() -> None:
    cost = Pricing(1.0, 4.0).cost_of(Usage(0, 0, cache_read=1_000_000, cache_write=1))
    assert cost.cache_usd == pytest.approx(1.000001)


def test_costs_add_up() -> None:
    assert Cost(1.0, 0.5, 0.25, 0.25) + Cost(2.0, 1.0, 1.0, 0.0) == Cost(
        3.0, 1.5, 1.25, 0.25
    )


def test_the_chat_profile_price_is_a_pricing() -> None:
    price = Price(input=1.0, output=4.0, cache_read=0.1)
    assert isinstance(price, Pricing)
    u = Usage(input=1_000_000, output=1_000_000, cache_read=1_000_000)
    assert price.cost(u) == pytest.approx(5.1) == price.cost_of(u).usd


def openai(url: str, pricing: Pricing | None) -> OpenAIChat:
    return OpenAIChat("gpt-test", base_url=url + "/v1", api_key="k", pricing=pricing)


def anthropic(url: str, pricing: Pricing | None) -> Anthropic:
    return Anthropic("claude-test", base_url=url, api_key="k", pricing=pricing)


OPENAI_USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 200,
    "total_tokens": 1200,
    "prompt_tokens_details": {"cached_tokens": 400},
}
ANTHROPIC_USAGE = {
    "input_tokens": 600,
    "output_tokens": 1,
    "cache_read_input_tokens": 300,
    "cache_creation_input_tokens": 100,
}


def openai_replies() -> list[Reply]:
    call = openai_body(
        tool_calls=[("c1", "missing", ['{"a"', ": 1}"])], usage=OPENAI_USAGE
    )
    return [Reply.sse(call), Reply.sse(openai_body(["ok"], usage=OPENAI_USAGE))]


def anthropic_replies() -> list[Reply]:
    call = anthropic_body(
        [("tool", ("c1", "missing", ['{"a": 1}']))], stop="tool_use",
        usage=ANTHROPIC_USAGE,
    )  # fmt: skip
    answer = anthropic_body([("text", ["ok"])], usage=ANTHROPIC_USAGE)
    return [Reply.sse(call), Reply.sse(answer)]


PRICE = Pricing(input=2.0, output=8.0, cache_read=0.5, cache_write=4.0)


@pytest.mark.parametrize(
    ("make", "replies"),
    [(openai, openai_replies), (anthropic, anthropic_replies)],
    ids=["openai", "anthropic"],
)
def test_turn_complete_carries_the_cost_of_the_whole_turn(
    loopback: LoopbackServer, opened: list[Any], make: Any, replies: Any
) -> None:
    loopback.add(*replies())
    opened.append(provider := make(loopback.url, PRICE))
    with Agent(provider) as agent:
        done = agent.ask("go")
    assert (done.iterations, done.tool_calls) == (2, 1)
    u = done.usage
    assert u.cache_read > 0  # the cache buckets were read off the wire
    assert done.cost is not None
    assert done.cost == PRICE.cost_of(u)
    assert done.cost.input_usd == pytest.approx(u.input * 2.0 / 1e6)
    assert done.cost.output_usd == pytest.approx(u.output * 8.0 / 1e6)
    assert done.cost.cache_usd == pytest.approx(
        (u.cache_read * 0.5 + u.cache_write * 4.0) / 1e6
    )
    assert done.cost.usd == pytest.approx(
        done.cost.input_usd + done.cost.output_usd + done.cost.cache_usd
    )


def test_an_unknown_model_without_pricing_has_no_cost(
    loopback: LoopbackServer, opened: list[Any]
) -> None:
    loopback.add(Reply.sse(openai_body(["ok"])))
    opened.append(provider := openai(loopback.url, None))
    with Agent(provider) as agent:
        done = agent.ask("go")
    assert done.cost is None


def test_scripted_takes_a_pricing_too() -> None:
    answer = Scripted([[Text("hi")]], pricing=Pricing(1.0, 1.0))
    done = Agent(answer).ask("go")
    assert done.cost == Pricing(1.0, 1.0).cost_of(done.usage)


def test_completion_hooks_see_the_cost() -> None:
    seen: list[TurnComplete] = []

    class Watch(Hook):
        def on_completion(self, turn: TurnComplete) -> None:
            seen.append(turn)

    script = [answer("hi", Usage(input=1_000_000, output=500_000))]
    agent = Agent(Scripted(script, pricing=Pricing(1.0, 2.0)), hooks=[Watch()])
    done = agent.ask("go")
    assert done.cost is not None and done.cost.usd == pytest.approx(2.0)
    assert [t.cost for t in seen] == [done.cost]


# -- the price table ----------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt fails the test: the price table is read offline."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the price lookup tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_the_price_table_knows_vendor_models_offline(no_network: None) -> None:
    pytest.importorskip("genai_prices")
    gpt = Pricing.lookup("gpt-4o", "https://api.openai.com/v1")
    assert gpt is not None
    assert (gpt.input, gpt.output) == (2.5, 10.0)
    assert gpt.cache_read == 1.25
    claude = Pricing.lookup("claude-sonnet-4-5", "https://api.anthropic.com")
    assert claude is not None
    assert claude.output > claude.input > (claude.cache_read or 0) > 0
    assert Pricing.lookup("qwen2.5", "http://127.0.0.1:11434/v1") is None
    assert Pricing.lookup("no-such-model-xyz", "https://api.openai.com/v1") is None


class TableProvider:
    """A provider that says it talks to OpenAI's endpoint and replays a script."""

    def __init__(self, script: Scripted) -> None:
        self._script = script

    @property
    def wire(self) -> WireIdentity:
        return WireIdentity("openai_chat", "https://api.openai.com/v1", "gpt-4o")

    def open(self, request: ProviderRequest) -> ProviderStream:
        return self._script.open(request)

    def close(self) -> None:
        self._script.close()


def test_without_pricing_the_turn_is_priced_from_the_table(no_network: None) -> None:
    pytest.importorskip("genai_prices")
    script = Scripted([answer("hi", Usage(input=1000, output=100))])
    done = Agent(TableProvider(script)).ask("go")
    assert done.cost is not None
    assert done.cost.usd == pytest.approx((1000 * 2.5 + 100 * 10.0) / 1e6)


def test_a_local_model_server_is_not_looked_up_in_the_table() -> None:
    """No price table knows a server on this machine (Ollama, vLLM, llama.cpp on
    loopback): its lookup is None at once, and the table is never imported."""
    pytest.importorskip("genai_prices")
    code = (
        "import sys\n"
        "from navi_core import Pricing\n"
        "for url in ('http://127.0.0.1:11434/v1', 'http://localhost:8000/v1',"
        " 'http://[::1]:8080/v1'):\n"
        "    assert Pricing.lookup('gpt-4o', url) is None, url\n"
        "assert 'genai_prices' not in sys.modules\n"
        "assert Pricing.lookup('gpt-4o', 'https://api.openai.com/v1') is not None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


class SlowTable:
    """A price table whose lookup waits for ``release``: what the first lookup of a
    process is like while ``genai-prices`` imports."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        self.threads: list[str] = []

        def lookup(cls: type[Pricing], model: str, base_url: str) -> Pricing | None:
            self.threads.append(threading.current_thread().name)
            self.asked.set()
            self.release.wait(10)
            return cls(3.0, 15.0)

        monkeypatch.setattr(Pricing, "_lookup", classmethod(lookup))
        monkeypatch.setattr(navi_core.config, "_table_installed", lambda: True)


class UnpricedProvider:
    """A scripted provider at an endpoint of its own, so no earlier lookup is kept."""

    def __init__(self, script: Scripted) -> None:
        self._script = script
        self._wire = WireIdentity(
            "openai_chat", "https://prices.test/v1", f"m-{uuid.uuid4().hex}"
        )

    @property
    def wire(self) -> WireIdentity:
        return self._wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        return self._script.open(request)

    def close(self) -> None:
        self._script.close()


def test_a_table_prefetched_by_the_host_is_read_once_off_the_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Pricing.prefetch`` loads the table on a thread of its own; the turn's end
    takes that answer instead of looking up a second time."""
    table = SlowTable(monkeypatch)
    provider = UnpricedProvider(Scripted([answer("hi", Usage(1000, 100))]))
    Pricing.prefetch(provider.wire.model, provider.wire.base_url)
    assert table.asked.wait(5)
    assert Pricing.known(provider.wire.model, provider.wire.base_url) is None
    table.release.set()
    done = Agent(provider).ask("go")
    assert done.cost is not None
    assert done.cost.usd == pytest.approx((1000 * 3.0 + 100 * 15.0) / 1e6)
    assert table.threads == ["navi-prices"]


@pytest.mark.parametrize("prefetched", [False, True])
def test_a_cancel_does_not_wait_for_the_price_table(
    monkeypatch: pytest.MonkeyPatch, prefetched: bool
) -> None:
    """A cancel ends the turn without looking the price up, or while a prefetch still
    runs: its cost is unknown (None). The next turn that ends normally is priced."""
    table = SlowTable(monkeypatch)
    hold = threading.Event()

    @tool
    def wait() -> str:
        """Wait."""
        hold.wait(10)
        return "ok"

    script = Scripted(
        [[ToolUse("w", "wait", "{}")], answer("hi", Usage(input=1000, output=100))]
    )
    provider = UnpricedProvider(script)
    if prefetched:
        Pricing.prefetch(provider.wire.model, provider.wire.base_url)
        assert table.asked.wait(5)  # and it holds on for 10 s
    try:
        agent = Agent(provider, tools=[wait])
        stream = agent.run("go")
        while not isinstance(stream.next(), ToolStarted):
            pass
        started = time.monotonic()
        stream.cancel()
        done = [e for e in stream if isinstance(e, TurnComplete)][-1]
        assert time.monotonic() - started < 2
        assert done.stop_reason is StopReason.CANCELLED and done.cost is None
        assert table.asked.is_set() is prefetched  # a cancel starts no lookup
    finally:
        hold.set()
        table.release.set()
    assert agent.ask("again").cost is not None
    agent.close()


def test_a_prefetch_whose_thread_cannot_start_leaves_lookups_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = SlowTable(monkeypatch)
    table.release.set()

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    wire = UnpricedProvider(Scripted([])).wire
    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", refuse)
        with pytest.raises(RuntimeError):
            Pricing.prefetch(wire.model, wire.base_url)
    found: list[Pricing | None] = []
    looker = threading.Thread(
        target=lambda: found.append(Pricing.lookup(wire.model, wire.base_url)),
        daemon=True,
    )
    looker.start()
    looker.join(5)
    assert found == [Pricing(3.0, 15.0)], "the lookup waited for a prefetch never run"


def answer(text: str, usage: Usage) -> Message:
    """A scripted assistant answer that reports ``usage``."""
    return Message("assistant", (Text(text),), usage)


# -- where the cost is shown ----------------------------------------------------------


def done_with(cost: Cost | None) -> TurnComplete:
    return TurnComplete(
        StopReason.END_TURN, "ok", 1, 0, Usage(input=1_000_000, output=0), cost=cost
    )


PLAIN = Painter(color=False, width=lambda: 80)


def test_the_chat_status_line_shows_the_profile_price_else_the_turn_cost() -> None:
    price = Price(input=3.0, output=15.0)
    profile = status_line(done_with(Cost(0.25, 0.25, 0.0, 0.0)), 1.0, price, PLAIN)
    assert "$3.0000" in profile and "$0.2500" not in profile  # as /usage counts it
    table = status_line(done_with(Cost(0.25, 0.25, 0.0, 0.0)), 1.0, None, PLAIN)
    assert "$0.2500" in table


def test_the_serve_wire_carries_the_cost() -> None:
    for cost in (Cost(0.5, 0.1, 0.3, 0.1), None):
        done = done_with(cost)
        frame = encode_event(done)
        data = frame.split(b"data: ", 1)[1]
        assert decode_event(data) == done
    assert b'"cost":{"usd":0.5' in encode_event(done_with(Cost(0.5, 0.1, 0.3, 0.1)))


def test_a_tool_call_turn_is_priced_per_response_usage() -> None:
    script = Scripted(
        [[ToolUse("c1", "missing", "{}")], answer("x", Usage(input=10, output=1))],
        pricing=Pricing(1.0, 2.0),
    )
    done = Agent(script).ask("go")
    assert done.cost == Pricing(1.0, 2.0).cost_of(done.usage)
    assert done.cost is not None and done.cost.usd > 0

"""Turn control over real loopback HTTP: cancel from every state, next(timeout), close()
from another thread, the turn timeout, what a cancel keeps, ResponseDiscarded.

Each cancel test drives the turn in one of two ways: ``blocking`` (``next()`` with no
timeout on a driver thread, cancelled from the test thread) and ``timeout``
(``next(timeout=0.02)`` on the test thread, cancelled from a timer thread). The bounds
are generous (CI is noisy); ``bench/bench_control.py`` measures the real latencies.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from loopback import LoopbackServer, Reply
from providers.wire_streams import anthropic_body, openai_body, openai_chunk

from navi_core import (
    PENDING,
    Agent,
    Anthropic,
    CompactionConfig,
    Config,
    OpenAIChat,
    ProviderRetry,
    ResponseDiscarded,
    RetryPolicy,
    StopReason,
    TextDelta,
    Timeout,
    ToolContext,
    ToolDispatchComplete,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnComplete,
)
from navi_core.events import Event
from navi_core.store import SQLiteStore
from navi_core.stream import Stream
from navi_core.tokens import estimate_tokens
from navi_core.tools import tool

BOUND = 0.5  # seconds a stop may take here; the benchmark asserts nothing
NO_RETRY = RetryPolicy(max_attempts=1)


_OPEN: list[OpenAIChat] = []


def provider(url: str, **kw: object) -> OpenAIChat:
    """A provider for ``url``, closed when the test ends (with its pooled sockets)."""
    p = OpenAIChat("gpt-test", url + "/v1", "sk-test-1234567890", **kw)  # type: ignore[arg-type]
    _OPEN.append(p)
    return p


@pytest.fixture(autouse=True)
def _close_providers() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def drive_blocking(
    stream: Stream, stop: Callable[[], None], after: float
) -> tuple[list[Event], float]:
    """Run ``next()`` on a driver thread; call ``stop`` after ``after`` seconds; return
    the events and the seconds from the stop to the end of the turn."""
    events: list[Event] = []
    ended = threading.Event()
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            while (ev := stream.next()) is not None:
                events.append(ev)
        except BaseException as exc:
            errors.append(exc)
        ended.set()

    t = threading.Thread(target=drive, daemon=True)
    t.start()
    assert not ended.wait(after), f"the turn ended before the stop: {events}"
    t0 = time.monotonic()
    stop()
    assert ended.wait(10), "the turn did not end after the stop"
    latency = time.monotonic() - t0
    t.join(5)
    if errors:
        raise errors[0]
    return events, latency


def drive_polling(
    stream: Stream, stop: Callable[[], None], after: float
) -> tuple[list[Event], float]:
    """``next(timeout=0.02)`` on this thread; ``stop`` from a timer thread."""
    events: list[Event] = []
    stopped: list[float] = []

    def fire() -> None:
        stopped.append(time.monotonic())
        stop()

    timer = threading.Timer(after, fire)
    timer.start()
    try:
        deadline = time.monotonic() + 20
        while (ev := stream.next(timeout=0.02)) is not None:
            assert time.monotonic() < deadline, "the turn did not end"
            if ev is not PENDING:
                events.append(ev)
    finally:
        timer.cancel()
    assert stopped, f"the turn ended before the stop: {events}"
    return events, time.monotonic() - stopped[0]


Driver = Callable[[Stream, Callable[[], None], float], tuple[list[Event], float]]
DRIVERS: dict[str, Driver] = {"blocking": drive_blocking, "timeout": drive_polling}


@pytest.fixture(params=sorted(DRIVERS))
def drive(
    request: pytest.FixtureRequest,
) -> Callable[[Stream, Callable[[], None], float], tuple[list[Event], float]]:
    return DRIVERS[request.param]


def last(events: Sequence[Event]) -> TurnComplete:
    done = events[-1]
    assert isinstance(done, TurnComplete), events
    return done


def text_stream(*pieces: bytes | float) -> Reply:
    return Reply(body=pieces)


def test_cancel_while_waiting_for_headers(
    loopback: LoopbackServer, drive: Driver
) -> None:
    loopback.add(Reply.sse(openai_body(["late"]), delay=30))
    with Agent(provider(loopback.url), config=Config(retry=NO_RETRY)) as agent:
        stream = agent.run("hi")
        events, latency = drive(stream, stream.cancel, 0.3)
    assert last(events).stop_reason is StopReason.CANCELLED
    assert latency < BOUND
    assert [m.role for m in agent.conversation.messages] == ["user"]


def test_cancel_on_a_silent_stream(loopback: LoopbackServer, drive: Driver) -> None:
    head = openai_chunk({"role": "assistant", "content": "first "})
    loopback.add(text_stream(head, 30.0, openai_body(["never"])))
    with Agent(provider(loopback.url), config=Config(retry=NO_RETRY)) as agent:
        stream = agent.run("hi")
        events, latency = drive(stream, stream.cancel, 0.4)
    assert any(isinstance(e, TextDelta) for e in events)
    assert last(events).stop_reason is StopReason.CANCELLED
    assert latency < BOUND


def test_cancel_mid_stream(loopback: LoopbackServer, drive: Driver) -> None:
    chunks: list[bytes | float] = []
    for i in range(400):
        chunks += [openai_chunk({"content": f"w{i} "}), 0.01]
    loopback.add(text_stream(*chunks))
    with Agent(provider(loopback.url), config=Config(retry=NO_RETRY)) as agent:
        stream = agent.run("hi")
        events, latency = drive(stream, stream.cancel, 0.3)
    assert sum(isinstance(e, TextDelta) for e in events) > 3
    done = last(events)
    assert done.stop_reason is StopReason.CANCELLED
    assert latency < BOUND
    # no usage came for the cut response: it is estimated, and kept with its text
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert done.usage.estimated
    assert done.usage.input > 0
    assert done.usage.output == estimate_tokens(shown) > 0
    partial = agent.conversation.messages[-1]
    assert partial.stop_reason == "cancelled" and partial.text == shown
    assert partial.usage == done.usage


def test_a_cancel_keeps_the_usage_the_stream_reported_and_estimates_the_rest(
    loopback: LoopbackServer, drive: Driver
) -> None:
    """An Anthropic stream reports its prompt's tokens at its start: a cancel during
    thinking keeps them (the cache counts priced apart) and estimates the output."""
    usage = {"input_tokens": 120, "cache_read_input_tokens": 40000, "output_tokens": 1}
    body = anthropic_body(
        [("thinking", (["Let me think ", "about it hard"], "sig"))], usage=usage
    )
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]
    head = [e for e in events if b"message_stop" not in e][:5]  # through the thinking
    loopback.add(text_stream(*head, 30.0))
    model = Anthropic("claude-test", base_url=loopback.url, api_key="k")
    with model, Agent(model, config=Config(retry=NO_RETRY)) as agent:
        stream = agent.run("hi")
        seen, latency = drive(stream, stream.cancel, 0.4)
    done = last(seen)
    assert done.stop_reason is StopReason.CANCELLED
    assert latency < BOUND
    thought = estimate_tokens("Let me think about it hard")
    assert (done.usage.input, done.usage.cache_read) == (120, 40000)
    assert done.usage.output == thought and done.usage.estimated
    # thinking alone is not kept as an answer: the usage is the turn's only
    assert [m.role for m in agent.conversation.messages] == ["user"]


def test_cancel_during_a_retry_wait(loopback: LoopbackServer, drive: Driver) -> None:
    loopback.add(
        Reply.json(503, {"error": {"message": "busy"}}, [("retry-after", "20")])
    )
    config = Config(retry=RetryPolicy(max_attempts=3, max_delay_ms=30_000))
    with Agent(provider(loopback.url), config=config) as agent:
        stream = agent.run("hi")
        events, latency = drive(stream, stream.cancel, 0.4)
    assert any(isinstance(e, ProviderRetry) for e in events)
    assert last(events).stop_reason is StopReason.CANCELLED
    assert latency < BOUND


def test_cancel_during_a_summary_request(
    loopback: LoopbackServer, drive: Driver, tmp_path: Path
) -> None:
    from navi_core import SQLiteStore

    db = tmp_path / "s.db"
    loopback.add(*(Reply.sse(openai_body([f"answer {i} " * 40])) for i in range(4)))
    compaction = CompactionConfig(
        prompt="Summarise.", context_window=400, keep_verbatim=50
    )
    store = SQLiteStore(db)
    with Agent(
        provider(loopback.url), store=store, config=Config(retry=NO_RETRY)
    ) as agent:
        for i in range(4):
            with agent.run(f"question {i} " * 40) as s:
                for _ in s:
                    pass
        agent.set_config(Config(retry=NO_RETRY, compaction=compaction))
        before = len(agent.conversation.messages)
        loopback.add(Reply.sse(openai_body(["summary"]), delay=30))
        stream = agent.run("next")
        events, latency = drive(stream, stream.cancel, 0.5)
        assert last(events).stop_reason is StopReason.CANCELLED
        assert latency < BOUND
        assert len(agent.conversation.messages) == before + 1  # nothing rewritten
    store.close()


def test_cancel_while_connecting(drive: Driver) -> None:
    # A listener whose accept queue is full drops new SYNs: connect() hangs.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    time.sleep(0.1)
    probe = socket.socket()
    probe.settimeout(0.3)
    try:
        probe.connect(("127.0.0.1", port))
        pytest.skip("this kernel completes connects to a full accept queue")
    except (TimeoutError, OSError):
        pass
    finally:
        probe.close()
    try:
        url = f"http://127.0.0.1:{port}"
        timeout = Timeout(connect=30)
        with Agent(
            provider(url, timeout=timeout), config=Config(retry=NO_RETRY)
        ) as agent:
            stream = agent.run("hi")
            events, latency = drive(stream, stream.cancel, 0.3)
        assert last(events).stop_reason is StopReason.CANCELLED
        assert latency < BOUND
    finally:
        for s in fillers:
            s.close()
        listener.close()


def test_cancel_while_a_tool_hangs_keeps_finished_results(
    loopback: LoopbackServer, drive: Driver
) -> None:
    release = threading.Event()
    sent: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    @tool
    def hang() -> str:
        """Hang."""
        release.wait(30)
        return "late"

    calls = [("c1", "send_email", ['{"to": "a@b"}']), ("c2", "hang", ["{}"])]
    loopback.add(Reply.sse(openai_body(tool_calls=calls)))
    try:
        with Agent(
            provider(loopback.url),
            tools=[send_email, hang],
            config=Config(retry=NO_RETRY),
        ) as agent:
            stream = agent.run("go")
            events, latency = drive(stream, stream.cancel, 0.5)
            assert latency < BOUND
            done = last(events)
            assert done.stop_reason is StopReason.CANCELLED
            started = {e.call_id for e in events if isinstance(e, ToolStarted)}
            finished = {e.call_id for e in events if isinstance(e, ToolFinished)}
            assert started == finished == {"c1", "c2"}
            (hung,) = [
                e for e in events if isinstance(e, ToolFinished) and e.call_id == "c2"
            ]
            # it ran from its start (the turn's first moments) to the cancel at 0.5 s
            assert hung.is_error and hung.error == "cancelled"
            assert 0.25 < hung.seconds < 0.5 + latency + 1
            results = agent.conversation.messages[-1].tool_results
            by_id = {r.tool_use_id: r for r in results}
            assert by_id["c1"].text == "sent to a@b" and not by_id["c1"].is_error
            assert by_id["c2"].is_error and "cancelled" in by_id["c2"].text
            assert done.tool_calls == 2
            assert any(isinstance(e, ToolDispatchComplete) for e in events)
            assert sent == ["a@b"]
    finally:
        release.set()


def test_hung_cancelled_tools_do_not_starve_the_next_turn(
    loopback: LoopbackServer,
) -> None:
    release = threading.Event()

    @tool
    def hang() -> str:
        """Hang."""
        release.wait(30)
        return "late"

    @tool
    def quick() -> str:
        """Quick."""
        return "quick"

    hung = [(f"h{i}", "hang", ["{}"]) for i in range(2)]
    loopback.add(
        Reply.sse(openai_body(tool_calls=hung)),
        Reply.sse(openai_body(tool_calls=[("q", "quick", ["{}"])])),
        Reply.sse(openai_body(["done"])),
    )
    config = Config(retry=NO_RETRY, max_tool_threads=2)
    try:
        with Agent(provider(loopback.url), tools=[hang, quick], config=config) as agent:
            stream = agent.run("one")
            while not isinstance(stream.next(), ToolStarted):
                pass
            stream.cancel()
            while stream.next() is not None:
                pass
            t0 = time.monotonic()
            with agent.run("two") as second:
                events = list(second)
            assert last(events).stop_reason is StopReason.END_TURN
            assert time.monotonic() - t0 < 5
    finally:
        release.set()


def test_cancel_after_the_final_answer_ends_the_turn_normally(
    loopback: LoopbackServer,
) -> None:
    from navi_core import MessageComplete

    loopback.add(Reply.sse(openai_body(["the answer"])))
    with Agent(provider(loopback.url)) as agent:
        stream = agent.run("hi")
        while not isinstance(stream.next(), MessageComplete):
            pass
        stream.cancel()
        done = stream.next()
        assert isinstance(done, TurnComplete)
        assert done.stop_reason is StopReason.END_TURN
        assert done.response == "the answer"


def test_next_with_a_timeout_returns_pending_promptly(loopback: LoopbackServer) -> None:
    loopback.add(Reply.sse(openai_body(["hello"]), delay=0.6))
    with Agent(provider(loopback.url)) as agent:
        stream = agent.run("hi")
        pendings = 0
        overshoot = 0.0
        events: list[Event] = []
        while True:
            t0 = time.monotonic()
            ev = stream.next(timeout=0.05)
            overshoot = max(overshoot, time.monotonic() - t0 - 0.05)
            if ev is None:
                break
            if ev is PENDING:
                pendings += 1
            else:
                events.append(ev)
        assert bool(PENDING) is True
        assert pendings >= 5  # about 0.6 s / 0.05 s of waiting for headers
        assert overshoot < 0.2
        assert last(events).response == "hello"


def test_close_from_another_thread_while_next_blocks(
    sqlite_stores: Callable[..., SQLiteStore], loopback: LoopbackServer, tmp_path: Path
) -> None:

    loopback.add(Reply.sse(openai_body(["never"]), delay=30))
    store = sqlite_stores(tmp_path / "c.db")
    agent = Agent(provider(loopback.url), store=store, config=Config(retry=NO_RETRY))
    stream = agent.run("keep me")
    events, latency = drive_blocking(stream, stream.close, 0.3)
    assert latency < BOUND
    assert last(events).stop_reason is StopReason.CANCELLED
    session = agent.session_id
    agent.close()
    again = Agent(
        provider(loopback.url), store=sqlite_stores(tmp_path / "c.db"), session=session
    )
    assert [m.text for m in again.conversation.messages] == ["keep me"]
    again.close()


@pytest.mark.parametrize("pause", [0.0, 30.0], ids=["flowing", "silent"])
def test_close_from_another_thread_mid_stream_keeps_the_answer_so_far(
    sqlite_stores: Callable[..., SQLiteStore],
    loopback: LoopbackServer,
    tmp_path: Path,
    pause: float,
) -> None:
    """The thread inside next() gets TurnComplete(CANCELLED), not an exception, and
    the text it was shown is stored, as after cancel()."""
    chunks: list[bytes | float] = [openai_chunk({"role": "assistant", "content": ""})]
    for i in range(200):
        chunks += [openai_chunk({"content": f"w{i} "}), 0.01]
        if i == 5 and pause:
            chunks.append(pause)
    loopback.add(text_stream(*chunks))
    store = sqlite_stores(tmp_path / "c.db")
    agent = Agent(provider(loopback.url), store=store, config=Config(retry=NO_RETRY))
    stream = agent.run("count")
    events, latency = drive_blocking(stream, stream.close, 0.3)
    assert latency < BOUND
    done = last(events)
    assert done.stop_reason is StopReason.CANCELLED
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown.startswith("w0 w1 w2 w3 w4 w5 ") and done.response == shown
    assert stream.next() is None
    session = agent.session_id
    agent.close()
    stored = sqlite_stores(tmp_path / "c.db").load(session).messages
    assert [(m.role, m.text) for m in stored] == [
        ("user", "count"),
        ("assistant", shown),
    ]
    assert stored[-1].stop_reason == "cancelled"


def test_turn_timeout_ends_the_turn_with_timeout(
    loopback: LoopbackServer, drive: Driver
) -> None:
    loopback.add(Reply.sse(openai_body(["late"]), delay=30))
    config = Config(retry=NO_RETRY, turn_timeout=0.6)
    with Agent(provider(loopback.url), config=config) as agent:
        stream = agent.run("hi")
        t0 = time.monotonic()
        events, _ = drive(stream, lambda: None, 0.1)
    assert last(events).stop_reason is StopReason.TIMEOUT
    assert 0.5 < time.monotonic() - t0 < 0.6 + BOUND


def test_a_failed_attempt_that_showed_deltas_is_discarded_before_the_retry(
    loopback: LoopbackServer,
) -> None:
    body = openai_body(["Hello ", "wor"], done=False)
    loopback.add(
        Reply(body=(body,), reset=True), Reply.sse(openai_body(["Hello ", "world"]))
    )
    config = Config(retry=RetryPolicy(max_attempts=2, initial_delay_ms=0))
    with (
        Agent(provider(loopback.url), config=config) as agent,
        agent.run("hi") as stream,
    ):
        events = list(stream)
    kinds = [type(e) for e in events]
    i = kinds.index(ResponseDiscarded)
    assert kinds[i + 1] is ProviderRetry
    discarded = events[i]
    assert isinstance(discarded, ResponseDiscarded)
    assert (
        discarded.attempt,
        discarded.text_chars,
        discarded.thinking_chars,
        discarded.tool_calls,
    ) == (1, 9, 0, 0)
    shown_before = "".join(e.text for e in events[:i] if isinstance(e, TextDelta))
    assert len(shown_before) == discarded.text_chars
    assert last(events).response == "Hello world"


def test_tool_context_reports_progress_and_sees_the_cancel(
    loopback: LoopbackServer,
) -> None:
    saw_cancel = threading.Event()

    @tool
    def long_job(steps: int, ctx: ToolContext) -> str:
        """A long job."""
        for i in range(steps):
            ctx.emit(f"step {i}")
        if ctx.cancelled.wait(10):
            saw_cancel.set()
        return f"{ctx.name} {ctx.call_id}"

    assert "ctx" not in long_job.parameters["properties"]
    loopback.add(
        Reply.sse(openai_body(tool_calls=[("j1", "long_job", ['{"steps": 3}'])]))
    )
    with Agent(provider(loopback.url), tools=[long_job]) as agent:
        stream = agent.run("go")
        progress: list[str] = []
        while len(progress) < 3:
            ev = stream.next()
            if isinstance(ev, ToolProgress):
                assert ev.call_id == "j1"
                progress.append(ev.text)
        stream.cancel()
        while stream.next() is not None:
            pass
    assert progress == ["step 0", "step 1", "step 2"]
    assert saw_cancel.wait(2)


def test_the_readme_frame_loop_runs(capsys: pytest.CaptureFixture[str]) -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"
    readme = page.read_text()
    section = readme[readme.index("## In a frame loop") :]
    start = section.index("```python") + len("```python")
    code = section[start : section.index("```", start)]
    exec(compile(code, "README frame loop", "exec"), {})
    assert capsys.readouterr().out == "Once upon a time, a fox learned to stream."


def test_the_idle_timeout_bounds_a_silent_server_apart_from_connect(
    loopback: LoopbackServer,
) -> None:
    from navi_core import TransportError

    loopback.add(Reply.sse(openai_body(["late"]), delay=5))
    timeout = Timeout(connect=10, read=120, idle=0.3)
    with Agent(
        provider(loopback.url, timeout=timeout), config=Config(retry=NO_RETRY)
    ) as agent:
        stream = agent.run("hi")
        t0 = time.monotonic()
        with pytest.raises(TransportError):
            while stream.next() is not None:
                pass
        assert time.monotonic() - t0 < 0.3 + BOUND


def test_an_optional_tool_context_is_injected_too() -> None:
    from navi_core import Scripted, ToolUse

    @tool
    def where(ctx: ToolContext | None = None) -> str:
        """Say which call this is."""
        assert ctx is not None
        return ctx.call_id

    assert where.parameters["properties"] == {}
    agent = Agent(Scripted([[ToolUse("c7", "where", "{}")], "done"]), tools=[where])
    with agent.run("go") as stream:
        for _ in stream:
            pass
    assert agent.conversation.messages[2].tool_results[0].text == "c7"

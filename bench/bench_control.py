"""Turn control, measured: cancel latency from every state, ``next(timeout)`` overshoot,
and a 60 fps frame loop consuming a long stream beside the openai SDK in a thread.

    python bench/bench_control.py                # 50 cancels per state, 200,000 chunks
    python bench/bench_control.py --trials 10 --chunks 20000   # a quick look

Cancel latency is the time from ``cancel()`` (called on another thread) to the moment
``next()`` returns ``TurnComplete(CANCELLED)``; the driver blocks in ``next()`` (no
timeout), the hardest case. The frame loop gives each frame 1/60 s: it takes events
with ``next(timeout=<rest of the frame>)`` until ``PENDING``; a frame is *over budget*
when its work ends more than 1 ms after its deadline. The openai SDK has no timeout on
its iterator, so its loop runs the SDK on a reader thread feeding a ``queue.Queue``
that the frame loop reads with ``get(timeout=...)`` — the wrapper every host writes.
"""

from __future__ import annotations

import argparse
import queue
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE)]

import _record  # noqa: E402
from bench_providers import MODEL_O, PROMPT, server  # noqa: E402
from loopback import LoopbackServer, Reply  # noqa: E402
from providers.wire_streams import openai_body, openai_chunk  # noqa: E402

from navi_core import (  # noqa: E402
    PENDING,
    Agent,
    CompactionConfig,
    CompactionStarted,
    Config,
    MemoryStore,
    NullStore,
    OpenAIChat,
    ProviderRetry,
    RetryPolicy,
    StopReason,
    TextDelta,
    Timeout,
    ToolStarted,
    TurnComplete,
    tool,
)
from navi_core.stream import Stream  # noqa: E402

NO_RETRY = RetryPolicy(max_attempts=1)
FRAME = 1 / 60


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cancel_latency(stream: Stream, ready: Callable[[list[object]], bool]) -> float:
    """Drive ``stream`` on a thread; once ``ready(events so far)``, cancel and time
    the end of the turn."""
    done = threading.Event()
    seen: list[object] = []
    ended: list[float] = []

    def drive() -> None:
        while (ev := stream.next()) is not None:
            seen.append(ev)
            if isinstance(ev, TurnComplete):
                assert ev.stop_reason is StopReason.CANCELLED, ev
                ended.append(time.perf_counter())
        done.set()

    t = threading.Thread(target=drive, daemon=True)
    t.start()
    limit = time.monotonic() + 5
    while not ready(list(seen)):
        if time.monotonic() > limit:
            raise RuntimeError("the state was never reached")
        time.sleep(0.002)
    time.sleep(0.02)  # let the driver block inside the state
    t0 = time.perf_counter()
    stream.cancel()
    if not done.wait(10):
        raise RuntimeError("the turn did not end after cancel()")
    t.join()
    return ended[0] - t0


def saw(kind: type) -> Callable[[list[object]], bool]:
    return lambda seen: any(isinstance(e, kind) for e in seen)


@contextmanager
def blackhole() -> Iterator[str]:
    """A listener with a full accept queue: connects to it hang."""
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
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for s in fillers:
            s.close()
        listener.close()


def states(trials: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    gate = threading.Event()

    @tool
    def hang() -> str:
        """Hang until released."""
        gate.wait(30)
        return "late"

    with LoopbackServer() as srv, blackhole() as hole:
        url = srv.url + "/v1"

        def turn(
            reply: Reply | None,
            config: Config,
            ready: Callable[[list[object]], bool],
            base: str = url,
            tools: tuple[Any, ...] = (),
            warm: int = 0,
        ) -> float:
            timeout = Timeout(connect=30)
            with OpenAIChat("gpt-test", base, "sk-bench", timeout=timeout) as p:
                agent = Agent(p, tools=tools, config=plain, store=MemoryStore())
                for i in range(warm):  # history that makes the next turn compact
                    srv.add(Reply.sse(openai_body([f"answer {i} " * 40])))
                    with agent.run(f"question {i} " * 40) as s:
                        for _ in s:
                            pass
                agent.set_config(config)
                if reply is not None:
                    srv.add(reply)
                try:
                    return cancel_latency(agent.run("go"), ready)
                finally:
                    agent.close()

        plain = Config(retry=NO_RETRY)
        now: Callable[[list[object]], bool] = lambda seen: True  # noqa: E731
        mid = [
            x for i in range(3000) for x in (openai_chunk({"content": f"w{i} "}), 0.001)
        ]
        cases: dict[str, Callable[[], float]] = {
            "connecting": lambda: turn(None, plain, now, base=hole + "/v1"),
            "waiting for headers": lambda: turn(
                Reply.sse(openai_body(["x"]), delay=30), plain, now
            ),
            "silent stream": lambda: turn(
                Reply(body=(openai_chunk({"role": "assistant", "content": "a"}), 30.0)),
                plain,
                saw(TextDelta),
            ),
            "mid-stream": lambda: turn(Reply(body=mid), plain, saw(TextDelta)),
            "retry wait": lambda: turn(
                Reply.json(
                    503, {"error": {"message": "busy"}}, [("retry-after", "20")]
                ),
                Config(retry=RetryPolicy(max_attempts=3, max_delay_ms=30_000)),
                saw(ProviderRetry),
            ),
            "summary request": lambda: turn(
                Reply.sse(openai_body(["summary"]), delay=30),
                Config(
                    retry=NO_RETRY,
                    compaction=CompactionConfig(
                        prompt="Summarise.", context_window=400, keep_verbatim=50
                    ),
                ),
                saw(CompactionStarted),
                warm=4,
            ),
            "running tools": lambda: turn(
                Reply.sse(openai_body(tool_calls=[("h", "hang", ["{}"])])),
                plain,
                saw(ToolStarted),
                tools=(hang,),
            ),
        }
        for name, case in cases.items():
            out[name] = [case() for _ in range(trials)]
    gate.set()
    return out


def overshoot(samples: int) -> list[float]:
    """How far past its timeout ``next(timeout=0.01)`` returns on a silent stream."""
    late: list[float] = []
    with LoopbackServer() as srv:
        srv.add(Reply.sse(openai_body(["x"]), delay=60))
        with OpenAIChat("gpt-test", srv.url + "/v1", "sk-bench") as p:
            agent = Agent(p, store=NullStore())
            stream = agent.run("go")
            for _ in range(samples):
                t0 = time.perf_counter()
                ev = stream.next(timeout=0.01)
                late.append(time.perf_counter() - t0 - 0.01)
                assert ev is PENDING
            stream.cancel()
            while stream.next() is not None:
                pass
            agent.close()
    return late


def frames_navi(url: str) -> tuple[int, int, float]:
    """(frames, frames over budget, seconds) for a navi turn in a 60 fps loop."""
    with OpenAIChat(MODEL_O, url + "/v1", "sk-bench") as p:
        agent = Agent(p, store=NullStore())
        stream = agent.run("Tell me a long story.")
        frames = over = 0
        t_start = time.perf_counter()
        ended = False
        while not ended:
            deadline = time.perf_counter() + FRAME
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                ev = stream.next(timeout=left)
                if ev is None:
                    ended = True
                    break
                if ev is PENDING:
                    break
            frames += 1
            if time.perf_counter() > deadline + 0.001:
                over += 1
            rest = deadline - time.perf_counter()
            if rest > 0 and not ended:
                time.sleep(rest)  # the frame's own drawing would go here
        agent.close()
        return frames, over, time.perf_counter() - t_start


def frames_sdk(url: str) -> tuple[int, int, float]:
    """The same loop over the openai SDK on a reader thread and a queue."""
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)
    q: queue.Queue[object] = queue.Queue()
    end = object()

    def read() -> None:
        stream = client.chat.completions.create(
            model=MODEL_O,
            messages=PROMPT,
            stream=True,  # type: ignore[arg-type]
        )
        for chunk in stream:
            q.put(chunk)
        q.put(end)

    threading.Thread(target=read, daemon=True).start()
    frames = over = 0
    t_start = time.perf_counter()
    ended = False
    while not ended:
        deadline = time.perf_counter() + FRAME
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            try:
                item = q.get(timeout=left)
            except queue.Empty:
                break
            if item is end:
                ended = True
                break
        frames += 1
        if time.perf_counter() > deadline + 0.001:
            over += 1
        rest = deadline - time.perf_counter()
        if rest > 0 and not ended:
            time.sleep(rest)
    client.close()
    return frames, over, time.perf_counter() - t_start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--skip-frames", action="store_true")
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)

    print(f"cancel latency, {args.trials} trials per state (ms)")
    print(f"  {'state':<22}{'p50':>8}{'p99':>8}{'max':>8}")
    cancels: list[list[object]] = []
    for name, values in states(args.trials).items():
        ms = [v * 1000 for v in values]
        print(
            f"  {name:<22}{statistics.median(ms):8.2f}{pct(ms, 0.99):8.2f}{max(ms):8.2f}"
        )
        cancels.append(
            [
                name,
                f"{statistics.median(ms):.2f}",
                f"{pct(ms, 0.99):.2f}",
                f"{max(ms):.2f}",
            ]
        )
    _record.table(
        f"Cancel latency, {args.trials} trials per state",
        ["state", "p50 ms", "p99 ms", "max ms"],
        cancels,
    )

    late = [v * 1000 for v in overshoot(500)]
    print(
        f"next(timeout=0.01) overshoot over 500 calls: p50 {statistics.median(late):.3f} ms,"
        f" p99 {pct(late, 0.99):.3f} ms, max {max(late):.3f} ms"
    )
    _record.table(
        "next(timeout=0.01) overshoot over 500 calls",
        ["p50 ms", "p99 ms", "max ms"],
        [
            [
                f"{statistics.median(late):.3f}",
                f"{pct(late, 0.99):.3f}",
                f"{max(late):.3f}",
            ]
        ],
    )
    if args.skip_frames:
        return
    frame_rows: list[list[object]] = []
    with server(args.chunks) as url:
        for label, run in (
            ("navi next(timeout)", frames_navi),
            ("openai SDK + thread", frames_sdk),
        ):
            frames, over, seconds = run(url)
            print(
                f"60 fps loop, {args.chunks:,} chunks, {label:<20}: {frames} frames in "
                f"{seconds:.2f} s, {over} over budget ({over / frames:.1%})"
            )
            frame_rows.append(
                [
                    label,
                    f"{frames:,}",
                    f"{seconds:.2f}",
                    f"{over:,}",
                    f"{over / frames:.1%}",
                ]
            )
    _record.table(
        f"A 60 fps frame loop reading a {args.chunks:,}-chunk response",
        ["reader", "frames", "seconds", "frames over budget", "share"],
        frame_rows,
    )


if __name__ == "__main__":
    main()

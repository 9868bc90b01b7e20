"""What importing navi_core costs a process that embeds it, against importing httpx.

Each sample is a fresh interpreter (after one uncounted warm-up of each, which writes
the bytecode caches an installed package has) that times one import statement with
``time.perf_counter`` around it (so the interpreter's own start is not counted: this is
the cost above a bare interpreter) and reports the modules it loaded. The statements
are interleaved round by round so a slow moment falls on all of them; the medians are
printed as ratios to ``import httpx`` measured in the same run:

- ``import navi_core``: what a program pays that names navi_core but may not run a turn;
- ``from navi_core import Agent, OpenAIChat``: what a program pays before its first turn.

Also printed: whether ``sqlite3``, ``asyncio`` or httpx were loaded by ``import
navi_core`` (they should load only when a store, a coroutine tool or a provider needs
them), and the wall time from starting a process to the first event of a turn against
a loopback server (``bench_memory.py --serve``): navi_core's ``Agent`` beside, when
they are installed, the ``openai`` SDK's streamed ``chat.completions.create``,
openai-agents' ``Runner.run_streamed`` (its first ``raw_response_event``) and
pydantic-ai's ``Agent.run_stream_events`` (its first event), all against the same
server, and a bare interpreter that only starts and exits. Goal: ``import navi_core``
at most 0.5x ``import httpx``.

    python bench/bench_import.py              # 15 rounds
    python bench/bench_import.py --rounds 31

The contenders are best installed beside navi_core's own dependencies in a throwaway
virtual environment of the same Python (the compiled core is built for it), run with
the checkout on the path::

    python -m venv /tmp/venv-peers
    /tmp/venv-peers/bin/pip install openai openai-agents 'pydantic-ai-slim[openai]' \
        httpx orjson pillow google-re2 platformdirs
    PYTHONPATH=. /tmp/venv-peers/bin/python bench/bench_import.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _record
from bench_memory import serving

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.5

STATEMENTS = {
    "import httpx": "import httpx",
    "import navi_core": "import navi_core",
    "from navi_core import Agent, OpenAIChat": (
        "from navi_core import Agent, OpenAIChat"
    ),
}
WATCH = ("sqlite3", "asyncio", "httpx", "httpcore", "pydantic", "ssl")

_PROBE = """
import sys, time, json
start = time.perf_counter()
{statement}
elapsed = time.perf_counter() - start
print(json.dumps({{"s": elapsed, "modules": sorted(sys.modules)}}))
"""


FIRST_EVENT = {
    "bare interpreter": "print('first', flush=True)",
    "navi_core Agent": """
import sys
from navi_core import Agent, OpenAIChat
provider = OpenAIChat(model="m", base_url=sys.argv[1], api_key="x")
stream = Agent(provider).run("hi")
stream.next()
print("first", flush=True)
stream.cancel()
""",
    "openai SDK": """
import sys
import openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="x", max_retries=0)
messages = [{"role": "user", "content": "hi"}]
stream = client.chat.completions.create(model="m", messages=messages, stream=True)
next(iter(stream))
print("first", flush=True)
""",
    "openai-agents Runner.run_streamed": """
import asyncio, os, sys
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI
set_tracing_disabled(True)
client = AsyncOpenAI(base_url=sys.argv[1], api_key="x", max_retries=0)
model = OpenAIChatCompletionsModel(model="m", openai_client=client)
agent = Agent(name="bench", model=model)
async def first():
    result = Runner.run_streamed(agent, "hi")
    async for event in result.stream_events():
        if event.type == "raw_response_event":  # the first one the response makes
            print("first", flush=True)
            os._exit(0)
asyncio.run(first())
""",
    "pydantic-ai Agent.run_stream_events": """
import asyncio, os, sys
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
provider = OpenAIProvider(base_url=sys.argv[1], api_key="x")
agent = Agent(OpenAIChatModel("m", provider=provider))
async def first():
    async with agent.run_stream_events("hi") as events:
        async for event in events:
            print("first", flush=True)
            os._exit(0)
asyncio.run(first())
""",
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p
    )
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    # an installed package has its bytecode compiled: let the warm-up write it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _first_event(code: str, url: str) -> float | None:
    """Seconds from starting a process running ``code`` to its first line (None:
    it failed, e.g. a contender that is not installed)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", code, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        cwd="/",
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    elapsed = time.perf_counter() - start
    child.wait(timeout=60)
    return elapsed if line.startswith(b"first") else None


def _sample(statement: str) -> tuple[float, list[str]]:
    env = _env()
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(statement=statement)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    ).stdout
    report = json.loads(out)
    return float(report["s"]), list(report["modules"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)

    times: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    loaded: dict[str, list[str]] = {}
    names = list(STATEMENTS)
    for name in names:  # warm-up, not counted: bytecode caches written
        _sample(STATEMENTS[name])
    for r in range(args.rounds):
        rotated = names[r % len(names) :] + names[: r % len(names)]
        for name in rotated:
            seconds, modules = _sample(STATEMENTS[name])
            times[name].append(seconds)
            loaded[name] = modules

    base = statistics.median(times["import httpx"])
    print(f"rounds: {args.rounds}   (median import time in a fresh interpreter)")
    rows: list[list[object]] = []
    for name in names:
        median = statistics.median(times[name])
        ours = sum(1 for m in loaded[name] if m.split(".")[0] == "navi_core")
        print(
            f"  {name:<42} {median * 1e3:7.1f} ms  {median / base:5.2f}x httpx"
            f"   navi_core modules: {ours}"
        )
        rows.append([name, f"{median * 1e3:.1f}", f"{median / base:.2f}x", f"{ours}"])
    _record.table(
        f"Import time in a fresh interpreter (median of {args.rounds})",
        ["statement", "ms", "vs import httpx", "navi_core modules loaded"],
        rows,
    )
    heavy = [m for m in WATCH if m in loaded["import navi_core"]]
    print(
        f"  loaded by `import navi_core`: {', '.join(heavy) or 'none of ' + ', '.join(WATCH)}"
    )
    ratio = statistics.median(times["import navi_core"]) / base
    verdict = "met" if ratio <= GOAL else "missed"
    print(f"goal: import navi_core <= {GOAL}x import httpx: {ratio:.2f}x ({verdict})")
    _record.goal(
        f"import navi_core <= {GOAL}x import httpx ({ratio:.2f}x)", ratio <= GOAL
    )

    with serving() as root:
        url = root + "/v1"
        starts: dict[str, list[float]] = {name: [] for name in FIRST_EVENT}
        kinds = list(FIRST_EVENT)
        for name in kinds:  # warm-up, not counted
            _first_event(FIRST_EVENT[name], url)
        for r in range(args.rounds):
            for name in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                took = _first_event(FIRST_EVENT[name], url)
                if took is not None:
                    starts[name].append(took)
    print("process start to the first event of a turn (median wall time)")
    bare = statistics.median(starts["bare interpreter"])
    first: list[list[object]] = []
    for name in kinds:
        if not starts[name]:
            print(f"  {name:<42} not measured (not installed?)")
            continue
        median = statistics.median(starts[name])
        print(f"  {name:<42} {median * 1e3:7.1f} ms  {median - bare:+7.3f} s over bare")
        first.append([name, f"{median * 1e3:.1f}", f"{median - bare:+.3f}"])
    _record.table(
        "Process start to the first event of a turn (median wall time)",
        ["program", "ms", "seconds over a bare interpreter"],
        first,
    )


if __name__ == "__main__":
    main()

"""Every ``examples/*.py`` runs as a user runs it: a subprocess, offline and against a
model endpoint, with its output checked.

Offline, an example falls back to the ``Scripted`` provider (``NAVI_BASE_URL``
unset). Against an endpoint, ``NAVI_BASE_URL`` points at a loopback server that
answers in the OpenAI chat-completions wire format, scripted with the same answers;
every scripted answer must be taken, so the example really talked to the endpoint.
An example without a case here fails, and so does a case without an example.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from loopback import LoopbackServer, Recorded, Reply
from providers.wire_streams import openai_body

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
FILES = sorted(p.name for p in EXAMPLES.glob("*.py"))


def text(*pieces: str) -> Reply:
    return Reply.sse(openai_body(pieces))


def call(name: str, arguments: str, *, call_id: str = "call_1", say: str = "") -> Reply:
    return Reply.sse(
        openai_body([say] if say else [], tool_calls=[(call_id, name, [arguments])])
    )


def no_check(requests: list[Recorded], tmp: Path) -> None:
    pass


@dataclass(frozen=True)
class Case:
    """What an example prints (``offline``, and ``loopback`` when it differs) and the
    replies of the scripted endpoint; ``check`` looks at the requests it received."""

    replies: tuple[Reply, ...]
    offline: tuple[str, ...]
    loopback: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    check: Callable[[list[Recorded], Path], None] = no_check


def asked_for_a_city_schema(requests: list[Recorded], tmp: Path) -> None:
    schema = requests[0].json["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"name", "population"}


def sent_the_tool_results(requests: list[Recorded], tmp: Path) -> None:
    roles = [m["role"] for m in requests[-1].json["messages"]]
    assert roles.count("tool") == 2  # both payments' results reached the model


def recorded_a_cassette(requests: list[Recorded], tmp: Path) -> None:
    cassette = (tmp / "weather.jsonl").read_text(encoding="utf-8")
    assert cassette.count("\n") == 3  # the head and two responses
    assert "authorization" not in cassette.lower()


WEATHER = (
    call("weather", '{"city": "Oslo"}', say="Let me check."),
    text("It is 4 °C ", "with light snow in Oslo."),
)

CASES: dict[str, Case] = {
    "quickstart.py": Case(
        WEATHER,
        offline=(
            "Let me check.\n[calling weather]\n[weather done]\n",
            "It is 4 °C with light snow in Oslo.\n[end_turn]\n",
            "stored messages: 4\n",
        ),
    ),
    "structured_output.py": Case(
        (text('{"name": "Oslo", ', '"population": 717710}'),),
        offline=("Oslo: 717,710 people\n",),
        check=asked_for_a_city_schema,
    ),
    "frame_loop.py": Case(
        (text("Once upon a time, ", "a fox learned to stream."),),
        offline=("Once upon a time, a fox learned to stream.\n", " frames; "),
    ),
    "approvals.py": Case(
        (
            Reply.sse(
                openai_body(
                    ["Paying both invoices."],
                    tool_calls=[
                        ("call_1", "pay", ['{"amount": 20, "to": "Coffee Ltd"}']),
                        ("call_2", "pay", ['{"amount": 250, "to": "ACME"}']),
                    ],
                )
            ),
            text("Both invoices are paid: 20 EUR to Coffee Ltd and 250 EUR to ACME."),
        ),
        offline=(
            "step 1 stopped: approval_required\n",
            "held: pay (payments over 100 EUR need a person's approval)\n",
            "step 2: end_turn - Both invoices are paid",
        ),
        check=sent_the_tool_results,
    ),
    "mcp_tools.py": Case(
        (
            call("units_celsius_to_fahrenheit", '{"celsius": 21.5}'),
            text("21.5 °C is 70.7 °F."),
        ),
        offline=(
            "tools: units_celsius_to_fahrenheit, units_km_to_miles\n",
            "[units_celsius_to_fahrenheit: ok]\n21.5 °C is 70.7 °F.\n",
            "the server answered: ['70.7']\n",
        ),
    ),
    "subagents.py": Case(
        (  # parent, child, child, parent: the child runs inside the parent's call
            call("research", '{"task": "What is the Fram?"}', call_id="p1"),
            call("lookup", '{"topic": "Fram"}', call_id="c1"),
            text("Fram: a polar ship from 1892, shown in a museum in Oslo."),
            text("The Fram is a polar ship from 1892; you can visit it in Oslo."),
        ),
        offline=(
            "sub-agent answered: Fram: a polar ship from 1892, shown in a museum",
            "The Fram is a polar ship from 1892; you can visit it in Oslo.\n",
            "[end_turn]\n",
        ),
    ),
    "served_session.py": Case(
        (text("Hello from ", "the model."),),
        offline=(
            "[tool list_dir]",
            "[turn over: end_turn]\n",
            "stored messages: 4\n",
            "server stopped with status 0\n",
        ),
        loopback=(
            "Hello from the model.\n[turn over: end_turn]\n",
            "stored messages: 2\n",
            "server stopped with status 0\n",
        ),
    ),
    "cassette_test.py": Case(
        WEATHER,
        offline=("2 passed",),
        loopback=("recorded: It is 4 °C with light snow in Oslo.\n", "2 passed"),
        env={"NAVI_CASSETTE": "weather.jsonl"},
        check=recorded_a_cassette,
    ),
}


def run_example(name: str, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python examples/NAME`` from a scratch folder, with this checkout's navi_core."""
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("NAVI_") and not k.endswith("_API_KEY")
    }
    full["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), full.get("PYTHONPATH")])
    )
    full.update(env)
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def case_of(name: str) -> Case:
    if name not in CASES:
        pytest.fail(f"examples/{name} has no case in tests/test_examples.py::CASES")
    return CASES[name]


def assert_prints(
    result: subprocess.CompletedProcess[str], expected: tuple[str, ...]
) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    for piece in expected:
        assert piece in result.stdout, (piece, result.stdout, result.stderr)


def test_there_are_examples_and_every_case_has_one() -> None:
    assert len(FILES) >= 8
    assert sorted(CASES) == FILES


@pytest.mark.parametrize("name", FILES)
def test_the_example_runs_offline(name: str, tmp_path: Path) -> None:
    case = case_of(name)
    result = run_example(name, tmp_path)
    assert_prints(result, case.offline)
    # it leaves nothing behind in the working directory (tools' caches aside)
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


@pytest.mark.parametrize("name", FILES)
def test_the_example_runs_against_a_model_endpoint(name: str, tmp_path: Path) -> None:
    case = case_of(name)
    with LoopbackServer() as server:
        server.add(*case.replies)
        result = run_example(
            name,
            tmp_path,
            NAVI_BASE_URL=f"{server.url}/v1",
            NAVI_MODEL="loopback-model",
            **case.env,
        )
        assert_prints(result, case.offline if case.loopback is None else case.loopback)
        assert server.pending == 0 and server.unscripted == 0, result.stdout
        requests = list(server.requests)
    assert {r.json["model"] for r in requests} == {"loopback-model"}
    case.check(requests, tmp_path)


def test_the_two_approval_steps_run_in_two_processes(tmp_path: Path) -> None:
    result = run_example("approvals.py", tmp_path)
    assert_prints(result, CASES["approvals.py"].offline)
    pids = dict(re.findall(r"paying (\d+) EUR to .*, in process (\d+)", result.stdout))
    # each payment ran exactly once, the held one in the second process
    assert result.stdout.count("paying 20 EUR") == 1
    assert result.stdout.count("paying 250 EUR") == 1
    assert pids["20"] != pids["250"]

"""A large response streams through a turn in flat memory: only the message grows.

The turn runs in a fresh process (so its peak RSS is its own) against the loopback
server, which builds the 50 MB body as it sends it. Peak RSS growth minus the final
message must stay near one transient copy of the message (the final join) and far
below the size of the body.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from loopback import LoopbackServer, Reply
from wire_streams import openai_body, openai_chunk

BODY_MB = 50
ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from pathlib import Path
import orjson
from navi_core import Agent, NullStore
from navi_core.providers.openai_chat import OpenAIChat

def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

provider = OpenAIChat("gpt-test", sys.argv[1])
for big in (False, True):
    agent = Agent(provider, store=NullStore())
    if big:
        Path("/proc/self/clear_refs").write_text("5")
        before = status("VmRSS")
    stream = agent.run("go")
    while stream.next() is not None:
        pass
text = agent.conversation.messages[-1].text
print(orjson.dumps({"growth": status("VmHWM") - before, "message": sys.getsizeof(text),
                    "chars": len(text)}).decode())
"""

WORDS = (
    "The ",
    "quick ",
    "brown ",
    "fox ",
    "jumps ",
    "over ",
    "the ",
    "lazy ",
    "dog. ",
)


def _big_body(size: int) -> Iterator[bytes]:
    sent = 0
    batch: list[bytes] = []
    i = 0
    while sent < size:
        event = openai_chunk({"content": WORDS[i % len(WORDS)]})
        batch.append(event)
        sent += len(event)
        i += 1
        if len(batch) == 512:
            yield b"".join(batch)
            batch = []
    yield b"".join(batch)
    yield openai_chunk({}, finish_reason="stop") + b"data: [DONE]\n\n"


def _can_reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _can_reset_peak(), reason="needs Linux /proc/self/clear_refs")
def test_fifty_megabytes_stream_in_flat_memory(loopback: LoopbackServer) -> None:
    size = BODY_MB * 1024 * 1024
    loopback.add(Reply.sse(openai_body(["warm up"])), Reply(body=_big_body(size)))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, loopback.url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=True,
    )
    result = orjson.loads(out.stdout.strip().splitlines()[-1])
    growth, message = result["growth"], result["message"]
    assert result["chars"] > size // 60  # the whole body went through
    # One transient copy of the message (the final join), plus small change.
    assert growth - message < message + 4 * 1024 * 1024, result
    assert growth - message < size // 8, result

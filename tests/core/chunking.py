"""Feeding helpers shared by the core tests: every input whole, byte by byte, and at
seeded random split points, so chunk boundaries can never change a result."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DATA", "chunkings", "feed_all", "run"]

DATA = Path(__file__).parent.parent / "data" / "sse"


def chunkings(raw: bytes, seeds: int = 3) -> list[list[bytes]]:
    """The input whole, one byte at a time, then at seeded random split points."""
    out = [[raw], [raw[i : i + 1] for i in range(len(raw))]]
    for seed in range(seeds):
        rng = random.Random(seed)
        cuts = sorted(rng.sample(range(1, len(raw)), min(len(raw) - 1, 8)))
        out.append(
            [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        )
    return out


def run(target: Any, chunks: list[bytes]) -> list[Any]:
    """Feed every chunk, then close; everything returned, in order."""
    out: list[Any] = []
    for chunk in chunks:
        out += target.feed(chunk)
    out += target.close()
    return out


def feed_all(make: Callable[[], Any], raw: bytes) -> list[Any]:
    """Results of ``raw`` under every chunking, each on a fresh object; all must agree."""
    results = [run(make(), c) for c in chunkings(raw)]
    assert all(r == results[0] for r in results)
    return results[0]
